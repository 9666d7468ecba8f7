//! Arguments as every face takes them: strict parsing (M-3), the advertised schema with the
//! configured limits written in (M-4), the argument shapes several tools share, and text
//! pairs (a query string) typed by the schema.
//!
//! Every argument struct denies unknown fields, which gives both halves of M-3 at once: serde
//! refuses an unknown argument (named in the error) and schemars writes
//! `additionalProperties: false` into the advertised schema. Old MCP clients rely on that
//! refusal to learn that an argument such as `plugins` is not supported and fall back once.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A tool's arguments as a transport carries them: a JSON object.
pub type Arguments = Map<String, Value>;

/// The limits a deployment configured, as the tool texts state them (an agent plans its calls
/// by them, so they must be the ones in force, not the defaults).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Lines a read returns when `end_line` is omitted.
    pub default_lines: u64,
    /// Entries one `read_many` may ask for.
    pub max_batch_items: usize,
    /// Body bytes of one `read`.
    pub read_budget: usize,
    /// Body bytes one `read_many` shares.
    pub batch_budget: usize,
}

impl Limits {
    /// The limits of `config`.
    pub fn new(config: &service::ServiceConfig) -> Self {
        Self {
            default_lines: config.default_lines,
            max_batch_items: config.max_batch_items,
            read_budget: config.read_budget,
            batch_budget: config.batch_budget,
        }
    }

    /// `template` with `{last_offset}`, `{max_items}`, `{read_budget}` and `{batch_budget}`
    /// replaced by the configured values.
    pub fn fill(&self, template: &str) -> String {
        template
            .replace(
                "{last_offset}",
                &self.default_lines.saturating_sub(1).to_string(),
            )
            .replace("{max_items}", &self.max_batch_items.to_string())
            .replace("{read_budget}", &bytes(self.read_budget))
            .replace("{batch_budget}", &bytes(self.batch_budget))
    }
}

/// `262144` → `256 KiB`; exact values only, so a stated limit is never rounded.
pub(crate) fn bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// Deserializes a tool's arguments, or says what was wrong with them, naming the tool (the
/// unknown argument, the missing or mistyped field).
///
/// The message deliberately does not start with rmcp's "failed to deserialize parameters:"
/// prefix: rmcp turns errors with that prefix into `isError` tool results, and M-3 wants a
/// protocol error.
pub(crate) fn parse<T: DeserializeOwned>(tool: &str, arguments: Arguments) -> Result<T, String> {
    serde_json::from_value(Value::Object(arguments)).map_err(|error| {
        let detail = error.to_string();
        // serde says "unknown field `x`"; to the caller these are arguments.
        let detail = detail
            .strip_prefix("unknown field")
            .map(|rest| format!("unknown argument{rest}"))
            .unwrap_or(detail);
        format!("invalid arguments for tool `{tool}`: {detail}")
    })
}

/// The strict input schema of `T`: JSON Schema 2020-12 with nested types inlined (some agent
/// clients do not follow `$ref`), `additionalProperties: false` from `deny_unknown_fields`,
/// the struct's own title and description stripped (noise to the model), and the property
/// descriptions filled with `limits`.
pub(crate) fn input_schema<T: JsonSchema>(limits: &Limits) -> Arguments {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|settings| {
        settings.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match serde_json::to_value(schema) {
        Ok(Value::Object(object)) => object,
        // A derived schema is always an object; should that ever change, advertise a schema
        // that still refuses unknown arguments rather than fail the whole tool list.
        other => {
            tracing::error!(?other, "tool input schema is not a JSON object");
            let mut fallback = Arguments::new();
            fallback.insert("type".into(), "object".into());
            fallback.insert("additionalProperties".into(), false.into());
            fallback
        }
    };
    object.remove("title");
    object.remove("description");
    object.remove("$schema");
    for value in object.values_mut() {
        fill_descriptions(value, limits);
    }
    object
}

/// Writes the configured limits into every `description` below `value`.
fn fill_descriptions(value: &mut Value, limits: &Limits) {
    match value {
        Value::Object(object) => {
            for (key, child) in object.iter_mut() {
                match child {
                    Value::String(text) if key == "description" => *text = limits.fill(text),
                    _ => fill_descriptions(child, limits),
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                fill_descriptions(item, limits);
            }
        }
        _ => {}
    }
}

/// Arguments from text pairs (a GET query string), typed by the tool's `schema`: a property
/// the schema types as a string stays text; an integer, number or boolean is parsed as one;
/// an array or object is read as JSON text (`files=[{"path":"a.md"}]`). A name the schema
/// does not know stays text, so parsing refuses it exactly as it refuses it in JSON. A name
/// given twice is refused here.
pub fn arguments_from_pairs(
    schema: &Arguments,
    pairs: impl IntoIterator<Item = (String, String)>,
) -> Result<Arguments, String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    let mut out = Arguments::new();
    for (name, text) in pairs {
        let types = properties
            .and_then(|p| p.get(&name))
            .map(schema_types)
            .unwrap_or_default();
        let value = typed(&name, &text, &types)?;
        if out.insert(name.clone(), value).is_some() {
            return Err(format!("argument `{name}` is given more than once"));
        }
    }
    Ok(out)
}

/// The JSON types a property schema allows (`"type": "x"` or `"type": ["x", "null"]`).
fn schema_types(schema: &Value) -> Vec<String> {
    match schema.get("type") {
        Some(Value::String(one)) => vec![one.clone()],
        Some(Value::Array(many)) => many
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

fn typed(name: &str, text: &str, types: &[String]) -> Result<Value, String> {
    let allows = |t: &str| types.iter().any(|x| x == t);
    if allows("string") || types.is_empty() {
        return Ok(Value::String(text.to_owned()));
    }
    if allows("boolean") {
        return match text {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            _ => Err(format!(
                "argument `{name}` must be true or false, not {text:?}"
            )),
        };
    }
    if allows("integer") || allows("number") {
        // JSON's number grammar, so `1e3` or `0x10` are refused like in a JSON body.
        return match serde_json::from_str::<Value>(text) {
            Ok(number @ Value::Number(_)) => Ok(number),
            _ => Err(format!("argument `{name}` must be a number, not {text:?}")),
        };
    }
    serde_json::from_str(text)
        .map_err(|error| format!("argument `{name}` must be JSON text here: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> Arguments {
        match value {
            Value::Object(object) => object,
            _ => Arguments::new(),
        }
    }

    #[test]
    fn byte_sizes_are_exact() {
        assert_eq!(bytes(262_144), "256 KiB");
        assert_eq!(bytes(2 << 20), "2 MiB");
        assert_eq!(bytes(1000), "1000 bytes");
        assert_eq!(bytes(1536), "1536 bytes");
    }

    /// R-6: a query string carries the same arguments as JSON, typed by the schema.
    #[test]
    fn r6_query_pairs_are_typed_by_the_schema() {
        let schema = object(json!({"properties": {
            "repo": {"type": "string"},
            "limit": {"type": ["integer", "null"]},
            "regex": {"type": ["boolean", "null"]},
            "files": {"type": "array"}
        }}));
        let pairs = |list: &[(&str, &str)]| {
            list.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let args = arguments_from_pairs(
            &schema,
            pairs(&[
                ("repo", "a/b"),
                ("limit", "20"),
                ("regex", "true"),
                ("files", r#"[{"path":"x"}]"#),
                ("bogus", "1"),
            ]),
        )
        .unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"repo": "a/b", "limit": 20, "regex": true, "files": [{"path": "x"}], "bogus": "1"})
        );
        assert!(arguments_from_pairs(&schema, pairs(&[("limit", "x")])).is_err());
        assert!(arguments_from_pairs(&schema, pairs(&[("regex", "yes")])).is_err());
        assert!(arguments_from_pairs(&schema, pairs(&[("repo", "a"), ("repo", "b")])).is_err());
    }
}
