//! The corpus of the search and navigation benchmarks: text sources copied from cargo's
//! registry (`~/.cargo/registry/src`) into a new Git repository.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Files larger than this are not copied into the corpus (the index's default size limit).
pub const MAX_FILE: u64 = 1 << 20;
/// Extensions of the text files copied into the corpus.
pub const EXTENSIONS: &[&str] = &[
    "rs", "toml", "md", "c", "h", "cc", "cpp", "hpp", "py", "js", "ts", "txt", "json", "yml",
    "yaml", "sh", "html", "css", "go", "java", "proto", "s", "S", "in", "cfg", "lock",
];

pub struct Corpus {
    /// Repository-relative paths, in copy order.
    pub files: Vec<String>,
    pub bytes: u64,
    /// Crate directories something was copied from.
    pub crates: usize,
}

fn cargo_home() -> Result<PathBuf> {
    std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .context("neither CARGO_HOME nor HOME is set")
}

/// Copies text sources from cargo's registry into `dest` until `target` bytes, in sorted
/// (deterministic) order, and commits them.
pub fn build_corpus(dest: &Path, target: u64) -> Result<Corpus> {
    let root = cargo_home()?.join("registry/src");
    let mut registries: Vec<PathBuf> = std::fs::read_dir(&root)
        .with_context(|| format!("reading {}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    registries.sort();
    std::fs::create_dir_all(dest)?;
    let mut corpus = Corpus {
        files: Vec::new(),
        bytes: 0,
        crates: 0,
    };
    'registries: for registry in registries {
        let mut crates: Vec<PathBuf> = std::fs::read_dir(&registry)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir() && !p.is_symlink())
            .collect();
        crates.sort();
        for krate in crates {
            let mut sources = Vec::new();
            walk(&krate, &mut sources);
            let mut any = false;
            for path in sources {
                if corpus.bytes >= target {
                    break 'registries;
                }
                let Ok(meta) = std::fs::metadata(&path) else {
                    continue;
                };
                if meta.len() > MAX_FILE || meta.len() == 0 {
                    continue;
                }
                let Ok(bytes) = std::fs::read(&path) else {
                    continue;
                };
                if bytes.contains(&0) || std::str::from_utf8(&bytes).is_err() {
                    continue;
                }
                let rel = path.strip_prefix(&registry)?;
                let target_path = dest.join(rel);
                std::fs::create_dir_all(target_path.parent().context("file has a parent")?)?;
                std::fs::write(&target_path, &bytes)?;
                corpus.files.push(rel.to_string_lossy().into_owned());
                corpus.bytes += bytes.len() as u64;
                any = true;
            }
            corpus.crates += usize::from(any);
        }
    }
    if corpus.bytes < target {
        bail!(
            "only {:.1} MB of text source under {}; build the workspace so cargo fetches its dependencies, or pass a smaller --mb",
            corpus.bytes as f64 / 1e6,
            root.display()
        );
    }
    git(dest, &["init", "-q", "-b", "main"])?;
    git(dest, &["add", "-A"])?;
    git(dest, &["commit", "-q", "-m", "corpus"])?;
    Ok(corpus)
}

/// Regular files under `dir` with a text extension, sorted, skipping hidden names (so that no
/// `.gitignore`/`.gitattributes` changes what git or rg see) and symlinks.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.filter_map(|e| e.ok()).collect();
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            walk(&path, out);
        } else if kind.is_file()
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| EXTENSIONS.contains(&e))
        {
            out.push(path);
        }
    }
}

/// `git` in `dir` without global or system configuration, with a fixed identity.
pub fn git_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("LC_ALL", "C.UTF-8")
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "commit.gpgsign=false",
        ]);
    cmd
}

/// Runs `git` in `dir`; answers its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let out = git_command(dir).args(args).output()?;
    if !out.status.success() {
        bail!(
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Opens a store in `data_dir`, registers the corpus `tree` as `repo` and syncs it (a `git
/// fetch` into the bare mirror); answers the store and the head's full SHA.
pub fn register_corpus(
    data_dir: &Path,
    repo: &str,
    tree: &Path,
) -> Result<(gitstore::GitStore, String)> {
    let store = gitstore::GitStore::open(
        gitstore::StoreConfig {
            data_dir: data_dir.to_path_buf(),
            retention: gitstore::DEFAULT_RETENTION,
        },
        std::sync::Arc::new(gitstore::SystemClock),
    )?;
    let name = gitstore::RepoName::parse(repo)?;
    store.register(gitstore::Registration {
        name: name.clone(),
        source: format!("file://{}", tree.display()),
        registered_path: gitstore::RepoPath::root(),
        branch: None,
        private: None,
    })?;
    let head = store
        .sync(&name)?
        .head
        .context("the corpus has a head")?
        .to_string();
    Ok((store, head))
}
