//! The static rank of a document (S-10), fixed at index time from its path alone: what a
//! reader most likely wants first. A generation numbers its documents in this order (rank,
//! then path), so posting lists list candidates best first and a search can stop verifying
//! once its page is full.
//!
//! The rank is a class, then the depth (slashes in the path; shallower first):
//! 0. source: everything not below;
//! 1. tests: a path component `test`, `tests`, `__tests__`, `spec`, `specs`, `testdata` or
//!    `testing`, or a file named `test_*`, `*_test.*`, `*.test.*`, `*_spec.*`, `*.spec.*`,
//!    `*Test.*` or `*Tests.*`;
//! 2. generated or minified: `*.min.js`, `*.min.css`, `*.pb.go`, `*_pb2.py`, `*.pb.h`,
//!    `*.pb.cc`, `*_generated.*`, `*.generated.*`, `*.g.dart`, and lockfiles (`*.lock`,
//!    `package-lock.json`, `pnpm-lock.yaml`, `go.sum`);
//! 3. vendored: a path component `vendor`, `third_party`, `third-party` or `node_modules`.
//!
//! The later class wins when several apply (a test under `vendor/` is vendored).

use std::cmp::Ordering;

/// Class and depth packed so that a smaller value ranks first.
pub(crate) fn static_rank(path: &str) -> u32 {
    let depth = path.bytes().filter(|&b| b == b'/').count().min(0xFFFF) as u32;
    (class(path) << 16) | depth
}

/// The order of documents in a generation (their ids): static rank, then path.
pub(crate) fn doc_order(a: &str, b: &str) -> Ordering {
    static_rank(a).cmp(&static_rank(b)).then_with(|| a.cmp(b))
}

const VENDORED: &[&str] = &["vendor", "third_party", "third-party", "node_modules"];
const TEST_DIRS: &[&str] = &[
    "test",
    "tests",
    "__tests__",
    "spec",
    "specs",
    "testdata",
    "testing",
];
const GENERATED_SUFFIXES: &[&str] = &[
    ".min.js", ".min.css", ".pb.go", "_pb2.py", ".pb.h", ".pb.cc", ".g.dart", ".lock",
];
const LOCKFILES: &[&str] = &["package-lock.json", "pnpm-lock.yaml", "go.sum"];

fn class(path: &str) -> u32 {
    let (dirs, name) = path.rsplit_once('/').unwrap_or(("", path));
    let mut components = dirs.split('/').filter(|c| !c.is_empty());
    if components.clone().any(|c| VENDORED.contains(&c)) {
        return 3;
    }
    let stem = name.split('.').next().unwrap_or(name);
    if GENERATED_SUFFIXES.iter().any(|s| name.ends_with(s))
        || LOCKFILES.contains(&name)
        || stem.ends_with("_generated")
        || name.contains(".generated.")
    {
        return 2;
    }
    if components.any(|c| TEST_DIRS.contains(&c))
        || name.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || name.contains(".test.")
        || name.contains(".spec.")
        || stem.ends_with("Test")
        || stem.ends_with("Tests")
    {
        return 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_depth() {
        assert_eq!(class("src/main.rs"), 0);
        assert_eq!(class("latest.rs"), 0);
        assert_eq!(class("tests/it.rs"), 1);
        assert_eq!(class("src/parse_test.go"), 1);
        assert_eq!(class("app/Foo.test.ts"), 1);
        assert_eq!(class("src/FooTest.java"), 1);
        assert_eq!(class("test_x.py"), 1);
        assert_eq!(class("web/app.min.js"), 2);
        assert_eq!(class("api/x.pb.go"), 2);
        assert_eq!(class("Cargo.lock"), 2);
        assert_eq!(class("src/schema_generated.rs"), 2);
        assert_eq!(class("vendor/x/tests/a.go"), 3);
        assert_eq!(class("a/node_modules/b.js"), 3);
        assert!(static_rank("a.rs") < static_rank("src/a.rs"));
        assert!(static_rank("src/a/b/c.rs") < static_rank("tests/a.rs"));
        assert_eq!(doc_order("b.rs", "a/a.rs"), Ordering::Less);
        assert_eq!(doc_order("a.rs", "b.rs"), Ordering::Less);
    }
}
