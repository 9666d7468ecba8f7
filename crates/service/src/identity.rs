//! Callers signed in through the company's identity provider (A-5, issue 44): which user an
//! access token names, what its scopes and groups allow, and the operator's group grants.
//! The transport validates the token (`oauth`) and hands over what it carried, a
//! [`ProviderGrant`]; this module turns it into a [`Principal`] the permission checks
//! (`permissions.rs`) treat like any other, unknown-versus-forbidden rule included.

use crate::{Inner, Service, ServiceError};
use access::{Principal, ProviderGrant};
use sha2::{Digest, Sha256};
use std::str::FromStr;

/// The scope of preparing (registration, sync, `reload_plugins`, index rebuilds).
pub const SCOPE_PREPARE: &str = "csg:prepare";

/// What the operator decided about identity-provider callers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdentityPolicy {
    /// Group grants (`--oauth-group-grant GROUP=REPO`).
    pub group_grants: Vec<GroupGrant>,
    /// Groups whose members hold `prepare` (`--oauth-prepare-group`), besides the tokens
    /// with the `csg:prepare` scope.
    pub prepare_groups: Vec<String>,
}

/// Read of the repositories `repo` matches for the members of `group`; a `*` in either
/// matches any run of characters (`eng=acme/*`, `*=acme/handbook`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupGrant {
    /// The group (pattern).
    pub group: String,
    /// The repository (pattern).
    pub repo: String,
}

impl FromStr for GroupGrant {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (group, repo) = text
            .split_once('=')
            .map(|(g, r)| (g.trim(), r.trim()))
            .filter(|(g, r)| !g.is_empty() && !r.is_empty())
            .ok_or_else(|| {
                format!(
                    "{text:?} is not GROUP=REPO (e.g. `eng=acme/*`: members of the group `eng` \
                     read every repository under `acme/`)"
                )
            })?;
        Ok(Self {
            group: group.to_owned(),
            repo: repo.to_owned(),
        })
    }
}

impl IdentityPolicy {
    /// Whether a group of `grant` reads the repository `repo` by a group grant.
    pub(crate) fn grants_read(&self, grant: &ProviderGrant, repo: &str) -> bool {
        self.group_grants.iter().any(|rule| {
            matches_pattern(&rule.repo, repo)
                && grant
                    .groups
                    .iter()
                    .any(|group| matches_pattern(&rule.group, group))
        })
    }

    /// Whether `grant` holds `prepare` by its scope or one of its groups.
    fn prepares(&self, grant: &ProviderGrant) -> bool {
        grant.scopes.iter().any(|scope| scope == SCOPE_PREPARE)
            || grant
                .groups
                .iter()
                .any(|group| self.prepare_groups.contains(group))
    }
}

/// `pattern` matches `text`, `*` standing for any run of characters.
fn matches_pattern(pattern: &str, text: &str) -> bool {
    let mut pieces = pattern.split('*');
    let Some(first) = pieces.next() else {
        return false;
    };
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The user name of the provider's subject `sub`: itself when it is a valid user name (the
/// operator then grants and lists it as such), else `idp-` and 16 hex digits of its hash (a
/// UUID or an e-mail address of some providers is not a user name here).
pub fn user_name_of(subject: &str) -> String {
    if access::valid_user_name(subject) {
        return subject.to_owned();
    }
    let digest = Sha256::digest(subject.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("idp-{hex}")
}

impl Inner {
    /// Whether the provider caller `principal` reads `repo` by a group grant: the
    /// operator's `--oauth-group-grant` patterns, or a `csg grant --group`.
    pub(crate) fn group_granted(
        &self,
        principal: &Principal,
        repo: &str,
    ) -> Result<bool, ServiceError> {
        let Some(grant) = &principal.provider else {
            return Ok(false);
        };
        if self.config.identity.grants_read(grant, repo) {
            return Ok(true);
        }
        Ok(self.access()?.granted_to_groups(&grant.groups, repo)?)
    }
}

impl Service {
    /// A website session's principal of the identity provider with what its grant's
    /// scopes and groups give now: the access store knows only the user's own capability.
    pub fn with_provider_capabilities(&self, mut principal: Principal) -> Principal {
        if let Some(grant) = &principal.provider {
            principal.prepare |= self.inner.config.identity.prepares(grant);
        }
        principal
    }

    /// The principal of a validated access token: the user its subject names (added to the
    /// users, as `csg user list` shows them, on first use), holding `prepare` by the token's
    /// `csg:prepare` scope, a prepare group, or the user's own capability.
    pub async fn provider_principal(
        &self,
        grant: ProviderGrant,
    ) -> Result<Principal, ServiceError> {
        let user = user_name_of(&grant.subject);
        let store = self.inner.access()?;
        let own = match store.user_prepare(&user)? {
            Some(prepare) => prepare,
            None => {
                let name = user.clone();
                self.blocking(move |inner| {
                    match inner.access()?.add_user(&name, false) {
                        // Another replica (or call) added it a moment ago.
                        Ok(_) | Err(access::Error::UserExists(_)) => Ok(()),
                        Err(error) => Err(error.into()),
                    }
                })
                .await?;
                tracing::info!(%user, "a user of the identity provider signed in for the first time");
                false
            }
        };
        Ok(Principal {
            prepare: own || self.inner.config.identity.prepares(&grant),
            user,
            token_id: 0,
            provider: Some(grant),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a5_group_grant_patterns() {
        for (pattern, text, expected) in [
            ("acme/*", "acme/web", true),
            ("acme/*", "acme/", true),
            ("acme/*", "other/web", false),
            ("*", "anything", true),
            ("acme/web", "acme/web", true),
            ("acme/web", "acme/web2", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxc", false),
            ("*-docs", "acme/handbook-docs", true),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(matches_pattern(pattern, text), expected, "{pattern} {text}");
        }
        let grant: GroupGrant = "eng = acme/*".parse().unwrap();
        assert_eq!(
            (grant.group.as_str(), grant.repo.as_str()),
            ("eng", "acme/*")
        );
        for bad in ["eng", "=acme/x", "eng=", ""] {
            assert!(bad.parse::<GroupGrant>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a5_grants_and_prepare_follow_groups_and_scopes() {
        let policy = IdentityPolicy {
            group_grants: vec!["eng=acme/*".parse().unwrap()],
            prepare_groups: vec!["ops".into()],
        };
        let alice = ProviderGrant {
            subject: "alice".into(),
            scopes: vec!["csg:read".into()],
            groups: vec!["eng".into()],
        };
        assert!(policy.grants_read(&alice, "acme/private"));
        assert!(!policy.grants_read(&alice, "other/private"));
        assert!(!policy.prepares(&alice));
        let bob = ProviderGrant {
            groups: vec!["ops".into()],
            ..alice.clone()
        };
        assert!(!policy.grants_read(&bob, "acme/private"));
        assert!(policy.prepares(&bob));
        let scoped = ProviderGrant {
            scopes: vec!["csg:read".into(), "csg:prepare".into()],
            groups: vec![],
            ..alice
        };
        assert!(policy.prepares(&scoped));
    }

    #[test]
    fn a5_user_names_of_subjects() {
        assert_eq!(user_name_of("alice"), "alice");
        let uuid = user_name_of("f81d4fae-7dec-11d0-a765-00a0c91e6bf6");
        assert_eq!(uuid, "f81d4fae-7dec-11d0-a765-00a0c91e6bf6");
        let mail = user_name_of("alice@example.org");
        assert!(mail.starts_with("idp-") && mail.len() == 20, "{mail}");
        assert_eq!(mail, user_name_of("alice@example.org"));
        assert_ne!(mail, user_name_of("bob@example.org"));
    }
}
