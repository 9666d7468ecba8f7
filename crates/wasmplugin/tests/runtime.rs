//! The execution runtime against small hand-written guests (WAT built inline) and hostile
//! variants of them. Each test names the SPEC rule it checks.

use std::collections::HashMap;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use wasmplugin::runtime::{HostFiles, HostReadError, InstanceKey, Module, PrepareOutcome, Runtime};
use wasmplugin::{Code, Diagnostic, PluginConfig};

mod support;

// ---------------------------------------------------------------------------------------------
// Guests

/// Constant strings laid out in a data segment, with their (offset, length).
struct Strings {
    wat: String,
    at: HashMap<&'static str, (usize, usize)>,
}

fn strings(list: &[&'static str]) -> Strings {
    let mut wat = String::new();
    let mut at = HashMap::new();
    let mut offset = 16;
    for s in list {
        wat.push_str(&format!(
            "(data (i32.const {offset}) \"{}\")\n",
            s.replace('"', "\\\"")
        ));
        at.insert(*s, (offset, s.len()));
        offset += s.len();
    }
    assert!(offset < 4096);
    Strings { wat, at }
}

/// A bump allocator (from 4096, growing memory on demand, never returning 0 — alloc(0)
/// included), a `dealloc` that remembers its last two calls, and `$pack`.
const PRELUDE: &str = r#"
  (global $bump (mut i32) (i32.const 4096))
  (global $d1p (mut i32) (i32.const 0)) (global $d1l (mut i32) (i32.const 0))
  (global $d2p (mut i32) (i32.const 0)) (global $d2l (mut i32) (i32.const 0))
  (func $alloc (export "alloc") (param $len i32) (result i32)
    (local $ptr i32) (local $end i32) (local $have i32)
    (local.set $ptr (global.get $bump))
    (local.set $end (i32.add (local.get $ptr) (i32.and (i32.add (local.get $len) (i32.const 8)) (i32.const -8))))
    (local.set $have (i32.shl (memory.size) (i32.const 16)))
    (if (i32.gt_u (local.get $end) (local.get $have))
      (then
        (if (i32.eq (memory.grow (i32.shr_u (i32.add (i32.sub (local.get $end) (local.get $have)) (i32.const 65535)) (i32.const 16)))
                    (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $bump (local.get $end))
    (local.get $ptr))
  (func (export "dealloc") (param $p i32) (param $l i32)
    (global.set $d1p (global.get $d2p)) (global.set $d1l (global.get $d2l))
    (global.set $d2p (local.get $p)) (global.set $d2l (local.get $l)))
  (func $pack (param $ptr i32) (param $len i32) (result i64)
    (i64.or (i64.shl (i64.extend_i32_u (local.get $ptr)) (i64.const 32)) (i64.extend_i32_u (local.get $len))))
"#;

/// The echo guest. `enrich` counts its calls and answers one whole-batch attachment (a valid
/// ABI 2 output, so the instance may be reused) whose text is
/// `calls=N input=L prev=<in ptr>,<in len>,<out ptr>,<out len> dealloc=<p1>,<l1>,<p2>,<l2>`,
/// where `prev` is what the previous call received and returned and `dealloc` the last two
/// `dealloc` calls (made by the host after the previous call). The input's first byte picks a
/// hostile behaviour instead: `t` trap, `l` loop forever, `g` grow memory forever, `a` return
/// the input buffer, `o` return a buffer past the end of memory, `b` return 256 MiB, `u`
/// return invalid UTF-8, `z` return a null pointer, `j` return the rest of the input (after
/// the `j`) in a fresh buffer, as the output text.
fn echo_wat() -> String {
    const OPEN: &str = "{\"attachments\":[{\"text\":\"calls=";
    const CLOSE: &str = "\"}]}";
    let s = strings(&[OPEN, " input=", " prev=", ",", " dealloc=", CLOSE]);
    let put = |name: &str| {
        let (offset, len) = s.at[name];
        format!("(local.set $q (call $put (local.get $q) (i32.const {offset}) (i32.const {len})))")
    };
    let num = |value: &str| format!("(local.set $q (call $utoa (local.get $q) {value}))");
    let comma = put(",");
    format!(
        r#"(module
  (memory (export "memory") 1)
  {data}
  {PRELUDE}
  (global $calls (mut i32) (i32.const 0))
  (global $in_ptr (mut i32) (i32.const 0)) (global $in_len (mut i32) (i32.const 0))
  (global $out_ptr (mut i32) (i32.const 0)) (global $out_len (mut i32) (i32.const 0))
  (func $put (param $q i32) (param $src i32) (param $len i32) (result i32)
    (memory.copy (local.get $q) (local.get $src) (local.get $len))
    (i32.add (local.get $q) (local.get $len)))
  (func $utoa (param $p i32) (param $v i32) (result i32)
    (local $start i32) (local $end i32) (local $t i32)
    (local.set $start (local.get $p))
    (loop $digits
      (i32.store8 (local.get $p) (i32.add (i32.rem_u (local.get $v) (i32.const 10)) (i32.const 48)))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (br_if $digits (local.tee $v (i32.div_u (local.get $v) (i32.const 10)))))
    (local.set $end (i32.sub (local.get $p) (i32.const 1)))
    (block $done
      (loop $rev
        (br_if $done (i32.ge_u (local.get $start) (local.get $end)))
        (local.set $t (i32.load8_u (local.get $start)))
        (i32.store8 (local.get $start) (i32.load8_u (local.get $end)))
        (i32.store8 (local.get $end) (local.get $t))
        (local.set $start (i32.add (local.get $start) (i32.const 1)))
        (local.set $end (i32.sub (local.get $end) (i32.const 1)))
        (br $rev)))
    (local.get $p))
  (func (export "enrich") (param $p i32) (param $l i32) (result i64)
    (local $mode i32) (local $o i32) (local $q i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (if (local.get $l) (then (local.set $mode (i32.load8_u (local.get $p)))))
    (if (i32.eq (local.get $mode) (i32.const 116)) (then unreachable))
    (if (i32.eq (local.get $mode) (i32.const 108)) (then (loop $spin (br $spin))))
    (if (i32.eq (local.get $mode) (i32.const 103))
      (then (loop $grow (drop (memory.grow (i32.const 1))) (br $grow))))
    (if (i32.eq (local.get $mode) (i32.const 97)) (then (return (call $pack (local.get $p) (local.get $l)))))
    (if (i32.eq (local.get $mode) (i32.const 111))
      (then (return (call $pack (i32.sub (i32.shl (memory.size) (i32.const 16)) (i32.const 4)) (i32.const 16)))))
    (if (i32.eq (local.get $mode) (i32.const 98)) (then (return (call $pack (i32.const 16) (i32.const 0x10000000)))))
    (if (i32.eq (local.get $mode) (i32.const 117))
      (then
        (local.set $o (call $alloc (i32.const 2)))
        (i32.store16 (local.get $o) (i32.const 0xfeff))
        (return (call $pack (local.get $o) (i32.const 2)))))
    (if (i32.eq (local.get $mode) (i32.const 122)) (then (return (i64.const 5))))
    (if (i32.eq (local.get $mode) (i32.const 106))
      (then
        (local.set $o (call $alloc (i32.sub (local.get $l) (i32.const 1))))
        (memory.copy (local.get $o) (i32.add (local.get $p) (i32.const 1)) (i32.sub (local.get $l) (i32.const 1)))
        (return (call $pack (local.get $o) (i32.sub (local.get $l) (i32.const 1))))))
    (local.set $o (call $alloc (i32.const 256)))
    (local.set $q (local.get $o))
    {calls} {n_calls}
    {input} {n_input}
    {prev} {n_in_ptr} {comma} {n_in_len} {comma} {n_out_ptr} {comma} {n_out_len}
    {dealloc} {n_d1p} {comma} {n_d1l} {comma} {n_d2p} {comma} {n_d2l}
    {close}
    (global.set $in_ptr (local.get $p))
    (global.set $in_len (local.get $l))
    (global.set $out_ptr (local.get $o))
    (global.set $out_len (i32.sub (local.get $q) (local.get $o)))
    (call $pack (local.get $o) (i32.sub (local.get $q) (local.get $o))))
)"#,
        data = s.wat,
        calls = put(OPEN),
        close = put(CLOSE),
        n_calls = num("(global.get $calls)"),
        input = put(" input="),
        n_input = num("(local.get $l)"),
        prev = put(" prev="),
        n_in_ptr = num("(global.get $in_ptr)"),
        n_in_len = num("(global.get $in_len)"),
        n_out_ptr = num("(global.get $out_ptr)"),
        n_out_len = num("(global.get $out_len)"),
        dealloc = put(" dealloc="),
        n_d1p = num("(global.get $d1p)"),
        n_d1l = num("(global.get $d1l)"),
        n_d2p = num("(global.get $d2p)"),
        n_d2l = num("(global.get $d2l)"),
    )
}

/// The reader guest: the input is a path. A plain input reads it once and returns the file
/// (or `last_error`); `*path` reads until a read fails and returns `last_error`; `!path`
/// reads forever.
fn reader_wat() -> String {
    format!(
        r#"(module
  (import "sourcegraph" "read_file" (func $read_file (param i32 i32) (result i64)))
  (import "sourcegraph" "last_error" (func $last_error (result i64)))
  (memory (export "memory") 1)
  {PRELUDE}
  (func (export "enrich") (param $p i32) (param $l i32) (result i64)
    (local $r i64) (local $mode i32)
    (local.set $mode (i32.load8_u (local.get $p)))
    (if (i32.eq (local.get $mode) (i32.const 33))
      (then (loop $forever (drop (call $read_file (i32.add (local.get $p) (i32.const 1)) (i32.sub (local.get $l) (i32.const 1)))) (br $forever))))
    (if (i32.eq (local.get $mode) (i32.const 42))
      (then
        (loop $until_failure
          (br_if $until_failure (i64.ne (call $read_file (i32.add (local.get $p) (i32.const 1)) (i32.sub (local.get $l) (i32.const 1))) (i64.const 0))))
        (return (call $last_error))))
    (local.set $r (call $read_file (local.get $p) (local.get $l)))
    (if (result i64) (i64.eqz (local.get $r)) (then (call $last_error)) (else (local.get $r))))
)"#
    )
}

/// The batch reader: the input is the JSON request of `read_files`; the answer is returned as
/// the output as is (or `last_error`).
fn batch_reader_wat() -> String {
    format!(
        r#"(module
  (import "sourcegraph" "read_files" (func $read_files (param i32 i32) (result i64)))
  (import "sourcegraph" "last_error" (func $last_error (result i64)))
  (memory (export "memory") 1)
  {PRELUDE}
  (func (export "enrich") (param $p i32) (param $l i32) (result i64)
    (local $r i64)
    (local.set $r (call $read_files (local.get $p) (local.get $l)))
    (if (result i64) (i64.eqz (local.get $r)) (then (call $last_error)) (else (local.get $r))))
)"#
    )
}

/// A guest with its own `alloc` (replacing the bump allocator) and a trivial `enrich`
/// returning a fresh 2-byte buffer `{}`.
fn custom_alloc_wat(alloc_body: &str) -> String {
    format!(
        r#"(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{{}}")
  (global $bump (mut i32) (i32.const 4096))
  (func $alloc (export "alloc") (param $len i32) (result i32) {alloc_body})
  (func (export "dealloc") (param i32 i32))
  (func (export "enrich") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 16) (i64.const 32)) (i64.const 2))))"#
    )
}

// ---------------------------------------------------------------------------------------------
// Harness

fn config() -> PluginConfig {
    PluginConfig {
        memory_mib: 16,
        concurrency: 2,
        idle_instances: 2,
        cache_entries: 4,
        output_bytes: 4096,
        file_bytes: 1024,
        read_bytes: 4096,
        read_calls: 16,
        ..PluginConfig::default()
    }
}

fn runtime() -> Runtime {
    Runtime::new(config()).expect("runtime")
}

fn soon() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

fn key(args: &str) -> InstanceKey {
    InstanceKey {
        storage_root: "/data".into(),
        repo: "example/knowledge".into(),
        commit: "0123456789abcdef0123456789abcdef01234567".into(),
        plugin_dir: "docs".into(),
        args: args.into(),
    }
}

fn compile(rt: &Runtime, digest: &str, wat: &str) -> Arc<Module> {
    let bytes: Arc<[u8]> = wat::parse_str(wat).expect("wat").into();
    rt.module(digest, &bytes, Some(soon()))
        .unwrap_or_else(|d| panic!("module {digest}: {d}"))
}

fn compile_err(rt: &Runtime, wat: &str) -> Diagnostic {
    let bytes: Arc<[u8]> = wat::parse_str(wat).expect("wat").into();
    rt.module("bad", &bytes, Some(soon()))
        .expect_err("module should be refused")
}

#[derive(Default)]
struct Files(HashMap<String, Vec<u8>>);

impl Files {
    fn with(entries: &[(&str, &[u8])]) -> Self {
        Self(
            entries
                .iter()
                .map(|(p, b)| (p.to_string(), b.to_vec()))
                .collect(),
        )
    }
}

impl HostFiles for Files {
    fn read(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        let bytes = self
            .0
            .get(path)
            .ok_or_else(|| format!("{path}: no such file"))?;
        if bytes.len() as u64 > max_bytes {
            return Err(HostReadError::TooLarge(bytes.len() as u64));
        }
        Ok(bytes.clone())
    }
}

fn no_files() -> Files {
    Files::default()
}

fn run(
    rt: &Runtime,
    module: &Module,
    key: &InstanceKey,
    input: &str,
    files: &dyn HostFiles,
) -> Result<String, Diagnostic> {
    rt.execute(module, key, input.as_bytes(), files, soon())
        .map(|e| e.output)
}

fn expect_code(result: Result<String, Diagnostic>, code: Code) -> Diagnostic {
    match result {
        Ok(output) => panic!("expected {code}, got output {output:?}"),
        Err(d) => {
            assert_eq!(d.code, code, "{d}");
            assert!(
                !d.message.contains("/data") && !d.message.contains("/work"),
                "host path leaked: {d}"
            );
            d
        }
    }
}

/// Parses the echo guest's `calls=N input=L prev=a,b,c,d dealloc=e,f,g,h` (the text of its
/// one attachment).
fn report(output: &str) -> HashMap<String, Vec<u64>> {
    let output: serde_json::Value = serde_json::from_str(output).expect("echo output is JSON");
    output["attachments"][0]["text"]
        .as_str()
        .expect("echo attachment text")
        .split(' ')
        .map(|field| {
            let (name, values) = field.split_once('=').expect("field");
            (
                name.to_string(),
                values
                    .split(',')
                    .map(|v| v.parse().expect("number"))
                    .collect(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Output ABI

#[test]
fn w16_happy_path_copies_output_and_deallocs_with_exact_lengths() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    let k = key("{}");
    let first = report(&run(&rt, &module, &k, r#"{"abi_version":2}"#, &no_files()).expect("first"));
    assert_eq!(first["calls"], [1]);
    assert_eq!(first["input"], [17]);
    // The second call on the same (reused) instance reports what the first one received and
    // returned, and the host's two dealloc calls made after it.
    let second = report(&run(&rt, &module, &k, "{}", &no_files()).expect("second"));
    assert_eq!(second["calls"], [2]);
    let prev = &second["prev"];
    assert_eq!(prev[1], 17, "input length");
    assert_eq!(
        second["dealloc"], *prev,
        "dealloc(input ptr, input len) then dealloc(output ptr, output len)"
    );
    assert_ne!(prev[0], prev[2], "output is a separate buffer");
}

/// W-16, W-21: every bad output the echo guest can be told to produce is PLUGIN_OUTPUT with a
/// message that says which fault it was.
#[test]
fn w16_w21_bad_outputs_are_plugin_output() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    for (input, expected) in [
        // (ptr, len) outside the memory.
        ("o", "outside"),
        // The output is the input buffer itself.
        ("a {\"x\":1}", "aliases"),
        // A null pointer.
        ("z", ""),
        // 256 MiB from offset 16: also far outside the 64 KiB memory, so the message proves
        // the size was refused before any bounds check or copy.
        ("b", "OUTPUT_BYTES"),
        ("u", "UTF-8"),
    ] {
        let d = expect_code(
            run(&rt, &module, &key("{}"), input, &no_files()),
            Code::Output,
        );
        assert!(d.message.contains(expected), "{input}: {d}");
    }
}

#[test]
fn w16_alloc_returning_zero_is_plugin_abi() {
    let rt = runtime();
    let always_zero = compile(&rt, "zero", &custom_alloc_wat("(i32.const 0)"));
    let d = expect_code(
        run(&rt, &always_zero, &key("{}"), "{}", &no_files()),
        Code::Abi,
    );
    assert!(d.message.contains("returned 0"), "{d}");
    // A zero-length allocation must still be non-zero (W-16).
    let zero_for_empty = compile(
        &rt,
        "zero-for-empty",
        &custom_alloc_wat(
            "(if (result i32) (local.get $len) (then (global.get $bump)) (else (i32.const 0)))",
        ),
    );
    assert_eq!(
        run(&rt, &zero_for_empty, &key("{}"), "{}", &no_files()).expect("non-empty input"),
        "{}"
    );
    expect_code(
        rt.execute(&zero_for_empty, &key("{}"), b"", &no_files(), soon())
            .map(|e| e.output),
        Code::Abi,
    );
}

#[test]
fn w16_alloc_returning_a_buffer_outside_memory_is_plugin_abi() {
    let rt = runtime();
    let module = compile(&rt, "oob-alloc", &custom_alloc_wat("(i32.const 65530)"));
    expect_code(
        run(&rt, &module, &key("{}"), "{\"abi_version\":2}", &no_files()),
        Code::Abi,
    );
}

// ---------------------------------------------------------------------------------------------
// Traps, time, memory

#[test]
fn w25_trap_inside_alloc_is_plugin_trap() {
    let rt = runtime();
    let module = compile(&rt, "trap-alloc", &custom_alloc_wat("unreachable"));
    let d = expect_code(run(&rt, &module, &key("{}"), "{}", &no_files()), Code::Trap);
    assert!(d.message.starts_with("alloc trapped"), "{d}");
    assert!(d.message.contains("unreachable"), "{d}");
}

#[test]
fn w25_unreachable_in_enrich_is_plugin_trap() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    let d = expect_code(run(&rt, &module, &key("{}"), "t", &no_files()), Code::Trap);
    assert_eq!(
        d.message,
        "enrich trapped: wasm `unreachable` instruction executed"
    );
}

#[test]
fn w25_infinite_loop_is_plugin_timeout() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    let started = Instant::now();
    let result = rt
        .execute(
            &module,
            &key("{}"),
            b"l",
            &no_files(),
            Instant::now() + Duration::from_millis(100),
        )
        .map(|e| e.output);
    expect_code(result, Code::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped after {:?}",
        started.elapsed()
    );
}

#[test]
fn w25_looping_start_function_is_plugin_timeout() {
    let rt = runtime();
    let wat = format!(
        r#"(module (memory (export "memory") 1) {PRELUDE}
             (func $start (loop $l (br $l))) (start $start)
             (func (export "enrich") (param i32 i32) (result i64) (i64.const 0)))"#
    );
    let module = compile(&rt, "start-loop", &wat);
    let result = rt
        .execute(
            &module,
            &key("{}"),
            b"{}",
            &no_files(),
            Instant::now() + Duration::from_millis(50),
        )
        .map(|e| e.output);
    expect_code(result, Code::Timeout);
}

#[test]
fn w26_memory_growth_bomb_is_plugin_memory() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    let d = expect_code(
        run(&rt, &module, &key("{}"), "g", &no_files()),
        Code::Memory,
    );
    assert!(d.message.contains("MEMORY_MIB"), "{d}");
}

#[test]
fn w26_initial_memory_over_memory_mib_is_plugin_memory() {
    let rt = runtime();
    // 300 pages = 18.75 MiB > 16 MiB.
    let wat = format!(
        r#"(module (memory (export "memory") 300) {PRELUDE}
             (func (export "enrich") (param i32 i32) (result i64) (i64.const 0)))"#
    );
    let d = compile_err(&rt, &wat);
    assert_eq!(d.code, Code::Memory, "{d}");
    assert!(!rt.is_cached("bad"));
}

// ---------------------------------------------------------------------------------------------
// Static ABI checks

#[test]
fn w1_missing_export_is_plugin_abi() {
    let rt = runtime();
    let wat = format!(r#"(module (memory (export "memory") 1) {PRELUDE})"#);
    let d = compile_err(&rt, &wat);
    assert_eq!(d.code, Code::Abi, "{d}");
    assert!(d.message.contains("enrich"), "{d}");
    let no_memory = format!(
        r#"(module (memory 1) {PRELUDE} (func (export "enrich") (param i32 i32) (result i64) (i64.const 0)))"#
    );
    assert_eq!(compile_err(&rt, &no_memory).code, Code::Abi);
}

#[test]
fn w1_mistyped_export_is_plugin_abi() {
    let rt = runtime();
    let wat = format!(
        r#"(module (memory (export "memory") 1) {PRELUDE}
             (func (export "enrich") (param i32 i32) (result i32) (i32.const 0)))"#
    );
    let d = compile_err(&rt, &wat);
    assert_eq!(d.code, Code::Abi, "{d}");
    assert!(d.message.contains("wrong type"), "{d}");
}

#[test]
fn w24_wasi_import_is_plugin_abi() {
    let rt = runtime();
    let wat = format!(
        r#"(module
             (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
             (memory (export "memory") 1) {PRELUDE}
             (func (export "enrich") (param i32 i32) (result i64) (i64.const 0)))"#
    );
    let d = compile_err(&rt, &wat);
    assert_eq!(d.code, Code::Abi, "{d}");
    assert!(d.message.contains("WASI"), "{d}");
}

#[test]
fn w22_unknown_or_mistyped_host_import_is_plugin_abi() {
    let rt = runtime();
    for import in [
        r#"(import "sourcegraph" "write_file" (func (param i32 i32) (result i64)))"#,
        r#"(import "sourcegraph" "read_file" (func (param i32) (result i64)))"#,
        r#"(import "sourcegraph" "last_error" (func (result i32)))"#,
        r#"(import "sourcegraph" "read_file" (global i32))"#,
    ] {
        let wat = format!(
            r#"(module {import} (memory (export "memory") 1) {PRELUDE}
                 (func (export "enrich") (param i32 i32) (result i64) (i64.const 0)))"#
        );
        assert_eq!(compile_err(&rt, &wat).code, Code::Abi, "{import}");
    }
}

#[test]
fn w2_invalid_module_is_plugin_artifact() {
    let rt = runtime();
    let d = rt
        .module(
            "junk",
            &Arc::from(&b"\0asm\x01\0\0\0\x99garbage"[..]),
            Some(soon()),
        )
        .expect_err("junk");
    assert_eq!(d.code, Code::Artifact, "{d}");
    let d = rt
        .module(
            "text",
            &Arc::from(&b"version https://git-lfs.github.com/spec/v1\n"[..]),
            Some(soon()),
        )
        .expect_err("lfs");
    assert_eq!(d.code, Code::Artifact, "{d}");
}

// ---------------------------------------------------------------------------------------------
// Host imports

#[test]
fn w22_read_file_returns_the_bytes() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    let files = Files::with(&[("notes/a.md", b"# A\nbody\n"), ("empty.txt", b"")]);
    assert_eq!(
        run(&rt, &module, &key("{}"), "notes/a.md", &files).expect("read"),
        "# A\nbody\n"
    );
    // An empty file succeeds with a non-zero pointer (the guest returns it as is).
    assert_eq!(
        run(&rt, &module, &key("{}"), "empty.txt", &files).expect("empty"),
        ""
    );
    // A reader error reaches the guest through last_error.
    assert_eq!(
        run(&rt, &module, &key("{}"), "missing.md", &files).expect("missing"),
        "missing.md: no such file"
    );
    let stats = rt.stats();
    assert_eq!((stats.host_reads, stats.host_read_bytes), (2, 9));
}

#[test]
fn w22_file_over_file_bytes_fails_softly_with_last_error() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    let big = vec![b'x'; 1025];
    let files = Files::with(&[("big.bin", &big)]);
    let message = run(&rt, &module, &key("{}"), "big.bin", &files).expect("soft failure");
    assert_eq!(message, "file is 1025 bytes, over FILE_BYTES (1024)");
    assert_eq!(rt.stats().read_budget_hits, 1);
}

/// Ignores `max_bytes`: the runtime must still hold FILE_BYTES.
struct Careless;

impl HostFiles for Careless {
    fn read(&self, _path: &str, _max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        Ok(vec![b'c'; 2048])
    }
}

#[test]
fn w22_file_bytes_holds_even_when_the_reader_ignores_the_limit() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    let message = run(&rt, &module, &key("{}"), "any", &Careless).expect("soft failure");
    assert_eq!(message, "file is 2048 bytes, over FILE_BYTES (1024)");
    assert_eq!(rt.stats().host_read_bytes, 0);
}

#[test]
fn w22_reads_after_read_calls_fail_with_last_error() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    let files = Files::with(&[("a", b"1")]);
    let message = run(&rt, &module, &key("{}"), "*a", &files).expect("soft failure");
    assert_eq!(
        message,
        "read budget spent: at most 16 reads per execution (READ_CALLS)"
    );
    let stats = rt.stats();
    assert_eq!((stats.host_reads, stats.read_budget_hits), (16, 1));
    // Budgets are per execution: the next execution reads again.
    assert_eq!(
        run(&rt, &module, &key("{}"), "a", &files).expect("fresh budget"),
        "1"
    );
}

#[test]
fn w27_read_budget_overrun_is_a_diagnostic_and_discards_the_instance() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    // `a` is a valid ABI 2 output, so the clean execution that returns it parks its instance.
    let files = Files::with(&[("a", br#"{"attachments":[]}"#), ("big", &[b'x'; 1025])]);
    let over = rt
        .execute(&module, &key("{}"), b"*a", &files, soon())
        .expect("the guest returned normally");
    // The guest's own output stands (it chose to return last_error) ...
    assert_eq!(
        over.output,
        "read budget spent: at most 16 reads per execution (READ_CALLS)"
    );
    // ... and the overrun is reported once, with the first refusal.
    let diagnostic = over.read_budget.expect("PLUGIN_READ_BUDGET");
    assert_eq!(diagnostic.code, Code::ReadBudget);
    assert_eq!(
        diagnostic.message,
        "1 host read(s) refused by a budget; first: read budget spent: at most 16 reads per \
         execution (READ_CALLS)"
    );
    // The instance was dropped: the next execution instantiates afresh.
    assert_eq!(rt.idle_instances(), 0);
    let clean = rt
        .execute(&module, &key("{}"), b"a", &files, soon())
        .expect("clean");
    assert!(clean.read_budget.is_none());
    let big = rt
        .execute(&module, &key("{}"), b"big", &files, soon())
        .expect("FILE_BYTES refusal");
    assert_eq!(big.read_budget.expect("FILE_BYTES").code, Code::ReadBudget);
    let stats = rt.stats();
    assert_eq!((stats.instantiations, stats.instance_reuses), (2, 1));
}

#[test]
fn w22_read_bytes_is_a_per_execution_total() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    let kib = vec![b'k'; 1000];
    let files = Files::with(&[("k", &kib)]);
    // READ_BYTES 4096: four reads of 1000 bytes fit, the fifth does not.
    let message = run(&rt, &module, &key("{}"), "*k", &files).expect("soft failure");
    assert!(message.contains("READ_BYTES (4096)"), "{message}");
    assert_eq!(rt.stats().host_read_bytes, 4000);
}

#[test]
fn w23_read_files_items_errors_and_malformed_request() {
    let rt = runtime();
    let module = compile(&rt, "batch", &batch_reader_wat());
    let big = vec![b'x'; 2000];
    let files = Files::with(&[("a.md", b"alpha"), ("b.md", b""), ("big", &big)]);
    let out = run(
        &rt,
        &module,
        &key("{}"),
        r#"["a.md","nope.md","b.md","big"]"#,
        &files,
    )
    .expect("batch");
    let items = parse_batch(out.as_bytes());
    assert_eq!(
        items,
        vec![
            (0, "alpha".to_string()),
            (1, "nope.md: no such file".to_string()),
            (0, String::new()),
            (1, "file is 2000 bytes, over FILE_BYTES (1024)".to_string()),
        ]
    );
    for malformed in [r#"{"a.md":1}"#, r#"["a.md""#, "[1,2]"] {
        let message = run(&rt, &module, &key("{}"), malformed, &files).expect("soft failure");
        assert_eq!(message, "request is not a JSON array of path strings");
    }
    // Each path is one READ_CALL: 17 paths with READ_CALLS 16 → the last is a budget error.
    let many = serde_json::to_string(&vec!["a.md"; 17]).expect("json");
    let items = parse_batch(
        run(&rt, &module, &key("{}"), &many, &files)
            .expect("batch")
            .as_bytes(),
    );
    assert_eq!(items.len(), 17);
    assert!(
        items[..16]
            .iter()
            .all(|item| *item == (0, "alpha".to_string()))
    );
    assert_eq!(items[16].0, 1);
    assert!(items[16].1.contains("READ_CALLS"), "{:?}", items[16]);
}

fn parse_batch(bytes: &[u8]) -> Vec<(u32, String)> {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let count = u32_at(0) as usize;
    let mut at = 4;
    let mut items = Vec::new();
    for _ in 0..count {
        let (status, len) = (u32_at(at), u32_at(at + 4) as usize);
        items.push((
            status,
            String::from_utf8(bytes[at + 8..at + 8 + len].to_vec()).expect("utf-8"),
        ));
        at += 8 + len;
    }
    assert_eq!(at, bytes.len(), "trailing bytes");
    items
}

#[test]
fn w22_read_file_in_a_tight_loop_ends_in_plugin_timeout() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    let files = Files::with(&[("a", b"1")]);
    let started = Instant::now();
    // Reads fail (missing file, then READ_CALLS) without allocating; the loop only ends by time.
    let result = rt
        .execute(
            &module,
            &key("{}"),
            b"!missing",
            &files,
            Instant::now() + Duration::from_millis(100),
        )
        .map(|e| e.output);
    expect_code(result, Code::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped after {:?}",
        started.elapsed()
    );
}

/// A reader whose `alloc` misbehaves for three lengths: 7 → a buffer past the end of memory,
/// 9 → trap, 11 → 0. `enrich` reads the input path and returns the file, or `last_error`.
fn fussy_reader_wat() -> String {
    r#"(module
  (import "sourcegraph" "read_file" (func $read_file (param i32 i32) (result i64)))
  (import "sourcegraph" "last_error" (func $last_error (result i64)))
  (memory (export "memory") 1)
  (global $bump (mut i32) (i32.const 4096))
  (func (export "alloc") (param $len i32) (result i32) (local $ptr i32)
    (if (i32.eq (local.get $len) (i32.const 7)) (then (return (i32.const 65534))))
    (if (i32.eq (local.get $len) (i32.const 9)) (then unreachable))
    (if (i32.eq (local.get $len) (i32.const 11)) (then (return (i32.const 0))))
    (local.set $ptr (global.get $bump))
    (global.set $bump (i32.add (local.get $ptr) (i32.and (i32.add (local.get $len) (i32.const 8)) (i32.const -8))))
    (local.get $ptr))
  (func (export "dealloc") (param i32 i32))
  (func (export "enrich") (param $p i32) (param $l i32) (result i64) (local $r i64)
    (local.set $r (call $read_file (local.get $p) (local.get $l)))
    (if (result i64) (i64.eqz (local.get $r)) (then (call $last_error)) (else (local.get $r)))))"#
        .to_string()
}

#[test]
fn w22_guest_alloc_failures_inside_host_imports() {
    let rt = runtime();
    let module = compile(&rt, "fussy", &fussy_reader_wat());
    let files = Files::with(&[
        ("seven", b"1234567"),
        ("nine", b"123456789"),
        ("eleven", b"12345678901"),
        ("ok", b"fine"),
    ]);
    assert_eq!(
        run(&rt, &module, &key("{}"), "ok", &files).expect("ok"),
        "fine"
    );
    // alloc handing out memory it does not have: the host cannot write the file → ABI fault.
    let d = expect_code(run(&rt, &module, &key("{}"), "seven", &files), Code::Abi);
    assert!(d.message.contains("outside"), "{d}");
    // A trap in alloc re-entered from the import ends the execution.
    let d = expect_code(run(&rt, &module, &key("{}"), "nine", &files), Code::Trap);
    assert!(d.message.contains("unreachable"), "{d}");
    // alloc returning 0 is a soft failure of the import.
    assert_eq!(
        run(&rt, &module, &key("{}"), "eleven", &files).expect("soft"),
        "alloc(11) returned 0"
    );
}

/// Answers after `delay`.
struct Slow(Duration);

impl HostFiles for Slow {
    fn read(&self, _path: &str, _max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        std::thread::sleep(self.0);
        Ok(b"late".to_vec())
    }
}

#[test]
fn w22_deadline_passing_during_a_host_read_is_plugin_timeout() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    let slow = Slow(Duration::from_millis(60));
    let result = rt
        .execute(
            &module,
            &key("{}"),
            b"a",
            &slow,
            Instant::now() + Duration::from_millis(20),
        )
        .map(|e| e.output);
    // The import answers 0 + "deadline passed"; the guest returns last_error normally, and the
    // execution still ends in PLUGIN_TIMEOUT.
    expect_code(result, Code::Timeout);
}

// ---------------------------------------------------------------------------------------------
// Concurrency, instances, compile cache

/// Holds every read until the test releases it.
struct Gate(Barrier);

impl HostFiles for Gate {
    fn read(&self, _path: &str, _max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        self.0.wait(); // both executions are inside a read
        self.0.wait(); // released
        Ok(b"done".to_vec())
    }
}

#[test]
fn w26_execution_over_concurrency_is_busy_at_once() {
    let rt = runtime(); // CONCURRENCY 2
    let module = compile(&rt, "reader", &reader_wat());
    let gate = Gate(Barrier::new(3));
    std::thread::scope(|scope| {
        let held: Vec<_> = (0..2)
            .map(|i| {
                let (rt, module, gate) = (&rt, &module, &gate);
                scope.spawn(move || run(rt, module, &key(&format!("{{\"i\":{i}}}")), "x", gate))
            })
            .collect();
        gate.0.wait();
        let started = Instant::now();
        let d = expect_code(run(&rt, &module, &key("{}"), "x", &no_files()), Code::Busy);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "BUSY must not wait"
        );
        assert!(d.message.contains("CONCURRENCY"), "{d}");
        gate.0.wait();
        for handle in held {
            assert_eq!(
                handle.join().expect("thread").expect("held execution"),
                "done"
            );
        }
    });
    assert_eq!(rt.stats().faults.busy, 1);
    // Slots were released.
    assert_eq!(
        run(&rt, &module, &key("{}"), "x", &Files::with(&[("x", b"ok")])).expect("after"),
        "ok"
    );
}

#[test]
fn w32_instance_reused_for_the_same_key_only() {
    let rt = Runtime::new(PluginConfig {
        idle_instances: 3,
        ..config()
    })
    .expect("runtime");
    let module = compile(&rt, "echo", &echo_wat());
    let calls = |k: &InstanceKey| {
        report(&run(&rt, &module, k, "{}", &no_files()).expect("run"))["calls"][0]
    };
    assert_eq!(calls(&key("{}")), 1);
    assert_eq!(calls(&key("{}")), 2);
    assert_eq!(
        calls(&key(r#"{"other":1}"#)),
        1,
        "another key gets its own instance"
    );
    let mut other_commit = key("{}");
    other_commit.commit = "f".repeat(40);
    assert_eq!(calls(&other_commit), 1);
    assert_eq!(calls(&key("{}")), 3);
    let stats = rt.stats();
    assert_eq!((stats.instantiations, stats.instance_reuses), (3, 2));
    assert_eq!(rt.idle_instances(), 3);
}

#[test]
fn w32_instance_not_shared_between_modules_of_one_key() {
    let rt = runtime();
    let a = compile(&rt, "echo-a", &echo_wat());
    let b = compile(&rt, "echo-b", &echo_wat());
    let calls =
        |m: &Module| report(&run(&rt, m, &key("{}"), "{}", &no_files()).expect("run"))["calls"][0];
    assert_eq!((calls(&a), calls(&b), calls(&a), calls(&b)), (1, 1, 2, 2));
}

#[test]
fn w32_instance_never_reused_after_a_fault() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    let k = key("{}");
    let calls = || report(&run(&rt, &module, &k, "{}", &no_files()).expect("run"))["calls"][0];
    assert_eq!(calls(), 1);
    assert_eq!(calls(), 2);
    for hostile in ["t", "a", "u", "o"] {
        assert!(
            run(&rt, &module, &k, hostile, &no_files()).is_err(),
            "{hostile}"
        );
        // The faulted instance (whose counter the fault incremented) is gone: a fresh one.
        assert_eq!(calls(), 1, "after {hostile}");
    }
}

/// W-27, W-32: after every bad output the echo guest can produce — a PLUGIN_OUTPUT fault of
/// the runtime (pointer, aliasing, size, UTF-8) or an output of the wrong JSON shape, which the
/// caller diagnoses as PLUGIN_OUTPUT — the instance is discarded: it is not parked, the next
/// execution instantiates afresh, and nothing counts as a reuse.
#[test]
fn w27_w32_bad_output_instance_not_reused() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    let k = key("{}");
    let calls = || report(&run(&rt, &module, &k, "{}", &no_files()).expect("run"))["calls"][0];
    let bad: [(&str, bool); 8] = [
        ("o", true),
        ("a {\"x\":1}", true),
        ("z", true),
        ("b", true),
        ("u", true),
        ("jnot json", false),
        ("j[]", false),
        ("j{\"attachments\":{}}", false),
    ];
    assert_eq!(calls(), 1);
    for (input, runtime_fault) in bad {
        assert_eq!(
            rt.idle_instances(),
            1,
            "an instance is parked before {input}"
        );
        let before = rt.stats();
        let outcome = run(&rt, &module, &k, input, &no_files());
        assert_eq!(outcome.is_err(), runtime_fault, "{input}: {outcome:?}");
        if let Err(d) = &outcome {
            assert_eq!(d.code, Code::Output, "{input}: {d}");
        }
        let after = rt.stats();
        assert_eq!(
            after.instance_reuses,
            before.instance_reuses + 1,
            "{input} ran on the parked instance"
        );
        assert_eq!(
            rt.idle_instances(),
            0,
            "{input}: the instance was not parked"
        );
        let fresh = rt.stats();
        assert_eq!(calls(), 1, "after {input}: a new instance");
        assert_eq!(
            rt.stats().instantiations,
            fresh.instantiations + 1,
            "after {input}"
        );
    }
    // Control: the right shape keeps the instance.
    assert_eq!(calls(), 2);
    run(&rt, &module, &k, "j{\"attachments\":[]}", &no_files()).expect("empty attachments");
    assert_eq!(rt.idle_instances(), 1);
    assert_eq!(calls(), 4);
}

#[test]
fn w26_idle_instances_are_bounded_lru() {
    let rt = runtime(); // IDLE_INSTANCES 2
    let module = compile(&rt, "echo", &echo_wat());
    let calls = |args: &str| {
        report(&run(&rt, &module, &key(args), "{}", &no_files()).expect("run"))["calls"][0]
    };
    assert_eq!((calls("1"), calls("2"), calls("3")), (1, 1, 1));
    assert_eq!(rt.idle_instances(), 2);
    assert_eq!(calls("3"), 2, "most recent kept");
    assert_eq!(calls("2"), 2, "second most recent kept");
    assert_eq!(calls("1"), 1, "least recently used was evicted");
}

#[test]
fn w30_compile_cache_hit_by_digest() {
    let rt = runtime();
    let bytes: Arc<[u8]> = wat::parse_str(echo_wat()).expect("wat").into();
    assert!(!rt.is_cached("blob-1"));
    let first = rt.module("blob-1", &bytes, None).expect("compile");
    assert!(rt.is_cached("blob-1"));
    // A hit does not look at the bytes again: the digest is the identity.
    let second = rt
        .module("blob-1", &Arc::from(&b""[..]), Some(soon()))
        .expect("hit");
    assert!(Arc::ptr_eq(&first, &second));
    let stats = rt.stats();
    assert_eq!((stats.compiles, stats.compile_cache_hits), (1, 1));
}

#[test]
fn w30_compile_cache_is_bounded_lru() {
    let rt = Runtime::new(PluginConfig {
        cache_entries: 2,
        ..config()
    })
    .expect("runtime");
    let bytes: Arc<[u8]> = wat::parse_str(echo_wat()).expect("wat").into();
    for digest in ["a", "b", "a", "c"] {
        rt.module(digest, &bytes, Some(soon())).expect("compile");
    }
    assert!(rt.is_cached("a") && rt.is_cached("c"));
    assert!(!rt.is_cached("b"), "least recently used evicted");
}

/// A module Cranelift needs a while for (tens of milliseconds or more).
fn heavy_wat(functions: usize) -> String {
    let mut wat = format!(r#"(module (memory (export "memory") 1) {PRELUDE}"#);
    wat.push_str(r#"(func (export "enrich") (param i32 i32) (result i64) (i64.const 0))"#);
    for f in 0..functions {
        wat.push_str(&format!(
            "(func $f{f} (export \"f{f}\") (param $x i32) (result i32) (local.get $x)"
        ));
        for i in 0..150 {
            wat.push_str(&format!(
                " (i32.mul (i32.const {m}))(i32.add (local.get $x))(i32.rotl (i32.const {r}))",
                m = 2 * i + 3,
                r = i % 31
            ));
        }
        wat.push(')');
    }
    wat.push(')');
    wat
}

#[test]
fn w30_deadline_already_passed_compiles_nothing() {
    let rt = runtime();
    let bytes: Arc<[u8]> = wat::parse_str(echo_wat()).expect("wat").into();
    let d = rt
        .module("late", &bytes, Some(Instant::now()))
        .expect_err("timeout");
    assert_eq!(d.code, Code::Timeout, "{d}");
    assert!(!rt.is_cached("late"));
    let stats = rt.stats();
    assert_eq!(
        (
            stats.compiles,
            stats.compiles_skipped,
            stats.compiles_dropped_late
        ),
        (0, 0, 0)
    );
}

/// W-30 (seed 000: a late artifact is closed, never executed): an in-process compile, which
/// nothing can stop, that finishes after its caller gave up is dropped, not cached, and the
/// next read compiles again (`compile_child.rs` has the child, which is stopped instead).
#[test]
fn w30_compile_finishing_after_its_caller_gave_up_is_dropped() {
    let (sent, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = runtime();
        // About two seconds of Cranelift: the worker has surely started it (it takes a job
        // at once) and not finished it when the caller gives up.
        let bytes: Arc<[u8]> = support::bigmodule::module(2 << 20, 7).into();
        let gave_up = rt.module(
            "heavy",
            &bytes,
            Some(Instant::now() + Duration::from_millis(300)),
        );
        while rt.stats().compiles_dropped_late + rt.stats().compiles_skipped == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        let late = (rt.stats(), rt.is_cached("heavy"));
        let again = rt
            .module(
                "heavy",
                &bytes,
                Some(Instant::now() + Duration::from_secs(60)),
            )
            .map(|_| ());
        let _ = sent.send((
            gave_up.map(|_| ()),
            late,
            again,
            rt.stats(),
            rt.is_cached("heavy"),
        ));
    });
    let (gave_up, (late, cached_late), again, stats, cached) = result
        .recv_timeout(Duration::from_secs(150))
        .expect("the test finishes within 150 s");
    let gave_up = gave_up.expect_err("2 MiB does not compile in 300 ms here");
    assert_eq!(gave_up.code, Code::Timeout, "{gave_up}");
    assert_eq!(
        (
            late.compiles,
            late.compiles_dropped_late,
            late.compiles_skipped
        ),
        (0, 1, 0),
        "{late:?}"
    );
    assert!(!cached_late, "a late module is never cached");
    again.expect("the next read compiles");
    assert!(cached);
    assert_eq!(
        (
            stats.compiles,
            stats.compiles_dropped_late,
            stats.compile_cache_hits
        ),
        (1, 1, 0),
        "{stats:?}"
    );
}

#[test]
fn w30_concurrent_callers_share_one_compile() {
    let rt = runtime();
    let bytes: Arc<[u8]> = wat::parse_str(heavy_wat(20)).expect("wat").into();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| rt.module("shared", &bytes, Some(soon()))))
            .collect();
        let modules: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("thread").expect("module"))
            .collect();
        assert!(Arc::ptr_eq(&modules[0], &modules[1]));
    });
    // The second caller joined the first one's job (or, if late, hit the cache).
    assert_eq!(rt.stats().compiles, 1);
}

/// W-31, W-30: background preparation never evicts a module a read used since it was
/// cached; with every slot held by such modules it compiles nothing and says so (not a
/// fault). A prepared module takes a free slot or the place of one no read used, and enters
/// least recently used; a preparation's cache hit is not a use. Reads keep plain LRU.
#[test]
fn w31_w30_preparation_never_evicts_a_module_reads_use() {
    let rt = Runtime::new(PluginConfig {
        cache_entries: 2,
        ..config()
    })
    .expect("runtime");
    let bytes: Arc<[u8]> = wat::parse_str(echo_wat()).expect("wat").into();
    let read = |digest: &str| rt.module(digest, &bytes, Some(soon())).expect("read");
    let prepare = |digest: &str| rt.prepare_module(digest, &bytes).expect("prepare");
    let cached = |digests: &[&str]| {
        ["a", "b", "p", "q", "r"]
            .into_iter()
            .filter(|d| rt.is_cached(d))
            .eq(digests.iter().copied())
    };

    // A free slot; a hit changes nothing (not a use, not more recent).
    read("a");
    assert_eq!(prepare("p"), PrepareOutcome::Compiled);
    assert_eq!(prepare("p"), PrepareOutcome::Cached);
    assert!(cached(&["a", "p"]));
    // The next preparation takes the place of the module no read used, never of `a`.
    assert_eq!(prepare("q"), PrepareOutcome::Compiled);
    assert!(cached(&["a", "q"]));
    // A read's miss is plain LRU, and the prepared module entered least recently used.
    read("b");
    assert!(
        cached(&["a", "b"]),
        "the prepared, unread module goes first"
    );
    // Every slot holds a module a read used: preparation compiles nothing.
    let compiles = rt.stats().compiles;
    assert_eq!(prepare("r"), PrepareOutcome::NoRoom);
    assert!(cached(&["a", "b"]));
    let stats = rt.stats();
    assert_eq!(stats.compiles, compiles, "nothing compiled");
    assert_eq!(stats.preparations_without_room, 1);
    assert_eq!(stats.faults.total(), 0, "no room is not a fault");
    // A read's hit marks a prepared module as used.
    let rt = Runtime::new(PluginConfig {
        cache_entries: 2,
        ..config()
    })
    .expect("runtime");
    assert_eq!(rt.prepare_module("p", &bytes), Ok(PrepareOutcome::Compiled));
    rt.module("p", &bytes, Some(soon())).expect("hit");
    rt.module("a", &bytes, Some(soon())).expect("read");
    assert_eq!(rt.prepare_module("q", &bytes), Ok(PrepareOutcome::NoRoom));
    assert!(rt.is_cached("p") && rt.is_cached("a") && !rt.is_cached("q"));
    // No cache at all: nothing to prepare into.
    let rt = Runtime::new(PluginConfig {
        cache_entries: 0,
        ..config()
    })
    .expect("runtime");
    assert_eq!(rt.prepare_module("p", &bytes), Ok(PrepareOutcome::NoRoom));
    assert_eq!(rt.stats().compiles, 0);
}

#[test]
fn w25_deadline_passed_before_execution_is_timeout() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    expect_code(
        rt.execute(&module, &key("{}"), b"{}", &no_files(), Instant::now())
            .map(|e| e.output),
        Code::Timeout,
    );
}

#[test]
fn w35_runtime_drop_stops_its_threads() {
    let rt = runtime();
    let module = compile(&rt, "echo", &echo_wat());
    run(&rt, &module, &key("{}"), "{}", &no_files()).expect("run");
    let started = Instant::now();
    drop(rt);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "drop took {:?}",
        started.elapsed()
    );
    // The module outlives the runtime harmlessly.
    assert_eq!(module.digest(), "echo");
}

#[test]
fn w36_measurements() {
    // Not an assertion on time: prints numbers for the report (`--nocapture`).
    let rt = runtime();
    let echo: Arc<[u8]> = wat::parse_str(echo_wat()).expect("wat").into();
    let started = Instant::now();
    let module = rt.module("echo", &echo, None).expect("compile");
    let echo_compile = started.elapsed();
    let heavy: Arc<[u8]> = wat::parse_str(heavy_wat(200)).expect("wat").into();
    let started = Instant::now();
    rt.module("heavy", &heavy, None).expect("compile");
    let heavy_compile = started.elapsed();
    let k = key("{}");
    let input = vec![b' '; 4096];
    let started = Instant::now();
    rt.execute(&module, &k, &input, &no_files(), soon())
        .map(|e| e.output)
        .expect("cold");
    let cold = started.elapsed();
    let rounds = 2000;
    let started = Instant::now();
    for _ in 0..rounds {
        rt.execute(&module, &k, &input, &no_files(), soon())
            .map(|e| e.output)
            .expect("warm");
    }
    let warm = started.elapsed() / rounds;
    let fresh_rounds = 200;
    let started = Instant::now();
    for i in 0..fresh_rounds {
        rt.execute(&module, &key(&i.to_string()), &input, &no_files(), soon())
            .map(|e| e.output)
            .expect("fresh");
    }
    let fresh = started.elapsed() / fresh_rounds;
    println!(
        "compile echo ({} B): {echo_compile:?}; compile heavy ({} B): {heavy_compile:?} ({:.1} MB/s); \
         first execution incl. instantiation: {cold:?}; execution on a fresh instance (instantiate + run): \
         {fresh:?}; warm execution on a pooled instance (4 KiB input): {warm:?}",
        echo.len(),
        heavy.len(),
        heavy.len() as f64 / heavy_compile.as_secs_f64() / 1e6,
    );
}

/// W-36: every execution reports its segments and reads, whatever its outcome.
#[test]
fn w36_execution_report() {
    let rt = runtime();
    let module = compile(&rt, "reader", &reader_wat());
    // The reader returns the file as its output: a valid ABI 2 output keeps the instance.
    const OUTPUT: &str = r#"{"attachments":[]}"#;
    let files = Files::with(&[("notes/a.md", OUTPUT.as_bytes())]);
    let (first, report) = rt.execute_reported(&module, &key("{}"), b"notes/a.md", &files, soon());
    assert_eq!(first.expect("read").output, OUTPUT);
    assert!(!report.instance_reused);
    assert_eq!((report.read_calls, report.read_bytes), (1, 18));
    let (_, again) = rt.execute_reported(&module, &key("{}"), b"notes/a.md", &files, soon());
    assert!(again.instance_reused);
    assert_eq!(
        again.instantiate,
        Duration::ZERO,
        "nothing instantiated on reuse"
    );
    let (late, failed) =
        rt.execute_reported(&module, &key("{}"), b"notes/a.md", &files, Instant::now());
    assert_eq!(late.expect_err("deadline passed").code, Code::Timeout);
    assert_eq!(failed.read_calls, 0, "a refused execution reads nothing");
}
