//! Diagnostics: what went wrong with a plugin, with a stable code (SPEC §9). They are shown
//! to agents as data; messages never contain host paths or internal error chains.

use std::fmt;

/// The stable diagnostic codes of SPEC §9 and W-25.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Code {
    /// The request deadline passed (execution, compile wait, or inside a host import).
    Timeout,
    /// CONCURRENCY executions were already running.
    Busy,
    /// The module trapped (in `alloc`, `enrich`, `dealloc`, or at start).
    Trap,
    /// MEMORY_MIB was exceeded (growth, or an initial memory over the cap).
    Memory,
    /// Invalid output: UTF-8, JSON or shape; out-of-bounds or aliased pointer; over
    /// OUTPUT_BYTES.
    Output,
    /// A bad attachment: unknown or foreign `item_id`, non-string fields, over the 2 MiB
    /// request cap.
    Attachment,
    /// Wrong `abi_version`, or a missing or mistyped export.
    Abi,
    /// Missing, duplicate or invalid `sourcegraph.plugin.v1` section; name mismatch; over
    /// METADATA_BYTES.
    Metadata,
    /// The artifact is an LFS pointer, a symlink, a gitlink, over ARTIFACT_BYTES, or not a
    /// valid module.
    Artifact,
    /// A plugin named by the call or connection does not exist at this commit and path.
    NotFound,
    /// A selected plugin does not declare the current operation.
    Operation,
    /// Plugins are off (connection `off` or host disabled) while a call named plugins.
    Disabled,
    /// A host-read budget (READ_BYTES, READ_CALLS, FILE_BYTES) stopped a read.
    ReadBudget,
}

impl Code {
    /// The code as shown: `PLUGIN_TIMEOUT`, …
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Timeout => "PLUGIN_TIMEOUT",
            Self::Busy => "PLUGIN_BUSY",
            Self::Trap => "PLUGIN_TRAP",
            Self::Memory => "PLUGIN_MEMORY",
            Self::Output => "PLUGIN_OUTPUT",
            Self::Attachment => "PLUGIN_ATTACHMENT",
            Self::Abi => "PLUGIN_ABI",
            Self::Metadata => "PLUGIN_METADATA",
            Self::Artifact => "PLUGIN_ARTIFACT",
            Self::NotFound => "PLUGIN_NOT_FOUND",
            Self::Operation => "PLUGIN_OPERATION",
            Self::Disabled => "PLUGIN_DISABLED",
            Self::ReadBudget => "PLUGIN_READ_BUDGET",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One diagnostic line: `- code=… plugin=… root=… items=… message=…` (SPEC §9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub code: Code,
    /// The plugin's name (may be empty when unknown, e.g. an unreadable artifact).
    pub plugin: String,
    /// The plugin directory, repository-relative (`""` = the repository root).
    pub root: String,
    /// The read items the failure concerns (`read-0`, …).
    pub items: Vec<String>,
    /// What happened, for an agent or an operator; no host paths.
    pub message: String,
}

impl Diagnostic {
    /// A diagnostic without plugin, root or items yet.
    pub fn new(code: Code, message: impl Into<String>) -> Self {
        Self {
            code,
            plugin: String::new(),
            root: String::new(),
            items: Vec::new(),
            message: message.into(),
        }
    }

    /// Sets the plugin and its directory.
    pub fn at(mut self, plugin: &str, root: &str) -> Self {
        self.plugin = plugin.to_string();
        self.root = root.to_string();
        self
    }

    /// Sets the items concerned.
    pub fn for_items(mut self, items: Vec<String>) -> Self {
        self.items = items;
        self
    }
}

impl fmt::Display for Diagnostic {
    /// The §9 line without its leading `- `. Values are kept on one line: a newline in
    /// untrusted text (a plugin name from metadata, a message) is escaped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one_line = |s: &str| {
            s.replace('\\', "\\\\")
                .replace('\n', "\\n")
                .replace('\r', "\\r")
        };
        write!(f, "code={} plugin={}", self.code, one_line(&self.plugin))?;
        write!(
            f,
            " root={}",
            if self.root.is_empty() {
                "\"\"".to_string()
            } else {
                one_line(&self.root)
            }
        )?;
        if !self.items.is_empty() {
            write!(f, " items={}", self.items.join(","))?;
        }
        write!(f, " message={}", one_line(&self.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostic_line_shape() {
        let d = Diagnostic::new(Code::Timeout, "took longer than 10s")
            .at("related-content", "docs")
            .for_items(vec!["read-0".into(), "read-2".into()]);
        assert_eq!(
            d.to_string(),
            "code=PLUGIN_TIMEOUT plugin=related-content root=docs items=read-0,read-2 message=took longer than 10s"
        );
        let hostile = Diagnostic::new(Code::Metadata, "bad\nline").at("x\ny", "");
        assert_eq!(
            hostile.to_string(),
            "code=PLUGIN_METADATA plugin=x\\ny root=\"\" message=bad\\nline"
        );
    }
}
