//! `reload_plugins`: a new server-plugin epoch from the directory (P-12), for operators.

use service::Cost;
use std::time::Duration;

use crate::plugin_status::{NoArgs, render_status};
use crate::tool::{Annotations, Answer, Capability, Face, Tool, ToolError};
use service::{CallContext, Service};

/// The `reload_plugins` tool.
pub(crate) struct ReloadPlugins;

impl Tool for ReloadPlugins {
    type Args = NoArgs;
    const NAME: &'static str = "reload_plugins";
    const COST: Cost = Cost::light(Duration::from_secs(60));
    const TITLE: &'static str = "Reload server plugins";
    const DESCRIPTION: &'static str = "\
Operator tool: re-read the server-plugins directory into a new epoch (calls in flight finish \
on the old one) and answer the new plugin status. Refused when server plugins are disabled or \
wedged, and to callers without the prepare capability (over HTTP: a token of a user made with \
`csg user add NAME --prepare`).";
    const CAPABILITY: Capability = Capability::Prepare;
    const ANNOTATIONS: Annotations = Annotations {
        read_only: false,
        ..Annotations::READ
    };
    const PRESETABLE: bool = false;

    async fn run(
        service: &Service,
        ctx: &CallContext,
        args: Self::Args,
        face: Face,
    ) -> Result<Answer, ToolError> {
        let NoArgs {} = args;
        let status = service.reload_server_plugins(ctx).await?;
        Ok(Answer::of(face, &status, render_status))
    }
}
