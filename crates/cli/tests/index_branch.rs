//! `csg repo add --index-branch PATTERN` (S-8, issue 33 point 4): repeatable, stored with the
//! registration (SQLite), shown by `csg repo list`; the cap of 64 and bad patterns are
//! refused before anything is registered.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;
use testgit::SourceRepo;

const CSG: &str = env!("CARGO_BIN_EXE_csg");

fn csg(tmp: &Path, args: &[&str]) -> Output {
    let mut command = Command::new(CSG);
    command
        .arg("--data-dir")
        .arg(tmp.join("data"))
        .args(args)
        .env_remove("CSG_LISTEN")
        .env_remove("CSG_DATA_DIR")
        .env_remove("SOURCEGRAPH_API_TOKEN");
    // Every run is a short command: a hang fails the test instead of holding it.
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("csg runs");
    let started = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().ok();
            panic!("csg {args:?} did not finish within 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("csg output")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn s8_repo_add_index_branch_is_stored_and_listed() {
    let source = SourceRepo::with_files(&[("a.md", b"# A\n")]);
    source.git(&["branch", "release/1.0"]);
    let tmp = source.tmp();
    let path = source.source();

    let too_many: Vec<String> = (0..65)
        .flat_map(|i| ["--index-branch".to_string(), format!("b{i}")])
        .collect();
    let mut args: Vec<&str> = vec!["repo", "add", "acme/docs", &path];
    args.extend(too_many.iter().map(String::as_str));
    let refused = csg(tmp, &args);
    assert!(!refused.status.success());
    assert!(
        text(&refused.stderr).contains("at most 64"),
        "{}",
        text(&refused.stderr)
    );
    let bad = csg(
        tmp,
        &["repo", "add", "acme/docs", &path, "--index-branch", "a b"],
    );
    assert!(!bad.status.success());
    assert!(
        text(&bad.stderr).contains("index-branch pattern"),
        "{}",
        text(&bad.stderr)
    );
    let listed = csg(tmp, &["repo", "list"]);
    assert!(
        !text(&listed.stdout).contains("acme/docs"),
        "a refused add registers nothing: {}",
        text(&listed.stdout)
    );

    let added = csg(
        tmp,
        &[
            "repo",
            "add",
            "acme/docs",
            &path,
            "--index-branch",
            "release/*",
            "--index-branch",
            "dev",
        ],
    );
    assert!(added.status.success(), "{}", text(&added.stderr));
    let listed = text(&csg(tmp, &["repo", "list"]).stdout);
    let line = listed
        .lines()
        .find(|l| l.starts_with("acme/docs\t"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(line.ends_with("\tindex-branches=release/*,dev"), "{line}");

    // Registered again without patterns: they stay; with patterns: replaced.
    let again = csg(tmp, &["repo", "add", "acme/docs", &path, "--no-wait"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    let listed = text(&csg(tmp, &["repo", "list"]).stdout);
    assert!(
        listed.contains("\tindex-branches=release/*,dev"),
        "{listed}"
    );
    let replaced = csg(
        tmp,
        &[
            "repo",
            "add",
            "acme/docs",
            &path,
            "--no-wait",
            "--index-branch",
            "main",
        ],
    );
    assert!(replaced.status.success(), "{}", text(&replaced.stderr));
    let listed = text(&csg(tmp, &["repo", "list"]).stdout);
    assert!(listed.contains("\tindex-branches=main\n"), "{listed}");
}
