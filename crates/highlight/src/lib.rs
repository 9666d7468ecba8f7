//! Syntax highlighting of one file (issue 34): text + grammar → per-line spans, each with
//! the CSS class of its `highlights.scm` capture. The parser and queries are the grammars the
//! project already ships (see `symbols::Grammar`, which also maps a path to its grammar);
//! `tree-sitter-highlight` runs each grammar's own `HIGHLIGHTS_QUERY`, so what is a keyword
//! or a string is what the grammar's authors say it is.
//!
//! Bounds, because the text is repository data and may be hostile:
//! - input over [`Limits::max_bytes`] is not parsed (the result is plain text);
//! - a watchdog cancels a run past [`Limits::deadline`] (tree-sitter checks the flag while
//!   parsing and while matching), and the result is plain text;
//! - [`Cache`] keeps results per blob up to a byte budget, least recently used out first,
//!   so a page shown again costs a lookup, and a file that timed out is not retried.
//!
//! Nothing here escapes HTML: spans are byte ranges into the text and the caller renders
//! each piece through its own escaping (the website: `maud` splices).

mod cache;
mod configs;
mod run;

pub use cache::{Cache, CacheStats};
pub use run::highlight;
pub use symbols::Grammar;

use std::sync::Arc;
use std::time::Duration;

/// The capture names this crate recognises (`tree-sitter-highlight` matches a capture to the
/// longest prefix here: `function.method.builtin` is `function.method`). The CSS class of a
/// span is [`Class::css`]. Brackets and delimiters (`punctuation`, `punctuation.bracket`,
/// `punctuation.delimiter`) are left out on purpose: they show in the text's own colour, and
/// as spans they were half of a source file's spans and a third of its page's bytes.
pub const CAPTURE_NAMES: [&str; 26] = [
    "attribute",
    "comment",
    "comment.documentation",
    "constant",
    "constant.builtin",
    "constructor",
    "embedded",
    "escape",
    "function",
    "function.builtin",
    "function.macro",
    "function.method",
    "keyword",
    "label",
    "module",
    "number",
    "operator",
    "property",
    "punctuation.special",
    "string",
    "string.special",
    "tag",
    "type",
    "type.builtin",
    "variable",
    "variable.builtin",
];

/// CSS classes of [`CAPTURE_NAMES`], in the same order: `hl-` and the name with `.` as `-`.
const CSS_CLASSES: [&str; 26] = [
    "hl-attribute",
    "hl-comment",
    "hl-comment-documentation",
    "hl-constant",
    "hl-constant-builtin",
    "hl-constructor",
    "hl-embedded",
    "hl-escape",
    "hl-function",
    "hl-function-builtin",
    "hl-function-macro",
    "hl-function-method",
    "hl-keyword",
    "hl-label",
    "hl-module",
    "hl-number",
    "hl-operator",
    "hl-property",
    "hl-punctuation-special",
    "hl-string",
    "hl-string-special",
    "hl-tag",
    "hl-type",
    "hl-type-builtin",
    "hl-variable",
    "hl-variable-builtin",
];

/// One recognised capture (an index into [`CAPTURE_NAMES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Class(u8);

impl Class {
    /// The capture's name, such as `keyword` or `function.method`.
    pub fn name(self) -> &'static str {
        CAPTURE_NAMES
            .get(usize::from(self.0))
            .copied()
            .unwrap_or("")
    }

    /// The CSS class of the capture, such as `hl-keyword` or `hl-function-method`.
    pub fn css(self) -> &'static str {
        CSS_CLASSES.get(usize::from(self.0)).copied().unwrap_or("")
    }

    /// Whether a name under this capture may be a definition's name used elsewhere
    /// (functions, types, variables, properties…), as opposed to comments, strings, keywords,
    /// literals, punctuation and builtins.
    pub fn may_name_definition(self) -> bool {
        matches!(
            self.name(),
            "constant"
                | "constructor"
                | "function"
                | "function.macro"
                | "function.method"
                | "module"
                | "property"
                | "type"
                | "variable"
                | "attribute"
        )
    }

    fn from_index(index: usize) -> Option<Class> {
        (index < CAPTURE_NAMES.len())
            .then(|| u8::try_from(index).ok().map(Class))
            .flatten()
    }
}

/// How much one highlighting run may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Larger texts are shown plain without being parsed.
    pub max_bytes: usize,
    /// A run still going after this is cancelled and the text shown plain.
    pub deadline: Duration,
}

impl Default for Limits {
    /// 1 MiB and one second: a hand-written source file of 25,000 lines highlights in well
    /// under that; what does not is generated or hostile, and plain text serves it.
    fn default() -> Self {
        Limits {
            max_bytes: 1024 * 1024,
            deadline: Duration::from_secs(1),
        }
    }
}

/// Whether (and why not) a text was highlighted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Spans from the grammar's highlights query.
    Highlighted,
    /// No grammar for this file: plain text.
    NoGrammar,
    /// Over [`Limits::max_bytes`]: plain text.
    TooLarge {
        /// The limit it was over.
        limit: usize,
    },
    /// Cancelled at [`Limits::deadline`]: plain text.
    TimedOut,
    /// The grammar's query did not load or the parser gave up: plain text. A bug of this
    /// crate (its tests load every grammar) or a parser refusing the input.
    Failed,
}

/// A run of one line with one class (or none: plain text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// The text, as in the file (not escaped).
    pub text: &'a str,
    /// The capture it is under, innermost first; `None` for text no capture covers.
    pub class: Option<Class>,
}

/// A classified byte range of the text; never crosses a line end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: u32,
    end: u32,
    class: Class,
}

/// A highlighted text: the text, where its lines begin, and its classified spans in order.
/// Lines follow the read contract: each ends after its `\n`, a last line without one still
/// counts, and an empty text has no lines.
#[derive(Debug)]
pub struct Highlighted {
    text: Arc<str>,
    grammar: Option<Grammar>,
    /// Byte offset where line `i + 1` begins.
    line_starts: Vec<u32>,
    /// Index into `spans` of the first span of line `i + 1` (spans never cross lines).
    line_spans: Vec<u32>,
    spans: Vec<Span>,
    outcome: Outcome,
}

impl Highlighted {
    /// A text without spans (no grammar, too large, timed out, failed).
    fn plain(text: Arc<str>, grammar: Option<Grammar>, outcome: Outcome) -> Highlighted {
        let line_starts = line_starts(&text);
        let line_spans = vec![0; line_starts.len()];
        Highlighted {
            text,
            grammar,
            line_starts,
            line_spans,
            spans: Vec::new(),
            outcome,
        }
    }

    /// The whole text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The grammar it was highlighted with (or would have been).
    pub fn grammar(&self) -> Option<Grammar> {
        self.grammar
    }

    /// Whether it was highlighted, and why not.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// Number of lines.
    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// The tokens of line `n` (1-based), without its line end (`\n` or `\r\n`); `None` past
    /// the last line. Classified spans and the plain text between them, in order; together
    /// they are exactly the line.
    pub fn line(&self, n: usize) -> Option<Vec<Token<'_>>> {
        let (text, runs) = self.line_runs(n)?;
        Some(
            runs.map(|(range, class)| Token {
                text: &text[range],
                class,
            })
            .collect(),
        )
    }

    /// Line `n` (1-based) without its line end, and its runs: byte ranges of that text with
    /// their class (`None`: no capture), in order and together exactly the text; `None`
    /// past the last line. What [`Highlighted::line`] gives, without a string per token.
    pub fn line_runs(&self, n: usize) -> Option<(&str, Runs<'_>)> {
        let i = n.checked_sub(1)?;
        let start = *self.line_starts.get(i)? as usize;
        let end = self
            .line_starts
            .get(i + 1)
            .map_or(self.text.len(), |&next| next as usize);
        let line = &self.text[start..end];
        let line = line.strip_suffix('\n').unwrap_or(line);
        let line = line.strip_suffix('\r').unwrap_or(line);
        let first = *self.line_spans.get(i)? as usize;
        let last = self
            .line_spans
            .get(i + 1)
            .map_or(self.spans.len(), |&next| next as usize);
        Some((
            line,
            Runs {
                spans: self.spans.get(first..last).unwrap_or(&[]),
                base: start,
                at: 0,
                len: line.len(),
                pending: None,
            },
        ))
    }

    /// Heap bytes this result holds (what the cache counts).
    pub fn heap_bytes(&self) -> usize {
        self.text.len()
            + self.line_starts.capacity() * 4
            + self.line_spans.capacity() * 4
            + self.spans.capacity() * std::mem::size_of::<Span>()
            + std::mem::size_of::<Self>()
    }
}

/// The runs of one line (see [`Highlighted::line_runs`]): byte ranges of the line's text.
#[derive(Debug, Clone)]
pub struct Runs<'a> {
    /// The line's spans, in order (offsets into the whole text).
    spans: &'a [Span],
    /// Where the line starts in the whole text.
    base: usize,
    /// The next byte of the line not yet given out.
    at: usize,
    /// The line's length without its line end.
    len: usize,
    /// A classified run to give after the plain text before it.
    pending: Option<(std::ops::Range<usize>, Class)>,
}

impl Iterator for Runs<'_> {
    type Item = (std::ops::Range<usize>, Option<Class>);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some((range, class)) = self.pending.take() {
            self.at = range.end;
            return Some((range, Some(class)));
        }
        while let Some((span, rest)) = self.spans.split_first() {
            self.spans = rest;
            let s = (span.start as usize).saturating_sub(self.base);
            let e = (span.end as usize).saturating_sub(self.base).min(self.len);
            if s >= e || s < self.at {
                continue;
            }
            if s > self.at {
                let plain = self.at..s;
                self.pending = Some((s..e, span.class));
                self.at = s;
                return Some((plain, None));
            }
            self.at = e;
            return Some((s..e, Some(span.class)));
        }
        if self.at < self.len {
            let rest = self.at..self.len;
            self.at = self.len;
            return Some((rest, None));
        }
        None
    }
}

/// Byte offsets where each line begins (no entry for an empty text).
fn line_starts(text: &str) -> Vec<u32> {
    let mut starts = Vec::new();
    if text.is_empty() {
        return starts;
    }
    starts.push(0);
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' && i + 1 < text.len() {
            // Texts are at most `Limits::max_bytes` when parsed and u32-sized in any case
            // (the store serves no text over 4 GiB).
            starts.push(u32::try_from(i + 1).unwrap_or(u32::MAX));
        }
    }
    starts
}
