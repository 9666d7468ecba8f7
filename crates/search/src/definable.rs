//! Whether a file can define a name, told without parsing it (S-8, issue 33 point 5).
//!
//! Why: a search at a commit that is not indexed ranks the definitions of an identifier
//! query first (module `rank`), so every added file holding the name had to be parsed with
//! tree-sitter: over a thousand commits of moby, ~580 files hold `TODO`, ~4 s of parsing on
//! this machine for one definition. Almost every such occurrence lies in a comment (`//
//! TODO`), a string, or after a `.` (`context.TODO()`), where no tags query of the `symbols`
//! crate ever captures a definition's name (names are identifier nodes, never comments or
//! strings). [`may_define`] answers `false` only when every occurrence of the name is such
//! a place; then the file has no definition of it and is not parsed.
//!
//! The judgement is one-sided by design: any doubt answers `true` (and the file is parsed
//! as before). A string that runs to the end of its line where the language forbids that, a
//! Java text block, a C++ raw string, an unterminated comment: all answer `true`. Rust,
//! JavaScript and TypeScript (raw strings, nested comments, lifetimes, regex literals and
//! template literals make a hand lexer guess) only get the checks that need no lexer.

use memchr::memmem::Finder;
use symbols::Grammar;

/// Whether `text` (a file `grammar` parses) may hold a definition named `name`: `false`
/// only when every occurrence of `name` is provably not a definition's name (see the module
/// docs). `finder` searches for `name`.
pub(crate) fn may_define(grammar: Grammar, text: &[u8], name: &[u8], finder: &Finder<'_>) -> bool {
    let selector_rule = matches!(grammar, Grammar::Go | Grammar::Java | Grammar::Python);
    let mut occurrences = finder
        .find_iter(text)
        .filter(|&at| whole_word(text, at, name.len()))
        .filter(|&at| !(selector_rule && after_dot(text, at)))
        .peekable();
    if occurrences.peek().is_none() {
        return false;
    }
    let occurrences: Vec<usize> = occurrences.collect();
    let lexer = match grammar {
        Grammar::Go => Lexer::CLike {
            go: true,
            cpp: false,
            java: false,
        },
        Grammar::C => Lexer::CLike {
            go: false,
            cpp: false,
            java: false,
        },
        Grammar::Cpp => Lexer::CLike {
            go: false,
            cpp: true,
            java: false,
        },
        Grammar::Java => Lexer::CLike {
            go: false,
            cpp: false,
            java: true,
        },
        Grammar::Python => Lexer::Python,
        Grammar::Rust | Grammar::JavaScript | Grammar::TypeScript | Grammar::Tsx => return true,
    };
    lexer.any_in_code(text, &occurrences)
}

/// Whether the `len` bytes at `at` are not part of a longer ASCII identifier (a name next to
/// an ASCII letter, digit or `_` is part of another token in every grammar here; a
/// neighbour that is not ASCII may be a letter of the same identifier or not: kept).
fn whole_word(text: &[u8], at: usize, len: usize) -> bool {
    let ident = |b: u8| b == b'_' || b.is_ascii_alphanumeric();
    let before = at.checked_sub(1).map(|i| text[i]);
    let after = text.get(at + len).copied();
    !before.is_some_and(ident) && !after.is_some_and(ident)
}

/// Whether the nearest byte before `at` on its line that is not a space or tab is a `.`: a
/// selector or attribute (`context.TODO`), never a declared name in Go, Java or Python.
/// Only the same line: the `.` ending the comment line above a declaration is no selector.
fn after_dot(text: &[u8], at: usize) -> bool {
    text[..at]
        .iter()
        .rev()
        .find(|&&b| b != b' ' && b != b'\t')
        .is_some_and(|&b| b == b'.')
}

/// The hand lexers: just enough of each language to tell code from comments and strings.
enum Lexer {
    /// C, C++, Go, Java: `//` and `/* */` comments, `"` strings and `'` characters (one
    /// line each, `\` escapes), Go's `` ` `` raw strings.
    CLike { go: bool, cpp: bool, java: bool },
    /// `#` comments, `'`/`"` strings (one line) and `'''`/`"""` strings.
    Python,
}

impl Lexer {
    /// Whether any of `occurrences` (ascending byte offsets) starts in code, or the lexer
    /// cannot tell (then `true`).
    fn any_in_code(&self, text: &[u8], occurrences: &[usize]) -> bool {
        let mut next = 0; // the first occurrence not yet passed
        let mut i = 0;
        while i < text.len() {
            // Occurrences before `i` lay inside a comment or string just skipped.
            while next < occurrences.len() && occurrences[next] < i {
                next += 1;
            }
            let Some(&occurrence) = occurrences.get(next) else {
                return false;
            };
            if occurrence == i {
                return true;
            }
            let skipped = match self {
                Lexer::CLike { go, cpp, java } => clike_token(text, i, *go, *cpp, *java),
                Lexer::Python => python_token(text, i),
            };
            match skipped {
                Token::Code => i += 1,
                Token::Skip(end) => i = end,
                Token::Unsure => return true,
            }
        }
        next < occurrences.len()
    }
}

/// What starts at a byte: code (one byte of it), a comment or literal ending before `end`,
/// or something the lexer does not handle.
enum Token {
    Code,
    Skip(usize),
    Unsure,
}

fn clike_token(text: &[u8], i: usize, go: bool, cpp: bool, java: bool) -> Token {
    let next = text.get(i + 1).copied();
    match text[i] {
        b'/' if next == Some(b'/') => Token::Skip(line_end(text, i)),
        b'/' if next == Some(b'*') => match memchr::memmem::find(&text[i + 2..], b"*/") {
            Some(at) => Token::Skip(i + 2 + at + 2),
            None => Token::Unsure,
        },
        b'"' => {
            if java && text[i..].starts_with(b"\"\"\"") {
                return Token::Unsure; // a text block
            }
            if cpp && i > 0 && text[i - 1] == b'R' {
                return Token::Unsure; // a raw string
            }
            quoted_line(text, i, b'"')
        }
        b'\'' => {
            if cpp && i > 0 && text[i - 1].is_ascii_alphanumeric() {
                return Token::Code; // a digit separator (`1'000`) or a prefix's quote
            }
            quoted_line(text, i, b'\'')
        }
        b'`' if go => match memchr::memchr(b'`', &text[i + 1..]) {
            Some(at) => Token::Skip(i + 1 + at + 1),
            None => Token::Unsure,
        },
        _ => Token::Code,
    }
}

fn python_token(text: &[u8], i: usize) -> Token {
    match text[i] {
        b'#' => Token::Skip(line_end(text, i)),
        quote @ (b'"' | b'\'') => {
            let triple = [quote; 3];
            if text[i..].starts_with(&triple) {
                let mut j = i + 3;
                while j < text.len() {
                    if text[j] == b'\\' {
                        j += 2;
                    } else if text[j..].starts_with(&triple) {
                        return Token::Skip(j + 3);
                    } else {
                        j += 1;
                    }
                }
                Token::Unsure
            } else {
                quoted_line(text, i, quote)
            }
        }
        _ => Token::Code,
    }
}

/// Where the line holding `i` ends (its newline, or the end of the text).
fn line_end(text: &[u8], i: usize) -> usize {
    memchr::memchr(b'\n', &text[i..]).map_or(text.len(), |at| i + at)
}

/// A literal opened by `quote` at `i` that closes on the same line (a `\` escapes the next
/// byte, a line break too): past its closing quote; unsure when the line ends first.
fn quoted_line(text: &[u8], i: usize, quote: u8) -> Token {
    let mut j = i + 1;
    while j < text.len() {
        match text[j] {
            b'\\' => j += 2,
            b'\n' => return Token::Unsure,
            b if b == quote => return Token::Skip(j + 1),
            _ => j += 1,
        }
    }
    Token::Unsure
}

#[cfg(test)]
mod tests {
    use super::*;

    fn may(grammar: Grammar, text: &str, name: &str) -> bool {
        let finder = Finder::new(name.as_bytes());
        may_define(grammar, text.as_bytes(), name.as_bytes(), &finder)
    }

    /// What tree-sitter's tags say, for comparison.
    fn defines(grammar: Grammar, text: &str, name: &str) -> bool {
        symbols::Extractor::new()
            .extract(grammar, text.as_bytes())
            .expect("extract")
            .iter()
            .any(|s| s.name == name)
    }

    #[test]
    fn s8_comments_strings_and_selectors_define_nothing() {
        let cases: &[(Grammar, &str)] = &[
            (
                Grammar::Go,
                "package a\n// TODO: x\n/* TODO\n */\nvar s = \"TODO\" + `\nTODO`\nfunc f() { context.TODO(); x. TODO() }\n",
            ),
            (
                Grammar::C,
                "/*\n * TODO\n */\nint f(void) { return 'T' + \"TODO\\\"\"[0]; } // TODO\n",
            ),
            (
                Grammar::Cpp,
                "int x = 1'000; // TODO\nconst char *s = \"TODO\";\n",
            ),
            (
                Grammar::Java,
                "class A { // TODO\n String s = \"TODO\"; void f() { a.TODO(); } }\n",
            ),
            (
                Grammar::Python,
                "# TODO\ns = 'TODO'\nt = \"\"\"\nTODO\n\"\"\"\nx.TODO()\ndef f():\n    return self.TODO\n",
            ),
            (Grammar::Go, "package a\nvar TODOS, XTODO = 1, 2\n"),
        ];
        for (grammar, text) in cases {
            assert!(!defines(*grammar, text, "TODO"), "{text}");
            assert!(!may(*grammar, text, "TODO"), "{grammar:?}: {text}");
        }
    }

    #[test]
    fn s8_every_definition_is_kept() {
        let cases: &[(Grammar, &str)] = &[
            (Grammar::Go, "package a\n// TODO\nfunc TODO() {}\n"),
            (
                Grammar::Go,
                "package a\nvar s = \"x\"\ntype TODO struct{}\n",
            ),
            (Grammar::Go, "package a\nconst (\n\tTODO = 1\n)\n"),
            (
                Grammar::Go,
                "package a\nconst (\n\t// The end.\n\tTODO = 1\n)\n",
            ),
            (Grammar::C, "/* TODO */ int TODO(void) { return 0; }\n"),
            (Grammar::Cpp, "struct TODO { int x; };\n"),
            (Grammar::Java, "class TODO { }\n"),
            (Grammar::Python, "'''doc'''\ndef TODO():\n    pass\n"),
            (Grammar::Rust, "// TODO\nfn TODO() {}\n"),
            (Grammar::JavaScript, "function TODO() {}\n"),
        ];
        for (grammar, text) in cases {
            assert!(defines(*grammar, text, "TODO"), "{text}");
            assert!(may(*grammar, text, "TODO"), "{grammar:?}: {text}");
        }
    }

    #[test]
    fn s8_what_the_lexer_cannot_tell_is_kept() {
        let cases: &[(Grammar, &str)] = &[
            (Grammar::Go, "package a\nvar s = \"open\n// TODO\n"),
            (
                Grammar::Java,
                "class A { String s = \"\"\"\nTODO\n\"\"\"; }\n",
            ),
            (Grammar::Cpp, "auto s = R\"(\n// TODO\n)\";\n"),
            (Grammar::C, "/* never closed\nTODO\n"),
            (Grammar::Python, "'''never closed\nTODO\n"),
            (Grammar::Rust, "// TODO\n"),
        ];
        for (grammar, text) in cases {
            assert!(may(*grammar, text, "TODO"), "{grammar:?}: {text}");
        }
    }
}

/// A check over real code (not run by default): `CSG_DEFINABLE_FILES` names a file listing
/// paths, one a line; for every file a grammar parses, every name tags define there must be
/// one [`may_define`] keeps.
#[cfg(test)]
mod corpus {
    use super::*;

    #[test]
    #[ignore = "needs CSG_DEFINABLE_FILES: a list of source files"]
    fn s8_no_definition_of_a_real_corpus_is_dropped() {
        let list = std::env::var("CSG_DEFINABLE_FILES").expect("CSG_DEFINABLE_FILES");
        let list = std::fs::read_to_string(list).expect("list");
        let mut extractor = symbols::Extractor::new();
        let (mut files, mut names, mut dropped) = (0, 0, Vec::new());
        for path in list.lines() {
            let Some(grammar) = Grammar::for_path(path) else {
                continue;
            };
            let Ok(text) = std::fs::read(path) else {
                continue;
            };
            files += 1;
            let found = extractor.extract(grammar, &text).unwrap_or_default();
            let mut seen = std::collections::HashSet::new();
            for symbol in found {
                // Only identifiers are searched for definitions (module `rank`).
                if !crate::rank::identifier(&symbol.name) || !seen.insert(symbol.name.clone()) {
                    continue;
                }
                names += 1;
                let finder = Finder::new(symbol.name.as_bytes());
                if !may_define(grammar, &text, symbol.name.as_bytes(), &finder) {
                    dropped.push(format!("{path}: {}", symbol.name));
                }
            }
        }
        println!("{files} files, {names} defined names");
        assert!(dropped.is_empty(), "{} dropped: {dropped:?}", dropped.len());
    }
}
