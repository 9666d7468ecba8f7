//! The unified diff between two commits, file by file, as `git diff --no-renames
//! --full-index BASE HEAD` prints it, except that hunk headers carry no function context
//! (git's `@@ … @@ fn name`). Lines are diffed with `linediff::line_diff` (minimal, as git's
//! are), then slid by the indent heuristic; where several minimal alignments exist (repeated
//! lines such as blank lines or closing braces), hunks may be drawn differently from git's.
//! A file that is not valid UTF-8 is diffed after lossy decoding.
//!
//! A page costs its budget (issue 42 point 5): each file's text is written only as far as
//! the page has room (a file added or deleted whole is written line by line, never diffed),
//! a blob over the text cap is not inflated (one line says the file is too large to diff),
//! and the call's budget is checked between files.
//!
//! A commit's own diff ([`GitStore::commit_diff`], issue 34's commit page) is `git show`'s:
//! against the first parent (a root commit against nothing), renames detected as git does by
//! default (`walk::pair_renames`), a renamed file as git prints it (`similarity index`,
//! `rename from`, `rename to`, then the diff of its two blobs).

use crate::blobcache::{BlobCache, SharedBlob};
use crate::changes::{self, ChangeKind, Leaf};
use crate::linediff::{self, ExactBudget};
use crate::objects::{odb, to_oid};
use crate::walk::{Chunks, MAX_SCORE, similarity};
use crate::{CommitId, Error, GitStore, RepoName, RepoPath};
use budget::Budget;
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

/// One file's text being written, cut once it passes `limit` bytes: past that, every write
/// fails, so the diff printer stops instead of writing the rest (issue 42 point 5: a page
/// costs its budget, not the whole diff of a huge file).
struct Bounded {
    text: String,
    limit: usize,
    /// A write did not fit: the text is its first `limit` bytes (on a character boundary).
    over: bool,
}

impl Bounded {
    fn new(limit: usize) -> Self {
        Bounded {
            text: String::new(),
            limit,
            over: false,
        }
    }
}

impl fmt::Write for Bounded {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.over {
            return Err(fmt::Error);
        }
        let room = self.limit - self.text.len();
        if s.len() > room {
            self.text.push_str(&s[..s.floor_char_boundary(room)]);
            self.over = true;
            return Err(fmt::Error);
        }
        self.text.push_str(s);
        Ok(())
    }
}

/// Git's text of one changed file, into `out` (which stops taking text at its limit).
fn file_text(
    repo: &gix::Repository,
    change: &changes::Pending,
    sizes: &mut Sizes<'_>,
    out: &mut Bounded,
) -> Result<(), Error> {
    file_text_renamed(repo, change, None, sizes, out)
}

/// What one diff call may spend on one file: the exact-diff budget left, and the text cap
/// (a blob over it is not diffed); and where its blobs are read, shared with other calls.
struct Sizes<'a> {
    exact: ExactBudget,
    max_text: u64,
    blobs: &'a BlobCache,
}

/// One side of a file's diff: nothing, a submodule's line, or a blob's bytes shared with
/// every other call reading that blob now (concurrent diffs of one huge file hold one copy).
enum Side {
    Absent,
    Line(Vec<u8>),
    Blob(SharedBlob),
}

impl Side {
    fn read(
        repo: &gix::Repository,
        blobs: &BlobCache,
        leaf: Option<Leaf>,
        path: &str,
    ) -> Result<Self, Error> {
        Ok(match leaf {
            None => Side::Absent,
            Some(Leaf::Blob(id, _)) => {
                Side::Blob(blobs.raw(id, path, || crate::objects::read_blob(repo, id))?)
            }
            Some(other @ Leaf::Submodule(_)) => Side::Line(changes::content(repo, Some(other))?),
        })
    }

    fn bytes(&self) -> &[u8] {
        match self {
            Side::Absent => &[],
            Side::Line(line) => line,
            Side::Blob(blob) => blob.as_bytes(),
        }
    }
}

/// [`file_text`], for a file renamed from `from` when given (git's rename header).
fn file_text_renamed(
    repo: &gix::Repository,
    change: &changes::Pending,
    from: Option<&str>,
    sizes: &mut Sizes<'_>,
    out: &mut Bounded,
) -> Result<(), Error> {
    let path = &change.path;
    let old_path = from.unwrap_or(path);
    let _ = writeln!(out, "diff --git a/{old_path} b/{path}");
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
            return Ok(());
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
                    return Ok(());
                }
                let _ = writeln!(out, "index {}..{}", old.id(), new.id());
            } else {
                let _ = writeln!(out, "index {}..{} {}", old.id(), new.id(), new.mode());
            }
        }
        (None, None) => return Ok(()),
    }
    // The page is full already: the blobs are not even read.
    if out.over {
        return Ok(());
    }
    let (a, b) = match (change.old, change.new) {
        (None, _) => ("/dev/null".to_owned(), format!("b/{path}")),
        (_, None) => (format!("a/{path}"), "/dev/null".to_owned()),
        _ => (format!("a/{old_path}"), format!("b/{path}")),
    };
    // Sizes from the object headers: a blob over the text cap is never inflated here.
    let size = |leaf: Option<Leaf>| -> Result<u64, Error> {
        match leaf {
            Some(Leaf::Blob(id, _)) => Ok(repo.find_header(id).map_err(odb)?.size()),
            _ => Ok(0),
        }
    };
    let largest = size(change.old)?.max(size(change.new)?);
    if largest > sizes.max_text {
        let _ = writeln!(
            out,
            "Files {a} and {b} differ; file too large to diff: {largest} bytes, over the \
             {} bytes the server diffs",
            sizes.max_text
        );
        return Ok(());
    }
    let (before, after) = (
        Side::read(repo, sizes.blobs, change.old, old_path)?,
        Side::read(repo, sizes.blobs, change.new, path)?,
    );
    let (before, after) = (before.bytes(), after.bytes());
    if changes::binary(before) || changes::binary(after) {
        let _ = writeln!(out, "Binary files {a} and {b} differ");
        return Ok(());
    }
    let _ = writeln!(out, "--- {a}\n+++ {b}");
    let (before, after) = (
        String::from_utf8_lossy(before),
        String::from_utf8_lossy(after),
    );
    // A file added or deleted whole is one hunk of all its lines: written line by line up to
    // the page's limit, without interning (and diffing) every line of it first.
    match (change.old, change.new) {
        (None, _) => whole_file(out, &after, '+'),
        (_, None) => whole_file(out, &before, '-'),
        _ => changed_lines(out, &before, &after, &mut sizes.exact),
    }
    Ok(())
}

/// The hunks of a file changed on both sides, written until `out` is full.
fn changed_lines(out: &mut Bounded, before: &str, after: &str, exact: &mut ExactBudget) {
    let input = InternedInput::new(before, after);
    let mut diff = linediff::line_diff(&input, exact);
    diff.postprocess_lines(&input);
    let printer = GitPrinter(&input.interner);
    // Stops at the first write past the limit.
    let _ = write!(
        out,
        "{}",
        diff.unified_diff(&printer, UnifiedDiffConfig::default(), &input)
    );
}

/// The one hunk of a file added (`sign` `+`) or deleted (`-`) whole, as imara-diff's unified
/// printer draws it (`@@ -0,0 +1,N @@`, each line signed, git's note after a last line
/// without a line feed), until `out` is full.
fn whole_file(out: &mut Bounded, text: &str, sign: char) {
    let lines = text.split_inclusive('\n');
    let count = lines.clone().count();
    if count == 0 {
        return;
    }
    let side = |len: usize| match len {
        0 => "0,0".to_owned(),
        1 => "1".to_owned(),
        _ => format!("1,{len}"),
    };
    let (before, after) = match sign {
        '+' => (side(0), side(count)),
        _ => (side(count), side(0)),
    };
    let write = || -> fmt::Result {
        writeln!(out, "@@ -{before} +{after} @@")?;
        for line in lines {
            out.write_char(sign)?;
            out.write_str(line)?;
            if !line.ends_with('\n') {
                out.write_str("\n\\ No newline at end of file\n")?;
            }
        }
        Ok(())
    };
    // An error is the page's limit reached: `out` says so.
    let _ = write();
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

    /// A writer for the next file's text: what is left of the page.
    fn writer(&self) -> Bounded {
        Bounded::new(self.budget.saturating_sub(self.used))
    }

    /// Whether the call's time is up for this page: with a file on it, the page ends here
    /// (file `index` next); with none, the call stops.
    fn out_of_time(&mut self, index: usize, call: &Budget) -> Result<bool, Error> {
        if call.should_wrap_up()? && !self.files.is_empty() {
            self.next_file = Some(index);
            return Ok(true);
        }
        Ok(false)
    }

    /// Adds file number `index` if it fits (`written`, its text as far as the page had room
    /// for it); false when the page is full (stop adding).
    fn push(
        &mut self,
        index: usize,
        written: Bounded,
        make: impl FnOnce(String) -> FileDiff,
    ) -> bool {
        let mut file = make(written.text);
        if written.over {
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

/// What one diff page may spend: files from `skip` on while their texts fit `bytes`; blobs
/// over `max_text` bytes are not diffed; `call` is checked between files.
pub(crate) struct Page<'a> {
    pub(crate) skip: usize,
    pub(crate) bytes: usize,
    pub(crate) call: &'a Budget,
    /// The store's decoded blobs (and its text cap).
    pub(crate) blobs: &'a BlobCache,
}

impl<'a> Page<'a> {
    fn sizes(&self) -> Sizes<'a> {
        Sizes {
            exact: ExactBudget::per_call(),
            max_text: self.blobs.max_text(),
            blobs: self.blobs,
        }
    }
}

/// The files that differ between `base` and `head` within `limit`, from file `page.skip`
/// on, while their texts fit `page.bytes` (the first always comes, cut at a line if it
/// must).
pub(crate) fn diff(
    repo: &gix::Repository,
    base: ObjectId,
    head: ObjectId,
    limit: &RepoPath,
    page: Page<'_>,
) -> Result<DiffPage, Error> {
    let tree = |commit: ObjectId| -> Result<ObjectId, Error> {
        let commit = repo.find_commit(commit).map_err(crate::objects::odb)?;
        Ok(commit.tree_id().map_err(crate::objects::odb)?.detach())
    };
    let pending = changes::pending(repo, Some(tree(base)?), Some(tree(head)?), limit)?;
    let mut paging = Paging::new(pending.len(), page.bytes);
    let mut sizes = page.sizes();
    for (index, change) in pending.iter().enumerate().skip(page.skip) {
        if paging.out_of_time(index, page.call)? {
            break;
        }
        let mut out = paging.writer();
        file_text(repo, change, &mut sizes, &mut out)?;
        let file = |text| FileDiff {
            path: change.path.clone(),
            old_path: None,
            kind: change.kind,
            text,
            truncated: false,
        };
        if !paging.push(index, out, file) {
            break;
        }
    }
    Ok(paging.finish(None))
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
        self.commit_diff_within(name, commit, skip, budget, &Budget::unlimited())
    }

    /// [`GitStore::commit_diff`] under a call's budget, checked between files: past its
    /// soft deadline a page with files on it ends there (its `next_file` continues); a
    /// cancelled or overdue call stops ([`Error::Stopped`]). A file's text is written only
    /// as far as the page has room for it, and a blob over the text cap
    /// ([`GitStore::set_max_text_bytes`]) is not diffed (one line says so).
    pub fn commit_diff_within(
        &self,
        name: &RepoName,
        commit: &CommitId,
        skip: usize,
        budget: usize,
        call: &Budget,
    ) -> Result<DiffPage, Error> {
        let scope = self.inner.registered_path(name)?;
        let reader = self.inner.blob_reader(name, commit)?;
        let id = to_oid(commit)?;
        let page = Page {
            skip,
            bytes: budget,
            call,
            blobs: &self.inner.blobs,
        };
        crate::handles::with_repo(&reader.repo, |repo| commit_diff(repo, id, &scope, page))
    }
}

fn commit_diff(
    repo: &gix::Repository,
    id: ObjectId,
    scope: &RepoPath,
    page: Page<'_>,
) -> Result<DiffPage, Error> {
    let commit = repo.find_commit(id).map_err(odb)?;
    let parent = commit.parent_ids().next().map(|p| p.detach());
    let pairs = crate::commitfiles::changed_pairs(repo, &commit, parent, scope)?;
    let mut paging = Paging::new(pairs.len(), page.bytes);
    let mut sizes = page.sizes();
    for (index, (old, new)) in pairs.into_iter().enumerate().skip(page.skip) {
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
        if paging.out_of_time(index, page.call)? {
            break;
        }
        let change = changes::Pending {
            path: path.clone(),
            kind,
            old: leaf(&old),
            new: leaf(&new),
        };
        let mut out = paging.writer();
        file_text_renamed(repo, &change, from.as_deref(), &mut sizes, &mut out)?;
        let file = |text| FileDiff {
            path,
            old_path: from,
            kind,
            text,
            truncated: false,
        };
        if !paging.push(index, out, file) {
            break;
        }
    }
    let parent = parent
        .as_ref()
        .map(crate::objects::to_commit_id)
        .transpose()?;
    Ok(paging.finish(parent))
}
