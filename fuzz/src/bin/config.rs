//! Fuzz target `config`: a `--config` TOML file read and applied as `csg` reads it
//! (`crates/cli/src/config.rs`'s `fuzz_config_file`). `csg` is a binary without a library, so
//! its settings modules are included here by path, unchanged.
#![allow(dead_code, unused_imports)]

#[path = "../../../crates/cli/src/config.rs"]
mod config;
#[path = "../../../crates/cli/src/server_plugin_env.rs"]
mod server_plugin_env;
#[path = "../../../crates/cli/src/setting.rs"]
mod setting;
#[path = "../../../crates/cli/src/settings.rs"]
mod settings;

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let _ = config::fuzz_config_file(&String::from_utf8_lossy(data));
    });
}
