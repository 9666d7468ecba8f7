//! What a tool is: the [`Tool`] trait a tool module implements, its type-erased face
//! [`ToolDef`] that the table holds, and the values every face shares (capability,
//! annotations, answers, errors).

use crate::args::{self, Arguments, Limits};
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use service::{ArgumentRewrite, CallContext, Cost, Service, ServiceError};
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;

/// What a caller must hold to run a tool. The service checks it; the table says it
/// so that transports and documentation can show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Read access to the repositories it names (public, or granted: ).
    Read,
    /// The `prepare` capability: operator actions.
    Prepare,
}

impl Capability {
    /// The capability's name in generated documentation.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Read => "read",
            Capability::Prepare => "prepare",
        }
    }
}

/// MCP tool annotations (M-5): hints a client may show or act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotations {
    /// The tool changes nothing.
    pub read_only: bool,
    /// The tool may destroy data.
    pub destructive: bool,
    /// Calling it twice with the same arguments has the effect of calling it once.
    pub idempotent: bool,
    /// It reaches outside the server's own data.
    pub open_world: bool,
}

impl Annotations {
    /// A read-side tool (every tool but the operator's reload).
    pub const READ: Annotations = Annotations {
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
}

/// Which face asked: the answer and, for reads, the work differ (R-6: the JSON API never runs
/// plugins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Face {
    /// An MCP `tools/call`: text blocks, repository plugins per the call (W-10).
    Mcp,
    /// The JSON API: one JSON value, never plugins.
    Api,
}

/// A tool's answer in the shape of the face that asked.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// MCP: the text blocks, and a `QUERY_ALIASES` rewrite to disclose (P-22).
    Text {
        /// One `content` text block each, in order.
        blocks: Vec<String>,
        /// A search term the server plugins replaced.
        query_rewrite: Option<ArgumentRewrite>,
    },
    /// The JSON API's body.
    Json(Value),
}

impl Answer {
    /// One text block (MCP) or the serialized answer (API).
    pub(crate) fn of<T: Serialize>(
        face: Face,
        answer: &T,
        text: impl FnOnce(&T) -> String,
    ) -> Self {
        match face {
            Face::Mcp => Answer::Text {
                blocks: vec![text(answer)],
                query_rewrite: None,
            },
            Face::Api => Answer::json(answer),
        }
    }

    /// The JSON value of `answer`. Service answers are plain data, so serializing cannot
    /// fail; should it ever, the body says so rather than the call panicking.
    pub(crate) fn json<T: Serialize>(answer: &T) -> Self {
        Answer::Json(serde_json::to_value(answer).unwrap_or_else(|error| {
            tracing::error!(%error, "a tool answer did not serialize");
            serde_json::json!({"error": {"kind": "internal", "message": "the answer could not be encoded; see the server log"}})
        }))
    }
}

/// Why a call did not produce an answer.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolError {
    /// The arguments do not fit the tool's schema (unknown, missing or mistyped). MCP answers
    /// JSON-RPC invalid params (M-3); the API answers 400. The message names the tool.
    Arguments(String),
    /// The operation failed (not found, forbidden, busy…): an `isError` result over MCP, the
    /// kind's status over HTTP.
    Service(ServiceError),
}

impl From<ServiceError> for ToolError {
    fn from(error: ServiceError) -> Self {
        ToolError::Service(error)
    }
}

/// A boxed answer future: what [`ToolDef::call`] returns so the table can hold every tool.
pub type Call<'a> = Pin<Box<dyn Future<Output = Result<Answer, ToolError>> + Send + 'a>>;

/// One tool, written once. Implemented by a unit type per tool module; [`TOOLS`] erases it to
/// [`ToolDef`].
pub trait Tool: Send + Sync + 'static {
    /// Its arguments: strict (`deny_unknown_fields`), their doc comments are the schema's
    /// property descriptions (an agent reads them), `{placeholders}` filled by [`Limits`].
    type Args: DeserializeOwned + JsonSchema + Send;
    /// The name in `tools/list` and in `/sourcegraph/api/<name>` (SPEC §9).
    const NAME: &'static str;
    /// A short human title.
    const TITLE: &'static str;
    /// What the agent reads to decide when and how to call it (M-4); a [`Limits`] template.
    const DESCRIPTION: &'static str;
    /// What the caller must hold.
    const CAPABILITY: Capability = Capability::Read;
    /// What one call may spend (O-9): its class (the pool its slot comes from), deadline,
    /// walk and byte bounds. The service frame runs the call under it.
    const COST: Cost;
    /// Annotations (M-5).
    const ANNOTATIONS: Annotations = Annotations::READ;
    /// Whether a server plugin's `TOOL_PRESETS` entry may build on it (P-22).
    const PRESETABLE: bool = true;

    /// Runs the tool for `face`.
    fn run(
        service: &Service,
        ctx: &CallContext,
        args: Self::Args,
        face: Face,
    ) -> impl Future<Output = Result<Answer, ToolError>> + Send;
}

/// A tool of [`TOOLS`], its type erased.
pub trait ToolDef: Sync {
    /// See [`Tool::NAME`].
    fn name(&self) -> &'static str;
    /// See [`Tool::TITLE`].
    fn title(&self) -> &'static str;
    /// The description with the configured limits written in.
    fn description(&self, limits: &Limits) -> String;
    /// See [`Tool::CAPABILITY`].
    fn capability(&self) -> Capability;
    /// See [`Tool::COST`].
    fn cost(&self) -> Cost;
    /// See [`Tool::ANNOTATIONS`].
    fn annotations(&self) -> Annotations;
    /// See [`Tool::PRESETABLE`].
    fn presetable(&self) -> bool;
    /// The strict input schema (JSON Schema 2020-12, nested types inlined), its property
    /// descriptions filled with `limits`.
    fn input_schema(&self, limits: &Limits) -> Arguments;
    /// Parses `arguments` as [`ToolDef::call`] does, without running the tool: the fuzz
    /// target `tool_args` (`fuzzing.rs`, issue 43).
    #[doc(hidden)]
    fn parse_arguments(&self, arguments: Arguments) -> Result<(), String>;
    /// Parses `arguments` and runs the tool for `face`.
    fn call<'a>(
        &'a self,
        service: &'a Service,
        ctx: &'a CallContext,
        arguments: Arguments,
        face: Face,
    ) -> Call<'a>;
}

/// The [`ToolDef`] of a [`Tool`].
pub(crate) struct Def<T>(PhantomData<fn() -> T>);

impl<T> Def<T> {
    pub(crate) const NEW: Self = Def(PhantomData);
}

impl<T: Tool> ToolDef for Def<T> {
    fn name(&self) -> &'static str {
        T::NAME
    }

    fn title(&self) -> &'static str {
        T::TITLE
    }

    fn description(&self, limits: &Limits) -> String {
        limits.fill(T::DESCRIPTION)
    }

    fn capability(&self) -> Capability {
        T::CAPABILITY
    }

    fn cost(&self) -> Cost {
        T::COST
    }

    fn annotations(&self) -> Annotations {
        T::ANNOTATIONS
    }

    fn presetable(&self) -> bool {
        T::PRESETABLE
    }

    fn input_schema(&self, limits: &Limits) -> Arguments {
        args::input_schema::<T::Args>(limits)
    }

    fn parse_arguments(&self, arguments: Arguments) -> Result<(), String> {
        args::parse::<T::Args>(T::NAME, arguments).map(drop)
    }

    fn call<'a>(
        &'a self,
        service: &'a Service,
        ctx: &'a CallContext,
        arguments: Arguments,
        face: Face,
    ) -> Call<'a> {
        Box::pin(async move {
            let args: T::Args = args::parse(T::NAME, arguments).map_err(ToolError::Arguments)?;
            // The call's budget starts here, under the tool's cost (O-9).
            let ctx = ctx.with_cost(T::COST);
            T::run(service, &ctx, args, face).await
        })
    }
}
