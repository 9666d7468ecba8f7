//! `tools` owns what a tool of Context Source Graph is, once: for each tool one module with
//! its name, title, agent-facing description (M-4), strict typed arguments (M-3), annotations
//! (M-5), the capability it needs, the service call it makes and how its answer reads as MCP
//! text (R-5, SPEC §9) or as JSON. [`TOOLS`] lists them.
//!
//! Everything else is derived from that table: `mcpserver` builds `tools/list` and its
//! dispatch from it, `httpserver` the routes `/sourcegraph/api/<tool>` (GET with a query
//! string, POST with a JSON body, same arguments and errors as MCP), the server-plugin host
//! the tools a `TOOL_PRESETS` entry may target, and the generated reference texts (README,
//! `plugin_api.py`). Adding a tool is: its module here, one line in [`TOOLS`], its service
//! method, its test.
//!
//! This crate speaks plain Rust and JSON values: no JSON-RPC, no HTTP status codes. A
//! transport maps [`ToolError`] onto its own error shapes.

#![warn(missing_docs)]

mod args;
#[doc(hidden)]
pub mod fuzzing;
mod readargs;
pub mod reference;
pub mod render;
mod table;
mod tool;

mod availability;
mod blame;
mod commit;
mod definitions;
mod diff;
mod discovery;
mod list;
mod log;
mod outline;
mod plugin_status;
mod read;
mod read_many;
mod references;
mod reload_plugins;
mod resolve;
mod search;

pub use args::{Arguments, Limits, arguments_from_pairs};
pub use read::ItemJson;
pub use render::render_read_block;
pub use table::{
    API_ONLY_OPERATIONS, INSTRUCTIONS, TOOLS, find, plugin_catalog, preset_targets, reserved_names,
};
pub use tool::{Annotations, Answer, Call, Capability, Face, Tool, ToolDef, ToolError};
