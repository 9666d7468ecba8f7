//! The one line diff of the history tools (`diff`, `commit`'s counts, `blame`), so they agree
//! with each other and with git.
//!
//! Git's default diff (Myers) finds a *minimal* line diff on ordinary changes, and a minimal
//! diff's counts are unique (`before − LCS` removed, `after − LCS` added), whatever alignment
//! is drawn: `git diff --numstat --minimal` gives them on any input. imara-diff's algorithms
//! do not always reach that minimum (its histogram prefers readable hunks; its Myers, even
//! `MyersMinimal`, prunes frequent lines first), so on this repository's own history each was
//! a line off git on some files. `similar`'s Myers is exact but unbounded
//! (`O((before + after) · D)`), so it runs only where that cost is bounded, and imara-diff
//! keeps doing what it does well: the container for hunks, the indent heuristic that slides
//! them the way git does, and the unified printer.

use imara_diff::{Algorithm, Diff, InternedInput, Token};
use std::convert::Infallible;

/// The most `(before + after lines) × (lines the histogram diff changes)` for which the exact
/// (minimal) alignment is searched. Myers' cost grows with that product; past it (rewrites of
/// files of tens of thousands of lines) the histogram diff is kept, as git's own Myers then
/// stops short of the minimum too. About 0.1 s of Myers at the limit on this kind of machine
/// (`cargo test -p gitstore --release linediff -- --ignored --nocapture` prints it).
const EXACT_COST_LIMIT: u64 = 50_000_000;

/// The most exact-diff cost one call (a `commit`'s counts, a `diff` page, a `blame`) spends
/// over all its files: a few rewrites at [`EXACT_COST_LIMIT`]. Ordinary changes cost little
/// (a 2,000-line file with 10 changed lines: 40,000), so only a commit of many large
/// rewrites, which repository content can craft, meets it; its later files keep the
/// histogram's counts instead of costing minutes.
const CALL_COST_LIMIT: u64 = 4 * EXACT_COST_LIMIT;

/// What is left of one call's exact-diff cost ([`CALL_COST_LIMIT`]).
#[derive(Debug)]
pub(crate) struct ExactBudget(u64);

impl ExactBudget {
    /// The budget of one call.
    pub(crate) fn per_call() -> Self {
        ExactBudget(CALL_COST_LIMIT)
    }
}

/// The diff of `input`'s lines with the fewest changed lines (within [`EXACT_COST_LIMIT`]
/// and what is left of `budget`, which the search for it spends).
/// Among minimal alignments, the histogram's is kept when it is one; otherwise the lines the
/// exact diff matches are the ones kept. Call `postprocess_lines` on the result to slide
/// hunks as git draws them.
pub(crate) fn line_diff<T>(input: &InternedInput<T>, budget: &mut ExactBudget) -> Diff {
    let histogram = Diff::compute(Algorithm::Histogram, input);
    let (before, after) = (input.before.len(), input.after.len());
    let changed = u64::from(histogram.count_additions()) + u64::from(histogram.count_removals());
    let cost = (before + after) as u64 * changed;
    // When only the length difference changed, nothing can change less.
    if changed == before.abs_diff(after) as u64 || cost > EXACT_COST_LIMIT || cost > budget.0 {
        return histogram;
    }
    budget.0 -= cost;
    let mut matched = Matched::default();
    // Infallible: the hook never fails.
    let Ok(()) = similar::algorithms::myers::diff(
        &mut matched,
        &input.before,
        0..before,
        &input.after,
        0..after,
    );
    let minimal = (before + after - 2 * matched.lines()) as u64;
    if minimal >= changed {
        return histogram;
    }
    matched.forced_diff(before, after)
}

/// The equal runs of an exact diff, `(before index, after index, length)`, in order.
#[derive(Default)]
struct Matched(Vec<(usize, usize, usize)>);

impl similar::algorithms::DiffHook for Matched {
    type Error = Infallible;

    fn equal(&mut self, old: usize, new: usize, len: usize) -> Result<(), Infallible> {
        self.0.push((old, new, len));
        Ok(())
    }
}

impl Matched {
    fn lines(&self) -> usize {
        self.0.iter().map(|&(_, _, len)| len).sum()
    }

    /// An imara-diff [`Diff`] that keeps exactly these lines. imara-diff builds a `Diff` only
    /// by diffing tokens, so the alignment is written as tokens: each matched pair of lines
    /// shares a token of its own and every other line gets one nobody else has. The only
    /// common subsequence of those is the matched lines, in order, which any diff finds.
    fn forced_diff(&self, before: usize, after: usize) -> Diff {
        const UNSET: Token = Token(u32::MAX);
        let (mut old, mut new) = (vec![UNSET; before], vec![UNSET; after]);
        // Fewer than i32::MAX lines a side (imara-diff's own bound), so these fit in a u32.
        let mut next = 0u32;
        for &(o, n, len) in &self.0 {
            for k in 0..len {
                old[o + k] = Token(next);
                new[n + k] = Token(next);
                next += 1;
            }
        }
        for token in old.iter_mut().chain(new.iter_mut()) {
            if *token == UNSET {
                *token = Token(next);
                next += 1;
            }
        }
        let mut diff = Diff::default();
        diff.compute_with(Algorithm::Histogram, &old, &new, next);
        diff
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Changed lines of a minimal diff, by the textbook LCS table.
    fn minimal_changes(a: &[u8], b: &[u8]) -> u32 {
        let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                lcs[i][j] = if a[i] == b[j] {
                    lcs[i + 1][j + 1] + 1
                } else {
                    lcs[i + 1][j].max(lcs[i][j + 1])
                };
            }
        }
        (a.len() + b.len()) as u32 - 2 * lcs[0][0]
    }

    fn text(lines: &[u8]) -> String {
        lines.iter().map(|l| format!("line {l}\n")).collect()
    }

    proptest! {
        /// The diff is minimal and keeps only equal lines, in order, on small files drawn from
        /// few distinct lines (where repeated lines make many alignments equally good and
        /// imara-diff's own algorithms miss the minimum).
        #[test]
        fn line_diff_is_minimal_and_keeps_equal_lines(
            a in proptest::collection::vec(0u8..6, 0..40),
            b in proptest::collection::vec(0u8..6, 0..40),
        ) {
            let (old, new) = (text(&a), text(&b));
            let input = InternedInput::new(old.as_str(), new.as_str());
            let mut diff = line_diff(&input, &mut ExactBudget::per_call());
            let changed = diff.count_additions() + diff.count_removals();
            prop_assert_eq!(changed, minimal_changes(&a, &b));
            diff.postprocess_lines(&input);
            prop_assert_eq!(diff.count_additions() + diff.count_removals(), changed);
            let kept_old: Vec<u8> =
                (0..a.len()).filter(|&i| !diff.is_removed(i as u32)).map(|i| a[i]).collect();
            let kept_new: Vec<u8> =
                (0..b.len()).filter(|&i| !diff.is_added(i as u32)).map(|i| b[i]).collect();
            prop_assert_eq!(kept_old, kept_new);
        }
    }

    /// The smallest input found (by search) on which imara-diff's histogram and Myers both
    /// change more lines than needed: keeping `}` and the first `b` costs 4 removals and 1
    /// addition.
    const CROSSED: (&str, &str) = ("}\na\nb\na\na\na\n", "b\n}\nb\n");

    #[test]
    fn repeated_lines_cost_no_more_than_the_minimum() {
        let input = InternedInput::new(CROSSED.0, CROSSED.1);
        for algorithm in [Algorithm::Histogram, Algorithm::Myers] {
            let diff = Diff::compute(algorithm, &input);
            assert!(diff.count_additions() + diff.count_removals() > 5);
        }
        let diff = line_diff(&input, &mut ExactBudget::per_call());
        assert_eq!((diff.count_additions(), diff.count_removals()), (1, 4));
    }

    /// A call's budget is spent by each exact search: once it cannot pay for one more, the
    /// histogram's diff is kept (more lines than the minimum, never wrong ones).
    #[test]
    fn a_spent_call_budget_keeps_the_histogram() {
        let input = InternedInput::new(CROSSED.0, CROSSED.1);
        let changed = |diff: Diff| diff.count_additions() + diff.count_removals();
        let histogram = changed(Diff::compute(Algorithm::Histogram, &input));
        let one_search = (6 + 3) * u64::from(histogram);
        let mut budget = ExactBudget(one_search);
        assert_eq!(changed(line_diff(&input, &mut budget)), 5);
        assert_eq!(budget.0, 0);
        assert_eq!(changed(line_diff(&input, &mut budget)), histogram);
        let mut budget = ExactBudget(one_search - 1);
        assert_eq!(changed(line_diff(&input, &mut budget)), histogram);
        assert_eq!(budget.0, one_search - 1, "nothing spent without a search");
    }

    /// A rewrite just under the cost limit: prints how long the exact diff takes there.
    #[test]
    #[ignore = "a timing probe, not a check: run it in release to see EXACT_COST_LIMIT's cost"]
    fn cost_at_the_limit() {
        // Lines from few distinct values, differently ordered on each side: the histogram
        // changes most of them and the exact diff has to search hard. The cost grows with the
        // square of the size: the largest size under the limit is probed.
        let texts = |size: usize| -> (String, String) {
            let old = (0..size).map(|i| format!("{}\n", i % 7)).collect();
            let new = (0..size).map(|i| format!("{}\n", (i * 3) % 11)).collect();
            (old, new)
        };
        let cost = |input: &InternedInput<&str>| {
            let histogram = Diff::compute(Algorithm::Histogram, input);
            let changed = u64::from(histogram.count_additions() + histogram.count_removals());
            (input.before.len() + input.after.len()) as u64 * changed
        };
        let mut size = 10_000;
        let (old, new) = loop {
            let (old, new) = texts(size);
            if cost(&InternedInput::new(old.as_str(), new.as_str())) <= EXACT_COST_LIMIT {
                break (old, new);
            }
            size -= 100;
        };
        let input = InternedInput::new(old.as_str(), new.as_str());
        let t = std::time::Instant::now();
        let histogram = Diff::compute(Algorithm::Histogram, &input);
        let histogram_time = t.elapsed();
        let t = std::time::Instant::now();
        let diff = line_diff(&input, &mut ExactBudget::per_call());
        println!(
            "{size} lines a side, cost {} (limit {EXACT_COST_LIMIT}): histogram {} changed in \
             {histogram_time:?}, line_diff {} changed in {:?}",
            cost(&input),
            histogram.count_additions() + histogram.count_removals(),
            diff.count_additions() + diff.count_removals(),
            t.elapsed()
        );
    }
}
