//! A measurement, not a test (O-9, W-30: "document the measured compile speed"): how long one
//! compile takes, in-process and in a compile child, for the committed fixtures and for
//! generated modules of a few sizes. Run in release:
//!
//! ```sh
//! cargo test --release -p wasmplugin --test compile_speed -- --ignored --nocapture
//! SIZES_MIB=4,32 cargo test --release -p wasmplugin --test compile_speed -- --ignored --nocapture
//! ```

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmplugin::PluginConfig;
use wasmplugin::runtime::{CompileCommand, Runtime};

/// Compile time of `bytes` (validation, compile, link, as `module` reports it) and the wall
/// time of the call, on a fresh runtime each (nothing cached).
fn compile(config: &PluginConfig, bytes: &Arc<[u8]>) -> (Duration, Duration) {
    let rt = Runtime::new(config.clone()).expect("runtime");
    let started = Instant::now();
    let module = rt.module("measured", bytes, None).expect("compiles");
    (module.compile_time(), started.elapsed())
}

#[test]
#[ignore = "a measurement: prints compile times (run in release with --nocapture)"]
fn o9_compile_speed() {
    let in_process = PluginConfig {
        timeout: Duration::from_secs(3600),
        ..PluginConfig::default()
    };
    let in_child = PluginConfig {
        compiler: Some(CompileCommand::program(env!(
            "CARGO_BIN_EXE_wasmplugin-compile-child"
        ))),
        ..in_process.clone()
    };
    let mut artifacts: Vec<(String, Arc<[u8]>)> = Vec::new();
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");
    for name in ["echo", "related-content"] {
        let path = format!("{fixtures}/{name}.sourcegraph.wasm");
        let bytes = std::fs::read(&path).expect("fixture");
        artifacts.push((format!("fixture {name}"), bytes.into()));
    }
    let sizes = std::env::var("SIZES_MIB").unwrap_or_else(|_| "1,4".into());
    for mib in sizes.split(',') {
        let mib: usize = mib
            .trim()
            .parse()
            .expect("SIZES_MIB: whole MiB, comma-separated");
        // Just under the size: the generator overshoots by up to one function, and 32 MiB is
        // ARTIFACT_BYTES itself.
        let bytes = support::bigmodule::module((mib << 20) - (16 << 10), 1);
        artifacts.push((format!("generated {mib} MiB"), bytes.into()));
    }
    for (name, bytes) in &artifacts {
        let (compile_in, _) = compile(&in_process, bytes);
        let (compile_child, wall_child) = compile(&in_child, bytes);
        println!(
            "{name} ({} B): in-process {compile_in:.2?} ({:.2} MB/s); in a child {compile_child:.2?} \
             (wall {wall_child:.2?})",
            bytes.len(),
            bytes.len() as f64 / compile_in.as_secs_f64() / 1e6,
        );
    }
}
