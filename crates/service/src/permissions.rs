//! Who may read which repository, and who may prepare (A-2..A-4, W-28, W-34).
//!
//! The transport says who the caller is ([`Caller`]); every operation that names a
//! repository asks [`Inner::check_read`] (through the service frame, `frame.rs`) before it
//! touches the repository, on every call: no cache
//! (catalogs, compiled modules, instances, search results) answers before it, so revoking a
//! token or a grant takes effect on the next call. A repository the caller may not read is
//! answered exactly like an unknown one. Plugins never take part in these decisions
//! (W-28).

use crate::{Inner, Service, ServiceError};
use gitstore::RepoName;
use std::net::IpAddr;

pub use access::{NewToken, Principal, ProviderGrant, TokenInfo};

/// Who is calling, as the transport established it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Caller {
    /// The user who started this process: `csg mcp` over stdio, the `csg` commands. Reads
    /// every repository and holds `prepare`. The default, for in-process callers; the HTTP
    /// transports never use it.
    #[default]
    Local,
    /// An HTTP caller without a token.
    Anonymous,
    /// An HTTP caller with a valid token.
    User(Principal),
}

impl Caller {
    /// Whether the caller presented a valid token (what server plugins learn of it, P-11).
    pub fn authenticated(&self) -> bool {
        matches!(self, Caller::User(_))
    }
}

/// What an HTTP caller without a token is told when the server needs one.
pub const TOKEN_NEEDED: &str = "this server needs an API token: send `Authorization: Bearer \
     <token>` (an operator creates one with `csg token create USER`)";

impl Inner {
    /// the caller may read `name`, or the same error as for an unknown repository.
    pub(crate) fn check_read(&self, caller: &Caller, name: &RepoName) -> Result<(), ServiceError> {
        if *caller == Caller::Anonymous && !self.config.public_read {
            // Before the lookup: without a token nothing is learnt, not even existence.
            return Err(ServiceError::unauthenticated(TOKEN_NEEDED));
        }
        // An unknown repository is refused here for every caller, the local one too.
        if !self.store.is_private(name)? {
            return Ok(());
        }
        let user = match caller {
            Caller::Local => return Ok(()),
            Caller::Anonymous => None,
            Caller::User(principal) => Some(principal),
        };
        if let Some(user) = user
            && (self.access()?.granted(&user.user, name.as_str())?
                || self.group_granted(user, name.as_str())?)
        {
            return Ok(());
        }
        Err(gitstore::Error::UnknownRepo(name.clone()).into())
    }

    /// Whether the caller may read `name` (for filtering lists; errors count as no).
    pub(crate) fn may_read(&self, caller: &Caller, name: &RepoName) -> bool {
        self.check_read(caller, name).is_ok()
    }

    /// the caller holds the `prepare` capability for `what` (an action's name).
    pub(crate) fn check_prepare(&self, caller: &Caller, what: &str) -> Result<(), ServiceError> {
        match caller {
            Caller::Local => Ok(()),
            Caller::User(principal) if principal.prepare => Ok(()),
            Caller::Anonymous => Err(ServiceError::unauthenticated(format!(
                "{what} needs the prepare capability: send `Authorization: Bearer <token>` with \
                 a token of a user who has it (`csg user add NAME --prepare`)"
            ))),
            Caller::User(principal) => Err(ServiceError::forbidden(format!(
                "{what} needs the prepare capability, which user {:?} does not have; an \
                 operator can give it with `csg user prepare {} on`",
                principal.user, principal.user
            ))),
        }
    }

    pub(crate) fn access(&self) -> Result<&access::AccessStore, ServiceError> {
        self.access.as_deref().map_err(|why| {
            tracing::warn!(error = %why, "the access store is unavailable");
            ServiceError::internal("the access store is unavailable; see the server log")
        })
    }
}

/// Why a presented token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// Not a token, unknown or revoked: the client should not retry with it.
    Invalid(String),
    /// The store failed: nothing is known about the token.
    Unavailable(String),
    /// The in-memory view does not know the token and this client's database look-ups are
    /// spent: nothing is known about it (another replica may have made it a moment ago), so
    /// the client should retry after `retry_after` seconds, not give the token up.
    UnknownNow {
        /// What to tell the client.
        message: String,
        /// Whole seconds until a look-up may be made again.
        retry_after: u64,
    },
}

impl Service {
    /// The access store this service decides with, for the transport's sign-in sessions
    /// (one store per process: one in-memory view, one reload thread).
    pub fn access_store(&self) -> Option<std::sync::Arc<access::AccessStore>> {
        self.inner.access.as_ref().ok().cloned()
    }

    /// The user of a presented bearer token: hashed and looked up, never compared as
    /// plaintext. Cheap: an in-memory lookup, reloaded only when the access tables changed.
    pub fn authenticate(&self, token: &str) -> Result<Principal, AuthFailure> {
        let store = self
            .inner
            .access()
            .map_err(|e| AuthFailure::Unavailable(e.message))?;
        store.authenticate(token).map_err(|error| match error {
            access::Error::Storage(_) | access::Error::Unavailable(_) => {
                AuthFailure::Unavailable(error.to_string())
            }
            other => AuthFailure::Invalid(other.to_string()),
        })
    }

    /// [`Service::authenticate`], and for a token the in-memory view refused, where the
    /// metadata database may know it already (cluster mode: a token made on another replica
    /// a moment ago), a look-up there, on the blocking pool (issue 31, behaviour 5), within
    /// the budget of look-ups of the `client` address (`None`: callers without one share a
    /// budget). A spent budget is [`AuthFailure::UnknownNow`], so one client's made-up tokens
    /// never make another's new token fail (issue 43 finding 3).
    pub async fn authenticate_or_look_up(
        &self,
        token: &str,
        client: Option<IpAddr>,
    ) -> Result<Principal, AuthFailure> {
        let refused = match self.authenticate(token) {
            Err(AuthFailure::Invalid(message)) => message,
            other => return other,
        };
        let Some(store) = self.access_store().filter(|store| store.may_know_more()) else {
            return Err(AuthFailure::Invalid(refused));
        };
        let token = token.to_owned();
        match tokio::task::spawn_blocking(move || store.authenticate_in_database(&token, client))
            .await
        {
            Ok(Ok(principal)) => Ok(principal),
            Ok(Err(error @ access::Error::UnknownNow { retry_after })) => {
                Err(AuthFailure::UnknownNow {
                    message: error.to_string(),
                    retry_after,
                })
            }
            Ok(Err(_)) | Err(_) => Err(AuthFailure::Invalid(refused)),
        }
    }

    /// the caller holds the `prepare` capability. [`Service::prepare`] checks it too; a
    /// transport that answers in a stream asks first, so a refusal keeps its own status.
    pub fn check_prepare(&self, ctx: &crate::CallContext) -> Result<(), ServiceError> {
        self.inner.check_prepare(&ctx.caller, "prepare")
    }

    /// Whether anonymous callers may read public repositories.
    pub fn public_read(&self) -> bool {
        self.inner.config.public_read
    }

    /// The calling user's tokens, newest last (the site's token page).
    pub async fn my_tokens(
        &self,
        ctx: &crate::CallContext,
    ) -> Result<Vec<TokenInfo>, ServiceError> {
        let user = signed_in(&ctx.caller)?.to_owned();
        self.blocking(move |inner| Ok(inner.access()?.tokens(Some(&user))?))
            .await
    }

    /// A new token of the calling user, named `name` (the secret is in the answer only).
    pub async fn create_my_token(
        &self,
        ctx: &crate::CallContext,
        name: Option<String>,
    ) -> Result<NewToken, ServiceError> {
        let user = signed_in(&ctx.caller)?.to_owned();
        self.blocking(move |inner| Ok(inner.access()?.create_token(&user, name.as_deref())?))
            .await
    }

    /// Revokes token `id` of the calling user; another user's token is "not found".
    pub async fn revoke_my_token(
        &self,
        ctx: &crate::CallContext,
        id: i64,
    ) -> Result<(), ServiceError> {
        let user = signed_in(&ctx.caller)?.to_owned();
        self.blocking(move |inner| {
            let access = inner.access()?;
            if !access.tokens(Some(&user))?.iter().any(|t| t.id == id) {
                return Err(ServiceError {
                    kind: crate::ErrorKind::NotFound,
                    message: format!("you have no token {id}"),
                });
            }
            Ok(access.revoke_token(id)?)
        })
        .await
    }
}

/// The user behind `caller`, who must have signed in with a token.
fn signed_in(caller: &Caller) -> Result<&str, ServiceError> {
    match caller {
        Caller::User(principal) => Ok(&principal.user),
        _ => Err(ServiceError::unauthenticated(
            "sign in with an API token to manage your tokens",
        )),
    }
}
