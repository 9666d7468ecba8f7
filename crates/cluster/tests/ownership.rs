//! The properties of rendezvous ownership (`cluster::owners`).

use std::collections::BTreeSet;

use cluster::{NodeUrl, owners};
use proptest::prelude::*;

/// Distinct member URLs, 1 to 12 of them. Each host name starts with `node-`: a generated
/// one starting `xn--` would be an invalid internationalised name, which `NodeUrl` refuses.
fn members() -> impl Strategy<Value = Vec<NodeUrl>> {
    prop::collection::btree_set("[a-z][a-z0-9-]{0,10}", 1..12).prop_map(|hosts| {
        hosts
            .into_iter()
            .map(|host| NodeUrl::parse(&format!("http://node-{host}:7878")).unwrap())
            .collect()
    })
}

/// `count` repository names under a random owner, so each case hashes other names.
fn repos(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}/repo-{i}")).collect()
}

const REPOS: usize = 600;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn owners_are_distinct_members_and_do_not_depend_on_order(
        members in members(),
        n in 1usize..4,
        prefix in "[a-z]{1,6}",
    ) {
        let mut reversed = members.clone();
        reversed.reverse();
        let mut doubled = members.clone();
        doubled.extend(members.iter().cloned());
        for repo in repos(&prefix, 100) {
            let got = owners(&repo, &members, n);
            prop_assert_eq!(got.len(), n.min(members.len()));
            let distinct: BTreeSet<&NodeUrl> = got.iter().collect();
            prop_assert_eq!(distinct.len(), got.len());
            prop_assert!(got.iter().all(|owner| members.contains(owner)));
            prop_assert_eq!(&owners(&repo, &members, n), &got, "deterministic");
            prop_assert_eq!(&owners(&repo, &reversed, n), &got, "order of members");
            prop_assert_eq!(&owners(&repo, &doubled, n), &got, "duplicates");
            // The first owners for n are the owners for fewer.
            prop_assert_eq!(&owners(&repo, &members, 1)[..], &got[..1]);
        }
    }

    #[test]
    fn removing_a_member_moves_only_its_repositories(
        members in members(),
        n in 1usize..4,
        which in any::<prop::sample::Index>(),
        prefix in "[a-z]{1,6}",
    ) {
        prop_assume!(members.len() >= 2);
        let gone = members[which.index(members.len())].clone();
        let rest: Vec<NodeUrl> = members.iter().filter(|m| **m != gone).cloned().collect();
        for repo in repos(&prefix, REPOS) {
            let before = owners(&repo, &members, n);
            let after = owners(&repo, &rest, n);
            if before.contains(&gone) {
                // The survivors keep their places; the next in line fills the gap.
                let kept: Vec<NodeUrl> = before.iter().filter(|m| **m != gone).cloned().collect();
                prop_assert_eq!(&after[..kept.len()], &kept[..], "{}", repo);
            } else {
                prop_assert_eq!(&after, &before, "{} moved without its owner leaving", repo);
            }
        }
    }

    #[test]
    fn adding_a_member_takes_its_share_and_only_for_itself(
        members in members(),
        n in 1usize..4,
        prefix in "[a-z]{1,6}",
    ) {
        let new = NodeUrl::parse("http://the-new-one:7878").unwrap();
        prop_assume!(!members.contains(&new));
        let mut more = members.clone();
        more.push(new.clone());
        let m = members.len();
        let mut taken = 0usize;
        for repo in repos(&prefix, REPOS) {
            let before = owners(&repo, &members, n);
            let after = owners(&repo, &more, n);
            if after.contains(&new) {
                taken += 1;
                let others: Vec<&NodeUrl> = after.iter().filter(|o| **o != new).collect();
                prop_assert!(others.iter().all(|o| before.contains(o)), "{}: {:?} -> {:?}", repo, before, after);
            } else {
                prop_assert_eq!(&after, &before, "{} moved but not to the new member", repo);
            }
        }
        // Each repository's owners are the top min(n, m + 1) of m + 1 members, so the new one
        // holds a share 1 / (m + 1) of all the slots: this many repositories, within 5 sigma.
        let p = n.min(m + 1) as f64 / (m + 1) as f64;
        let expected = REPOS as f64 * p;
        let sigma = (REPOS as f64 * p * (1.0 - p)).sqrt();
        prop_assert!(
            (taken as f64 - expected).abs() <= 5.0 * sigma + 2.0,
            "the new member took {} repositories of {}, expected about {:.0} (m = {}, n = {})",
            taken, REPOS, expected, m, n
        );
    }
}

#[test]
fn ownership_is_spread_evenly() {
    // Ten members, two owners each, 10,000 repositories: each member holds about 2,000.
    let members: Vec<NodeUrl> = (0..10)
        .map(|i| NodeUrl::parse(&format!("http://10.0.0.{i}:7878")).unwrap())
        .collect();
    let mut held = vec![0usize; members.len()];
    let mut first = vec![0usize; members.len()];
    for repo in repos("github.com/org", 10_000) {
        let got = owners(&repo, &members, 2);
        for (rank, owner) in got.iter().enumerate() {
            let i = members.iter().position(|m| m == owner).unwrap();
            held[i] += 1;
            if rank == 0 {
                first[i] += 1;
            }
        }
    }
    // Expected 2,000 held (sigma 40) and 1,000 preferred (sigma 30).
    assert!(held.iter().all(|&h| (1800..=2200).contains(&h)), "{held:?}");
    assert!(
        first.iter().all(|&f| (850..=1150).contains(&f)),
        "{first:?}"
    );
}
