//! Shared parts of the benchmarks (each benchmark is a binary under `src/bin/`).

pub mod corpus;
pub mod cpu;

/// The command line (after the program) as `--flag value` pairs; `--help` or `-h` prints
/// `usage` and exits. A flag without a value is an error that shows `usage`.
pub fn flag_pairs(usage: &str) -> Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "--help" || flag == "-h" {
            println!("{usage}");
            std::process::exit(0);
        }
        let value = args
            .next()
            .with_context(|| format!("{flag} takes a value\n{usage}"))?;
        pairs.push((flag, value));
    }
    Ok(pairs)
}

/// `value`, the value of `flag`, as a number.
pub fn flag_number<T: std::str::FromStr>(flag: &str, value: &str, usage: &str) -> Result<T> {
    value
        .parse()
        .map_err(|_| anyhow::anyhow!("{flag} takes a number\n{usage}"))
}

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default big repository of `bench/soak` and `bench/pybuild`: the moby/moby mirror of
/// this machine (a partial clone; its head's tree is about 106 MB).
pub const DEFAULT_BIG_REPO: &str = "/work/.mirror/moby+moby/repo";

/// A head tree of at least this many bytes makes a "repository of 100 MB or more".
pub const BIG_REPO_BYTES: u64 = 100 * 1024 * 1024;

/// The `p` quantile (0.0..=1.0) of `times`, nearest rank; sorts them. `times` must not be
/// empty.
pub fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort_unstable();
    times[((times.len() - 1) as f64 * p).round() as usize]
}

/// Reads a `csg serve` child's stdout until its `MCP endpoint: URL` line and answers the URL,
/// within `within`; then keeps draining stdout on a task of its own, so the server never
/// writes into a full pipe. `log` is named in the error when the child exits first.
pub async fn mcp_endpoint(
    stdout: tokio::process::ChildStdout,
    within: Duration,
    log: &std::path::Path,
) -> anyhow::Result<String> {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(within, async {
        while let Some(line) = lines.next_line().await? {
            if let Some(url) = line.strip_prefix("MCP endpoint: ") {
                return anyhow::Ok(url.trim().to_string());
            }
        }
        anyhow::bail!(
            "csg serve exited before printing its endpoint; see {}",
            log.display()
        )
    })
    .await
    .map_err(|_| anyhow::anyhow!("csg serve printed no endpoint within {within:?}"))??;
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(url)
}

/// `git ARGS` in `dir` (identity and a clean environment from `testgit`), its trimmed stdout.
pub fn git(dir: &Path, args: &[&str]) -> Result<String> {
    git_input(dir, args, None)
}

/// [`git`] with `input` on its stdin.
pub fn git_input(dir: &Path, args: &[&str], input: Option<&[u8]>) -> Result<String> {
    let out = testgit::git_raw(dir, args, input);
    if !out.status.success() {
        bail!(
            "git {args:?} in {} failed: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// One blob of a head tree, as `git ls-tree -r -l` lists it.
pub struct HeadBlob {
    pub mode: String,
    pub id: String,
    pub size: u64,
    pub path: String,
}

/// The blobs of the tree of `HEAD` in the repository `dir` (submodules and other non-blobs
/// left out), in `ls-tree` order.
pub fn head_blobs(dir: &Path) -> Result<Vec<HeadBlob>> {
    let listing = git(dir, &["ls-tree", "-r", "-l", "-z", "HEAD"])?;
    let mut blobs = Vec::new();
    for entry in listing.split('\0').filter(|e| !e.is_empty()) {
        let (meta, path) = entry
            .split_once('\t')
            .context("ls-tree entry without a tab")?;
        let fields: Vec<&str> = meta.split_whitespace().collect();
        let [mode, kind, id, size] = fields[..] else {
            bail!("unexpected ls-tree entry `{entry}`");
        };
        if kind != "blob" {
            continue;
        }
        blobs.push(HeadBlob {
            mode: mode.to_string(),
            id: id.to_string(),
            size: size.parse().unwrap_or(0),
            path: path.to_string(),
        });
    }
    Ok(blobs)
}

/// A bare clone of a big repository made by [`clone_big_repo`].
pub struct BigClone {
    /// The clone (under the caller's directory).
    pub dir: PathBuf,
    /// The given repository's head, full SHA.
    pub source_head: String,
    /// Objects missing from the given repository's history; when not zero the clone's head
    /// is the tree of `source_head` as one root commit.
    pub missing: usize,
}

/// Clones `repo` (bare, `--shared`: `repo` is never written) into `dest`, its default branch
/// only, so the service can register it as a local source. A history with missing objects
/// (a partial clone, as the moby mirror is) cannot be fetched: then the clone's head becomes
/// its tree as one root commit. `who` prefixes the progress line on stderr and the commit
/// message.
pub fn clone_big_repo(repo: &Path, dest: &Path, who: &str) -> Result<BigClone> {
    eprintln!(
        "{who}: cloning {} (bare, --shared) into {}",
        repo.display(),
        dest.display()
    );
    let (source_head, missing) = shared_bare_clone(repo, dest)?;
    if missing > 0 {
        let root = git(
            dest,
            &[
                "commit-tree",
                "HEAD^{tree}",
                "-m",
                &format!("{who}: the tree of {source_head}"),
            ],
        )?;
        git(dest, &["update-ref", "HEAD", &root])?;
    }
    Ok(BigClone {
        dir: dest.to_path_buf(),
        source_head,
        missing,
    })
}

/// Clones `repo` into `dest` (bare, `--shared`, its default branch only, no tags: `repo` is
/// never written); answers the head and how many objects its history lacks (a partial clone,
/// as the moby mirror is, lacks some: then git cannot fetch from it).
pub fn shared_bare_clone(repo: &Path, dest: &Path) -> Result<(String, usize)> {
    let parent = dest.parent().context("the clone's path has a parent")?;
    git(
        parent,
        &[
            "clone",
            "-q",
            "--bare",
            "--shared",
            "--single-branch",
            "--no-tags",
            repo.to_str().context("the repository path is not UTF-8")?,
            dest.to_str().context("the clone path is not UTF-8")?,
        ],
    )?;
    let source_head = git(dest, &["rev-parse", "HEAD"])?;
    let missing = git(dest, &["rev-list", "--objects", "--missing=print", "HEAD"])?
        .lines()
        .filter(|l| l.starts_with('?'))
        .count();
    Ok((source_head, missing))
}

/// Reads one object of `git cat-file --batch`'s output into `body` (its header line read
/// through `header`); answers its size.
pub fn read_batch_object(
    stdout: &mut impl std::io::BufRead,
    header: &mut String,
    body: &mut Vec<u8>,
) -> Result<usize> {
    header.clear();
    stdout.read_line(header)?;
    let size: usize = header
        .split_whitespace()
        .nth(2)
        .with_context(|| format!("cat-file answered `{}`", header.trim()))?
        .parse()?;
    // The object, then the line break git adds after it.
    body.resize(size + 1, 0);
    stdout.read_exact(body)?;
    body.truncate(size);
    Ok(size)
}

/// An answer read off a [`KeepAlive`] connection.
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The `Content-Type`, lowercased (empty when absent).
    pub content_type: String,
    /// The body, de-chunked.
    pub body: Vec<u8>,
}

/// A keep-alive HTTP/1.1 connection, hand-written: what it sends is exactly what a benchmark
/// measures, and no HTTP client crate is needed (rmcp's own client opens a connection per
/// call, which the server pays for).
pub struct KeepAlive {
    stream: tokio::io::BufStream<tokio::net::TcpStream>,
    line: String,
}

impl KeepAlive {
    /// Connects to `authority` (`HOST:PORT`), with `TCP_NODELAY` as HTTP clients set it.
    pub async fn connect(authority: &str) -> Result<Self> {
        let stream = tokio::net::TcpStream::connect(authority)
            .await
            .with_context(|| format!("cannot connect to {authority}"))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream: tokio::io::BufStream::new(stream),
            line: String::new(),
        })
    }

    /// Sends `request` (a whole HTTP/1.1 request) and reads the answer (`Content-Length` or
    /// chunked).
    pub async fn exchange(&mut self, request: &[u8]) -> Result<HttpAnswer> {
        use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
        self.stream.write_all(request).await?;
        self.stream.flush().await?;
        self.line.clear();
        if self.stream.read_line(&mut self.line).await? == 0 {
            bail!("the server closed the connection");
        }
        let status: u16 = self
            .line
            .split_whitespace()
            .nth(1)
            .with_context(|| format!("malformed status line `{}`", self.line.trim()))?
            .parse()?;
        let (mut length, mut chunked, mut content_type) = (None, false, String::new());
        loop {
            self.line.clear();
            if self.stream.read_line(&mut self.line).await? == 0 {
                bail!("the server closed the connection in the headers");
            }
            let header = self.line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                let value = value.trim();
                if name.eq_ignore_ascii_case("content-length") {
                    length = Some(value.parse::<usize>()?);
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = value.eq_ignore_ascii_case("chunked");
                } else if name.eq_ignore_ascii_case("content-type") {
                    content_type = value.to_ascii_lowercase();
                }
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                self.line.clear();
                self.stream.read_line(&mut self.line).await?;
                let size =
                    usize::from_str_radix(self.line.trim().split(';').next().unwrap_or(""), 16)
                        .with_context(|| format!("malformed chunk size `{}`", self.line.trim()))?;
                let start = body.len();
                body.resize(start + size + 2, 0);
                self.stream.read_exact(&mut body[start..]).await?;
                body.truncate(start + size);
                if size == 0 {
                    break;
                }
            }
        } else {
            body.resize(
                length.context("an answer without Content-Length or chunks")?,
                0,
            );
            self.stream.read_exact(&mut body).await?;
        }
        Ok(HttpAnswer {
            status,
            content_type,
            body,
        })
    }
}

/// A text file of a head tree, as the read benchmarks read it whole.
#[derive(Debug, Clone)]
pub struct TextFile {
    /// Its path in the tree.
    pub path: String,
    /// Its lines (a last line without a newline counts).
    pub lines: u64,
    /// Its size.
    pub bytes: u64,
}

/// Lines of `text` as a reader numbers them: a last line without a newline counts.
pub fn line_count(text: &[u8]) -> u64 {
    let newlines = text.iter().filter(|&&b| b == b'\n').count() as u64;
    newlines + u64::from(!text.is_empty() && !text.ends_with(b"\n"))
}

/// The regular text files (no NUL, valid UTF-8) of the tree of `HEAD` in `dir` whose size is
/// in `sizes` and whose path `keep` accepts, read with one `git cat-file --batch`, in a
/// deterministic shuffle (the same list for the same tree, so runs compare).
pub fn text_files(
    dir: &Path,
    sizes: std::ops::RangeInclusive<u64>,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<TextFile>> {
    use std::io::{BufReader, Write};
    let sized: Vec<HeadBlob> = head_blobs(dir)?
        .into_iter()
        .filter(|b| {
            (b.mode == "100644" || b.mode == "100755") && sizes.contains(&b.size) && keep(&b.path)
        })
        .collect();
    let mut child = std::process::Command::new("git")
        .current_dir(dir)
        .args(["cat-file", "--batch"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let input: String = sized.iter().map(|b| format!("{}\n", b.id)).collect();
    let mut stdin = child.stdin.take().context("cat-file stdin")?;
    // Written from a thread: cat-file's output is read meanwhile, or both block on full pipes.
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let mut stdout = BufReader::new(child.stdout.take().context("cat-file stdout")?);
    let (mut header, mut text, mut files) = (String::new(), Vec::new(), Vec::new());
    for blob in &sized {
        let size = read_batch_object(&mut stdout, &mut header, &mut text)?;
        if text.contains(&0) || std::str::from_utf8(&text).is_err() {
            continue;
        }
        files.push(TextFile {
            path: blob.path.clone(),
            lines: line_count(&text),
            bytes: size as u64,
        });
    }
    writer
        .join()
        .map_err(|_| anyhow::anyhow!("the cat-file writer panicked"))??;
    child.wait()?;
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in (1..files.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        files.swap(i, (state % (i as u64 + 1)) as usize);
    }
    Ok(files)
}
