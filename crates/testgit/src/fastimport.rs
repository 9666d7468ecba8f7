//! Generated histories: commits written as one `git fast-import` stream, so a test can make
//! tens of thousands of commits in seconds (long histories for budgets, walks and blame).

use std::fmt::Write as _;
use std::path::Path;

/// A change a generated commit makes.
#[derive(Debug, Clone)]
pub enum Change {
    /// The file at the path gets this content (mode 100644).
    Write(String, String),
    /// The file at the path goes.
    Delete(String),
}

/// A fast-import stream being written: one commit after another, each with a mark.
#[derive(Debug, Default)]
pub struct Stream {
    out: String,
    marks: u64,
}

/// The date of generated commit `n` when a test does not care: one minute apart, from
/// November 2023.
pub fn minute(n: u64) -> i64 {
    1_700_000_000 + 60 * n as i64
}

impl Stream {
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
        mark
    }

    /// Appends a commit on `main` after the last one (a linear history), at `time`.
    pub fn next(&mut self, time: i64, changes: &[Change]) -> u64 {
        let from = (self.marks > 0).then_some(self.marks);
        self.commit("main", time, from, &[], changes)
    }

    /// Imports the stream into the repository at `dir` (its branches forced to the stream's
    /// commits). A work tree is left as it was: `git reset --hard main` updates it.
    pub fn import(self, dir: &Path) {
        crate::git_with_input(
            dir,
            &["fast-import", "--quiet", "--force"],
            Some(self.out.as_bytes()),
        );
    }
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
    let mut stream = Stream::default();
    for n in 0..count {
        stream.next(minute(n), &[Change::Write(file.to_owned(), content(n))]);
    }
    stream.import(dir);
    if dir.join(".git").exists() {
        crate::git(dir, &["reset", "--quiet", "--hard", "main"]);
    }
    crate::git(dir, &["rev-list", "--max-parents=0", "main"])
}
