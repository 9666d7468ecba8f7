//! Running the `git` CLI for the few things gix does not do for us here: fetching, writing
//! our own bookkeeping refs and pruning. Never on the read path.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
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
    /// Non-zero exit.
    Exit { code: Option<i32>, stderr: String },
}

impl std::fmt::Display for GitFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GitFailure::Spawn(e) => write!(f, "could not run git: {e}"),
            GitFailure::Timeout => f.write_str("git timed out"),
            GitFailure::Exit { code, stderr } => {
                write!(f, "git exited with {code:?}: {}", stderr.trim())
            }
        }
    }
}

/// A `git` command with an environment that can neither prompt nor be redirected by the
/// variables of whatever process started the server.
pub(crate) fn git(git_dir: Option<&Path>) -> Command {
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
    cmd
}

/// Runs `cmd` with `stdin` (or none), capturing stdout and stderr, killing it after `timeout`.
pub(crate) fn run(
    mut cmd: Command,
    stdin: Option<Vec<u8>>,
    timeout: Duration,
) -> Result<Vec<u8>, GitFailure> {
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
    let stderr = child.stderr.take().map(spawn_reader);

    let started = Instant::now();
    let mut pause = Duration::from_millis(1);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                if started.elapsed() > timeout {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(GitFailure::Timeout);
                }
                thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(GitFailure::Spawn(e)),
        }
    };
    let collect = |rx: Option<mpsc::Receiver<Vec<u8>>>| {
        rx.and_then(|rx| rx.recv_timeout(PIPE_GRACE).ok())
            .unwrap_or_default()
    };
    let out = collect(stdout);
    let err = collect(stderr);
    if status.success() {
        Ok(out)
    } else {
        Err(GitFailure::Exit {
            code: status.code(),
            stderr: String::from_utf8_lossy(&err).into_owned(),
        })
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

/// A one-line, path-free description of a failure, fit for `last_error` (G-3).
///
/// `secrets` are strings that must not appear (the source, which may carry credentials or a
/// host path, the data directory, the mirror path); each is replaced by its placeholder.
pub(crate) fn describe(failure: &GitFailure, secrets: &[(&str, &str)]) -> String {
    match failure {
        GitFailure::Spawn(_) => "git could not be started on the server".to_string(),
        GitFailure::Timeout => "git did not finish in time".to_string(),
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
}
