//! CI's replay of the fuzz targets whose entry points live in this crate (`fuzz/`, issue 43):
//! every committed corpus input and every regression input (`fuzz/corpus/<target>/`,
//! `fuzz/regressions/<target>/`) through the same entry point the fuzzer calls, each without a
//! panic and well within the time bound.

use testgit::fuzz::replay;

#[test]
fn fuzz_cursor_corpus_replays() {
    replay("cursor", gitstore::fuzzing::log_cursor);
}

#[test]
fn fuzz_paths_corpus_replays() {
    replay("paths", gitstore::fuzzing::names);
}
