//! Running the `git` CLI for the few things gix does not do for us here: fetching, writing
//! our own bookkeeping refs and pruning. Never on the read path.
//!
//! This is the only place the process starts a subprocess, so it is also where shutdown
//! reaches them (O-6): [`stop_all`] kills every running command (with the helpers it started:
//! `git-upload-pack`, an ssh, a remote helper) and refuses new ones.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::ops::{Deref, DerefMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How long a fetch (or `ls-remote`) may take before it is killed: a hung network peer must
/// not hold the repository's maintenance lock forever.
pub(crate) const FETCH_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Local bookkeeping commands (`init`, `update-ref`, `for-each-ref`).
pub(crate) const LOCAL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Garbage collection of a large mirror can take a long time.
pub(crate) const GC_TIMEOUT: Duration = Duration::from_secs(2 * 60 * 60);
/// A check that a source answers before it is registered ([`ls_remote`]): a person waits for
/// it, and a source that lists nothing within a minute will not be fetched either.
pub(crate) const CHECK_TIMEOUT: Duration = Duration::from_secs(60);

/// After the process exited, how long we wait for its pipes to close: a grandchild (an ssh
/// control master, say) may keep them open, and we must not wait for it.
const PIPE_GRACE: Duration = Duration::from_secs(5);

/// Why a git command failed. Carries raw text that may hold host paths: callers sanitise it
/// before it reaches an [`crate::Error`].
#[derive(Debug)]
pub(crate) enum GitFailure {
    /// `git` could not be started at all.
    Spawn(std::io::Error),
    /// The command ran past its timeout and was killed.
    Timeout,
    /// The process is shutting down: the command was killed, or never started (O-6).
    Stopped,
    /// Non-zero exit.
    Exit { code: Option<i32>, stderr: String },
}

impl std::fmt::Display for GitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitFailure::Spawn(e) => write!(f, "could not run git: {e}"),
            GitFailure::Timeout => f.write_str("git timed out"),
            GitFailure::Stopped => f.write_str("git was stopped: the server is shutting down"),
            GitFailure::Exit { code, stderr } => {
                write!(f, "git exited with {code:?}: {}", stderr.trim())
            }
        }
    }
}

/// Set once by [`stop_all`]; every running command polls it.
static STOPPING: AtomicBool = AtomicBool::new(false);

/// Kills every `git` command this process runs, and refuses to start new ones, for the rest
/// of the process's life (O-6: a shutdown must not wait up to the two hours a gc may take,
/// nor leave a hung fetch behind as an orphan). Lock files a killed command left in its
/// repository are removed, so the next start is not refused by them. Returns at once; each
/// running command notices within 50 ms.
pub fn stop_all() {
    STOPPING.store(true, Ordering::SeqCst);
}

fn stopping() -> bool {
    STOPPING.load(Ordering::SeqCst)
}

/// A `git` command and the repository it works on (where its lock files are, should it have
/// to be killed). Derefs to the [`Command`] to add arguments.
pub(crate) struct GitCommand {
    cmd: Command,
    git_dir: Option<PathBuf>,
}

impl Deref for GitCommand {
    type Target = Command;
    fn deref(&self) -> &Command {
        &self.cmd
    }
}

impl DerefMut for GitCommand {
    fn deref_mut(&mut self) -> &mut Command {
        &mut self.cmd
    }
}

/// A `git` command with an environment that can neither prompt nor be redirected by the
/// variables of whatever process started the server.
pub(crate) fn git(git_dir: Option<&Path>) -> GitCommand {
    let mut cmd = Command::new("git");
    for var in [
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_COMMON_DIR",
        "GIT_QUARANTINE_PATH",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0");
    // Sources come from API callers: only the transports git allows unconditionally (plus
    // `file`, below), never "user"-level ones such as arbitrary remote helpers.
    cmd.env("GIT_PROTOCOL_FROM_USER", "0");
    // Keep git's messages in English: we pick lines out of them.
    cmd.env("LC_ALL", "C");
    cmd.env("LANGUAGE", "C");
    cmd.arg("-c").arg("protocol.file.allow=always");
    // We decide when to collect garbage (G-5, G-8); git must never do it behind our back.
    cmd.arg("-c").arg("gc.auto=0");
    cmd.arg("-c").arg("maintenance.auto=false");
    if let Some(dir) = git_dir {
        cmd.arg(OsStr::new("--git-dir")).arg(dir);
    }
    // A process group of its own: a timeout or shutdown kills git together with the helpers
    // it started (a local fetch runs `sh -c git-upload-pack`; killing only git would leave
    // those running), and a terminal's Ctrl-C reaches only us; we decide what stops.
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    GitCommand {
        cmd,
        git_dir: git_dir.map(Path::to_path_buf),
    }
}

/// Runs `cmd` with `stdin` (or none), capturing stdout and stderr, killing it after `timeout`
/// or when the process shuts down ([`stop_all`]).
pub(crate) fn run(
    command: GitCommand,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<Vec<u8>, GitFailure> {
    run_observed(command, stdin, timeout, None)
}

/// `git ls-remote --symref -- SOURCE PATTERNS…` outside any repository, under `timeout`: what
/// the source lists (`<sha>\t<ref>` lines, `ref: <target>\tHEAD` for a symbolic HEAD). The
/// patterns keep a source with many refs from listing them all.
pub(crate) fn ls_remote(
    source: &str,
    patterns: &[&str],
    timeout: Duration,
) -> Result<Vec<u8>, GitFailure> {
    let mut cmd = git(None);
    cmd.args(["ls-remote", "--symref", "--", source]);
    cmd.args(patterns);
    run(cmd, None, timeout)
}

/// One progress report of a running transfer, as git prints it on stderr with `--progress`
/// (`Receiving objects:  45% (450/1000)`; `remote: Enumerating objects: 202, done.`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferProgress {
    /// What git is doing: `Counting objects`, `Receiving objects`, `Resolving deltas`, …
    pub phase: String,
    /// Units done so far.
    pub done: u64,
    /// Units in the phase, when git knows them.
    pub total: Option<u64>,
}

/// Receives [`TransferProgress`] reports on the thread that runs the command.
pub type ProgressObserver<'a> = &'a mut dyn FnMut(&TransferProgress);

/// [`run`] that hands git's progress lines to `observer` as they come (the rest of stderr is
/// kept for the failure text). The command must be told `--progress`.
pub(crate) fn run_observed(
    command: GitCommand,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
    mut observer: Option<ProgressObserver<'_>>,
) -> Result<Vec<u8>, GitFailure> {
    let GitCommand { mut cmd, git_dir } = command;
    if stopping() {
        return Err(GitFailure::Stopped);
    }
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    cmd.stdout(Stdio::piped());
    cmd.stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(GitFailure::Spawn)?;

    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A writer thread: git may fill its output pipes before it has read all input.
        thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
    }
    let stdout = child.stdout.take().map(spawn_reader);
    let stderr = child.stderr.take().map(spawn_segment_reader);
    let mut err = Vec::new();
    let mut absorb = |segment: Vec<u8>| match (observer.as_mut(), parse_progress(&segment)) {
        (Some(observer), Some(progress)) => observer(&progress),
        _ => err.extend_from_slice(&segment),
    };

    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                if let Some(rx) = &stderr {
                    rx.try_iter().for_each(&mut absorb);
                }
                let failure = if stopping() {
                    GitFailure::Stopped
                } else if started.elapsed() > timeout {
                    GitFailure::Timeout
                } else {
                    thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                    continue;
                };
                kill_group(&mut child);
                if let Some(dir) = &git_dir {
                    remove_stale_locks(dir);
                }
                return Err(failure);
            }
            Err(e) => return Err(GitFailure::Spawn(e)),
        }
    };
    let out = stdout
        .and_then(|rx| rx.recv_timeout(PIPE_GRACE).ok())
        .unwrap_or_default();
    if let Some(rx) = stderr {
        let deadline = Instant::now() + PIPE_GRACE;
        while let Ok(segment) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            absorb(segment);
        }
    }
    if status.success() {
        Ok(out)
    } else {
        Err(GitFailure::Exit {
            code: status.code(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        })
    }
}

/// Kills `child` and everything in its process group, then reaps it.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) has no memory effects; the group is the one `git()` created for
        // this child (its pid is the group id) and the child is not reaped yet, so the id
        // cannot have been reused.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// After a command on `git_dir` was killed: removes the lock files git takes while it updates
/// refs, the config or shallow info (`packed-refs.lock`, `refs/heads/main.lock`, …). The
/// killed command held them, under the repository's maintenance lock, so nobody else does;
/// left behind, they would make every later fetch and ref update fail ("File exists").
/// Half-written packs (`objects/pack/tmp_*`) are harmless and left to gc.
fn remove_stale_locks(git_dir: &Path) {
    for name in [
        "packed-refs.lock",
        "HEAD.lock",
        "config.lock",
        "shallow.lock",
    ] {
        let _ = std::fs::remove_file(git_dir.join(name));
    }
    remove_locks_below(&git_dir.join("refs"), 0);
}

fn remove_locks_below(dir: &Path, depth: usize) {
    // Ref names are short paths; the bound only guards against a pathological tree.
    if depth > 64 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => remove_locks_below(&path, depth + 1),
            Ok(kind) if kind.is_file() && path.extension().is_some_and(|e| e == "lock") => {
                let _ = std::fs::remove_file(&path);
            }
            _ => {}
        }
    }
}

fn spawn_reader<R: Read + Send + 'static>(mut pipe: R) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// Reads `pipe` to its end in segments that each end at a `\r` or `\n` (git redraws a
/// progress line with `\r`), sent as they complete; the channel closes at the end.
fn spawn_segment_reader<R: Read + Send + 'static>(mut pipe: R) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut pending = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            pending.extend_from_slice(&buf[..n]);
            while let Some(end) = pending.iter().position(|&b| b == b'\r' || b == b'\n') {
                if tx.send(pending.drain(..=end).collect()).is_err() {
                    return;
                }
            }
        }
        if !pending.is_empty() {
            let _ = tx.send(pending);
        }
    });
    rx
}

/// The progress report in one stderr segment, or `None` for anything else. Strict on
/// purpose: the `remote:` lines come from the source, and a failure message must never be
/// taken for progress and lost.
fn parse_progress(segment: &[u8]) -> Option<TransferProgress> {
    let text = std::str::from_utf8(segment).ok()?.trim();
    let text = text.strip_prefix("remote:").map_or(text, str::trim_start);
    let (phase, rest) = text.split_once(':')?;
    let phase = phase.trim();
    let plain = |s: &str| s.bytes().all(|b| b.is_ascii_alphabetic() || b == b' ');
    if phase.is_empty() || phase.len() > 40 || !plain(phase) {
        return None;
    }
    let number = |s: &str| -> Option<u64> {
        (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let rest = rest.trim();
    let (done, total) = match rest.split_once('%') {
        // `45% (450/1000)`, then perhaps `, 1.00 MiB | 2.00 MiB/s` or `, done.`
        Some((percent, counts)) => {
            number(percent.trim())?;
            let counts = counts.trim_start().strip_prefix('(')?;
            let (done, total) = counts.split_once(')')?.0.split_once('/')?;
            (number(done)?, Some(number(total)?))
        }
        // `202` or `202, done.`
        None => (number(rest.strip_suffix(", done.").unwrap_or(rest))?, None),
    };
    Some(TransferProgress {
        phase: phase.to_string(),
        done,
        total,
    })
}

/// A one-line, path-free description of a failure, fit for `last_error` (G-3).
///
/// `secrets` are strings that must not appear (the source, which may carry credentials or a
/// host path, the data directory, the mirror path); each is replaced by its placeholder.
pub(crate) fn describe(failure: &GitFailure, secrets: &[(&str, &str)]) -> String {
    match failure {
        GitFailure::Spawn(_) => "git could not be started on the server".to_string(),
        GitFailure::Timeout => "git did not finish in time".to_string(),
        GitFailure::Stopped => {
            "the sync was stopped because the server shut down; the next sync retries".to_string()
        }
        GitFailure::Exit { code, stderr } => match meaningful_line(stderr) {
            Some(line) => sanitize(line, secrets),
            None => format!("git exited with status {}", code.unwrap_or(-1)),
        },
    }
}

/// Git's first line that says what went wrong: `fatal:`/`error:` lines first, hints and
/// warnings only if nothing else was said.
fn meaningful_line(stderr: &str) -> Option<&str> {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("hint:"))
        .collect();
    let pick = lines
        .iter()
        .find(|l| l.starts_with("fatal:") || l.starts_with("error:"))
        .or_else(|| lines.iter().find(|l| !l.starts_with("warning:")))
        .or_else(|| lines.first())?;
    let line = pick
        .strip_prefix("fatal:")
        .or_else(|| pick.strip_prefix("error:"))
        .unwrap_or(pick)
        .trim();
    (!line.is_empty()).then_some(line)
}

/// Replaces the secrets, then any remaining quoted absolute path, and bounds the length.
pub(crate) fn sanitize(text: &str, secrets: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    let mut secrets: Vec<&(&str, &str)> = secrets.iter().filter(|(s, _)| s.len() > 1).collect();
    // Longest first, so a mirror path below the data directory is replaced as a whole.
    secrets.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    for (secret, placeholder) in secrets {
        out = out.replace(secret, placeholder);
    }
    out = scrub_quoted_paths(&out);
    out = out.chars().filter(|c| !c.is_control()).collect();
    if out.chars().count() > 300 {
        out = out.chars().take(300).collect::<String>() + "…";
    }
    out
}

/// `'/some/host/path'` → `'<path>'`: git quotes the paths it complains about, and a path we
/// did not know to replace (a symlink-resolved form, say) must still not leak.
fn scrub_quoted_paths(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('\'') {
        out.push_str(&rest[..=start]);
        rest = &rest[start + 1..];
        match rest.find('\'') {
            Some(end) => {
                let quoted = &rest[..end];
                if quoted.starts_with('/') || quoted.starts_with("~/") {
                    out.push_str("<path>");
                } else {
                    out.push_str(quoted);
                }
                out.push('\'');
                rest = &rest[end + 1..];
            }
            None => break,
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// G-3: `last_error` keeps git's reason and never a host path.
    #[test]
    fn g3_failure_text_is_path_free() {
        let failure = GitFailure::Exit {
            code: Some(128),
            stderr: "hint: foo\nfatal: '/tmp/x/src' does not appear to be a git repository\nfatal: Could not read from remote repository.\n".into(),
        };
        let text = describe(&failure, &[("/tmp/x/src", "<source>")]);
        assert_eq!(text, "'<source>' does not appear to be a git repository");
        let text = describe(&failure, &[]);
        assert_eq!(text, "'<path>' does not appear to be a git repository");
        let empty = GitFailure::Exit {
            code: Some(1),
            stderr: String::new(),
        };
        assert_eq!(describe(&empty, &[]), "git exited with status 1");
    }

    /// O-5: git's progress lines are recognised, everything else (a failure above all) is not.
    #[test]
    fn o5_progress_lines_are_parsed_strictly() {
        let parse = |s: &str| parse_progress(s.as_bytes());
        assert_eq!(
            parse("Receiving objects:  45% (450/1000), 1.00 MiB | 2.00 MiB/s\r"),
            Some(TransferProgress {
                phase: "Receiving objects".into(),
                done: 450,
                total: Some(1000),
            })
        );
        assert_eq!(
            parse("remote: Enumerating objects: 202, done.\n"),
            Some(TransferProgress {
                phase: "Enumerating objects".into(),
                done: 202,
                total: None,
            })
        );
        assert_eq!(
            parse("Resolving deltas: 100% (3/3), done.\n").map(|p| p.total),
            Some(Some(3))
        );
        for other in [
            "fatal: '/x' does not appear to be a git repository\n",
            "error: 1 object missing\n",
            "remote: fatal: 2 (a/b)\n",
            "warning: redirecting to https://x/: 5\n",
            "remote: Counting objects: many\n",
            "",
        ] {
            assert_eq!(parse(other), None, "{other:?}");
        }
    }

    /// O-5: a fetch told `--progress` reports its phases to the observer while its failure
    /// text stays clean of them.
    #[test]
    fn o5_observed_fetch_reports_progress() {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("source");
        let mirror = tmp.path().join("mirror");
        let mut init = git(None);
        init.args(["init", "--quiet"]).arg(&source);
        run(init, None, LOCAL_TIMEOUT).unwrap();
        // Over git's unpack limit (100 objects): a pack that is received with progress.
        for i in 0..150 {
            std::fs::write(source.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
        }
        let mut add = git(None);
        add.arg("-C").arg(&source).args(["add", "."]);
        run(add, None, LOCAL_TIMEOUT).unwrap();
        let mut commit = git(None);
        commit.arg("-C").arg(&source).args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "--quiet",
            "-m",
            "x",
        ]);
        run(commit, None, LOCAL_TIMEOUT).unwrap();
        let mut init = git(None);
        init.args(["init", "--bare", "--quiet"]).arg(&mirror);
        run(init, None, LOCAL_TIMEOUT).unwrap();

        let mut seen = Vec::new();
        let mut fetch = git(Some(&mirror));
        fetch
            .args(["fetch", "--progress", "--"])
            .arg(&source)
            .arg("+refs/heads/*:refs/heads/*");
        run_observed(
            fetch,
            None,
            LOCAL_TIMEOUT,
            Some(&mut |p| seen.push(p.clone())),
        )
        .unwrap();
        // A small pack is unpacked into loose objects, a large one kept as it came.
        let receiving: Vec<_> = seen
            .iter()
            .filter(|p| ["Receiving objects", "Unpacking objects"].contains(&p.phase.as_str()))
            .collect();
        assert!(!receiving.is_empty(), "{seen:?}");
        let last = receiving.last().unwrap();
        assert_eq!(Some(last.done), last.total, "{seen:?}");

        let mut broken = git(Some(&mirror));
        broken
            .args(["fetch", "--progress", "--"])
            .arg(tmp.path().join("missing"));
        let failure = run_observed(broken, None, LOCAL_TIMEOUT, Some(&mut |_| {})).unwrap_err();
        assert!(
            describe(&failure, &[]).contains("does not appear to be a git repository"),
            "{failure}"
        );
    }

    #[test]
    fn run_reports_exit_and_output() {
        let mut cmd = git(None);
        cmd.arg("--version");
        let out = run(cmd, None, LOCAL_TIMEOUT).unwrap();
        assert!(String::from_utf8_lossy(&out).starts_with("git version"));
        let mut cmd = git(None);
        cmd.arg("no-such-subcommand-here");
        assert!(matches!(
            run(cmd, None, LOCAL_TIMEOUT),
            Err(GitFailure::Exit { .. })
        ));
    }

    /// O-6: a killed command takes the helpers it started along (here the `git-upload-pack`
    /// of a local source, stuck opening a FIFO its config includes) and leaves no lock file
    /// in the repository it worked on.
    #[cfg(target_os = "linux")]
    #[test]
    fn o6_killed_git_takes_its_helpers_and_locks_along() {
        let tmp = tempfile::tempdir().unwrap();
        let source = tmp.path().join("source");
        let mirror = tmp.path().join("mirror");
        for dir in [&source, &mirror] {
            let mut init = git(None);
            init.args(["init", "--bare", "--quiet"]).arg(dir);
            run(init, None, LOCAL_TIMEOUT).unwrap();
        }
        let hung = testgit::HungFetches::bare(&source);
        std::fs::create_dir_all(mirror.join("refs/heads")).unwrap();
        std::fs::write(mirror.join("refs/heads/main.lock"), "").unwrap();
        std::fs::write(mirror.join("packed-refs.lock"), "").unwrap();

        let mut cmd = git(Some(&mirror));
        cmd.arg("ls-remote").arg("--").arg(&source);
        let failure = run(cmd, None, Duration::from_millis(300)).unwrap_err();
        assert!(matches!(failure, GitFailure::Timeout), "{failure}");
        assert!(!mirror.join("refs/heads/main.lock").exists());
        assert!(!mirror.join("packed-refs.lock").exists());
        // SIGKILL is delivered at once but a process exits asynchronously: look again for a
        // moment. (A zombie holds nothing; a live helper would block here until its timeout.)
        let mut gone = false;
        for _ in 0..500 {
            if !hung.blocked() {
                gone = true;
                break;
            }
            thread::sleep(Duration::from_millis(10));
        }
        assert!(gone, "git-upload-pack survived its git");
    }
}
