//! The runtime against the real Rust-built fixtures of `testdata/` (W-37): the JSON ABI 2 round
//! trip through the guest SDK, host reads, and the fault paths of a real artifact.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wasmplugin::runtime::{HostFiles, HostReadError, InstanceKey, Module, Runtime};
use wasmplugin::{Code, PluginConfig};

fn fixture(name: &str) -> Arc<[u8]> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata")
        .join(format!("{name}.sourcegraph.wasm"));
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into()
}

fn runtime() -> Runtime {
    Runtime::new(PluginConfig {
        memory_mib: 16,
        concurrency: 2,
        idle_instances: 2,
        ..PluginConfig::default()
    })
    .expect("runtime")
}

fn module(rt: &Runtime, name: &str) -> Arc<Module> {
    rt.module(name, &fixture(name), None)
        .unwrap_or_else(|d| panic!("{name}: {d}"))
}

fn key() -> InstanceKey {
    InstanceKey {
        storage_root: "/data".into(),
        repo: "example/knowledge".into(),
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        plugin_dir: "docs".into(),
        args: "{}".into(),
    }
}

fn input(args: Value) -> Vec<u8> {
    let file = |i: usize, path: &str| {
        json!({
            "item_id": format!("read-{i}"), "path": path, "repository_path": format!("docs/{path}"),
            "start_line": 1, "end_line": 3, "content": "a\nb\nc\n", "truncated": false,
            "has_more": null, "next_start_line": null,
        })
    };
    serde_json::to_vec(&json!({
        "abi_version": 2, "operation": "read", "repository": "example/knowledge",
        "commit": "0123456789abcdef0123456789abcdef01234567", "root": "docs", "args": args,
        "files": [file(0, "a.md"), file(2, "guide/b.md")],
    }))
    .expect("json")
}

struct Files(HashMap<&'static str, &'static [u8]>);

impl HostFiles for Files {
    fn read(&self, path: &str, _max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        let bytes = self
            .0
            .get(path)
            .ok_or_else(|| format!("{path}: no such file"))?;
        Ok(bytes.to_vec())
    }
}

fn no_files() -> Files {
    Files(HashMap::new())
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

/// The attachment texts of an output, with their item ids.
fn attachments(output: &str) -> Vec<(Option<String>, String)> {
    let value: Value = serde_json::from_str(output).expect("output is JSON");
    value["attachments"]
        .as_array()
        .expect("attachments")
        .iter()
        .map(|a| {
            (
                a["item_id"].as_str().map(str::to_string),
                a["text"].as_str().expect("text").to_string(),
            )
        })
        .collect()
}

#[test]
fn w37_fixture_echo_round_trip_and_instance_reuse() {
    let rt = runtime();
    let echo = module(&rt, "echo");
    let out = rt
        .execute(&echo, &key(), &input(json!({})), &no_files(), soon())
        .map(|e| e.output)
        .expect("echo");
    assert_eq!(
        attachments(&out),
        vec![
            (
                Some("read-0".into()),
                "echo read-0 a.md 1-3 root=docs op=read calls=1".into()
            ),
            (
                Some("read-2".into()),
                "echo read-2 guide/b.md 1-3 root=docs op=read calls=1".into()
            ),
        ]
    );
    let out = rt
        .execute(&echo, &key(), &input(json!({})), &no_files(), soon())
        .map(|e| e.output)
        .expect("echo");
    assert!(attachments(&out)[0].1.ends_with("calls=2"), "{out}");
}

#[test]
fn w27_fixture_echo_faults_discard_the_instance() {
    let rt = runtime();
    let echo = module(&rt, "echo");
    let k = key();
    let calls = || {
        let out = rt
            .execute(&echo, &k, &input(json!({})), &no_files(), soon())
            .map(|e| e.output)
            .expect("echo");
        attachments(&out)[0]
            .1
            .rsplit('=')
            .next()
            .expect("calls")
            .to_string()
    };
    assert_eq!(calls(), "1");
    let panic = rt
        .execute(
            &echo,
            &k,
            &input(json!({"panic": "boom"})),
            &no_files(),
            soon(),
        )
        .map(|e| e.output)
        .expect_err("panic");
    assert_eq!(panic.code, Code::Trap, "{panic}");
    assert_eq!(calls(), "1", "a fresh instance after the trap");
    let spin = rt
        .execute(
            &echo,
            &k,
            &input(json!({"spin": true})),
            &no_files(),
            Instant::now() + Duration::from_millis(100),
        )
        .map(|e| e.output);
    assert_eq!(spin.expect_err("spin").code, Code::Timeout);
    assert_eq!(calls(), "1", "a fresh instance after the timeout");
    let grow = rt
        .execute(
            &echo,
            &k,
            &input(json!({"grow_mib": 32})),
            &no_files(),
            soon(),
        )
        .map(|e| e.output)
        .expect_err("grow");
    assert_eq!(grow.code, Code::Memory, "{grow}");
    assert_eq!(calls(), "1", "a fresh instance after the memory fault");
    // A guest-level error is an ordinary output (the SDK turns it into a whole-batch text).
    let out = rt
        .execute(
            &echo,
            &k,
            &input(json!({"error": "nope"})),
            &no_files(),
            soon(),
        )
        .map(|e| e.output)
        .expect("error");
    assert_eq!(attachments(&out), vec![(None, "echo: nope".to_string())]);
}

#[test]
fn w22_fixture_reader_read_file_and_read_files() {
    let rt = runtime();
    let reader = module(&rt, "reader");
    let files = Files([("notes/a.md", b"alpha" as &[u8]), ("empty.txt", b"")].into());
    for batch in [false, true] {
        let args = json!({"paths": ["notes/a.md", "missing.md", "empty.txt"], "content": true, "batch": batch});
        let out = rt
            .execute(&reader, &key(), &input(args), &files, soon())
            .map(|e| e.output)
            .expect("reader");
        let texts: Vec<String> = attachments(&out)
            .into_iter()
            .map(|(_, text)| text)
            .collect();
        assert_eq!(
            texts,
            [
                "notes/a.md: 5 bytes\nalpha",
                "missing.md: error missing.md: no such file",
                "empty.txt: 0 bytes\n"
            ],
            "batch={batch}"
        );
    }
    assert_eq!(rt.stats().host_reads, 4);
}

#[test]
fn w30_fixture_compile_times() {
    // Prints numbers for the report (`--nocapture`); no timed assertions.
    let rt = runtime();
    for name in ["echo", "reader", "related-content", "evidence-chain"] {
        let bytes = fixture(name);
        let started = Instant::now();
        let module = rt
            .module(name, &bytes, None)
            .unwrap_or_else(|d| panic!("{name}: {d}"));
        let elapsed = started.elapsed();
        println!(
            "{name}: {} bytes compiled in {elapsed:?} ({:.2} MB/s)",
            bytes.len(),
            bytes.len() as f64 / elapsed.as_secs_f64() / 1e6
        );
        let started = Instant::now();
        rt.execute(&module, &key(), &input(json!({})), &no_files(), soon())
            .map(|e| e.output)
            .expect("execute");
        let cold = started.elapsed();
        let started = Instant::now();
        rt.execute(&module, &key(), &input(json!({})), &no_files(), soon())
            .map(|e| e.output)
            .expect("execute");
        println!(
            "{name}: first execution {cold:?}, warm {:?}",
            started.elapsed()
        );
    }
}
