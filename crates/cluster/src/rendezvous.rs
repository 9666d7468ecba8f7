//! Which members own a repository: rendezvous (highest-random-weight) hashing.
//!
//! Every member gets a weight for every repository; the `n` heaviest own it. Removing a member
//! moves only the repositories it owned (each to the next member in that repository's
//! ranking); adding one moves to it about `n / (m + 1)` of the repositories, from the others
//! and to nobody else.

use siphasher::sip::SipHasher13;
use std::hash::Hasher as _;

use crate::NodeUrl;

/// SipHash-1-3's key: the ASCII of `csg-rend` and `ezvous-1`.
const KEY: (u64, u64) = (0x6373_672d_7265_6e64, 0x657a_766f_7573_2d31);

/// The weight of `node` for `repo`.
///
/// **This function must never change.** Replicas of two csg versions run side by side during a
/// rolling upgrade, and they agree on owners only if they compute the same weights; a test
/// holds fixed weights and owners for fixed inputs. It is SipHash-1-3 (the `siphasher` crate,
/// a reference implementation of a specified function) keyed with [`KEY`], over the bytes
/// `len(node) ‖ node ‖ len(repo) ‖ repo`, each length a little-endian u64 and each string its
/// UTF-8 bytes. (Not `std::hash::Hash`, whose encoding of strings is not promised to stay.)
pub(crate) fn weight(node: &str, repo: &str) -> u64 {
    let mut hasher = SipHasher13::new_with_keys(KEY.0, KEY.1);
    hasher.write(&(node.len() as u64).to_le_bytes());
    hasher.write(node.as_bytes());
    hasher.write(&(repo.len() as u64).to_le_bytes());
    hasher.write(repo.as_bytes());
    hasher.finish()
}

/// The owners of the repository named `repo` among `members`: the `n` members with the highest
/// weight for it (fewer if there are fewer members), heaviest first — the first is the
/// preferred owner. The order of `members` does not matter; a member listed twice counts once.
///
/// A member's weight for a repository is SipHash-1-3 keyed with `k0 = 0x6373_672d_7265_6e64`,
/// `k1 = 0x657a_766f_7573_2d31` over `len(url) ‖ url ‖ len(repo) ‖ repo` (lengths as
/// little-endian u64, strings as UTF-8, the URL as the members table holds it); equal weights
/// go to the smaller URL. **This never changes**: replicas of different versions run side by
/// side during a rolling upgrade and must agree on every owner; a test holds fixed owners for
/// fixed inputs.
///
/// `repo` is the repository's name exactly as the registry stores it.
pub fn owners(repo: &str, members: &[NodeUrl], n: usize) -> Vec<NodeUrl> {
    if n == 0 {
        return Vec::new();
    }
    let mut ranked: Vec<(u64, &NodeUrl)> = members
        .iter()
        .map(|member| (weight(member.as_str(), repo), member))
        .collect();
    ranked.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    ranked.dedup_by(|a, b| a.1 == b.1);
    ranked
        .into_iter()
        .take(n)
        .map(|(_, member)| member.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> NodeUrl {
        NodeUrl::parse(text).unwrap()
    }

    /// Fixed inputs, fixed outputs: if this test fails, the weight function changed, and
    /// replicas of this version would disagree with the released ones on every owner. Change
    /// the function back; never the expectations. (The values were also computed by an
    /// independent SipHash-1-3 written from the paper, checked against its SipHash-2-4 test
    /// vectors.)
    #[test]
    fn weights_and_owners_never_change() {
        assert_eq!(weight("", ""), 0xcf71_94b6_5ec7_cb3c);
        assert_eq!(
            weight("http://10.0.0.5:7878", "github.com/rust-lang/rust"),
            0xb843_0181_97b2_3d57
        );
        let members = [
            url("http://10.0.0.5:7878"),
            url("http://10.0.0.6:7878"),
            url("http://10.0.0.7:7878"),
        ];
        let expected = [
            (
                "github.com/rust-lang/rust",
                ["http://10.0.0.7:7878", "http://10.0.0.5:7878"],
            ),
            (
                "github.com/torvalds/linux",
                ["http://10.0.0.6:7878", "http://10.0.0.5:7878"],
            ),
            (
                "example/repo",
                ["http://10.0.0.6:7878", "http://10.0.0.7:7878"],
            ),
        ];
        for (repo, owners_expected) in expected {
            let got = owners(repo, &members, 2);
            let got: Vec<&str> = got.iter().map(NodeUrl::as_str).collect();
            assert_eq!(got, owners_expected, "{repo}");
        }
    }

    #[test]
    fn the_encoding_separates_node_and_repo() {
        // Without the lengths, ("ab", "c") and ("a", "bc") would hash the same bytes.
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
    }

    #[test]
    fn small_cases() {
        let a = url("http://a:1");
        let b = url("http://b:1");
        assert!(owners("r", &[], 2).is_empty());
        assert!(owners("r", std::slice::from_ref(&a), 0).is_empty());
        assert_eq!(owners("r", std::slice::from_ref(&a), 2), vec![a.clone()]);
        let both = owners("r", &[a.clone(), b.clone(), a.clone()], 3);
        assert_eq!(both.len(), 2);
        assert!(both.contains(&a) && both.contains(&b));
    }
}
