//! CI's replay of the fuzz targets whose entry points live in this crate (`fuzz/`, issue 43):
//! every committed corpus input and every regression input (`fuzz/corpus/<target>/`,
//! `fuzz/regressions/<target>/`) through the same entry point the fuzzer calls, each without a
//! panic and well within the time bound.

use testgit::fuzz::replay;

#[test]
fn fuzz_tool_args_corpus_replays() {
    replay("tool_args", tools::fuzzing::tool_arguments);
}

#[test]
fn fuzz_server_plugin_tables_corpus_replays() {
    replay("server_plugin_tables", tools::fuzzing::server_plugin_tables);
}
