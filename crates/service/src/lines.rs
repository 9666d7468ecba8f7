//! Cutting a line range out of a file under a byte budget (R-1..R-3). Pure functions over
//! an indexed text ([`gitstore::Text`]: lines end after `\n`, a last line without one still
//! counts), so the continuation property can be tested without Git. The line table comes
//! with the text (kept with it in the blob cache): finding a window deep in a big file is a
//! lookup, not a scan.

use crate::model::ReadRange;
use gitstore::Text;

/// Byte limits applied to one item.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Bytes of body this item may still take.
    pub budget: usize,
    /// A single line longer than this is cut inside the line.
    pub line_cap: usize,
    /// The item may exceed `budget` with its first line (progress guarantee of R-3).
    pub first_line_always: bool,
}

/// Why a range could not be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RangeError {
    /// `start_line` is 0.
    StartZero,
    /// `start_line` past the last line of a non-empty file.
    StartPastEnd { start: u64, total: u64 },
    /// `end_line < start_line`.
    EndBeforeStart { start: u64, end: u64, total: u64 },
}

impl RangeError {
    /// The caller-facing message, naming the file's length.
    pub(crate) fn message(&self, path: &str) -> String {
        match self {
            Self::StartZero => "start_line must be 1 or more (lines are 1-based)".to_string(),
            Self::StartPastEnd { start, total } => {
                format!("start_line {start} is past the end of `{path}`, which has {total} lines")
            }
            Self::EndBeforeStart { start, end, total } => {
                format!("end_line {end} is before start_line {start} (`{path}` has {total} lines)")
            }
        }
    }
}

/// The validated request window of an item: `start_line` and the clamped `end_line`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    pub start: u64,
    pub end: u64,
    pub total: u64,
}

/// Applies the R-1 defaults and checks the window against the file.
pub(crate) fn window(
    text: &Text,
    start_line: Option<u64>,
    end_line: Option<u64>,
    default_lines: u64,
) -> Result<Window, RangeError> {
    let total = text.line_count();
    let start = start_line.unwrap_or(1);
    if start == 0 {
        return Err(RangeError::StartZero);
    }
    let end = end_line.unwrap_or_else(|| start.saturating_add(default_lines - 1));
    if end < start {
        return Err(RangeError::EndBeforeStart { start, end, total });
    }
    if total == 0 {
        return Ok(Window {
            start: 1,
            end: 0,
            total,
        });
    }
    if start > total {
        return Err(RangeError::StartPastEnd { start, total });
    }
    Ok(Window {
        start,
        end: end.min(total),
        total,
    })
}

/// The answer for an item whose batch budget is spent: its place, no lines.
pub(crate) fn spent(window: Window) -> ReadRange {
    if window.total == 0 {
        return ReadRange::empty_file();
    }
    ReadRange {
        start_line: window.start,
        end_line: window.start - 1,
        total_lines: window.total,
        truncated: true,
        has_more: true,
        next_start_line: Some(window.start),
        line_cut: None,
        content: String::new(),
    }
}

/// Cuts `window` out of `text` under `limits`. Returns `None` when not even the first line
/// fits and `limits.first_line_always` is off (the batch budget is spent).
pub(crate) fn cut(text: &Text, window: Window, limits: Limits) -> Option<ReadRange> {
    if window.total == 0 {
        return Some(ReadRange::empty_file());
    }
    // The common case, a whole (rest of a) file that fits: one slice, no walk over its lines
    // and no line table.
    if window.end == window.total
        && let Some((begin, len)) = text.tail_from(window.start)
        && len <= limits.budget.min(limits.line_cap)
    {
        return Some(ReadRange {
            start_line: window.start,
            end_line: window.total,
            total_lines: window.total,
            truncated: false,
            has_more: false,
            next_start_line: None,
            line_cut: None,
            content: text[begin..].to_string(),
        });
    }
    // A window holds lines 1..=total of this text (see `window`): the lookup only misses for
    // a window made for another text, which is answered as an empty file, not a panic.
    let Some(first) = text.line(window.start) else {
        return Some(ReadRange::empty_file());
    };
    let (first_begin, first_end) = (first.start, first.end);
    let mut line_cut = None;
    let mut body_end = first_end;
    let first_len = first_end - first_begin;
    if first_len > limits.line_cap {
        let mut cut_at = first_begin + limits.line_cap;
        while !text.is_char_boundary(cut_at) {
            cut_at -= 1;
        }
        body_end = cut_at;
        line_cut = Some((first_end - cut_at) as u64);
    }
    if body_end - first_begin > limits.budget && !limits.first_line_always {
        return None;
    }
    let mut last = window.start;
    if line_cut.is_none() {
        while last < window.end {
            let Some(next) = text.line(last + 1) else {
                break;
            };
            let next_end = next.end;
            if next_end - first_begin > limits.budget {
                break;
            }
            last += 1;
            body_end = next_end;
        }
    }
    let has_more = last < window.total;
    Some(ReadRange {
        start_line: window.start,
        end_line: last,
        total_lines: window.total,
        truncated: last < window.end || line_cut.is_some(),
        has_more,
        next_start_line: has_more.then_some(last + 1),
        line_cut,
        content: text[first_begin..body_end].to_string(),
    })
}

/// The byte budget of one call: a single read, or a batch shared by its items in request
/// order.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    remaining: usize,
    per_item: usize,
    line_cap: usize,
    /// Some item already took lines: later items may not exceed the budget with their first
    /// line (only the first one does, so every call makes progress).
    anything_returned: bool,
    /// An item did not fit: every later item keeps its place with no lines.
    spent: bool,
}

impl Budget {
    /// The budget of one `read`.
    pub(crate) fn single(config: &crate::ServiceConfig) -> Self {
        Self::new(config.read_budget, config.read_budget, config.line_cap)
    }

    /// The shared budget of one `read_many`.
    pub(crate) fn batch(config: &crate::ServiceConfig) -> Self {
        Self::new(config.batch_budget, config.read_budget, config.line_cap)
    }

    fn new(total: usize, per_item: usize, line_cap: usize) -> Self {
        Self {
            remaining: total,
            per_item,
            line_cap,
            anything_returned: false,
            spent: total == 0,
        }
    }

    /// Cuts `window` out of `text` with what is left, and charges what was returned.
    pub(crate) fn take(&mut self, text: &Text, window: Window) -> ReadRange {
        if self.spent {
            return spent(window);
        }
        let limits = Limits {
            budget: self.remaining.min(self.per_item),
            line_cap: self.line_cap,
            first_line_always: !self.anything_returned,
        };
        let Some(range) = cut(text, window, limits) else {
            self.spent = true;
            return spent(window);
        };
        // An item cut short by the *shared* budget spends it: later items must not take
        // bytes ahead of the lines this one still owes (strict request order).
        let cut_by_batch =
            limits.budget < self.per_item && range.truncated && range.line_cut.is_none();
        self.remaining = self.remaining.saturating_sub(range.content.len());
        self.anything_returned |= !range.content.is_empty();
        self.spent |= self.remaining == 0 || cut_by_batch;
        range
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(text: &str) -> Text {
        Text::new(text.to_string()).expect("small")
    }

    fn limits(budget: usize) -> Limits {
        Limits {
            budget,
            line_cap: 1 << 20,
            first_line_always: true,
        }
    }

    /// a batch shares its budget in request order; once an item does not fit, every
    /// later item keeps its place with no lines, `Truncated`, `HasMore` and its start.
    #[test]
    fn r3_batch_budget_in_request_order() {
        let config = crate::ServiceConfig {
            batch_budget: 12,
            read_budget: 10,
            ..Default::default()
        };
        let mut budget = Budget::batch(&config);
        let text = &t("aaaa\nbbbb\ncccc\n");
        let w = window(text, None, None, 500).unwrap();
        let first = budget.take(text, w);
        assert_eq!(first.content, "aaaa\nbbbb\n", "per-item budget 10");
        let second = budget.take(text, w);
        assert_eq!(
            (
                second.content.as_str(),
                second.truncated,
                second.has_more,
                second.next_start_line
            ),
            ("", true, true, Some(1))
        );
        let tiny = &t("x\n");
        let third = budget.take(tiny, window(tiny, None, None, 500).unwrap());
        assert_eq!(
            (third.content.as_str(), third.next_start_line),
            ("", Some(1)),
            "spent stays spent"
        );
        let empty = &t("");
        let empty_file = budget.take(empty, window(empty, None, None, 500).unwrap());
        assert!(
            !empty_file.has_more && !empty_file.truncated,
            "an empty file has nothing more"
        );
    }

    /// defaults and window errors.
    #[test]
    fn r1_defaults_and_window_errors() {
        let text = t(&(1..=1000)
            .map(|i| format!("line {i}\n"))
            .collect::<String>());
        assert_eq!(
            window(&text, None, None, 500),
            Ok(Window {
                start: 1,
                end: 500,
                total: 1000
            })
        );
        assert_eq!(
            window(&text, Some(700), None, 500),
            Ok(Window {
                start: 700,
                end: 1000,
                total: 1000
            })
        );
        assert_eq!(
            window(&text, Some(0), None, 500),
            Err(RangeError::StartZero)
        );
        assert_eq!(
            window(&text, Some(1001), None, 500),
            Err(RangeError::StartPastEnd {
                start: 1001,
                total: 1000
            })
        );
        assert_eq!(
            window(&text, Some(5), Some(4), 500),
            Err(RangeError::EndBeforeStart {
                start: 5,
                end: 4,
                total: 1000
            })
        );
        assert!(
            RangeError::StartPastEnd { start: 9, total: 3 }
                .message("a.md")
                .contains("has 3 lines")
        );
        // Empty file: StartLine 1, EndLine 0, TotalLines 0, HasMore false, whatever the start.
        let empty = t("");
        let w = window(&empty, Some(7), None, 500).unwrap();
        let r = cut(&empty, w, limits(10)).unwrap();
        assert_eq!(
            (
                r.start_line,
                r.end_line,
                r.total_lines,
                r.has_more,
                r.truncated
            ),
            (1, 0, 0, false, false)
        );
    }

    /// budget counts whole lines; at least the first line; cut only above LINE_CAP.
    #[test]
    fn r3_budget_whole_lines() {
        let text = &t("aaaa\nbbbb\ncccc\n");
        let w = window(text, None, None, 500).unwrap();
        let r = cut(text, w, limits(11)).unwrap();
        assert_eq!(
            (r.end_line, r.truncated, r.has_more, r.next_start_line),
            (2, true, true, Some(3))
        );
        assert_eq!(r.content, "aaaa\nbbbb\n");
        let r = cut(text, w, limits(2)).unwrap();
        assert_eq!(
            (r.end_line, r.content.as_str()),
            (1, "aaaa\n"),
            "first line always"
        );
        let spent_budget = Limits {
            first_line_always: false,
            ..limits(2)
        };
        assert_eq!(cut(text, w, spent_budget), None);
        let capped = Limits {
            budget: 100,
            line_cap: 3,
            first_line_always: true,
        };
        let r = cut(text, w, capped).unwrap();
        assert_eq!(
            (
                r.content.as_str(),
                r.line_cut,
                r.next_start_line,
                r.truncated
            ),
            ("aaa", Some(2), Some(2), true)
        );
        // The cut never splits a UTF-8 character.
        let wide = t("ééé\n");
        let r = cut(&wide, window(&wide, None, None, 500).unwrap(), capped).unwrap();
        assert_eq!((r.content.as_str(), r.line_cut), ("é", Some(5)));
    }

    fn arb_text() -> impl Strategy<Value = String> {
        let line = prop_oneof![
            Just(String::new()),
            "[a-z ]{0,20}",
            "[é€😀a]{0,8}",
            "[x]{100,400}",
        ];
        let ending = prop_oneof![Just("\n"), Just("\r\n"), Just("")];
        (prop::collection::vec((line, ending), 0..40)).prop_map(|parts| {
            parts
                .into_iter()
                .map(|(l, e)| format!("{l}{e}"))
                .collect::<String>()
        })
    }

    proptest! {
        /// following `next_start_line` until `has_more` is false reproduces the file
        /// byte for byte, for any budget and any window size.
        #[test]
        fn r2_continuation_reproduces_file(text in arb_text(), budget in 1usize..600, lines in 1u64..50) {
            let indexed = t(&text);
            let total = indexed.line_count();
            let mut rebuilt = String::new();
            let mut next = Some(1u64);
            let mut calls = 0;
            while let Some(start) = next {
                let w = window(&indexed, Some(start), None, lines).unwrap();
                let r = cut(&indexed, w, limits(budget)).unwrap();
                prop_assert!(r.end_line >= r.start_line || total == 0, "progress");
                prop_assert_eq!(r.total_lines, total);
                rebuilt.push_str(&r.content);
                prop_assert_eq!(r.has_more, r.next_start_line.is_some());
                next = r.next_start_line;
                calls += 1;
                prop_assert!(calls <= total + 1);
            }
            prop_assert_eq!(rebuilt, text);
        }
    }
}
