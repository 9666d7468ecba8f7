//! The entry point of the fuzz target `wasm_plugin` (`fuzz/`, issue 43) and of its corpus
//! replay in CI (`tests/fuzz_corpus.rs`): what a repository plugin (untrusted code from a
//! repository) or a caller hands the host, read by the real parsers; a panic is a finding.
//! Not an API (hidden); nothing here changes what the host does.

use crate::abi::{attachments_of, check, static_limits};
use crate::{ConnectionPlugins, INPUT_SCHEMA_BYTES, PluginConfig, SECTION, read_metadata};

/// The artifact name the target's modules are read as.
const NAME: &str = "fuzz-plugin";

/// The first byte chooses what the rest is:
/// 0. an artifact's bytes: its metadata (W-3) and the static ABI checks (W-1, W-23, W-24);
/// 1. the JSON of its `sourcegraph.plugin.v1` section, put in an otherwise empty valid
///    module, then read as 0;
/// 2. an execution's output (`{"attachments": […]}`, W-16);
/// 3. a `read_files` request from the guest (a JSON array of paths), the next byte the
///    reads left;
/// 4. the `plugins` connection parameter (M-2);
/// 5. a duration setting (`SOURCEGRAPH_PLUGINS_TIMEOUT`, …).
pub fn plugin(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let text = || String::from_utf8_lossy(rest);
    match mode % 6 {
        0 => artifact(rest),
        1 => artifact(&module_with_metadata(rest)),
        2 => {
            let _ = attachments_of(&text());
        }
        3 => {
            let Some((&keep, request)) = rest.split_first() else {
                return;
            };
            let keep = usize::from(keep % 16);
            if let Some((kept, more)) = crate::runtime::parse_paths_for_fuzzing(request, keep) {
                assert!(kept.len() <= keep, "kept {} of {keep}", kept.len());
                assert!(more == 0 || kept.len() == keep);
            }
        }
        4 => {
            if let Ok(ConnectionPlugins::Named(names)) = ConnectionPlugins::parse(Some(&text())) {
                assert!(!names.is_empty());
                // The list as it is shown parses back to itself.
                let again = ConnectionPlugins::parse(Some(&names.join(",")));
                assert_eq!(again, Ok(ConnectionPlugins::Named(names)));
            }
        }
        _ => {
            if let Some(duration) = crate::parse_duration(&text()) {
                let _ = duration.as_nanos();
            }
        }
    }
}

fn artifact(wasm: &[u8]) {
    let config = PluginConfig::default();
    if let Ok(metadata) = read_metadata(NAME, wasm, config.metadata_bytes) {
        assert_eq!(metadata.name, NAME);
        if let Some(schema) = &metadata.input_schema {
            assert!(schema.len() <= INPUT_SCHEMA_BYTES + '…'.len_utf8());
        }
    }
    let _ = check(wasm, &static_limits(&config));
}

/// An empty valid core module whose one custom section is [`SECTION`] holding `json`.
pub fn module_with_metadata(json: &[u8]) -> Vec<u8> {
    let mut section = Vec::new();
    leb128(&mut section, SECTION.len());
    section.extend_from_slice(SECTION.as_bytes());
    section.extend_from_slice(json);
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    module.push(0);
    leb128(&mut module, section.len());
    module.extend_from_slice(&section);
    module
}

fn leb128(out: &mut Vec<u8>, mut n: usize) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}
