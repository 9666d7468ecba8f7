//! Fuzz target `wasm_plugin`: a repository plugin's artifact, metadata JSON, output, host-read
//! requests, and the `plugins` parameter (`wasmplugin::fuzzing::plugin`).
fn main() {
    afl::fuzz!(|data: &[u8]| wasmplugin::fuzzing::plugin(data));
}
