//! Issue 34, point 1 (the file page's highlighting) and the benchmark line's per-blob cache:
//! real grammars, real `highlights.scm` queries.

use std::time::{Duration, Instant};

use highlight::{Cache, Grammar, Highlighted, Limits, Outcome, highlight};

/// (text, class name) of every token of line `n`.
fn tokens(h: &Highlighted, n: usize) -> Vec<(String, Option<&'static str>)> {
    h.line(n)
        .unwrap_or_default()
        .into_iter()
        .map(|t| (t.text.to_owned(), t.class.map(|c| c.name())))
        .collect()
}

fn class_of(h: &Highlighted, n: usize, text: &str) -> Option<&'static str> {
    tokens(h, n)
        .into_iter()
        .find(|(t, _)| t == text)
        .unwrap_or_else(|| panic!("no token {text:?} on line {n}: {:?}", tokens(h, n)))
        .1
}

#[test]
fn rust_keywords_strings_and_comments_have_their_classes() {
    let text = "// a comment\nfn main() {\n    let s = \"text\";\n}\n";
    let h = highlight(Some(Grammar::Rust), text, Limits::default());
    assert_eq!(h.outcome(), Outcome::Highlighted);
    assert_eq!(h.line_count(), 4);
    assert_eq!(class_of(&h, 1, "// a comment"), Some("comment"));
    assert_eq!(class_of(&h, 2, "fn"), Some("keyword"));
    assert_eq!(class_of(&h, 2, "main"), Some("function"));
    assert_eq!(class_of(&h, 3, "let"), Some("keyword"));
    assert_eq!(class_of(&h, 3, "\"text\""), Some("string"));
}

#[test]
fn python_keywords_strings_and_comments_have_their_classes() {
    let text = "# note\ndef add(a, b):\n    return \"sum\"\n";
    let h = highlight(Some(Grammar::Python), text, Limits::default());
    assert_eq!(h.outcome(), Outcome::Highlighted);
    assert_eq!(class_of(&h, 1, "# note"), Some("comment"));
    assert_eq!(class_of(&h, 2, "def"), Some("keyword"));
    assert_eq!(class_of(&h, 2, "add"), Some("function"));
    assert_eq!(class_of(&h, 3, "return"), Some("keyword"));
    assert_eq!(class_of(&h, 3, "\"sum\""), Some("string"));
}

#[test]
fn every_shipped_grammar_highlights_a_keyword() {
    let samples = [
        (Grammar::Rust, "fn f() {}\n", "fn"),
        (Grammar::Go, "package main\nfunc f() {}\n", "func"),
        (Grammar::Python, "def f():\n    pass\n", "def"),
        (
            Grammar::JavaScript,
            "function f() { return 1 }\n",
            "function",
        ),
        (
            Grammar::TypeScript,
            "function f(): number { return 1 }\n",
            "function",
        ),
        (Grammar::Tsx, "function f() { return <div/> }\n", "function"),
        (Grammar::Java, "class A { }\n", "class"),
        (Grammar::C, "int main() { return 0; }\n", "return"),
        (Grammar::Cpp, "class A { public: int x; };\n", "class"),
    ];
    for (grammar, text, keyword) in samples {
        let h = highlight(Some(grammar), text, Limits::default());
        assert_eq!(h.outcome(), Outcome::Highlighted, "{grammar:?}");
        let found = (1..=h.line_count())
            .flat_map(|n| tokens(&h, n))
            .any(|(t, c)| t == keyword && c == Some("keyword"));
        assert!(found, "{grammar:?}: no keyword {keyword:?}");
    }
}

#[test]
fn tokens_are_exactly_the_line_so_hostile_text_stays_text() {
    // The crate escapes nothing: the renderer must. What it guarantees is that tokens are
    // the line's bytes, in order, nothing added or lost (so escaping them escapes the line).
    let hostile =
        "let x = \"<script>window.__pwned = true</script>\"; // <img src=x onerror=alert(1)>\r\n";
    let text = format!("{hostile}fn f() {{}}\n<b>\n");
    for grammar in [Some(Grammar::Rust), None] {
        let h = highlight(grammar, &text, Limits::default());
        let lines: Vec<String> = (1..=h.line_count())
            .map(|n| tokens(&h, n).into_iter().map(|(t, _)| t).collect())
            .collect();
        assert_eq!(
            lines,
            [hostile.trim_end_matches("\r\n"), "fn f() {}", "<b>"],
            "{grammar:?}"
        );
    }
}

#[test]
fn plain_text_without_grammar_keeps_lines() {
    let h = highlight(None, "a\n\nb", Limits::default());
    assert_eq!(h.outcome(), Outcome::NoGrammar);
    assert_eq!(h.line_count(), 3);
    assert_eq!(tokens(&h, 2), Vec::<(String, Option<&str>)>::new());
    assert_eq!(tokens(&h, 3), [("b".to_owned(), None)]);
    assert!(h.line(4).is_none());
    assert_eq!(highlight(None, "", Limits::default()).line_count(), 0);
}

#[test]
fn multi_line_strings_and_comments_are_split_per_line() {
    let text = "/* one\n   two */\nfn f() {}\n";
    let h = highlight(Some(Grammar::Rust), text, Limits::default());
    assert_eq!(tokens(&h, 1), [("/* one".to_owned(), Some("comment"))]);
    assert_eq!(tokens(&h, 2), [("   two */".to_owned(), Some("comment"))]);
}

#[test]
fn the_cache_highlights_one_blob_once() {
    let cache = Cache::new(16 * 1024 * 1024, Limits::default());
    let text = "fn main() {}\n".repeat(100);
    let first = cache.highlight(Some(Grammar::Rust), &text);
    // The same content (one blob id, whatever path or commit shows it) is a hit.
    let again = cache.highlight(Some(Grammar::Rust), &text.clone());
    assert!(std::sync::Arc::ptr_eq(&first, &again));
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (1, 1, 1));
    // Another grammar or another content is another entry.
    cache.highlight(Some(Grammar::Cpp), &text);
    cache.highlight(Some(Grammar::Rust), &format!("{text}// more\n"));
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (1, 3, 3));
}

#[test]
fn the_cache_neither_keeps_nor_looks_up_plain_results() {
    let limits = Limits {
        max_bytes: 1000,
        ..Limits::default()
    };
    let cache = Cache::new(16 * 1024 * 1024, limits);
    let large = "fn main() {}\n".repeat(100);
    for _ in 0..2 {
        assert_eq!(
            cache.highlight(Some(Grammar::Rust), &large).outcome(),
            Outcome::TooLarge { limit: 1000 }
        );
        assert_eq!(
            cache.highlight(None, "plain\n").outcome(),
            Outcome::NoGrammar
        );
    }
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (0, 0, 0));
}

#[test]
fn the_cache_stays_within_its_byte_budget() {
    let budget = 64 * 1024;
    let cache = Cache::new(budget, Limits::default());
    for i in 0..40 {
        cache.highlight(
            Some(Grammar::Rust),
            &format!("fn f{i}() {{}}\n").repeat(100),
        );
        assert!(cache.stats().bytes <= budget);
    }
    let stats = cache.stats();
    assert!(stats.entries < 40, "{stats:?}");
    assert!(stats.entries > 0, "{stats:?}");
}

#[test]
fn over_the_size_limit_is_plain_without_parsing() {
    let limits = Limits {
        max_bytes: 1000,
        ..Limits::default()
    };
    let text = "fn main() {}\n".repeat(100);
    let h = highlight(Some(Grammar::Rust), &text, limits);
    assert_eq!(h.outcome(), Outcome::TooLarge { limit: 1000 });
    assert_eq!(tokens(&h, 1), [("fn main() {}".to_owned(), None)]);
    assert_eq!(h.line_count(), 100);
}

#[test]
fn a_run_past_its_deadline_is_cancelled_and_plain() {
    // The test's own bound: a run the watchdog failed to cancel fails here instead of hanging.
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        deadline_run();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(30)) {
        Ok(()) => {}
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("highlighting hung past 30 s"),
        // The run panicked (its assertion failed): the thread's message is on stderr.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("the run failed"),
    }
}

fn deadline_run() {
    // About 2 MB of deeply nested, unbalanced code: far more than a millisecond of work.
    let text = "fn f() { let x = [(((\"a\", {".repeat(80_000);
    let limits = Limits {
        max_bytes: usize::MAX,
        deadline: Duration::from_millis(1),
    };
    let started = Instant::now();
    let h = highlight(Some(Grammar::Rust), &text, limits);
    let took = started.elapsed();
    assert_eq!(h.outcome(), Outcome::TimedOut);
    assert!(took < Duration::from_secs(2), "took {took:?}");
    assert_eq!(h.line(1).map(|t| t.len()), Some(1));
    // The cache keeps the timed-out result: a hostile file costs its deadline once.
    let cache = Cache::new(64 * 1024 * 1024, limits);
    cache.highlight(Some(Grammar::Rust), &text);
    cache.highlight(Some(Grammar::Rust), &text);
    assert_eq!(cache.stats().hits, 1);
    // The runs after a cancelled one (more of them than highlighters are kept) each
    // highlight their own text: tree-sitter resumes a cancelled parse on a parser's next
    // call unless it is reset, so a cancelled run's highlighter is not kept.
    for i in 0..10 {
        let small = format!("fn main{i}() {{\n    let s = \"text\";\n}}\n");
        let h = highlight(Some(Grammar::Rust), &small, Limits::default());
        assert_eq!(h.outcome(), Outcome::Highlighted);
        assert_eq!(tokens(&h, 1).len(), 4, "{:?}", tokens(&h, 1));
        assert_eq!(class_of(&h, 1, &format!("main{i}")), Some("function"));
        assert_eq!(class_of(&h, 2, "\"text\""), Some("string"));
    }
}

#[test]
fn css_classes_are_prefixed_and_dashed() {
    let h = highlight(
        Some(Grammar::Rust),
        "fn f() { x.len(); }\n",
        Limits::default(),
    );
    let classes: Vec<&str> = h
        .line(1)
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.class.map(|c| c.css()))
        .collect();
    assert!(classes.contains(&"hl-keyword"), "{classes:?}");
    assert!(classes.contains(&"hl-function-method"), "{classes:?}");
    assert!(
        classes
            .iter()
            .all(|c| c.starts_with("hl-") && !c.contains('.'))
    );
}

/// The runs of a line (what the file page renders) cover its text exactly, in order and on
/// character boundaries, with CRLF line ends and non-ASCII text.
#[test]
fn line_runs_cover_each_line_exactly() {
    let text = "// é – ü\r\nfn f() { let s = \"añb\"; } // ü\r\n\r\nlast";
    let h = highlight(Some(Grammar::Rust), text, Limits::default());
    assert_eq!(h.outcome(), Outcome::Highlighted);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(h.line_count(), lines.len());
    for (n, expected) in (1..).zip(&lines) {
        let (line, runs) = h.line_runs(n).expect("a line");
        assert_eq!(line, *expected);
        let mut at = 0;
        for (range, _) in runs {
            assert_eq!(range.start, at, "line {n}");
            assert!(range.end > range.start && line.is_char_boundary(range.end));
            at = range.end;
        }
        assert_eq!(at, line.len(), "line {n}");
    }
    assert!(h.line_runs(lines.len() + 1).is_none());
    assert!(h.line_runs(0).is_none());
}

/// `Cache::cached` answers a kept result (a hit) and nothing else (no miss counted).
#[test]
fn cached_answers_only_what_was_highlighted() {
    let cache = Cache::new(1 << 20, Limits::default());
    let text = "fn a() {}\n";
    assert!(cache.cached(Some(Grammar::Rust), text).is_none());
    let first = cache.highlight(Some(Grammar::Rust), text);
    let kept = cache.cached(Some(Grammar::Rust), text).expect("kept");
    assert!(std::sync::Arc::ptr_eq(&first, &kept));
    assert!(cache.cached(Some(Grammar::Python), text).is_none());
    assert!(cache.cached(None, text).is_none());
    let stats = cache.stats();
    assert_eq!((stats.hits, stats.misses), (1, 1));
}
