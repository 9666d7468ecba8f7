//! Generated histories: commits written as one `git fast-import` stream, so a test can make
//! tens of thousands of commits in seconds (long histories for budgets, walks and blame), and
//! an example or benchmark hundreds of thousands with the stream piped into git as it is
//! written ([`Stream::importing`]), so memory stays bounded.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};

/// A change a generated commit makes.
#[derive(Debug, Clone)]
pub enum Change {
    /// The file at the path gets this content (mode 100644).
    Write(String, String),
    /// The file at the path goes.
    Delete(String),
}

/// A fast-import stream being written: one commit after another, each with a mark. Made with
/// [`Stream::default`], it is kept until [`Stream::import`]; made with [`Stream::importing`],
/// it goes into git as it is written, until [`Stream::finish`].
#[derive(Debug, Default)]
pub struct Stream {
    out: String,
    marks: u64,
    git: Option<FastImport>,
}

/// The `git fast-import` a stream goes into, and its standard input.
#[derive(Debug)]
struct FastImport {
    child: Child,
    stdin: ChildStdin,
}

/// A stream going into git hands it what it has once it holds this much.
const PIPE_AT: usize = 1 << 20;

/// The date of generated commit `n` when a test does not care: one minute apart, from
/// November 2023.
pub fn minute(n: u64) -> i64 {
    1_700_000_000 + 60 * n as i64
}

impl Stream {
    /// A stream that goes into `git fast-import` in the repository at `dir` (its branches
    /// forced to the stream's commits) as it is written: for histories too long to hold.
    pub fn importing(dir: &Path) -> Self {
        let mut child = crate::git_command(dir, &["fast-import", "--quiet", "--force"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("git fast-import runs");
        let stdin = child.stdin.take().expect("stdin");
        Self {
            git: Some(FastImport { child, stdin }),
            ..Self::default()
        }
    }

    /// Appends a commit on `branch` at `time` with parents `from` and `merges` (marks);
    /// answers its mark.
    pub fn commit(
        &mut self,
        branch: &str,
        time: i64,
        from: Option<u64>,
        merges: &[u64],
        changes: &[Change],
    ) -> u64 {
        self.marks += 1;
        let mark = self.marks;
        let message = format!("commit {mark}\n");
        let _ = write!(
            self.out,
            "commit refs/heads/{branch}\nmark :{mark}\nauthor A <a@example.com> {time} +0000\n\
             committer C <c@example.com> {time} +0000\ndata {}\n{message}",
            message.len()
        );
        if let Some(from) = from {
            let _ = writeln!(self.out, "from :{from}");
        }
        for merge in merges {
            let _ = writeln!(self.out, "merge :{merge}");
        }
        for change in changes {
            match change {
                Change::Write(path, content) => {
                    let _ = write!(
                        self.out,
                        "M 100644 inline {path}\ndata {}\n{content}\n",
                        content.len()
                    );
                }
                Change::Delete(path) => {
                    let _ = writeln!(self.out, "D {path}");
                }
            }
        }
        self.out.push('\n');
        if self.out.len() >= PIPE_AT {
            self.pipe();
        }
        mark
    }

    /// Hands what the stream holds to the git it goes into, if any.
    fn pipe(&mut self) {
        let Some(git) = &mut self.git else { return };
        if git.stdin.write_all(self.out.as_bytes()).is_err() {
            // git stopped reading: it failed; its error says why.
            let FastImport { child, stdin } = self.git.take().expect("git");
            drop(stdin);
            wait(child);
            panic!("git fast-import ended before its stream did");
        }
        self.out.clear();
    }

    /// Appends a commit on `main` after the last one (a linear history), at `time`.
    pub fn next(&mut self, time: i64, changes: &[Change]) -> u64 {
        let from = (self.marks > 0).then_some(self.marks);
        self.commit("main", time, from, &[], changes)
    }

    /// Imports the stream into the repository at `dir` (its branches forced to the stream's
    /// commits). A work tree is left as it was: `git reset --hard main` updates it.
    pub fn import(self, dir: &Path) {
        assert!(
            self.git.is_none(),
            "a stream already importing ends with finish"
        );
        Self {
            out: self.out,
            ..Self::importing(dir)
        }
        .finish();
    }

    /// Ends a stream made with [`Stream::importing`]: hands git the rest and waits for the
    /// import.
    pub fn finish(mut self) {
        self.pipe();
        let FastImport { child, stdin } = self.git.take().expect("a stream made by importing");
        drop(stdin);
        wait(child);
    }
}

/// Waits for `git fast-import` to end; panics with its error if it failed.
fn wait(child: Child) {
    let out = child.wait_with_output().expect("git fast-import ends");
    assert!(
        out.status.success(),
        "git fast-import failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A linear history on `main` of `count` commits, commit `n` (from 0) writing `file` with
/// `content(n)` at [`minute`]`(n)`: imported into `dir`, its work tree reset to it; answers
/// the root commit's SHA.
pub fn linear(
    dir: &Path,
    count: u64,
    file: &str,
    mut content: impl FnMut(u64) -> String,
) -> String {
    let mut stream = Stream::importing(dir);
    for n in 0..count {
        stream.next(minute(n), &[Change::Write(file.to_owned(), content(n))]);
    }
    stream.finish();
    if dir.join(".git").exists() {
        crate::git(dir, &["reset", "--quiet", "--hard", "main"]);
    }
    crate::git(dir, &["rev-list", "--max-parents=0", "main"])
}
