//! `search` at a `revision` other than the indexed head (S-8).

use crate::frame::RepoCall;
use crate::serverplugins::SearchHook;
use crate::{SearchAnswer, SearchRequest, Service, ServiceError};

impl Service {
    /// A code search of `call`'s repository at `req.revision`.
    pub(crate) async fn search_revision(
        &self,
        _call: RepoCall<Option<String>>,
        _req: SearchRequest,
        _hook: Option<SearchHook>,
    ) -> Result<SearchAnswer, ServiceError> {
        Err(ServiceError::invalid(
            "search at a revision is not available on this server yet; leave revision out",
        ))
    }
}
