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
    /// The §9 line without its leading `- `. Values are kept on one line and free of control
    /// characters: in untrusted text (a plugin name from metadata or a file name, a message) a
    /// backslash is doubled, a newline or carriage return becomes `\n` or `\r`, and every
    /// other control character (and the Unicode line and paragraph separators) its Rust
    /// escape, such as `\t` or `\u{1b}`; other text is shown as it is.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one_line = |s: &str| {
            let mut line = String::with_capacity(s.len());
            for c in s.chars() {
                match c {
                    '\\' => line.push_str("\\\\"),
                    '\n' => line.push_str("\\n"),
                    '\r' => line.push_str("\\r"),
                    // An escape sequence or a stray line break in a terminal, a log or the
                    // MCP text must come from the host, never from a plugin or a file name.
                    c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => {
                        line.extend(c.escape_default())
                    }
                    c => line.push(c),
                }
            }
            line
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

    /// §9, W-6: every control character of untrusted text is escaped in the line (a terminal
    /// escape in a plugin name or a file name never reaches a reader raw); backslashes are
    /// doubled so an escape cannot be forged; other text is unchanged.
    #[test]
    fn w6_diagnostic_line_escapes_every_control_character() {
        let d = Diagnostic::new(Code::Artifact, "nul\0 del\u{7f} c1\u{85} sep\u{2028} ok é")
            .at("red\u{1b}[31m", "tab\there\\x");
        assert_eq!(
            d.to_string(),
            "code=PLUGIN_ARTIFACT plugin=red\\u{1b}[31m root=tab\\there\\\\x \
             message=nul\\u{0} del\\u{7f} c1\\u{85} sep\\u{2028} ok é"
        );
        assert!(!d.to_string().chars().any(char::is_control));
    }
}
