//! `search` with `type: "commit"` or `type: "diff"` (S-9): commit messages and diff lines of
//! one repository's history.

use crate::frame::RepoCall;
use crate::{SearchAnswer, SearchRequest, Service, ServiceError};

impl Service {
    /// A commit or diff search over `call`'s repository (which the caller named).
    pub(crate) async fn search_history(
        &self,
        _call: RepoCall<Option<String>>,
        req: SearchRequest,
    ) -> Result<SearchAnswer, ServiceError> {
        Err(ServiceError::invalid(format!(
            "type \"{}\" is not available on this server yet; search code instead",
            req.kind.name()
        )))
    }
}
