//! Helpers shared by the service's integration tests.

/// The bytes of a committed fixture artifact (W-37), `crates/wasmplugin/testdata/<name>.sourcegraph.wasm`.
pub fn artifact(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../wasmplugin/testdata/{name}.sourcegraph.wasm",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}
