//! `wasmplugin` is the host of repository plugins (SPEC section 6, seed 000): core Wasm
//! modules committed inside a repository as `<name>.sourcegraph.wasm`, discovered per commit,
//! selected per call, run sandboxed (no WASI, bounded time, memory, reads and output) after
//! a base read, and appending business text to `read`/`read_many` answers (JSON ABI 2).
//!
//! This crate never sees a transport and never reads Git itself: the service hands it
//! artifacts and a [`runtime::HostFiles`] reader bound to one repository, commit and plugin
//! directory.

mod abi;
mod catalog;
mod config;
mod connection;
mod diagnostic;
#[doc(hidden)]
pub mod fuzzing;
mod metadata;
mod plan;
pub mod runtime;

pub use catalog::{
    ArtifactEntry, ArtifactKind, Broken, CATALOG_ARTIFACT_BYTES, CATALOG_ARTIFACTS, Catalog,
    Nearest, Plugin, discover,
};
pub use config::{ConfigError, ENV_PREFIX, PluginConfig, parse_duration};
pub use connection::{ConnectionPlugins, InvalidConnectionPlugins, PluginSelection};
pub use diagnostic::{Code, Diagnostic};
pub use metadata::{
    ABI_VERSION, ARTIFACT_SUFFIX, INPUT_SCHEMA_BYTES, Metadata, SECTION, read_metadata,
};
pub use plan::{ATTACHMENT_CAP, Attachments, Execution, ItemRef, Plan, plan, plan_without_catalog};
