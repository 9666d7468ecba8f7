//! W-23, W-26: `read_files` takes out of its request only as many paths as READ_CALLS has
//! left; the rest are answered with the budget error without a host allocation per path.
//! This binary holds one test only, so the counting allocator sees nothing but it (and the
//! runtime's own idle threads).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use wasmplugin::PluginConfig;
use wasmplugin::runtime::{HostFiles, HostReadError, InstanceKey, Runtime};

/// Counts the bytes allocated (and grown by realloc) through the system allocator.
struct Counting;

static ALLOCATED: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to `System`; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATED.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATED.fetch_add(new_size.saturating_sub(layout.size()), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct One;

impl HostFiles for One {
    fn read(&self, path: &str, _max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        match path {
            "a" => Ok(b"A".to_vec()),
            _ => Err(HostReadError::Refused(format!("{path}: no such file"))),
        }
    }
}

/// A guest whose `enrich` passes its input to `read_files`, traps when the call failed as a
/// whole, and otherwise returns `{"attachments":[]}` (its answer is binary, not UTF-8).
const BATCH: &str = r#"(module
  (import "sourcegraph" "read_files" (func $read_files (param i32 i32) (result i64)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"attachments\":[]}")
  (global $bump (mut i32) (i32.const 4096))
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
  (func (export "dealloc") (param i32 i32))
  (func (export "enrich") (param $p i32) (param $l i32) (result i64)
    (local $out i32)
    (if (i64.eqz (call $read_files (local.get $p) (local.get $l))) (then unreachable))
    (local.set $out (call $alloc (i32.const 18)))
    (memory.copy (local.get $out) (i32.const 16) (i32.const 18))
    (i64.or (i64.shl (i64.extend_i32_u (local.get $out)) (i64.const 32)) (i64.const 18))))"#;

#[test]
fn w23_read_files_parses_only_the_paths_read_calls_allows() {
    const PATHS: usize = 100_000;
    let rt = Runtime::new(PluginConfig {
        memory_mib: 32,
        read_calls: 16,
        output_bytes: 32 << 20,
        ..PluginConfig::default()
    })
    .expect("runtime");
    let bytes: std::sync::Arc<[u8]> = wat::parse_str(BATCH).expect("wat").into();
    let deadline = Instant::now() + Duration::from_secs(60);
    let module = rt.module("batch", &bytes, Some(deadline)).expect("module");
    let key = InstanceKey {
        storage_root: "/data".into(),
        repo: "a/b".into(),
        commit: "0".repeat(40),
        plugin_dir: String::new(),
        args: "{}".into(),
    };
    let request = serde_json::to_vec(&vec!["a"; PATHS]).expect("json");

    let before = ALLOCATED.load(Ordering::Relaxed);
    let executed = rt
        .execute(&module, &key, &request, &One, deadline)
        .expect("the guest returns the answer");
    let allocated = ALLOCATED.load(Ordering::Relaxed) - before;

    assert_eq!(executed.output, r#"{"attachments":[]}"#);
    let read_budget = executed.read_budget.expect("PLUGIN_READ_BUDGET");
    assert!(
        read_budget
            .message
            .starts_with(&format!("{} host read(s)", PATHS - 16)),
        "{read_budget}"
    );
    let stats = rt.stats();
    assert_eq!(
        (stats.host_reads, stats.read_budget_hits),
        (16, (PATHS - 16) as u64)
    );
    // The answer (about 7 MiB: 99 984 budget errors) is written straight into guest memory;
    // the paths past READ_CALLS cost no host allocation each (a `String` per path and a
    // per-item result with its message would be well over 10 MiB).
    assert!(
        allocated < 1 << 20,
        "host allocated {allocated} bytes for {PATHS} paths"
    );
}
