//! The MCP server handler: `tools/list` and `tools/call` over the [`tools::TOOLS`] table, the
//! connection's `plugins` parameter, server-plugin presets and argument rewrites, and the
//! protocol's error shapes.
//!
//! The handler implements `tools/list` and `tools/call` by hand instead of with rmcp's
//! `#[tool_router]` macros, because the macros' argument extractor turns a deserialization
//! failure into an `isError` tool result, while M-3 requires a JSON-RPC invalid-params error
//! for an unknown argument.

use crate::connection::plugins_from_query;
use crate::serverplugins;
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    DiscoverResult, Implementation, InitializeRequestParams, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ResultType, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use service::{
    ArgumentRewrite, Budget, CallContext, Caller, ClientKey, ConnectionPlugins, ServiceError,
};
use std::sync::Arc;
use tools::{Answer, Face, Limits, ToolError, render};

/// The MCP server key and implementation name (seed 000).
pub(crate) const SERVER_NAME: &str = "context-sourcegraph";

/// Where a connection's `plugins` parameter comes from (M-2).
#[derive(Debug, Clone)]
pub(crate) enum PluginsSource {
    /// stdio: fixed for the process by `csg mcp --plugins …`.
    Fixed(ConnectionPlugins),
    /// Streamable HTTP: the query of each request's URL.
    RequestUrl,
}

/// The MCP face of Context Source Graph: one value per HTTP request (stateless) or per stdio
/// session. Cheap to create: the service and the tool catalogue are shared.
#[derive(Clone)]
pub struct McpServer {
    service: service::Service,
    plugins: PluginsSource,
    catalogue: Arc<Catalogue>,
}

impl McpServer {
    pub(crate) fn new(
        service: service::Service,
        plugins: PluginsSource,
        catalogue: Arc<Catalogue>,
    ) -> Self {
        Self {
            service,
            plugins,
            catalogue,
        }
    }

    /// The connection's `plugins` parameter, or invalid params naming it.
    fn connection_plugins(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<ConnectionPlugins, ErrorData> {
        match &self.plugins {
            PluginsSource::Fixed(plugins) => Ok(plugins.clone()),
            PluginsSource::RequestUrl => {
                let query = context
                    .extensions
                    .get::<http::request::Parts>()
                    .and_then(|parts| parts.uri.query());
                plugins_from_query(query)
                    .map_err(|message| ErrorData::invalid_params(message, None))
            }
        }
    }

    /// Runs a tool of the table. Answers the text blocks (or the business failure) and, for
    /// `search`, the `QUERY_ALIASES` rewrite to disclose.
    async fn dispatch(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        ctx: CallContext,
    ) -> Result<(Result<Vec<String>, ServiceError>, Option<ArgumentRewrite>), ErrorData> {
        let Some(tool) = tools::find(name) else {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`; this server offers: {}",
                    render::header_value(&name.chars().take(100).collect::<String>()),
                    self.catalogue
                        .tools()
                        .iter()
                        .map(|t| t.name.as_ref())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                None,
            ));
        };
        let called = tool
            .call(
                &self.service,
                &ctx,
                arguments.unwrap_or_default(),
                Face::Mcp,
            )
            .await;
        Ok(match called {
            Ok(Answer::Text {
                blocks,
                query_rewrite,
            }) => (Ok(blocks), query_rewrite),
            // The table answers text to the MCP face; JSON here would be a bug in a tool.
            Ok(Answer::Json(value)) => (Ok(vec![value.to_string()]), None),
            Err(ToolError::Arguments(message)) => {
                return Err(ErrorData::invalid_params(message, None));
            }
            Err(ToolError::Service(error)) => (Err(error), None),
        })
    }

    /// A built-in tool under `on_tool_call` (P-20): the effective arguments run; if they do
    /// not parse, the rewrite is discarded and the original ones run (P-10). Whatever changed
    /// the arguments is disclosed in one block before the diagnostics (SPEC §9).
    async fn dispatch_rewritten(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        ctx: CallContext,
    ) -> Result<CallToolResult, ErrorData> {
        let original = arguments.unwrap_or_default();
        let (effective, rewrite) = self
            .service
            .rewrite_tool_call(&ctx, name, original.clone())
            .await;
        let ((answer, query_rewrite), rewrite, used) = match rewrite {
            None => (
                self.dispatch(name, Some(original.clone()), ctx).await?,
                None,
                original,
            ),
            Some(rewrite) => match self
                .dispatch(name, Some(effective.clone()), ctx.clone())
                .await
            {
                Ok(done) => (done, Some(rewrite), effective),
                Err(error) => {
                    tracing::warn!(tool = name, files = ?rewrite.files, error = %error.message,
                        "a server plugin's argument rewrite does not parse; discarded");
                    (
                        self.dispatch(name, Some(original.clone()), ctx).await?,
                        None,
                        original,
                    )
                }
            },
        };
        let disclosure = serverplugins::merge_rewrites(rewrite, query_rewrite.as_ref(), &used);
        let (mut blocks, failed) = match answer {
            Ok(blocks) => (blocks, false),
            // Business failures are tool results the agent reads (isError), never protocol
            // errors: clients show protocol errors opaquely.
            Err(error) => {
                tracing::debug!(tool = name, kind = ?error.kind, message = %error.message, "tool call failed");
                (vec![render::render_error(&error.message)], true)
            }
        };
        if let Some(rewrite) = &disclosure {
            let at = match blocks.last() {
                Some(last) if last.starts_with("PluginDiagnostics:") => blocks.len() - 1,
                _ => blocks.len(),
            };
            blocks.insert(at, serverplugins::render_rewrite(rewrite));
        }
        let content = blocks.into_iter().map(ContentBlock::text).collect();
        Ok(if failed {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        })
    }

    /// A tool server plugins may not adapt (`plugin_status`, `reload_plugins`): run as it is,
    /// without `on_tool_call` (a plugin must not be able to hide its own status).
    async fn dispatch_plain(
        &self,
        name: &str,
        arguments: Option<rmcp::model::JsonObject>,
        ctx: CallContext,
    ) -> Result<CallToolResult, ErrorData> {
        let (answer, _) = self.dispatch(name, arguments, ctx).await?;
        Ok(match answer {
            Ok(blocks) => {
                CallToolResult::success(blocks.into_iter().map(ContentBlock::text).collect())
            }
            Err(error) => tool_error(name, &error),
        })
    }

    /// The preset of that name in the current epoch (P-22), unless a built-in tool has it.
    fn preset(&self, name: &str) -> Option<service::ToolPreset> {
        if self.catalogue.tools().iter().any(|tool| tool.name == name) {
            return None;
        }
        self.service
            .tool_presets()
            .into_iter()
            .find(|(preset, _)| preset == name)
            .map(|(_, preset)| preset)
    }

    /// The built-in tools and the presets of the current epoch.
    fn all_tools(&self) -> Vec<Tool> {
        let mut tools = self.catalogue.tools().to_vec();
        for (name, preset) in self.service.tool_presets() {
            if let Some(base) = self
                .catalogue
                .tools()
                .iter()
                .find(|t| t.name == preset.tool)
            {
                tools.push(serverplugins::preset_tool(&name, &preset, base));
            }
        }
        tools
    }

    /// Who calls: stdio is the local user who started the process; over HTTP the access
    /// layer in front put the caller into the request, and without it the caller is anonymous.
    /// Who the call counts against for heavy work (O-9), as the access layer set it; over
    /// stdio, the local user.
    fn client(&self, context: &RequestContext<RoleServer>) -> ClientKey {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<ClientKey>())
            .copied()
            .unwrap_or_default()
    }

    /// The budget the transport cancels when the client goes away (O-9); over stdio, one
    /// that only the call's own deadline ends.
    fn departure(&self, context: &RequestContext<RoleServer>) -> Budget {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Budget>())
            .cloned()
            .unwrap_or_default()
    }

    fn caller(&self, context: &RequestContext<RoleServer>) -> Caller {
        match &self.plugins {
            PluginsSource::Fixed(_) => Caller::Local,
            PluginsSource::RequestUrl => context
                .extensions
                .get::<http::request::Parts>()
                .and_then(|parts| parts.extensions.get::<Caller>())
                .cloned()
                .unwrap_or(Caller::Anonymous),
        }
    }
}

/// A failed operation as an `isError` result with the service's message (already fit for the
/// caller: no host paths, internal detail only in the log).
fn tool_error(tool: &str, error: &ServiceError) -> CallToolResult {
    tracing::debug!(tool, kind = ?error.kind, message = %error.message, "tool call failed");
    CallToolResult::error(vec![ContentBlock::text(render::render_error(
        &error.message,
    ))])
}

/// What the server advertises: the instructions and the tool list, with the configured limits
/// written in. Built once per transport and shared by every connection.
#[derive(Debug)]
pub(crate) struct Catalogue {
    instructions: String,
    tools: Vec<Tool>,
}

impl Catalogue {
    /// Every tool of [`tools::TOOLS`]: names fixed by seed 000 and SPEC §9, strict schemas
    /// (M-3), annotations (M-5), no `outputSchema`.
    pub(crate) fn new(limits: &Limits) -> Self {
        let tools = tools::TOOLS
            .iter()
            .map(|tool| {
                let hints = tool.annotations();
                Tool::new(
                    tool.name(),
                    tool.description(limits),
                    Arc::new(tool.input_schema(limits)),
                )
                .with_title(tool.title())
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(hints.read_only)
                        .destructive(hints.destructive)
                        .idempotent(hints.idempotent)
                        .open_world(hints.open_world),
                )
            })
            .collect();
        Self {
            instructions: limits.fill(tools::INSTRUCTIONS),
            tools,
        }
    }

    /// The tools, in advertised order.
    pub(crate) fn tools(&self) -> &[Tool] {
        &self.tools
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                // Server plugins' presets come and go with a reload (P-22).
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(
            Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"))
                .with_title("Context Source Graph"),
        )
        .with_instructions(self.catalogue.instructions.clone())
    }

    /// Refuses a connection whose `plugins` parameter is invalid at the handshake already, so
    /// a misconfigured client learns it when it connects, not at its first read.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        self.connection_plugins(&context)?;
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    /// Same early check for 2026-07-28 clients, which open with `server/discover`.
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        self.connection_plugins(&context)?;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            self.get_info(),
        ))
    }

    /// 2026-07-28 clients ask to hear of tool list changes on a `subscriptions/listen`
    /// stream: accepted (a reload of the server plugins may change the presets).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        (requested.tools_list_changed == Some(true))
            .then(|| SubscriptionFilter::builder().tools_list_changed().build())
    }

    /// One `subscriptions/listen` stream: a `notifications/tools/list_changed` each time a
    /// reload changes the presets, until the client ends the stream.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut changes = self.service.tool_list_changes();
        changes.borrow_and_update();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                changed = changes.changed() => {
                    if changed.is_err() || context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Clients of the earlier revisions (2025-06-18, 2025-11-25) hear of tool list changes
    /// on their session from its `notifications/initialized` on. The watch ends with the
    /// session: checked at each change and once a minute.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        // Over HTTP the endpoint is stateless: there is no session to notify (GET answers
        // 405), and a watch per `notifications/initialized` POST would let a caller pile
        // up tasks. Only a session that lives (stdio) gets one.
        if context.extensions.get::<http::request::Parts>().is_some() {
            return;
        }
        let mut changes = self.service.tool_list_changes();
        changes.borrow_and_update();
        let peer = context.peer;
        tokio::spawn(async move {
            let mut check = tokio::time::interval(std::time::Duration::from_secs(60));
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    _ = check.tick() => {
                        if peer.is_transport_closed() {
                            return;
                        }
                    }
                }
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        // SEP-2549 cache hints exist from 2026-07-28 on: the list is the same for every caller
        // (public) but may change with a server restart, so clients refetch when they need it.
        let modern = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        Ok(ListToolsResult {
            result_type: Some(ResultType::COMPLETE),
            meta: None,
            next_cursor: None,
            ttl_ms: modern.then_some(0),
            cache_scope: modern.then_some(CacheScope::Public),
            tools: self.all_tools(),
        })
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.all_tools().into_iter().find(|tool| tool.name == name)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let plugins = self.connection_plugins(&context)?;
        // One context per tool call: its rewrite, the tool and its hooks share one epoch.
        let ctx = CallContext {
            plugins,
            caller: self.caller(&context),
            client: self.client(&context),
            budget: self.departure(&context),
            ..CallContext::default()
        };
        let name = request.name.to_string();
        if tools::find(&name).is_some_and(|tool| !tool.presetable()) {
            return self
                .dispatch_plain(&name, request.arguments, ctx)
                .await
                .map(Into::into);
        }
        let (tool, arguments) = match self.preset(&name) {
            Some(preset) => {
                let merged = serverplugins::preset_arguments(&name, &preset, request.arguments)?;
                (preset.tool, Some(merged))
            }
            None => (name, request.arguments),
        };
        self.dispatch_rewritten(&tool, arguments, ctx)
            .await
            .map(Into::into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// M-4, R-1, R-3: the instructions, tool descriptions and argument descriptions state the
    /// limits the deployment configured, not the defaults; every placeholder is filled.
    #[test]
    fn m4_texts_state_the_configured_limits() {
        let config = service::ServiceConfig {
            default_lines: 120,
            max_batch_items: 7,
            read_budget: 64 * 1024,
            batch_budget: 3 * 1024 * 1024,
            ..service::ServiceConfig::default()
        };
        let catalogue = Catalogue::new(&Limits::new(&config));
        let tool = |name: &str| {
            let tool = catalogue.tools().iter().find(|t| t.name == name).unwrap();
            let schema = serde_json::to_string(&*tool.input_schema).unwrap();
            (
                tool.description.clone().unwrap_or_default().into_owned(),
                schema,
            )
        };
        let (read, read_schema) = tool("read");
        assert!(
            read.contains("start_line + 119") && read.contains("64 KiB"),
            "{read}"
        );
        assert!(read_schema.contains("start_line + 119"), "{read_schema}");
        let (read_many, read_many_schema) = tool("read_many");
        assert!(
            read_many.contains("1 to 7 entries") && read_many.contains("3 MiB"),
            "{read_many}"
        );
        assert!(
            read_many_schema.contains("1 to 7 entries"),
            "{read_many_schema}"
        );
        assert!(catalogue.instructions.contains("start_line + 119"));
        let everything = format!("{}{:?}", catalogue.instructions, catalogue.tools());
        for stale in [
            "499",
            "1 to 50",
            "{last_offset}",
            "{max_items}",
            "{read_budget}",
            "{batch_budget}",
        ] {
            assert!(!everything.contains(stale), "{stale} in {everything}");
        }
    }

    /// P-22: the tools a `TOOL_PRESETS` entry may target are the table's adaptable tools with
    /// exactly the schemas `tools/list` advertises, and no preset may shadow a tool.
    #[test]
    fn p22_preset_targets_are_the_advertised_schemas() {
        let limits = Limits::new(&service::ServiceConfig::default());
        let catalogue = Catalogue::new(&limits);
        let targets = tools::preset_targets(&limits);
        for tool in catalogue.tools() {
            let adaptable = tools::find(&tool.name).is_some_and(|t| t.presetable());
            match targets.get(tool.name.as_ref()) {
                Some(schema) => {
                    assert!(adaptable, "{}", tool.name);
                    assert_eq!(
                        schema,
                        &serde_json::Value::Object((*tool.input_schema).clone())
                    );
                }
                None => assert!(!adaptable, "{}", tool.name),
            }
            assert!(
                tools::reserved_names().any(|name| name == tool.name),
                "{} is not reserved",
                tool.name
            );
        }
    }
}
