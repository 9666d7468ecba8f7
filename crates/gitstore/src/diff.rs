//! The unified diff between two commits, file by file, as `git diff --no-renames
//! --full-index BASE HEAD` prints it, except that hunk headers carry no function context
//! (git's `@@ … @@ fn name`). Lines are diffed with `linediff::line_diff` (minimal, as git's
//! are), then slid by the indent heuristic; where several minimal alignments exist (repeated
//! lines such as blank lines or closing braces), hunks may be drawn differently from git's.
//! A file that is not valid UTF-8 is diffed after lossy decoding.
//!
//! A commit's own diff ([`GitStore::commit_diff`], issue 34's commit page) is `git show`'s:
//! against the first parent (a root commit against nothing), renames detected as git does by
//! default (`walk::pair_renames`), a renamed file as git prints it (`similarity index`,
//! `rename from`, `rename to`, then the diff of its two blobs).

use crate::changes::{self, ChangeKind, Leaf};
use crate::linediff::{self, ExactBudget};
use crate::objects::{odb, to_oid};
use crate::walk::{Chunks, MAX_SCORE, similarity};
use crate::{CommitId, Error, GitStore, RepoName, RepoPath};
use gix::ObjectId;
use imara_diff::{InternedInput, Interner, Token, UnifiedDiffConfig, UnifiedDiffPrinter};
use std::fmt::{self, Write as _};

/// One file of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    /// Repository-relative path (a renamed file's new path).
    pub path: String,
    /// A renamed file's old path (only in a commit's diff, which detects renames).
    pub old_path: Option<String>,
    pub kind: ChangeKind,
    /// Git's text for this file, from its `diff --git` line on.
    pub text: String,
    /// The text was cut at a line boundary to fit the budget.
    pub truncated: bool,
}

/// A page of a diff: files from the first asked for, while they fit the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffPage {
    pub files: Vec<FileDiff>,
    /// The index of the first file not on this page, when there is one.
    pub next_file: Option<usize>,
    /// How many files differ in all.
    pub total_files: usize,
    /// In a commit's diff: the first parent it is taken against (`None` for a root commit,
    /// and in a diff of two commits).
    pub parent: Option<CommitId>,
}

/// Hunk headers and lines as git writes them.
struct GitPrinter<'a>(&'a Interner<&'a str>);

impl GitPrinter<'_> {
    fn line(&self, f: &mut impl fmt::Write, sign: char, token: Token) -> fmt::Result {
        let text = self.0[token];
        f.write_char(sign)?;
        f.write_str(text)?;
        if !text.ends_with('\n') {
            f.write_str("\n\\ No newline at end of file\n")?;
        }
        Ok(())
    }
}

/// `start,len` of a hunk side as git writes it: `,1` left out, an empty side numbered by
/// the line before it.
fn range(start: u32, len: u32) -> String {
    match len {
        0 => format!("{start},0"),
        1 => format!("{}", start + 1),
        _ => format!("{},{len}", start + 1),
    }
}

impl UnifiedDiffPrinter for GitPrinter<'_> {
    fn display_header(
        &self,
        mut f: impl fmt::Write,
        start_before: u32,
        start_after: u32,
        len_before: u32,
        len_after: u32,
    ) -> fmt::Result {
        writeln!(
            f,
            "@@ -{} +{} @@",
            range(start_before, len_before),
            range(start_after, len_after)
        )
    }

    fn display_context_token(&self, mut f: impl fmt::Write, token: Token) -> fmt::Result {
        self.line(&mut f, ' ', token)
    }

    fn display_hunk(
        &self,
        mut f: impl fmt::Write,
        before: &[Token],
        after: &[Token],
    ) -> fmt::Result {
        for &token in before {
            self.line(&mut f, '-', token)?;
        }
        for &token in after {
            self.line(&mut f, '+', token)?;
        }
        Ok(())
    }
}

/// Git's text of one changed file.
fn file_text(
    repo: &gix::Repository,
    change: &changes::Pending,
    budget: &mut ExactBudget,
) -> Result<String, Error> {
    file_text_renamed(repo, change, None, budget)
}

/// [`file_text`], for a file renamed from `from` when given (git's rename header).
fn file_text_renamed(
    repo: &gix::Repository,
    change: &changes::Pending,
    from: Option<&str>,
    budget: &mut ExactBudget,
) -> Result<String, Error> {
    let path = &change.path;
    let old_path = from.unwrap_or(path);
    let mut out = format!("diff --git a/{old_path} b/{path}\n");
    let zero = ObjectId::null(gix::hash::Kind::Sha1);
    if let (Some(from), Some(old), Some(new)) = (from, change.old, change.new) {
        let score = if old.id() == new.id() {
            MAX_SCORE
        } else {
            let (a, b) = (
                changes::content(repo, Some(old))?,
                changes::content(repo, Some(new))?,
            );
            similarity(&Chunks::of(&a), &Chunks::of(&b))
        };
        let _ = writeln!(
            out,
            "similarity index {}%\nrename from {from}\nrename to {path}",
            score * 100 / MAX_SCORE
        );
        if old.id() == new.id() && old.mode() == new.mode() {
            return Ok(out);
        }
    }
    match (change.old, change.new) {
        (None, Some(new)) => {
            let _ = writeln!(out, "new file mode {}", new.mode());
            let _ = writeln!(out, "index {zero}..{}", new.id());
        }
        (Some(old), None) => {
            let _ = writeln!(out, "deleted file mode {}", old.mode());
            let _ = writeln!(out, "index {}..{zero}", old.id());
        }
        (Some(old), Some(new)) => {
            if old.mode() != new.mode() {
                let _ = writeln!(out, "old mode {}\nnew mode {}", old.mode(), new.mode());
                if old.id() == new.id() {
                    return Ok(out);
                }
                let _ = writeln!(out, "index {}..{}", old.id(), new.id());
            } else {
                let _ = writeln!(out, "index {}..{} {}", old.id(), new.id(), new.mode());
            }
        }
        (None, None) => return Ok(out),
    }
    let (before, after) = (
        changes::content(repo, change.old)?,
        changes::content(repo, change.new)?,
    );
    let (a, b) = match (change.old, change.new) {
        (None, _) => ("/dev/null".to_owned(), format!("b/{path}")),
        (_, None) => (format!("a/{path}"), "/dev/null".to_owned()),
        _ => (format!("a/{old_path}"), format!("b/{path}")),
    };
    if changes::binary(&before) || changes::binary(&after) {
        let _ = writeln!(out, "Binary files {a} and {b} differ");
        return Ok(out);
    }
    let _ = writeln!(out, "--- {a}\n+++ {b}");
    let (before, after) = (
        String::from_utf8_lossy(&before),
        String::from_utf8_lossy(&after),
    );
    let input = InternedInput::new(before.as_ref(), after.as_ref());
    let mut diff = linediff::line_diff(&input, budget);
    diff.postprocess_lines(&input);
    let printer = GitPrinter(&input.interner);
    let _ = write!(
        out,
        "{}",
        diff.unified_diff(&printer, UnifiedDiffConfig::default(), &input)
    );
    Ok(out)
}

/// One page of a diff being filled: whole files while their texts fit `budget` bytes; the
/// first file always comes, cut at a line if it alone is over the budget.
struct Paging {
    budget: usize,
    total_files: usize,
    used: usize,
    files: Vec<FileDiff>,
    next_file: Option<usize>,
}

impl Paging {
    fn new(total_files: usize, budget: usize) -> Self {
        Paging {
            budget,
            total_files,
            used: 0,
            files: Vec::new(),
            next_file: None,
        }
    }

    /// Adds file number `index` if it fits; false when the page is full (stop adding).
    fn push(&mut self, index: usize, mut file: FileDiff) -> bool {
        if self.used + file.text.len() > self.budget {
            if !self.files.is_empty() {
                self.next_file = Some(index);
                return false;
            }
            let cut = file.text[..file.text.floor_char_boundary(self.budget)]
                .rfind('\n')
                .map_or(0, |i| i + 1);
            file.text.truncate(cut);
            file.truncated = true;
            self.next_file = (index + 1 < self.total_files).then_some(index + 1);
        }
        self.used += file.text.len();
        let more = !file.truncated;
        self.files.push(file);
        more
    }

    fn finish(self, parent: Option<CommitId>) -> DiffPage {
        DiffPage {
            files: self.files,
            next_file: self.next_file,
            total_files: self.total_files,
            parent,
        }
    }
}

/// The files that differ between `base` and `head` within `limit`, from file `skip` on,
/// while their texts fit `budget` bytes (the first always comes, cut at a line if it must).
pub(crate) fn diff(
    repo: &gix::Repository,
    base: ObjectId,
    head: ObjectId,
    limit: &RepoPath,
    skip: usize,
    budget: usize,
) -> Result<DiffPage, Error> {
    let tree = |commit: ObjectId| -> Result<ObjectId, Error> {
        let commit = repo.find_commit(commit).map_err(crate::objects::odb)?;
        Ok(commit.tree_id().map_err(crate::objects::odb)?.detach())
    };
    let pending = changes::pending(repo, Some(tree(base)?), Some(tree(head)?), limit)?;
    let mut page = Paging::new(pending.len(), budget);
    let mut exact = ExactBudget::per_call();
    for (index, change) in pending.iter().enumerate().skip(skip) {
        let text = file_text(repo, change, &mut exact)?;
        let file = FileDiff {
            path: change.path.clone(),
            old_path: None,
            kind: change.kind,
            text,
            truncated: false,
        };
        if !page.push(index, file) {
            break;
        }
    }
    Ok(page.finish(None))
}

impl GitStore {
    /// The diff of `commit` (readable now) as `git show` prints it: against its first parent
    /// (a root commit against nothing), renames detected, inside the registered scope; file
    /// by file from file `skip` while the texts fit `budget` bytes (the first always comes,
    /// cut at a line if it must).
    pub fn commit_diff(
        &self,
        name: &RepoName,
        commit: &CommitId,
        skip: usize,
        budget: usize,
    ) -> Result<DiffPage, Error> {
        let scope = self.inner.registered_path(name)?;
        let reader = self.inner.blob_reader(name, commit)?;
        let id = to_oid(commit)?;
        crate::handles::with_repo(&reader.repo, |repo| {
            commit_diff(repo, id, &scope, skip, budget)
        })
    }
}

fn commit_diff(
    repo: &gix::Repository,
    id: ObjectId,
    scope: &RepoPath,
    skip: usize,
    budget: usize,
) -> Result<DiffPage, Error> {
    let commit = repo.find_commit(id).map_err(odb)?;
    let parent = commit.parent_ids().next().map(|p| p.detach());
    let pairs = crate::commitfiles::changed_pairs(repo, &commit, parent, scope)?;
    let mut page = Paging::new(pairs.len(), budget);
    let mut exact = ExactBudget::per_call();
    for (index, (old, new)) in pairs.into_iter().enumerate().skip(skip) {
        let leaf = |side: &Option<(String, Leaf)>| side.as_ref().map(|(_, l)| *l);
        let (path, from, kind) = match (&old, &new) {
            (Some((from, _)), Some((to, _))) if from != to => {
                (to.clone(), Some(from.clone()), ChangeKind::Modified)
            }
            (_, Some((to, _))) if old.is_some() => (to.clone(), None, ChangeKind::Modified),
            (None, Some((to, _))) => (to.clone(), None, ChangeKind::Added),
            (Some((from, _)), None) => (from.clone(), None, ChangeKind::Deleted),
            _ => continue,
        };
        let change = changes::Pending {
            path: path.clone(),
            kind,
            old: leaf(&old),
            new: leaf(&new),
        };
        let text = file_text_renamed(repo, &change, from.as_deref(), &mut exact)?;
        let file = FileDiff {
            path,
            old_path: from,
            kind,
            text,
            truncated: false,
        };
        if !page.push(index, file) {
            break;
        }
    }
    let parent = parent
        .as_ref()
        .map(crate::objects::to_commit_id)
        .transpose()?;
    Ok(page.finish(parent))
}
