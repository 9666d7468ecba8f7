//! The repository plugins committed into the source: the fixtures placed at the root and in
//! the largest top directories, and what each read item must therefore carry.

use super::head::SourceFile;
use anyhow::{Context, Result, bail};
use bench::{git, git_input};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the committed plugins are and what each read item must therefore carry.
pub(super) struct Layout {
    /// Directories with `echo.sourcegraph.wasm`: `""` and the largest top directory.
    echo_dirs: Vec<String>,
    /// The directory with `related-content` (every file below it gets `related:`).
    related: Option<String>,
    /// The directory with `evidence-chain` and the paths (repository-relative) its
    /// `evidence.json` names (those get `references:`).
    evidence: Option<(String, HashSet<String>)>,
    /// Plugin artifacts committed (what `availability` must list).
    pub(super) artifacts: usize,
}

impl Layout {
    /// The echo plugin that applies to `path` (the nearest ancestor): its directory and the
    /// path relative to it.
    pub(super) fn echo_for<'a>(&self, path: &'a str) -> (&str, &'a str) {
        self.echo_dirs
            .iter()
            .filter_map(|dir| {
                if dir.is_empty() {
                    Some((dir.as_str(), path))
                } else {
                    path.strip_prefix(dir.as_str())
                        .and_then(|rest| rest.strip_prefix('/'))
                        .map(|rest| (dir.as_str(), rest))
                }
            })
            .max_by_key(|(dir, _)| dir.len())
            .expect("the root echo applies to every path")
    }

    pub(super) fn related_applies(&self, path: &str) -> bool {
        self.related
            .as_ref()
            .is_some_and(|dir| path.starts_with(&format!("{dir}/")))
    }

    pub(super) fn evidence_applies(&self, path: &str) -> bool {
        self.evidence
            .as_ref()
            .is_some_and(|(_, keys)| keys.contains(path))
    }
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/wasmplugin/testdata")
}

/// Adds one commit to the bare clone `dir` with the plugins (plumbing only: no work tree).
pub(super) fn commit_plugins(dir: &Path, tmp: &Path, files: &[SourceFile]) -> Result<Layout> {
    // Top directories by text files, largest first.
    let mut tops: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for file in files {
        if let Some((top, _)) = file.path.split_once('/') {
            tops.entry(top).or_default().push(&file.path);
        }
    }
    let mut tops: Vec<(&str, Vec<&str>)> = tops.into_iter().collect();
    tops.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    let rel = |top: &str, path: &str| path[top.len() + 1..].to_string();
    let mut added: Vec<(String, Vec<u8>)> = Vec::new();
    let wasm = |name: &str| -> Result<Vec<u8>> {
        let path = testdata().join(format!("{name}.sourcegraph.wasm"));
        std::fs::read(&path).with_context(|| format!("cannot read {}", path.display()))
    };
    added.push(("echo.sourcegraph.wasm".into(), wasm("echo")?));
    let mut layout = Layout {
        echo_dirs: vec![String::new()],
        related: None,
        evidence: None,
        artifacts: 1,
    };
    if let Some((top, _)) = tops.first() {
        added.push((format!("{top}/echo.sourcegraph.wasm"), wasm("echo")?));
        layout.echo_dirs.push(top.to_string());
        layout.artifacts += 1;
    }
    if let Some((top, paths)) = tops.get(1) {
        let related: Vec<String> = paths.iter().take(2).map(|p| rel(top, p)).collect();
        let json = serde_json::json!({ "**": related });
        added.push((
            format!("{top}/related-content.sourcegraph.wasm"),
            wasm("related-content")?,
        ));
        added.push((format!("{top}/related.json"), json.to_string().into_bytes()));
        layout.related = Some(top.to_string());
        layout.artifacts += 1;
    }
    if let Some((top, paths)) = tops.get(2) {
        let mut evidence = serde_json::Map::new();
        let mut keys = HashSet::new();
        // Every other file of the directory points at the next one.
        for pair in paths.chunks(2).take(200) {
            let target = pair.get(1).unwrap_or(&pair[0]);
            evidence.insert(
                rel(top, pair[0]),
                serde_json::json!([{"path": rel(top, target), "start_line": 1, "end_line": 3,
                    "note": "soak evidence"}]),
            );
            keys.insert(pair[0].to_string());
        }
        added.push((
            format!("{top}/evidence-chain.sourcegraph.wasm"),
            wasm("evidence-chain")?,
        ));
        added.push((
            format!("{top}/evidence.json"),
            serde_json::Value::Object(evidence).to_string().into_bytes(),
        ));
        layout.evidence = Some((top.to_string(), keys));
        layout.artifacts += 1;
    }
    let index = tmp.join("plugin-commit.index");
    let index = index.to_str().context("temp path is not UTF-8")?;
    let git_dir = dir.to_str().context("clone path is not UTF-8")?;
    let with_index = |args: &[&str]| -> Result<String> {
        let mut all = vec!["--git-dir", git_dir, "-c", "core.bare=false"];
        all.extend_from_slice(args);
        let out = Command::new("git")
            .current_dir(dir)
            .env("GIT_INDEX_FILE", index)
            .args(&all)
            .output()?;
        if !out.status.success() {
            bail!(
                "git {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    with_index(&["read-tree", "HEAD"])?;
    for (path, bytes) in &added {
        let id = git_input(dir, &["hash-object", "-w", "--stdin"], Some(bytes))?;
        with_index(&[
            "update-index",
            "--add",
            "--cacheinfo",
            &format!("100644,{id},{path}"),
        ])?;
    }
    let tree = with_index(&["write-tree"])?;
    let commit = git(
        dir,
        &[
            "commit-tree",
            &tree,
            "-p",
            "HEAD",
            "-m",
            "soak: repository plugins",
        ],
    )?;
    git(dir, &["update-ref", "HEAD", &commit])?;
    for (path, _) in &added {
        eprintln!("  + {path}");
    }
    Ok(layout)
}
