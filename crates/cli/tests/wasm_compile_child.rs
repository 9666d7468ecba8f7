//! O-9 (issue 42 point 8): `csg` is its own repository-plugin compile child. A runtime that
//! compiles through the real binary gets a module it can run, so `main` answers the child's
//! exchange before anything else and the child's engine matches the server's.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use wasmplugin::PluginConfig;
use wasmplugin::runtime::{CompileCommand, HostFiles, HostReadError, InstanceKey, Runtime};

struct NoFiles;

impl HostFiles for NoFiles {
    fn read(&self, _path: &str, _max_bytes: u64) -> Result<Vec<u8>, HostReadError> {
        Err(HostReadError::Refused("no files here".into()))
    }
}

#[test]
fn o9_csg_compiles_repository_plugins_in_a_child_of_itself() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../wasmplugin/testdata/echo.sourcegraph.wasm"
    );
    let bytes: Arc<[u8]> = std::fs::read(fixture).expect("the echo fixture").into();
    let (sent, answer) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = Runtime::new(PluginConfig {
            compiler: Some(CompileCommand::program(env!("CARGO_BIN_EXE_csg"))),
            ..PluginConfig::default()
        })
        .expect("runtime");
        let deadline = Instant::now() + Duration::from_secs(30);
        let module = rt.module("echo", &bytes, Some(deadline));
        let run = module.map(|module| {
            let key = InstanceKey {
                storage_root: "/data".into(),
                repo: "example/knowledge".into(),
                commit: "0123456789abcdef0123456789abcdef01234567".into(),
                plugin_dir: "docs".into(),
                args: "{}".into(),
            };
            // The JSON ABI 2 input of one read of one file.
            let input = br#"{"abi_version":2,"operation":"read","repository":"example/knowledge",
                "commit":"0123456789abcdef0123456789abcdef01234567","root":"docs","args":{},
                "files":[{"item_id":"read-0","path":"a.md","repository_path":"docs/a.md",
                "start_line":1,"end_line":1,"content":"a\n","truncated":false,"has_more":null,
                "next_start_line":null}]}"#;
            rt.execute(&module, &key, input, &NoFiles, deadline)
        });
        let _ = sent.send((run, rt.stats()));
    });
    let (run, stats) = answer
        .recv_timeout(Duration::from_secs(60))
        .expect("compiled and ran within 60 s");
    let executed = run.expect("compiled in the csg child").expect("ran");
    assert!(
        executed.output.contains("echo read-0 a.md"),
        "{}",
        executed.output
    );
    assert_eq!(stats.compiles, 1);
}
