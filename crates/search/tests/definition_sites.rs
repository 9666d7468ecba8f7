//! Issue 34, point 1: the file page links a page's names to their definitions with one
//! batch lookup (`Indexes::definition_sites`). It must answer what `definitions` answers for
//! each name (paths, lines, kinds, totals, order), stop at its deadline, and say nothing for
//! a repository without an index.

mod common;

use std::time::{Duration, Instant};

use common::index_commit;
use search::{DefinitionsRequest, Indexes};

const LIB: &[u8] = b"pub struct Parser {\n    depth: usize,\n}\n\nimpl Parser {\n    pub fn parse(&self) -> usize {\n        self.depth\n    }\n}\n\npub fn parse(text: &str) -> usize {\n    text.len()\n}\n";
const APP: &[u8] = b"def parse(x):\n    return x\n\n\nclass Runner:\n    def run(self):\n        return parse(1)\n";
const ZED: &[u8] = b"pub fn parse() {}\npub const LIMIT: usize = 3;\n";

fn indexed() -> (testgit::SourceRepo, tempfile::TempDir, Indexes) {
    let repo =
        testgit::SourceRepo::with_files(&[("src/lib.rs", LIB), ("app.py", APP), ("a/zed.rs", ZED)]);
    let head = repo.head();
    let (tmp, indexes) = index_commit(&repo, &head);
    (repo, tmp, indexes)
}

/// (path, line, kind) of each definition, and the total.
type Found = (Vec<(String, u32, &'static str)>, u64);

/// What `definitions` answers for `name`.
fn by_definitions(indexes: &Indexes, name: &str, limit: usize) -> Option<Found> {
    let answer = indexes
        .definitions(&DefinitionsRequest {
            symbol: name.into(),
            repos: vec!["o/r".into()],
            limit,
            ..DefinitionsRequest::default()
        })
        .unwrap();
    (answer.total > 0).then(|| {
        (
            answer
                .definitions
                .into_iter()
                .map(|d| (d.path, d.symbol.line, d.symbol.kind.as_str()))
                .collect(),
            answer.total,
        )
    })
}

#[test]
fn sites_equal_definitions_name_by_name() {
    let (repo, _tmp, indexes) = indexed();
    let names = [
        "parse", "Parser", "depth", "LIMIT", "Runner", "run", "nothing", "len",
    ];
    for limit in [1, 2, 20] {
        let far = Instant::now() + Duration::from_secs(60);
        let answer = indexes
            .definition_sites("o/r", &names, limit, far)
            .expect("o/r is indexed");
        assert_eq!(answer.commit, repo.head());
        assert_eq!(answer.names.len(), names.len());
        for (name, sites) in names.iter().zip(&answer.names) {
            let got = sites.as_ref().map(|found| {
                (
                    found
                        .sites
                        .iter()
                        .map(|s| (s.path.clone(), s.line, s.kind.as_str()))
                        .collect::<Vec<_>>(),
                    found.total,
                )
            });
            assert_eq!(
                got,
                by_definitions(&indexes, name, limit),
                "{name}, limit {limit}"
            );
        }
    }
    // `parse` is defined in three files: all counted, listed in path order.
    let far = Instant::now() + Duration::from_secs(60);
    let parse = indexes
        .definition_sites("o/r", &["parse"], 20, far)
        .unwrap();
    let parse = parse.names[0].as_ref().unwrap();
    assert_eq!(parse.total, 4);
    assert_eq!(parse.sites[0].path, "a/zed.rs");
}

#[test]
fn a_passed_deadline_looks_nothing_up_and_no_index_answers_none() {
    let (_repo, _tmp, indexes) = indexed();
    let passed = Instant::now() - Duration::from_millis(1);
    let answer = indexes
        .definition_sites("o/r", &["parse"], 5, passed)
        .unwrap();
    assert!(answer.names.is_empty(), "{answer:?}");
    let far = Instant::now() + Duration::from_secs(60);
    assert!(
        indexes
            .definition_sites("o/other", &["parse"], 5, far)
            .is_none()
    );
}
