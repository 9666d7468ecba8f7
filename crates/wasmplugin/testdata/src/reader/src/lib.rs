//! Host test fixture `reader` (see `crates/wasmplugin/testdata/README.md`).
//!
//! For each path of `args.paths` it reads the file through the host and attaches, as a
//! whole-batch attachment per path, `<path>: <len> bytes` or `<path>: error <last_error>`.
//! With `{"batch": true}` all paths go through one `read_files` call instead of `read_file`
//! each; if that call fails as a whole the only attachment is `read_files: error <message>`.
//! With `{"content": true}` each success is followed by a newline and the content (lossy
//! UTF-8), so tests can check the bytes that arrived.

use sourcegraph_plugin_sdk::serde_json::Value;
use sourcegraph_plugin_sdk::{Attachment, Input};

sourcegraph_plugin_sdk::plugin! {
    metadata: r#"{"name":"reader","title":"Reader","description":"Test fixture: reads args.paths through the read_file/read_files host imports.","version":"0.1.0","abi_version":2,"operations":["read","read_many"],"default_enabled":true,"input_schema":{"type":"object"}}"#,
    enrich: enrich,
}

fn enrich(input: Input) -> Result<Vec<Attachment>, String> {
    let paths: Vec<&str> = match input.arg("paths") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().ok_or("args.paths must be an array of strings"))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("args.paths must be an array of strings".into()),
    };
    let show_content = input.arg("content") == Some(&Value::Bool(true));
    let results: Vec<Result<Vec<u8>, String>> = if input.arg("batch") == Some(&Value::Bool(true)) {
        match sourcegraph_plugin_sdk::read_files(&paths) {
            Ok(results) => results,
            Err(e) => return Ok(vec![Attachment::batch(format!("read_files: error {e}"))]),
        }
    } else {
        paths
            .iter()
            .map(|p| sourcegraph_plugin_sdk::read_file(p))
            .collect()
    };
    Ok(paths
        .iter()
        .zip(results)
        .map(|(path, result)| {
            Attachment::batch(match result {
                Ok(bytes) if show_content => format!(
                    "{path}: {} bytes\n{}",
                    bytes.len(),
                    String::from_utf8_lossy(&bytes)
                ),
                Ok(bytes) => format!("{path}: {} bytes", bytes.len()),
                Err(e) => format!("{path}: error {e}"),
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sourcegraph_plugin_sdk::mock;
    use sourcegraph_plugin_sdk::serde_json::{self, json};

    fn run(args: Value) -> Value {
        let input = json!({"abi_version": 2, "operation": "read", "repository": "r",
                           "commit": "c", "root": "", "args": args, "files": []});
        serde_json::from_slice(&__sourcegraph_run(&serde_json::to_vec(&input).unwrap())).unwrap()
    }

    #[test]
    fn single_and_batch_reads_report_lengths_and_errors() {
        mock::set_files([("a.txt", &b"abc"[..]), ("empty", &b""[..])]);
        for batch in [false, true] {
            let out = run(json!({"paths": ["a.txt", "empty", "nope"], "batch": batch}));
            let texts: Vec<&str> = out["attachments"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["text"].as_str().unwrap())
                .collect();
            assert_eq!(texts[..2], ["a.txt: 3 bytes", "empty: 0 bytes"]);
            assert!(texts[2].starts_with("nope: error "));
        }
        let out = run(json!({"paths": ["a.txt"], "content": true}));
        assert_eq!(out["attachments"][0]["text"], "a.txt: 3 bytes\nabc");
        assert_eq!(run(json!({})), json!({"attachments": []}));
    }
}
