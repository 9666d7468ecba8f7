//! Host test fixture `echo` (see `crates/wasmplugin/testdata/README.md`).
//!
//! Per item it attaches `echo <item_id> <path> <start_line>-<end_line> root=<root>
//! op=<operation> calls=<N>`, where N counts `enrich` calls of this instance (1 on a fresh
//! instance), so host tests can prove instance reuse and discard. Opt-in args drive the host's
//! fault paths with a real artifact:
//! * `{"whole": "<text>"}` — also one whole-batch attachment with that text (last);
//! * `{"attach_to": ["read-9", …]}` — also `extra for <id>` attached to each given id (after the
//!   per-item attachments), e.g. unknown or foreign ids;
//! * `{"error": "<message>"}` — return `Err`: the SDK turns it into `echo: <message>`;
//! * `{"panic": "<message>"}` — panic, i.e. trap;
//! * `{"spin": true}` — loop forever (timeout/epoch interruption);
//! * `{"grow_mib": N}` — allocate and touch N MiB first (memory limit).

use sourcegraph_plugin_sdk::serde_json::Value;
use sourcegraph_plugin_sdk::{Attachment, Input};
use std::sync::atomic::{AtomicU64, Ordering};

sourcegraph_plugin_sdk::plugin! {
    metadata: r#"{"name":"echo","title":"Echo","description":"Test fixture: echoes item metadata and a per-instance call counter.","version":"0.1.0","abi_version":2,"operations":["read","read_many"],"default_enabled":true,"input_schema":{"type":"object"}}"#,
    enrich: enrich,
}

/// Lives as long as the instance: the observable difference between a reused and a new one.
static CALLS: AtomicU64 = AtomicU64::new(0);

fn enrich(input: Input) -> Result<Vec<Attachment>, String> {
    let calls = CALLS.fetch_add(1, Ordering::Relaxed) + 1;

    if let Some(mib) = input.arg("grow_mib").and_then(Value::as_u64) {
        let buf = vec![1u8; (mib as usize).saturating_mul(1 << 20)];
        // Keep the allocation observable so it is not optimised away.
        std::hint::black_box(&buf);
    }
    if let Some(message) = input.arg_str("panic")? {
        panic!("{message}");
    }
    if input.arg("spin") == Some(&Value::Bool(true)) {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
    if let Some(message) = input.arg_str("error")? {
        return Err(message.to_owned());
    }

    let mut out: Vec<Attachment> = input
        .files
        .iter()
        .map(|f| {
            Attachment::item(
                &f.item_id,
                format!(
                    "echo {} {} {}-{} root={} op={} calls={calls}",
                    f.item_id, f.path, f.start_line, f.end_line, input.root, input.operation
                ),
            )
        })
        .collect();
    if let Some(ids) = input.arg("attach_to").and_then(Value::as_array) {
        for id in ids.iter().filter_map(Value::as_str) {
            out.push(Attachment::item(id, format!("extra for {id}")));
        }
    }
    if let Some(text) = input.arg_str("whole")? {
        out.push(Attachment::batch(text));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sourcegraph_plugin_sdk::serde_json::{self, json};

    #[test]
    fn echoes_items_and_whole() {
        let input = json!({
            "abi_version": 2, "operation": "read_many", "repository": "r", "commit": "c",
            "root": "docs", "args": {"whole": "W", "attach_to": ["read-9"]},
            "files": [{"item_id": "read-1", "path": "a.md", "repository_path": "docs/a.md",
                       "start_line": 2, "end_line": 4, "content": "", "truncated": false,
                       "has_more": null}]
        });
        let out: Value =
            serde_json::from_slice(&__sourcegraph_run(&serde_json::to_vec(&input).unwrap()))
                .unwrap();
        let atts = out["attachments"].as_array().unwrap();
        let text = atts[0]["text"].as_str().unwrap();
        assert!(text.starts_with("echo read-1 a.md 2-4 root=docs op=read_many calls="));
        assert_eq!(
            atts[1],
            json!({"item_id": "read-9", "text": "extra for read-9"})
        );
        assert_eq!(atts[2], json!({"text": "W"}));
    }
}
