//! CI's replay of the fuzz targets (`fuzz/`, issue 43): every committed corpus input and
//! every regression input (`fuzz/corpus/<target>/`, `fuzz/regressions/<target>/`) through the
//! same entry point the fuzzer calls, each without a panic and well within a time bound.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};

/// Feeds every input of `target` to `entry`: a panic, or an input that takes 5 s or more,
/// fails the test, and so does a target without any input.
pub fn replay(target: &str, entry: impl Fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut replayed = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        let mut paths: Vec<_> = entries.map(|entry| entry.unwrap().path()).collect();
        paths.sort();
        for path in paths {
            let data = std::fs::read(&path).unwrap();
            let started = Instant::now();
            if catch_unwind(AssertUnwindSafe(|| entry(&data))).is_err() {
                panic!("fuzz input {} panicked", path.display());
            }
            let took = started.elapsed();
            assert!(
                took < Duration::from_secs(5),
                "fuzz input {} took {took:?}",
                path.display()
            );
            replayed += 1;
        }
    }
    assert!(
        replayed > 0,
        "no fuzz corpus for {target} under {}",
        root.display()
    );
}
