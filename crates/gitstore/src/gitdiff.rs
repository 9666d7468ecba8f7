//! Git's own line diff (xdiff's Myers, `git diff`'s default algorithm), ported so the history
//! index's added and removed lines are exactly the ones `git log -G` tests (S-9).
//!
//! Where several minimal diffs exist (moved, repeated or swapped lines), which lines a diff
//! marks depends on every detail of the algorithm, and `-G` keeps a commit only when a marked
//! line matches: a line one diff keeps in place and git shows as removed and re-added drops
//! the commit from the result. imara-diff's Myers is modelled on xdiff but differs in those
//! details (its preprocessing windows, the parity test of its middle snake), and the
//! `linediff` module searches a *minimal* diff, which git does not promise either; so this is
//! a port of git 2.47's `xdiff/xprepare.c` (`xdl_trim_ends`, `xdl_cleanup_records`) and
//! `xdiff/xdiffi.c` (`xdl_recs_cmp`, `xdl_split` with its cost heuristics,
//! `xdl_change_compact`), with the flags `git log -G` passes (none: no `--minimal`, lines
//! compared byte for byte). The indent heuristic (`diff.indentHeuristic`, on by default in
//! `git show`/`git diff` but not used by `-G`) only chooses where an ambiguous group sits among
//! equal lines, so it changes line numbers but never which texts are added or removed; it is
//! applied on request so line numbers also match what `git show` prints.
//!
//! Arithmetic follows the C code's signed `long`s (`i64` here) so the port can be read against
//! it line by line.

use imara_diff::{InternedInput, Token};
use std::ops::Range;

/// `XDL_MAX_COST_MIN`, `XDL_HEUR_MIN_COST`, `XDL_SNAKE_CNT`, `XDL_K_HEUR`.
const MAX_COST_MIN: i64 = 256;
const HEUR_MIN_COST: i64 = 256;
const SNAKE_CNT: i64 = 20;
const K_HEUR: i64 = 4;
/// `XDL_KPDIS_RUN`, `XDL_MAX_EQLIMIT`, `XDL_SIMSCAN_WINDOW`.
const KPDIS_RUN: i64 = 4;
const MAX_EQLIMIT: i64 = 1024;
const SIMSCAN_WINDOW: i64 = 100;
/// `XDL_LINE_MAX`: larger than any line index.
const LINE_MAX: i64 = i64::MAX;

/// Where a group of changed lines is placed among equal lines it could slide over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slide {
    /// As `git log -G` (no flags): as far down as possible, or aligned with the other
    /// side's changes. The history index uses [`Slide::IndentHeuristic`] (same texts, the
    /// line numbers `git show` prints); this one is kept to prove that equivalence.
    #[cfg_attr(not(test), allow(dead_code))]
    Plain,
    /// As `git show`/`git diff` with the default `diff.indentHeuristic`.
    IndentHeuristic,
}

/// One change of git's edit script: lines `before` of the old file are replaced by lines
/// `after` of the new one (either may be empty), 0-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub(crate) before: Range<u32>,
    pub(crate) after: Range<u32>,
}

/// Git's diff of `input`'s lines (tokens of whole lines, line feed included, as imara-diff's
/// byte-line tokenizer makes them): its changes in order.
pub(crate) fn diff(input: &InternedInput<&[u8]>, slide: Slide) -> Vec<Change> {
    let classes = input.interner.num_tokens() as usize;
    let mut file1 = File::new(&input.before);
    let mut file2 = File::new(&input.after);
    // Records matching each class in either file (`len1`, `len2` of git's classifier).
    let (mut len1, mut len2) = (vec![0i64; classes], vec![0i64; classes]);
    for t in &input.before {
        len1[t.0 as usize] += 1;
    }
    for t in &input.after {
        len2[t.0 as usize] += 1;
    }
    trim_ends(&mut file1, &mut file2);
    cleanup_records(&mut file1, &len2);
    cleanup_records(&mut file2, &len1);
    recs_cmp(&mut file1, &mut file2);
    let line = |t: Token| -> &[u8] { input.interner[t] };
    change_compact(&mut file1, &mut file2, slide, &line);
    change_compact(&mut file2, &mut file1, slide, &line);
    build_script(&file1, &file2)
}

/// One side of the diff (git's `xdfile_t`).
struct File<'a> {
    /// Each line's class (equal lines, equal class).
    recs: &'a [Token],
    /// Changed marks with a zero sentinel on each side: line `i` is `rchg[i + 1]`.
    rchg: Vec<bool>,
    /// The lines left after cleanup (`rindex`) and their classes (`ha`): what Myers compares.
    rindex: Vec<i64>,
    ha: Vec<u32>,
    /// The range left after trimming the common ends (inclusive, as git's).
    dstart: i64,
    dend: i64,
}

impl<'a> File<'a> {
    fn new(recs: &'a [Token]) -> Self {
        File {
            recs,
            rchg: vec![false; recs.len() + 2],
            rindex: Vec::new(),
            ha: Vec::new(),
            dstart: 0,
            dend: recs.len() as i64 - 1,
        }
    }

    fn nrec(&self) -> i64 {
        self.recs.len() as i64
    }

    fn changed(&self, i: i64) -> bool {
        self.rchg[(i + 1) as usize]
    }

    fn set(&mut self, i: i64, value: bool) {
        self.rchg[(i + 1) as usize] = value;
    }

    /// `recs_match`: the two lines are equal.
    fn same(&self, a: i64, b: i64) -> bool {
        self.recs[a as usize] == self.recs[b as usize]
    }
}

/// `xdl_bogosqrt`.
fn bogosqrt(mut n: i64) -> i64 {
    let mut i = 1;
    while n > 0 {
        i <<= 1;
        n >>= 2;
    }
    i
}

/// `xdl_trim_ends`: the common first and last lines are left out of the search.
fn trim_ends(file1: &mut File, file2: &mut File) {
    let lim = file1.nrec().min(file2.nrec());
    let mut i = 0;
    while i < lim && file1.recs[i as usize] == file2.recs[i as usize] {
        i += 1;
    }
    file1.dstart = i;
    file2.dstart = i;
    let lim = lim - i;
    let mut j = 0;
    while j < lim
        && file1.recs[(file1.nrec() - 1 - j) as usize]
            == file2.recs[(file2.nrec() - 1 - j) as usize]
    {
        j += 1;
    }
    file1.dend = file1.nrec() - j - 1;
    file2.dend = file2.nrec() - j - 1;
}

/// `xdl_cleanup_records` for one side: lines with no match on the other side (`other`:
/// how many lines of each class it has) are changed outright, and so are lines with very
/// many matches inside a run of such lines; the rest go to Myers.
fn cleanup_records(file: &mut File, other: &[i64]) {
    let mlim = bogosqrt(file.nrec()).min(MAX_EQLIMIT);
    let mut dis = vec![0u8; file.recs.len() + 1];
    for i in file.dstart..=file.dend {
        let nm = other[file.recs[i as usize].0 as usize];
        dis[i as usize] = if nm == 0 {
            0
        } else if nm >= mlim {
            2
        } else {
            1
        };
    }
    for i in file.dstart..=file.dend {
        let d = dis[i as usize];
        if d == 1 || (d == 2 && !clean_mmatch(&dis, i, file.dstart, file.dend)) {
            file.rindex.push(i);
            file.ha.push(file.recs[i as usize].0);
        } else {
            file.set(i, true);
        }
    }
}

/// `xdl_clean_mmatch`: whether the many-match line `i` sits in a run mostly of unmatched
/// lines (then it is discarded).
fn clean_mmatch(dis: &[u8], i: i64, mut s: i64, mut e: i64) -> bool {
    if i - s > SIMSCAN_WINDOW {
        s = i - SIMSCAN_WINDOW;
    }
    if e - i > SIMSCAN_WINDOW {
        e = i + SIMSCAN_WINDOW;
    }
    let (mut rdis0, mut rpdis0) = (0i64, 1i64);
    let mut r = 1;
    while i - r >= s {
        match dis[(i - r) as usize] {
            0 => rdis0 += 1,
            2 => rpdis0 += 1,
            _ => break,
        }
        r += 1;
    }
    if rdis0 == 0 {
        return false;
    }
    let (mut rdis1, mut rpdis1) = (0i64, 1i64);
    let mut r = 1;
    while i + r <= e {
        match dis[(i + r) as usize] {
            0 => rdis1 += 1,
            2 => rpdis1 += 1,
            _ => break,
        }
        r += 1;
    }
    if rdis1 == 0 {
        return false;
    }
    rdis1 += rdis0;
    rpdis1 += rpdis0;
    rpdis1 * KPDIS_RUN < rpdis1 + rdis1
}

/// Git's `xdpsplit_t`.
struct Split {
    i1: i64,
    i2: i64,
    min_lo: bool,
    min_hi: bool,
}

/// The diagonal vectors of `xdl_split`, indexed by diagonal `d` (which may be negative).
struct Diagonals {
    v: Vec<i64>,
    offset: i64,
}

impl std::ops::Index<i64> for Diagonals {
    type Output = i64;
    fn index(&self, d: i64) -> &i64 {
        &self.v[(d + self.offset) as usize]
    }
}

impl std::ops::IndexMut<i64> for Diagonals {
    fn index_mut(&mut self, d: i64) -> &mut i64 {
        &mut self.v[(d + self.offset) as usize]
    }
}

/// `xdl_do_diff`'s Myers part: marks the changed lines among those cleanup kept.
fn recs_cmp(file1: &mut File, file2: &mut File) {
    let (n1, n2) = (file1.ha.len() as i64, file2.ha.len() as i64);
    let ndiags = n1 + n2 + 3;
    let mut kvdf = Diagonals {
        v: vec![0; ndiags as usize],
        offset: n2 + 1,
    };
    let mut kvdb = Diagonals {
        v: vec![0; ndiags as usize],
        offset: n2 + 1,
    };
    let mxcost = bogosqrt(ndiags).max(MAX_COST_MIN);
    let (ha1, ha2) = (&file1.ha, &file2.ha);
    // Git recurses on both halves; the marks do not depend on the order, so a stack keeps
    // the depth off the call stack.
    let mut boxes = vec![(0i64, n1, 0i64, n2, false)];
    let mut changed1 = Vec::new();
    let mut changed2 = Vec::new();
    while let Some((mut off1, mut lim1, mut off2, mut lim2, need_min)) = boxes.pop() {
        while off1 < lim1 && off2 < lim2 && ha1[off1 as usize] == ha2[off2 as usize] {
            off1 += 1;
            off2 += 1;
        }
        while off1 < lim1 && off2 < lim2 && ha1[(lim1 - 1) as usize] == ha2[(lim2 - 1) as usize] {
            lim1 -= 1;
            lim2 -= 1;
        }
        if off1 == lim1 {
            changed2.extend(off2..lim2);
        } else if off2 == lim2 {
            changed1.extend(off1..lim1);
        } else {
            let spl = split(
                ha1, off1, lim1, ha2, off2, lim2, &mut kvdf, &mut kvdb, need_min, mxcost,
            );
            boxes.push((spl.i1, lim1, spl.i2, lim2, spl.min_hi));
            boxes.push((off1, spl.i1, off2, spl.i2, spl.min_lo));
        }
    }
    for k in changed1 {
        let i = file1.rindex[k as usize];
        file1.set(i, true);
    }
    for k in changed2 {
        let i = file2.rindex[k as usize];
        file2.set(i, true);
    }
}

/// `xdl_split`: the middle snake of the box, or past the cost limit a good enough split.
#[allow(clippy::too_many_arguments)]
fn split(
    ha1: &[u32],
    off1: i64,
    lim1: i64,
    ha2: &[u32],
    off2: i64,
    lim2: i64,
    kvdf: &mut Diagonals,
    kvdb: &mut Diagonals,
    need_min: bool,
    mxcost: i64,
) -> Split {
    let h1 = |i: i64| ha1[i as usize];
    let h2 = |i: i64| ha2[i as usize];
    let (dmin, dmax) = (off1 - lim2, lim1 - off2);
    let (fmid, bmid) = (off1 - off2, lim1 - lim2);
    let odd = (fmid - bmid) & 1 != 0;
    let (mut fmin, mut fmax) = (fmid, fmid);
    let (mut bmin, mut bmax) = (bmid, bmid);
    kvdf[fmid] = off1;
    kvdb[bmid] = lim1;
    let mut ec = 1i64;
    loop {
        let mut got_snake = false;
        if fmin > dmin {
            fmin -= 1;
            kvdf[fmin - 1] = -1;
        } else {
            fmin += 1;
        }
        if fmax < dmax {
            fmax += 1;
            kvdf[fmax + 1] = -1;
        } else {
            fmax -= 1;
        }
        let mut d = fmax;
        while d >= fmin {
            let mut i1 = if kvdf[d - 1] >= kvdf[d + 1] {
                kvdf[d - 1] + 1
            } else {
                kvdf[d + 1]
            };
            let prev1 = i1;
            let mut i2 = i1 - d;
            while i1 < lim1 && i2 < lim2 && h1(i1) == h2(i2) {
                i1 += 1;
                i2 += 1;
            }
            if i1 - prev1 > SNAKE_CNT {
                got_snake = true;
            }
            kvdf[d] = i1;
            if odd && bmin <= d && d <= bmax && kvdb[d] <= i1 {
                return Split {
                    i1,
                    i2,
                    min_lo: true,
                    min_hi: true,
                };
            }
            d -= 2;
        }

        if bmin > dmin {
            bmin -= 1;
            kvdb[bmin - 1] = LINE_MAX;
        } else {
            bmin += 1;
        }
        if bmax < dmax {
            bmax += 1;
            kvdb[bmax + 1] = LINE_MAX;
        } else {
            bmax -= 1;
        }
        let mut d = bmax;
        while d >= bmin {
            let mut i1 = if kvdb[d - 1] < kvdb[d + 1] {
                kvdb[d - 1]
            } else {
                kvdb[d + 1] - 1
            };
            let prev1 = i1;
            let mut i2 = i1 - d;
            while i1 > off1 && i2 > off2 && h1(i1 - 1) == h2(i2 - 1) {
                i1 -= 1;
                i2 -= 1;
            }
            if prev1 - i1 > SNAKE_CNT {
                got_snake = true;
            }
            kvdb[d] = i1;
            if !odd && fmin <= d && d <= fmax && i1 <= kvdf[d] {
                return Split {
                    i1,
                    i2,
                    min_lo: true,
                    min_hi: true,
                };
            }
            d -= 2;
        }

        if need_min {
            ec += 1;
            continue;
        }

        // A long enough snake far enough along: split there rather than search on.
        if got_snake && ec > HEUR_MIN_COST {
            let mut best = 0;
            let mut at = (0, 0);
            let mut d = fmax;
            while d >= fmin {
                let dd = if d > fmid { d - fmid } else { fmid - d };
                let i1 = kvdf[d];
                let i2 = i1 - d;
                let v = (i1 - off1) + (i2 - off2) - dd;
                if v > K_HEUR * ec
                    && v > best
                    && off1 + SNAKE_CNT <= i1
                    && i1 < lim1
                    && off2 + SNAKE_CNT <= i2
                    && i2 < lim2
                {
                    let mut k = 1;
                    while h1(i1 - k) == h2(i2 - k) {
                        if k == SNAKE_CNT {
                            best = v;
                            at = (i1, i2);
                            break;
                        }
                        k += 1;
                    }
                }
                d -= 2;
            }
            if best > 0 {
                return Split {
                    i1: at.0,
                    i2: at.1,
                    min_lo: true,
                    min_hi: false,
                };
            }

            let mut best = 0;
            let mut d = bmax;
            while d >= bmin {
                let dd = if d > bmid { d - bmid } else { bmid - d };
                let i1 = kvdb[d];
                let i2 = i1 - d;
                let v = (lim1 - i1) + (lim2 - i2) - dd;
                if v > K_HEUR * ec
                    && v > best
                    && off1 < i1
                    && i1 <= lim1 - SNAKE_CNT
                    && off2 < i2
                    && i2 <= lim2 - SNAKE_CNT
                {
                    let mut k = 0;
                    while h1(i1 + k) == h2(i2 + k) {
                        if k == SNAKE_CNT - 1 {
                            best = v;
                            at = (i1, i2);
                            break;
                        }
                        k += 1;
                    }
                }
                d -= 2;
            }
            if best > 0 {
                return Split {
                    i1: at.0,
                    i2: at.1,
                    min_lo: false,
                    min_hi: true,
                };
            }
        }

        // Enough is enough: the furthest reaching path by (i1 + i2).
        if ec >= mxcost {
            let (mut fbest, mut fbest1) = (-1i64, -1i64);
            let mut d = fmax;
            while d >= fmin {
                let mut i1 = kvdf[d].min(lim1);
                let mut i2 = i1 - d;
                if lim2 < i2 {
                    i1 = lim2 + d;
                    i2 = lim2;
                }
                if fbest < i1 + i2 {
                    fbest = i1 + i2;
                    fbest1 = i1;
                }
                d -= 2;
            }
            let (mut bbest, mut bbest1) = (LINE_MAX, LINE_MAX);
            let mut d = bmax;
            while d >= bmin {
                let mut i1 = off1.max(kvdb[d]);
                let mut i2 = i1 - d;
                if i2 < off2 {
                    i1 = off2 + d;
                    i2 = off2;
                }
                if i1 + i2 < bbest {
                    bbest = i1 + i2;
                    bbest1 = i1;
                }
                d -= 2;
            }
            return if (lim1 + lim2) - bbest < fbest - (off1 + off2) {
                Split {
                    i1: fbest1,
                    i2: fbest - fbest1,
                    min_lo: true,
                    min_hi: false,
                }
            } else {
                Split {
                    i1: bbest1,
                    i2: bbest - bbest1,
                    min_lo: false,
                    min_hi: true,
                }
            };
        }
        ec += 1;
    }
}

/// Git's `struct xdlgroup`: changed lines `start..end` (empty: above line `start`).
#[derive(Clone, Copy)]
struct Group {
    start: i64,
    end: i64,
}

fn group_init(file: &File) -> Group {
    let mut g = Group { start: 0, end: 0 };
    while file.changed(g.end) {
        g.end += 1;
    }
    g
}

/// `group_next`: false at the end of the file.
fn group_next(file: &File, g: &mut Group) -> bool {
    if g.end == file.nrec() {
        return false;
    }
    g.start = g.end + 1;
    g.end = g.start;
    while file.changed(g.end) {
        g.end += 1;
    }
    true
}

/// `group_previous`: false at the start of the file.
fn group_previous(file: &File, g: &mut Group) -> bool {
    if g.start == 0 {
        return false;
    }
    g.end = g.start - 1;
    g.start = g.end;
    while file.changed(g.start - 1) {
        g.start -= 1;
    }
    true
}

/// `group_slide_down`, merging with a group it bumps into.
fn group_slide_down(file: &mut File, g: &mut Group) -> bool {
    if g.end < file.nrec() && file.same(g.start, g.end) {
        file.set(g.start, false);
        g.start += 1;
        file.set(g.end, true);
        g.end += 1;
        while file.changed(g.end) {
            g.end += 1;
        }
        true
    } else {
        false
    }
}

/// `group_slide_up`, merging with a group it bumps into.
fn group_slide_up(file: &mut File, g: &mut Group) -> bool {
    if g.start > 0 && file.same(g.start - 1, g.end - 1) {
        g.start -= 1;
        file.set(g.start, true);
        g.end -= 1;
        file.set(g.end, false);
        while file.changed(g.start - 1) {
            g.start -= 1;
        }
        true
    } else {
        false
    }
}

/// `xdl_change_compact`: slides each group of `file`'s changes up and down across equal
/// lines (merging groups it meets), then places it against a change of `other` if it can,
/// else where the heuristic prefers. Git's `BUG()`s (group sync lost) cannot happen for
/// consistent marks; they end the pass here.
fn change_compact<'l>(
    file: &mut File,
    other: &mut File,
    slide: Slide,
    line: &impl Fn(Token) -> &'l [u8],
) {
    let mut g = group_init(file);
    let mut go = group_init(other);
    loop {
        if g.end != g.start {
            let mut groupsize;
            let mut earliest_end;
            let mut end_matching_other;
            loop {
                groupsize = g.end - g.start;
                end_matching_other = -1;
                while group_slide_up(file, &mut g) {
                    if !group_previous(other, &mut go) {
                        return;
                    }
                }
                earliest_end = g.end;
                if go.end > go.start {
                    end_matching_other = g.end;
                }
                while group_slide_down(file, &mut g) {
                    if !group_next(other, &mut go) {
                        return;
                    }
                    if go.end > go.start {
                        end_matching_other = g.end;
                    }
                }
                if groupsize == g.end - g.start {
                    break;
                }
            }
            if g.end == earliest_end {
                // No shifting was possible.
            } else if end_matching_other != -1 {
                while go.end == go.start {
                    if !group_slide_up(file, &mut g) || !group_previous(other, &mut go) {
                        return;
                    }
                }
            } else if slide == Slide::IndentHeuristic {
                let mut shift = earliest_end;
                if g.end - groupsize - 1 > shift {
                    shift = g.end - groupsize - 1;
                }
                if g.end - INDENT_HEURISTIC_MAX_SLIDING > shift {
                    shift = g.end - INDENT_HEURISTIC_MAX_SLIDING;
                }
                let mut best: Option<(i64, Score)> = None;
                while shift <= g.end {
                    let mut score = Score::default();
                    score.add(&measure_split(file, shift, line));
                    score.add(&measure_split(file, shift - groupsize, line));
                    if best.as_ref().is_none_or(|(_, b)| score.cmp(b) <= 0) {
                        best = Some((shift, score));
                    }
                    shift += 1;
                }
                let best_shift = best.map_or(g.end, |(s, _)| s);
                while g.end > best_shift {
                    if !group_slide_up(file, &mut g) || !group_previous(other, &mut go) {
                        return;
                    }
                }
            }
        }
        if !group_next(file, &mut g) || !group_next(other, &mut go) {
            return;
        }
    }
}

/// `xdl_build_script`, in file order.
fn build_script(file1: &File, file2: &File) -> Vec<Change> {
    let mut out = Vec::new();
    let (mut i1, mut i2) = (0i64, 0i64);
    while i1 < file1.nrec() || i2 < file2.nrec() {
        if file1.changed(i1) || file2.changed(i2) {
            let (s1, s2) = (i1, i2);
            while file1.changed(i1) {
                i1 += 1;
            }
            while file2.changed(i2) {
                i2 += 1;
            }
            out.push(Change {
                before: s1 as u32..i1 as u32,
                after: s2 as u32..i2 as u32,
            });
        } else {
            i1 += 1;
            i2 += 1;
        }
    }
    out
}

// The indent heuristic (`xdiffi.c`'s `measure_split`, `score_add_split`, `score_cmp`), with
// git's empirically chosen weights.
const MAX_INDENT: i32 = 200;
const MAX_BLANKS: i32 = 20;
const START_OF_FILE_PENALTY: i32 = 1;
const END_OF_FILE_PENALTY: i32 = 21;
const TOTAL_BLANK_WEIGHT: i32 = -30;
const POST_BLANK_WEIGHT: i32 = 6;
const RELATIVE_INDENT_PENALTY: i32 = -4;
const RELATIVE_INDENT_WITH_BLANK_PENALTY: i32 = 10;
const RELATIVE_OUTDENT_PENALTY: i32 = 24;
const RELATIVE_OUTDENT_WITH_BLANK_PENALTY: i32 = 17;
const RELATIVE_DEDENT_PENALTY: i32 = 23;
const RELATIVE_DEDENT_WITH_BLANK_PENALTY: i32 = 17;
const INDENT_WEIGHT: i32 = 60;
const INDENT_HEURISTIC_MAX_SLIDING: i64 = 100;

/// `get_indent`: columns of leading whitespace (tab to the next multiple of 8), -1 for a
/// blank line; git's `isspace` is ASCII space, tab, LF and CR only.
fn get_indent(line: &[u8]) -> i32 {
    let mut ret = 0;
    for &c in line {
        if !matches!(c, b' ' | b'\t' | b'\n' | b'\r') {
            return ret;
        } else if c == b' ' {
            ret += 1;
        } else if c == b'\t' {
            ret += 8 - ret % 8;
        }
        if ret >= MAX_INDENT {
            return MAX_INDENT;
        }
    }
    -1
}

struct Measure {
    end_of_file: bool,
    indent: i32,
    pre_blank: i32,
    pre_indent: i32,
    post_blank: i32,
    post_indent: i32,
}

fn measure_split<'l>(file: &File, split: i64, line: &impl Fn(Token) -> &'l [u8]) -> Measure {
    let indent_of = |i: i64| get_indent(line(file.recs[i as usize]));
    let (end_of_file, indent) = if split >= file.nrec() {
        (true, -1)
    } else {
        (false, indent_of(split))
    };
    let (mut pre_blank, mut pre_indent) = (0, -1);
    let mut i = split - 1;
    while i >= 0 {
        pre_indent = indent_of(i);
        if pre_indent != -1 {
            break;
        }
        pre_blank += 1;
        if pre_blank == MAX_BLANKS {
            pre_indent = 0;
            break;
        }
        i -= 1;
    }
    let (mut post_blank, mut post_indent) = (0, -1);
    let mut i = split + 1;
    while i < file.nrec() {
        post_indent = indent_of(i);
        if post_indent != -1 {
            break;
        }
        post_blank += 1;
        if post_blank == MAX_BLANKS {
            post_indent = 0;
            break;
        }
        i += 1;
    }
    Measure {
        end_of_file,
        indent,
        pre_blank,
        pre_indent,
        post_blank,
        post_indent,
    }
}

#[derive(Default)]
struct Score {
    effective_indent: i32,
    penalty: i32,
}

impl Score {
    fn add(&mut self, m: &Measure) {
        if m.pre_indent == -1 && m.pre_blank == 0 {
            self.penalty += START_OF_FILE_PENALTY;
        }
        if m.end_of_file {
            self.penalty += END_OF_FILE_PENALTY;
        }
        let post_blank = if m.indent == -1 { 1 + m.post_blank } else { 0 };
        let total_blank = m.pre_blank + post_blank;
        self.penalty += TOTAL_BLANK_WEIGHT * total_blank;
        self.penalty += POST_BLANK_WEIGHT * post_blank;
        let indent = if m.indent != -1 {
            m.indent
        } else {
            m.post_indent
        };
        let any_blanks = total_blank != 0;
        self.effective_indent += indent;
        // No adjustment when either indent is unknown or both are equal.
        if indent == -1 || m.pre_indent == -1 || indent == m.pre_indent {
            return;
        }
        if indent > m.pre_indent {
            self.penalty += if any_blanks {
                RELATIVE_INDENT_WITH_BLANK_PENALTY
            } else {
                RELATIVE_INDENT_PENALTY
            };
        } else if m.post_indent != -1 && m.post_indent > indent {
            self.penalty += if any_blanks {
                RELATIVE_OUTDENT_WITH_BLANK_PENALTY
            } else {
                RELATIVE_OUTDENT_PENALTY
            };
        } else {
            self.penalty += if any_blanks {
                RELATIVE_DEDENT_WITH_BLANK_PENALTY
            } else {
                RELATIVE_DEDENT_PENALTY
            };
        }
    }

    /// `score_cmp`: negative when `self` is the better split.
    fn cmp(&self, other: &Score) -> i32 {
        let cmp_indents = i32::from(self.effective_indent > other.effective_indent)
            - i32::from(self.effective_indent < other.effective_indent);
        INDENT_WEIGHT * cmp_indents + (self.penalty - other.penalty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The `-`/`+` lines (1-based number, text) of `git diff --no-index` between two files
    /// with the Myers algorithm, with or without the indent heuristic, zero context.
    fn git_diff(dir: &std::path::Path, a: &[u8], b: &[u8], indent: bool) -> Vec<String> {
        std::fs::write(dir.join("a"), a).unwrap();
        std::fs::write(dir.join("b"), b).unwrap();
        let out = Command::new("git")
            .current_dir(dir)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args([
                "diff",
                "--no-index",
                "--no-color",
                "-U0",
                "--diff-algorithm=myers",
            ])
            .arg(if indent {
                "--indent-heuristic"
            } else {
                "--no-indent-heuristic"
            })
            .args(["a", "b"])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let mut lines = Vec::new();
        let (mut old, mut new) = (0, 0);
        for l in text.lines().skip_while(|l| !l.starts_with("@@")) {
            if let Some(h) = l.strip_prefix("@@ -") {
                let mut parts = h.split(' ');
                let start = |r: &str| -> u32 { r.split(',').next().unwrap().parse().unwrap() };
                let len =
                    |r: &str| -> u32 { r.split(',').nth(1).map_or(1, |n| n.parse().unwrap()) };
                let o = parts.next().unwrap();
                let n = parts.next().unwrap().trim_start_matches('+');
                // A side with no lines names the line before the change.
                old = start(o) + u32::from(len(o) == 0);
                new = start(n) + u32::from(len(n) == 0);
            } else if let Some(t) = l.strip_prefix('-') {
                lines.push(format!("-{old} {t}"));
                old += 1;
            } else if let Some(t) = l.strip_prefix('+') {
                lines.push(format!("+{new} {t}"));
                new += 1;
            }
        }
        lines
    }

    fn ours(a: &[u8], b: &[u8], slide: Slide) -> Vec<String> {
        let input = InternedInput::new(a, b);
        let text = |t: Token| {
            String::from_utf8_lossy(input.interner[t])
                .trim_end_matches('\n')
                .to_owned()
        };
        let mut lines = Vec::new();
        for change in diff(&input, slide) {
            for i in change.before {
                lines.push(format!("-{} {}", i + 1, text(input.before[i as usize])));
            }
            for i in change.after {
                lines.push(format!("+{} {}", i + 1, text(input.after[i as usize])));
            }
        }
        lines
    }

    fn texts(lines: &[String]) -> Vec<String> {
        let mut texts: Vec<String> = lines
            .iter()
            .map(|l| format!("{}{}", &l[..1], l.split_once(' ').unwrap().1))
            .collect();
        texts.sort();
        texts
    }

    /// On random files of few distinct (indented, blank, brace) lines, both placements are
    /// git's, line for line, and they add and remove the same texts: so the lines `-G`
    /// tests (no indent heuristic) are the ones kept with `git show`'s placement.
    #[test]
    fn s9_both_placements_equal_git_diff() {
        let dir = tempfile::tempdir().unwrap();
        let alphabet: &[&str] = &["{", "}", "", "    x();", "\ty();", "        z();", "a", "b"];
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            ((seed >> 33) % n as u64) as usize
        };
        for _ in 0..150 {
            let mut a = Vec::new();
            for _ in 0..next(60) {
                a.extend_from_slice(alphabet[next(alphabet.len())].as_bytes());
                a.push(b'\n');
            }
            let mut b = Vec::new();
            for line in a.split_inclusive(|&c| c == b'\n') {
                match next(5) {
                    0 => {}
                    1 => {
                        b.extend_from_slice(alphabet[next(alphabet.len())].as_bytes());
                        b.push(b'\n');
                        b.extend_from_slice(line);
                    }
                    _ => b.extend_from_slice(line),
                }
            }
            let plain = ours(&a, &b, Slide::Plain);
            let indent = ours(&a, &b, Slide::IndentHeuristic);
            assert_eq!(plain, git_diff(dir.path(), &a, &b, false));
            assert_eq!(indent, git_diff(dir.path(), &a, &b, true));
            assert_eq!(texts(&plain), texts(&indent));
        }
    }
}
