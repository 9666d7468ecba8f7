//! One `HighlightConfiguration` per grammar, built once: the grammar's language (from
//! `symbols::Grammar::language`, the same mapping symbols use) and its highlights query,
//! combined as the tree-sitter CLI combines them for grammars that extend another
//! (TypeScript over JavaScript, C++ over C).

use std::sync::OnceLock;

use symbols::{GRAMMARS, Grammar};
use tree_sitter_highlight::HighlightConfiguration;

use crate::CAPTURE_NAMES;

/// The queries of a grammar: (highlights, injections, locals).
fn queries(grammar: Grammar) -> (String, &'static str, &'static str) {
    match grammar {
        Grammar::Rust => (
            tree_sitter_rust::HIGHLIGHTS_QUERY.to_owned(),
            tree_sitter_rust::INJECTIONS_QUERY,
            "",
        ),
        Grammar::Go => (tree_sitter_go::HIGHLIGHTS_QUERY.to_owned(), "", ""),
        Grammar::Python => (tree_sitter_python::HIGHLIGHTS_QUERY.to_owned(), "", ""),
        Grammar::JavaScript => (
            format!(
                "{}\n{}",
                tree_sitter_javascript::HIGHLIGHT_QUERY,
                tree_sitter_javascript::JSX_HIGHLIGHT_QUERY
            ),
            "",
            tree_sitter_javascript::LOCALS_QUERY,
        ),
        // tree-sitter-typescript's tree-sitter.json: JavaScript's highlights, then its own.
        Grammar::TypeScript => (
            format!(
                "{}\n{}",
                tree_sitter_javascript::HIGHLIGHT_QUERY,
                tree_sitter_typescript::HIGHLIGHTS_QUERY
            ),
            "",
            tree_sitter_typescript::LOCALS_QUERY,
        ),
        Grammar::Tsx => (
            format!(
                "{}\n{}\n{}",
                tree_sitter_javascript::HIGHLIGHT_QUERY,
                tree_sitter_javascript::JSX_HIGHLIGHT_QUERY,
                tree_sitter_typescript::HIGHLIGHTS_QUERY
            ),
            "",
            tree_sitter_typescript::LOCALS_QUERY,
        ),
        Grammar::Java => (tree_sitter_java::HIGHLIGHTS_QUERY.to_owned(), "", ""),
        Grammar::C => (tree_sitter_c::HIGHLIGHT_QUERY.to_owned(), "", ""),
        // tree-sitter-cpp's tree-sitter.json: C's highlights, then its own.
        Grammar::Cpp => (
            format!(
                "{}\n{}",
                tree_sitter_c::HIGHLIGHT_QUERY,
                tree_sitter_cpp::HIGHLIGHT_QUERY
            ),
            "",
            "",
        ),
    }
}

/// The configuration of `grammar`, or why it did not build (the query's error).
pub(crate) fn configuration(grammar: Grammar) -> Result<&'static HighlightConfiguration, String> {
    static CONFIGS: [OnceLock<Result<HighlightConfiguration, String>>; GRAMMARS.len()] =
        [const { OnceLock::new() }; GRAMMARS.len()];
    let index = GRAMMARS.iter().position(|g| *g == grammar).unwrap_or(0);
    CONFIGS[index]
        .get_or_init(|| {
            let (highlights, injections, locals) = queries(grammar);
            let mut config = HighlightConfiguration::new(
                grammar.language(),
                grammar.lang(),
                &highlights,
                injections,
                locals,
            )
            .map_err(|e| format!("the {} highlights query: {e}", grammar.lang()))?;
            config.configure(&CAPTURE_NAMES);
            Ok(config)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// The configuration an injection names (Rust re-parses macro bodies as Rust); `None` for a
/// language this crate does not highlight.
pub(crate) fn injected(language: &str) -> Option<&'static HighlightConfiguration> {
    let grammar = match language {
        "rust" => Grammar::Rust,
        "javascript" | "js" => Grammar::JavaScript,
        "typescript" | "ts" => Grammar::TypeScript,
        "python" => Grammar::Python,
        "go" => Grammar::Go,
        "c" => Grammar::C,
        "cpp" => Grammar::Cpp,
        "java" => Grammar::Java,
        _ => return None,
    };
    configuration(grammar).ok()
}
