//! One highlighting run: the events of `tree-sitter-highlight` flattened into spans that
//! never cross a line end, under a watchdog that cancels the run at its deadline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use tree_sitter_highlight::{HighlightEvent, Highlighter};

use crate::configs::{configuration, injected};
use crate::{Class, Grammar, Highlighted, Limits, Outcome, Span, line_starts};

/// Highlighters kept between runs, whichever thread ran them. A new highlighter is slow for
/// its first few files (its parser's and query cursors' buffers grow: a 5,000-line file
/// took 50–55 ms instead of 30 on each of a new one's first runs), and the threads that run
/// highlighting (a blocking pool's) come and go, so per-thread ones were often new.
static HIGHLIGHTERS: Mutex<Vec<Highlighter>> = Mutex::new(Vec::new());
/// Highlighters kept at most (more run at once only under more concurrent first views).
const KEPT_HIGHLIGHTERS: usize = 8;

/// Runs `work` with a kept highlighter (the most recently used: the warmest), or a new one.
/// Only a highlighter whose run succeeded is kept: a parse cancelled at its deadline leaves
/// the parser mid-parse, and tree-sitter would resume that parse on the next text.
fn with_highlighter<T, E>(work: impl FnOnce(&mut Highlighter) -> Result<T, E>) -> Result<T, E> {
    let lock = || {
        HIGHLIGHTERS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let mut highlighter = lock().pop().unwrap_or_default();
    let answer = work(&mut highlighter);
    if answer.is_ok() {
        let mut kept = lock();
        if kept.len() < KEPT_HIGHLIGHTERS {
            kept.push(highlighter);
        }
    }
    answer
}

/// Highlights `text` as `grammar` within `limits`; without a grammar, over the size limit,
/// past the deadline or on a parser failure the text comes back plain (see
/// [`Highlighted::outcome`]). Blocks the calling thread for at most about the deadline.
pub fn highlight(grammar: Option<Grammar>, text: &str, limits: Limits) -> Highlighted {
    let shared: Arc<str> = Arc::from(text);
    let Some(grammar) = grammar else {
        return Highlighted::plain(shared, None, Outcome::NoGrammar);
    };
    if text.len() > limits.max_bytes || text.len() > u32::MAX as usize {
        return Highlighted::plain(
            shared,
            Some(grammar),
            Outcome::TooLarge {
                limit: limits.max_bytes,
            },
        );
    }
    let cancel = AtomicUsize::new(0);
    let (done, finished) = mpsc::channel::<()>();
    let deadline = limits.deadline;
    let flag = &cancel;
    let spans = std::thread::scope(|scope| {
        // The watchdog: sleeps until the run ends (the sender is dropped) or the deadline
        // passes, then raises the flag tree-sitter polls while parsing and matching.
        let watchdog = std::thread::Builder::new()
            .name("highlight-watchdog".into())
            .spawn_scoped(scope, move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(deadline) {
                    flag.store(1, Ordering::Relaxed);
                }
            });
        if watchdog.is_err() {
            // No thread, no bound on the run: better plain than unbounded.
            return Err(Outcome::Failed);
        }
        let spans = run(grammar, text, &cancel);
        drop(done);
        spans
    });
    match spans {
        Ok(spans) => {
            let starts = line_starts(text);
            let line_spans = index_lines(&starts, &spans);
            Highlighted {
                text: shared,
                grammar: Some(grammar),
                line_starts: starts,
                line_spans,
                spans,
                outcome: Outcome::Highlighted,
            }
        }
        Err(outcome) => Highlighted::plain(shared, Some(grammar), outcome),
    }
}

/// The spans of `text`, split at line ends; the innermost capture wins where captures nest.
fn run(grammar: Grammar, text: &str, cancel: &AtomicUsize) -> Result<Vec<Span>, Outcome> {
    let config = configuration(grammar).map_err(|_| Outcome::Failed)?;
    with_highlighter(|highlighter| {
        let events = highlighter
            .highlight(config, text.as_bytes(), None, Some(cancel), |name| {
                injected(name)
            })
            .map_err(|e| outcome_of(&e))?;
        let mut stack: Vec<Option<Class>> = Vec::new();
        let mut spans = Vec::new();
        for event in events {
            match event.map_err(|e| outcome_of(&e))? {
                HighlightEvent::HighlightStart(h) => stack.push(Class::from_index(h.0)),
                HighlightEvent::HighlightEnd => {
                    stack.pop();
                }
                HighlightEvent::Source { start, end } => {
                    if let Some(Some(class)) = stack.last() {
                        push_split(&mut spans, text, start, end, *class);
                    }
                }
            }
        }
        Ok(spans)
    })
}

fn outcome_of(error: &tree_sitter_highlight::Error) -> Outcome {
    match error {
        tree_sitter_highlight::Error::Cancelled => Outcome::TimedOut,
        _ => Outcome::Failed,
    }
}

/// Pushes `start..end` as spans that stop at each `\n` (which belongs to no span).
fn push_split(spans: &mut Vec<Span>, text: &str, start: usize, end: usize, class: Class) {
    let bytes = text.as_bytes();
    let mut at = start;
    while at < end {
        let stop = bytes[at..end]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(end, |p| at + p);
        if stop > at {
            // Offsets fit: the caller refused texts over u32::MAX bytes.
            spans.push(Span {
                start: at as u32,
                end: stop as u32,
                class,
            });
        }
        at = stop + 1;
    }
}

/// For each line, the index of its first span (spans are in order and within one line).
fn index_lines(starts: &[u32], spans: &[Span]) -> Vec<u32> {
    let mut out = Vec::with_capacity(starts.len());
    let mut s = 0usize;
    for &start in starts {
        while s < spans.len() && spans[s].start < start {
            s += 1;
        }
        out.push(s as u32);
    }
    out
}
