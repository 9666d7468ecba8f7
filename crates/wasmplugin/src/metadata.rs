//! Static plugin metadata: the JSON in the `sourcegraph.plugin.v1` custom section (W-3, W-4).
//! Reading it never runs the plugin (W-6).

use crate::{Code, Diagnostic};
use serde_json::Value;

/// The custom section holding the metadata. Its `v1` names the container; the JSON ABI it
/// announces is `abi_version` (W-4).
pub const SECTION: &str = "sourcegraph.plugin.v1";

/// The only JSON ABI this host speaks.
pub const ABI_VERSION: i64 = 2;

/// The artifact suffix (W-2).
pub const ARTIFACT_SUFFIX: &str = ".sourcegraph.wasm";

/// The most of an `input_schema` kept, in bytes of its compact JSON: it is shown on one line
/// in `availability` and on the Plugins tab, and catalogs are cached per commit, so a plugin
/// must not make either carry the whole METADATA_BYTES of it.
pub const INPUT_SCHEMA_BYTES: usize = 4096;

/// What a plugin says about itself. Display fields are untrusted text.
#[derive(Debug, Clone, PartialEq)]
pub struct Metadata {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub version: Option<String>,
    pub operations: Vec<String>,
    /// Only the boolean `true` counts (W-3).
    pub default_enabled: bool,
    /// `input_schema` as compact one-line JSON, for display only: never fetched or enforced
    /// (W-3). Cut on a character boundary with a trailing `…` when over
    /// [`INPUT_SCHEMA_BYTES`] (then no longer valid JSON).
    pub input_schema: Option<String>,
}

impl Metadata {
    /// Whether the plugin declares `operation` (`read` or `read_many`).
    pub fn declares(&self, operation: &str) -> bool {
        self.operations.iter().any(|op| op == operation)
    }
}

/// Validates the module and reads its metadata. `artifact_name` is the file name without
/// [`ARTIFACT_SUFFIX`]; `max_bytes` is METADATA_BYTES.
pub fn read_metadata(
    artifact_name: &str,
    wasm: &[u8],
    max_bytes: u64,
) -> Result<Metadata, Diagnostic> {
    let mut sections = Vec::new();
    // Validate the whole module before trusting anything in it (W-3).
    let mut validator = wasmparser::Validator::new();
    for payload in wasmparser::Parser::new(0).parse_all(wasm) {
        let payload = payload.map_err(|e| invalid_module(&e))?;
        if let wasmparser::Payload::CustomSection(reader) = &payload
            && reader.name() == SECTION
        {
            sections.push(reader.data().to_vec());
        }
        validator
            .payload(&payload)
            .map_err(|e| invalid_module(&e))?;
    }
    let data = match sections.as_slice() {
        [] => {
            return Err(metadata(format!(
                "no `{SECTION}` custom section: embed the metadata JSON in the module"
            )));
        }
        [one] => one,
        _ => {
            return Err(metadata(format!(
                "{} `{SECTION}` custom sections; exactly one is allowed",
                sections.len()
            )));
        }
    };
    if data.len() as u64 > max_bytes {
        return Err(metadata(format!(
            "metadata is {} bytes, over METADATA_BYTES ({max_bytes})",
            data.len()
        )));
    }
    let json: Value = serde_json::from_slice(data)
        .map_err(|e| metadata(format!("metadata is not valid JSON: {e}")))?;
    let Value::Object(fields) = json else {
        return Err(metadata("metadata must be a JSON object".to_string()));
    };
    let name = match fields.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => return Err(metadata("metadata has no string `name`".to_string())),
    };
    if name != artifact_name {
        return Err(metadata(format!(
            "metadata name `{}` does not match the artifact name `{artifact_name}{ARTIFACT_SUFFIX}`",
            bounded(&name)
        )));
    }
    match fields.get("abi_version") {
        Some(Value::Number(n)) if n.as_i64() == Some(ABI_VERSION) => {}
        other => {
            let found = other
                .map(|v| bounded(&v.to_string()))
                .unwrap_or_else(|| "missing".to_string());
            return Err(Diagnostic::new(
                Code::Abi,
                format!(
                    "incompatible ABI: abi_version is {found}, this host speaks JSON ABI {ABI_VERSION}; rebuild the plugin"
                ),
            ));
        }
    }
    let operations = match fields.get("operations") {
        Some(Value::Array(ops)) if ops.iter().all(Value::is_string) => ops
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => {
            return Err(metadata(
                "metadata `operations` must be an array of strings".to_string(),
            ));
        }
    };
    let text = |key: &str| fields.get(key).and_then(Value::as_str).map(str::to_string);
    Ok(Metadata {
        name,
        title: text("title"),
        description: text("description"),
        version: text("version"),
        operations,
        default_enabled: fields.get("default_enabled") == Some(&Value::Bool(true)),
        input_schema: fields.get("input_schema").map(compact_schema),
    })
}

/// `schema` as one line of JSON (control characters inside strings stay escaped), at most
/// [`INPUT_SCHEMA_BYTES`] plus the `…` that marks a cut.
fn compact_schema(schema: &Value) -> String {
    let mut text = schema.to_string();
    if text.len() > INPUT_SCHEMA_BYTES {
        let mut end = INPUT_SCHEMA_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

fn metadata(message: String) -> Diagnostic {
    Diagnostic::new(Code::Metadata, message)
}

fn invalid_module(error: &wasmparser::BinaryReaderError) -> Diagnostic {
    Diagnostic::new(
        Code::Artifact,
        format!("not a valid Wasm module: {}", bounded(error.message())),
    )
}

/// Untrusted text in a message: at most 120 characters.
fn bounded(text: &str) -> String {
    let mut out: String = text.chars().take(120).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(sections: &[&str]) -> Vec<u8> {
        let customs: String = sections
            .iter()
            .map(|json| {
                format!(
                    "(@custom \"{SECTION}\" \"{}\")",
                    json.replace('\\', "\\\\").replace('"', "\\\"")
                )
            })
            .collect();
        wat::parse_str(format!("(module (memory (export \"memory\") 1) {customs})")).unwrap()
    }

    const GOOD: &str = r#"{"name":"p","abi_version":2,"operations":["read"],"default_enabled":true,"title":"T","extra":1}"#;

    /// W-3: required and optional fields, unknown fields ignored.
    #[test]
    fn w3_reads_metadata() {
        let meta = read_metadata("p", &module(&[GOOD]), 1024).unwrap();
        assert_eq!(
            (
                meta.name.as_str(),
                meta.default_enabled,
                meta.title.as_deref()
            ),
            ("p", true, Some("T"))
        );
        assert!(meta.declares("read") && !meta.declares("read_many"));
    }

    /// W-3: `input_schema` is kept as compact one-line JSON, display only; absent stays
    /// absent, and one over INPUT_SCHEMA_BYTES is cut on a character boundary and marked.
    #[test]
    fn w3_input_schema_kept_compact_and_bounded() {
        let json = GOOD.replace(
            "\"extra\":1",
            "\"input_schema\":{\"type\": \"object\",  \"properties\": {\"q\": {\"description\": \"a\\nb <i>\"}}}",
        );
        let meta = read_metadata("p", &module(&[&json]), 4096).unwrap();
        // Compact: serde_json's own one-line form (its key order, with or without
        // `preserve_order`), the newline inside the string still escaped.
        let expected =
            serde_json::json!({"type": "object", "properties": {"q": {"description": "a\nb <i>"}}});
        let shown = meta.input_schema.unwrap();
        assert_eq!(shown, expected.to_string());
        assert!(!shown.contains('\n') && !shown.contains(", ") && shown.contains("a\\nb"));
        assert_eq!(
            read_metadata("p", &module(&[GOOD]), 1024)
                .unwrap()
                .input_schema,
            None
        );

        // Multi-byte characters across the bound: the cut falls before the one it splits.
        let long = "é".repeat(INPUT_SCHEMA_BYTES);
        let json = GOOD.replace("\"extra\":1", &format!("\"input_schema\":\"{long}\""));
        let meta = read_metadata("p", &module(&[&json]), 1 << 20).unwrap();
        let shown = meta.input_schema.unwrap();
        assert!(shown.ends_with('…') && shown.starts_with("\"éé"), "{shown}");
        assert!(shown.len() <= INPUT_SCHEMA_BYTES + '…'.len_utf8());
        assert!(shown.len() > INPUT_SCHEMA_BYTES - 2);
    }

    /// W-3: `default_enabled` counts only as the boolean true.
    #[test]
    fn w3_default_enabled_only_boolean_true() {
        let json = GOOD.replace("\"default_enabled\":true", "\"default_enabled\":\"true\"");
        assert!(
            !read_metadata("p", &module(&[&json]), 1024)
                .unwrap()
                .default_enabled
        );
    }

    /// W-3, W-4: each defect is a diagnostic with its code.
    #[test]
    fn w3_w4_metadata_defects() {
        let cases: Vec<(Vec<u8>, Code, &str)> = vec![
            (module(&[]), Code::Metadata, "no `sourcegraph.plugin.v1`"),
            (module(&[GOOD, GOOD]), Code::Metadata, "exactly one"),
            (
                module(&[&GOOD.replace("\"name\":\"p\"", "\"name\":\"q\"")]),
                Code::Metadata,
                "does not match",
            ),
            (
                module(&[&GOOD.replace(",\"abi_version\":2", "")]),
                Code::Abi,
                "abi_version is missing",
            ),
            (
                module(&[&GOOD.replace("\"abi_version\":2", "\"abi_version\":1")]),
                Code::Abi,
                "abi_version is 1",
            ),
            (
                module(&[&GOOD.replace("\"abi_version\":2", "\"abi_version\":3")]),
                Code::Abi,
                "abi_version is 3",
            ),
            (
                module(&[&GOOD.replace("[\"read\"]", "\"read\"")]),
                Code::Metadata,
                "operations",
            ),
            (module(&["not json"]), Code::Metadata, "not valid JSON"),
            (
                b"\0asm\x01\0\0\0\x7f".to_vec(),
                Code::Artifact,
                "not a valid Wasm module",
            ),
        ];
        for (wasm, code, text) in cases {
            let d = read_metadata("p", &wasm, 1024).unwrap_err();
            assert_eq!(d.code, code, "{d}");
            assert!(d.message.contains(text), "{text}: {d}");
        }
        let d = read_metadata("p", &module(&[GOOD]), 10).unwrap_err();
        assert!(
            d.code == Code::Metadata && d.message.contains("METADATA_BYTES"),
            "{d}"
        );
    }
}
