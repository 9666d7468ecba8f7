//! CI's replay of the fuzz targets whose entry points live in this crate (`fuzz/`, issue 43):
//! every committed corpus input and every regression input (`fuzz/corpus/<target>/`,
//! `fuzz/regressions/<target>/`) through the same entry point the fuzzer calls, each without a
//! panic and well within the time bound.

use testgit::fuzz::replay;

#[test]
fn fuzz_readme_corpus_replays() {
    replay("readme", website::fuzzing::readme);
}
