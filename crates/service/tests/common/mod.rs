//! Helpers shared by the service's integration tests.
#![allow(dead_code)]

pub mod cluster;

use gitstore::{GitStore, Registration, RepoName, RepoPath};
use service::{FileRange, ReadManyRequest, ReadRequest};
use testgit::SourceRepo;

/// The bytes of a committed fixture artifact (W-37), `crates/wasmplugin/testdata/<name>.sourcegraph.wasm`.
pub fn artifact(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../wasmplugin/testdata/{name}.sourcegraph.wasm",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}

/// `read` of the whole of `path` in `test/repo` at its head.
pub fn read(path: &str) -> ReadRequest {
    ReadRequest {
        repo: "test/repo".into(),
        revision: None,
        path: path.into(),
        start_line: None,
        end_line: None,
        plugins: None,
    }
}

/// `read_many` of the whole of each of `paths` in `test/repo` at its head.
pub fn batch(paths: &[&str]) -> ReadManyRequest {
    ReadManyRequest {
        repo: "test/repo".into(),
        revision: None,
        files: paths
            .iter()
            .map(|p| FileRange {
                path: p.to_string(),
                start_line: None,
                end_line: None,
            })
            .collect(),
        plugins: None,
    }
}

/// Registers `source` as `name` in `store` and syncs it.
pub fn register(store: &GitStore, name: &str, source: &SourceRepo) {
    let name = RepoName::parse(name).expect("name");
    store
        .register(Registration {
            name: name.clone(),
            source: source.source(),
            registered_path: RepoPath::root(),
            branch: None,
            private: None,
        })
        .expect("register");
    store.sync(&name).expect("sync");
}
