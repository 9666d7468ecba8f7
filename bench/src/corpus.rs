//! The corpus of the search and navigation benchmarks: text sources copied from cargo's
//! registry (`~/.cargo/registry/src`) into a new Git repository, or a real repository
//! ([`clone_history`], [`extract_tree`]); and what the search benchmarks share: the
//! production path they drive ([`Harness`]), the baselines' runs ([`timed`],
//! [`git_grep_hits`]) and the figures ([`median`], [`verdict`]).

use anyhow::{Context, Result, bail};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

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

/// The bare mirror the service reads `repo` from, under `store`'s storage root (`git grep`
/// and `git log` run there: the same objects and commit the service searches).
pub fn mirror_dir(store: &gitstore::GitStore, repo: &str) -> PathBuf {
    store.storage_root().join(format!("mirrors/{repo}.git"))
}

/// Writes the blobs of `commit`'s tree in the repository `repo` into the new directory `dest`
/// exactly as stored (no checkout filters or end-of-line conversion, which `git archive` and
/// `checkout` would apply): the tree `rg` and `csearch` search beside `git grep` on the
/// commit. Symbolic links become files holding their target, as `git grep` reads them;
/// submodules are left out. Answers the files written (paths in tree order) and their bytes.
pub fn extract_tree(repo: &Path, commit: &str, dest: &Path) -> Result<Corpus> {
    use std::io::{BufReader, Write};
    let listing = git_command(repo)
        .args(["ls-tree", "-r", "-z", commit])
        .output()?;
    if !listing.status.success() {
        bail!(
            "git ls-tree {commit} in {} failed: {}",
            repo.display(),
            String::from_utf8_lossy(&listing.stderr).trim()
        );
    }
    let mut blobs = Vec::new();
    for entry in listing.stdout.split(|&b| b == 0).filter(|e| !e.is_empty()) {
        let entry = std::str::from_utf8(entry).context("a path that is not UTF-8")?;
        let (meta, path) = entry
            .split_once('\t')
            .context("ls-tree entry without a tab")?;
        let fields: Vec<&str> = meta.split_whitespace().collect();
        if let [_, "blob", id] = fields[..] {
            blobs.push((id.to_owned(), path.to_owned()));
        }
    }
    let mut child = git_command(repo)
        .args(["cat-file", "--batch"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let input: String = blobs.iter().map(|(id, _)| format!("{id}\n")).collect();
    let mut stdin = child.stdin.take().context("cat-file stdin")?;
    // Written from a thread: cat-file's output is read meanwhile, or both block on full pipes.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut stdout = BufReader::new(child.stdout.take().context("cat-file stdout")?);
    let (mut header, mut bytes) = (String::new(), Vec::new());
    let mut corpus = Corpus {
        files: Vec::with_capacity(blobs.len()),
        bytes: 0,
        crates: 0,
    };
    for (_, path) in &blobs {
        let size = crate::read_batch_object(&mut stdout, &mut header, &mut bytes)?;
        let target = dest.join(path);
        std::fs::create_dir_all(target.parent().context("file has a parent")?)?;
        std::fs::write(&target, &bytes)?;
        corpus.files.push(path.clone());
        corpus.bytes += size as u64;
    }
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("the cat-file writer panicked"))??;
    child.wait()?;
    Ok(corpus)
}

/// A bare clone of a real repository made by [`clone_history`].
pub struct HistoryClone {
    /// The clone (the service registers it as a local source).
    pub dir: PathBuf,
    /// The given repository's head, full SHA.
    pub source_head: String,
    /// When the given repository misses objects (a partial clone, as the moby mirror is):
    /// how many first-parent commits were rewritten as a linear history of the same trees.
    pub linearized: Option<usize>,
}

/// Clones `repo` (bare, `--shared`: `repo` is never written) into `dest`, its default branch
/// only, keeping its history so the service can register it and search old commits. A history
/// with missing objects cannot be fetched from: then the last `keep` first-parent commits
/// become a linear history of the same trees (the files at each commit are real; only the
/// commit ids change), and the rest is left out.
pub fn clone_history(repo: &Path, dest: &Path, keep: usize) -> Result<HistoryClone> {
    let (source_head, missing) = crate::shared_bare_clone(repo, dest)?;
    let missing = missing > 0;
    if !missing {
        return Ok(HistoryClone {
            dir: dest.to_path_buf(),
            source_head,
            linearized: None,
        });
    }
    let chain = git(
        dest,
        &[
            "log",
            "--first-parent",
            "--format=%H %T",
            "-n",
            &keep.to_string(),
            "HEAD",
        ],
    )?;
    let mut tip: Option<String> = None;
    let mut count = 0;
    for line in chain.lines().rev() {
        let (commit, tree) = line.split_once(' ').context("log line without a tree")?;
        let message = format!("the tree of {commit}");
        let mut args = vec!["commit-tree", tree, "-m", &message];
        if let Some(parent) = &tip {
            args.extend(["-p", parent.as_str()]);
        }
        tip = Some(git(dest, &args)?);
        count += 1;
    }
    let tip = tip.context("the repository has no commits")?;
    let branch = git(dest, &["symbolic-ref", "HEAD"])?;
    git(dest, &["update-ref", &branch, &tip])?;
    Ok(HistoryClone {
        dir: dest.to_path_buf(),
        source_head,
        linearized: Some(count),
    })
}

/// The median of `samples` (not empty).
pub fn median(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// How a target line starts.
pub fn verdict(pass: bool) -> &'static str {
    if pass { "PASS" } else { "MISS" }
}

/// Runs `cmd` (stdin closed) and answers its wall time and stdout; exit status 1 ("no match"
/// for `git grep`, `rg` and `csearch`) is not a failure.
pub fn timed(mut cmd: Command) -> Result<(Duration, Vec<u8>)> {
    cmd.stdin(std::process::Stdio::null());
    let program = cmd.get_program().to_string_lossy().into_owned();
    let t = Instant::now();
    let out = cmd.output().with_context(|| {
        format!("running {program}; scripts/bench-deps.sh installs the baselines")
    })?;
    let elapsed = t.elapsed();
    if !out.status.success() && out.status.code() != Some(1) {
        bail!(
            "{program} {:?} failed: {}",
            cmd.get_args().collect::<Vec<_>>(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok((elapsed, out.stdout))
}

/// Lines of `out`.
pub fn line_count(out: &[u8]) -> u64 {
    out.iter().filter(|&&b| b == b'\n').count() as u64
}

/// The (path, line) hits of `git grep -n -z … COMMIT` output (`COMMIT:path\0line\0text`).
pub fn git_grep_hits(out: &[u8], commit: &str) -> Result<BTreeSet<(String, u64)>> {
    let mut hits = BTreeSet::new();
    for record in out.split(|&b| b == b'\n').filter(|r| !r.is_empty()) {
        let mut fields = record.splitn(3, |&b| b == 0);
        let path = fields.next().context("git grep record without path")?;
        let line = fields.next().context("git grep record without line")?;
        let path = String::from_utf8_lossy(path);
        let path = path
            .strip_prefix(commit)
            .and_then(|p| p.strip_prefix(':'))
            .unwrap_or(&path)
            .to_owned();
        let line: u64 = std::str::from_utf8(line)?.parse()?;
        hits.insert((path, line));
    }
    Ok(hits)
}

/// A first page's total: `N`, or `>=N` when the search stopped counting once the page was
/// full (S-10).
pub fn total(stats: &service::SearchStatsAnswer) -> String {
    if stats.truncated {
        format!(">={}", stats.total_hits)
    } else {
        stats.total_hits.to_string()
    }
}

/// Set differences of two hit sets, for a mismatch line: `"; only ours N e.g. […]; only
/// git M e.g. […]"`, empty when they are equal.
pub fn difference<T: Ord + std::fmt::Debug>(ours: &BTreeSet<T>, theirs: &BTreeSet<T>) -> String {
    if ours == theirs {
        return String::new();
    }
    let only_ours: Vec<_> = ours.difference(theirs).take(3).collect();
    let only_theirs: Vec<_> = theirs.difference(ours).take(3).collect();
    format!(
        "; only ours {} e.g. {only_ours:?}; only git {} e.g. {only_theirs:?}",
        ours.difference(theirs).count(),
        theirs.difference(ours).count()
    )
}

/// The production path a benchmark drives: a runtime and a `service::Service` over a
/// `gitstore::GitStore` in a data directory, with one registered repository.
pub struct Harness {
    pub runtime: tokio::runtime::Runtime,
    pub service: service::Service,
    /// The registered repository's name.
    pub repo: String,
    /// The bare mirror the service reads.
    pub mirror: PathBuf,
    /// The head the sync fetched, full SHA.
    pub head: String,
    /// Wall time of registration and sync (a `git fetch` into the bare mirror).
    pub sync_time: Duration,
}

/// All pages of one search, cursor by cursor.
pub struct AllPages {
    /// (path, line) of every line hit.
    pub lines: BTreeSet<(String, u64)>,
    /// The commits the answers name per repository (the searched commit).
    pub searched: BTreeSet<String>,
    /// The `commit` of every hit (commit and diff searches), in answer order, repeats removed.
    pub hit_commits: Vec<String>,
    pub pages: usize,
}

impl Harness {
    /// Registers `source` (a local repository) as `repo` in a store in `data_dir`, syncs it and
    /// starts a service with `index` settings.
    pub fn register(
        data_dir: &Path,
        repo: &str,
        source: &Path,
        index: service::IndexConfig,
    ) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let t = Instant::now();
        let (store, head) = register_corpus(data_dir, repo, source)?;
        let sync_time = t.elapsed();
        let mirror = mirror_dir(&store, repo);
        if !mirror.is_dir() {
            bail!("the service's mirror is not at {}", mirror.display());
        }
        let service = {
            let _context = runtime.enter();
            service::Service::new(
                store,
                service::ServiceConfig {
                    index,
                    ..service::ServiceConfig::default()
                },
            )
        };
        Ok(Harness {
            runtime,
            service,
            repo: repo.to_owned(),
            mirror,
            head,
            sync_time,
        })
    }

    /// Builds the index of the head (`Service::index`); answers its statistics and wall time.
    pub fn index(&self) -> Result<(service::BuildStats, Duration)> {
        let t = Instant::now();
        let stats = self
            .runtime
            .block_on(self.service.index(self.repo.clone(), |_| {}))?;
        Ok((stats, t.elapsed()))
    }

    /// One `Service::search` as a local caller.
    pub fn search(&self, req: service::SearchRequest) -> Result<service::SearchAnswer> {
        Ok(self
            .runtime
            .block_on(self.service.search(&service::CallContext::default(), req))?)
    }

    /// `req` and its later pages (limit [`search::MAX_LIMIT`]) to the end.
    pub fn all_pages(&self, mut req: service::SearchRequest) -> Result<AllPages> {
        req.limit = Some(search::MAX_LIMIT);
        req.cursor = None;
        let mut all = AllPages {
            lines: BTreeSet::new(),
            searched: BTreeSet::new(),
            hit_commits: Vec::new(),
            pages: 0,
        };
        let mut seen = std::collections::HashSet::new();
        loop {
            let answer = self.search(req.clone())?;
            all.pages += 1;
            for repo in &answer.repos {
                all.searched.insert(repo.commit.clone());
                for hit in &repo.hits {
                    if let Some(line) = hit.line {
                        all.lines.insert((hit.path.clone(), line));
                    }
                    if let Some(commit) = &hit.commit
                        && seen.insert(commit.clone())
                    {
                        all.hit_commits.push(commit.clone());
                    }
                }
            }
            match answer.next_cursor {
                Some(next) => req.cursor = Some(next),
                None => return Ok(all),
            }
        }
    }
}

/// A search pattern as the request and the baselines take it.
#[derive(Clone, Debug)]
pub struct Pattern {
    pub text: String,
    /// A regex (Rust `regex` for us, PCRE for `git grep -P`); else literal text.
    pub regex: bool,
    pub case_sensitive: bool,
}

impl Pattern {
    /// Case-sensitive literal text.
    pub fn literal(text: &str) -> Self {
        Pattern {
            text: text.to_owned(),
            regex: false,
            case_sensitive: true,
        }
    }

    /// A case-sensitive regex.
    pub fn regex(text: &str) -> Self {
        Pattern {
            regex: true,
            ..Pattern::literal(text)
        }
    }

    /// Case-insensitive literal text.
    pub fn literal_i(text: &str) -> Self {
        Pattern {
            case_sensitive: false,
            ..Pattern::literal(text)
        }
    }

    /// `/regex/`, `"literal"`, with ` -i` when case-insensitive.
    pub fn label(&self) -> String {
        let mut label = if self.regex {
            format!("/{}/", self.text)
        } else {
            format!("{:?}", self.text)
        };
        if !self.case_sensitive {
            label.push_str(" -i");
        }
        label
    }

    /// A code search of `repo` for it, first page of `limit`.
    pub fn request(&self, repo: &str, limit: usize) -> service::SearchRequest {
        service::SearchRequest {
            query: self.text.clone(),
            repo: Some(repo.to_owned()),
            regex: self.regex,
            case_sensitive: self.case_sensitive,
            limit: Some(limit),
            ..service::SearchRequest::default()
        }
    }

    /// `grep -n EXTRA (-P|-F) [-i] -e TEXT COMMIT`: the arguments of `git grep` on `commit`.
    pub fn git_grep_args(&self, commit: &str, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = vec!["grep".into(), "-n".into()];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(if self.regex { "-P" } else { "-F" }.into());
        if !self.case_sensitive {
            args.push("-i".into());
        }
        args.extend(["-e".into(), self.text.clone(), commit.into()]);
        args
    }
}
