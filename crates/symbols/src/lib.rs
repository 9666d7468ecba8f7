//! Symbols of source files (issue 12): which names a file defines, of what kind, on which
//! lines, inside which other definition. Extraction runs `tree-sitter` with
//! `tree-sitter-tags` and each grammar's own `tags.scm`, so what counts as a definition is
//! what the grammar's authors say it is; a few patterns are put *before* them (see
//! [`Grammar`]) where the grammar's query tags only a declarator, so that a C function's
//! range covers its body and a Rust `impl` block can be a parent.
//!
//! This is search-based navigation, not a compiler's: names are not resolved across files,
//! macros are not expanded, and a file that does not parse still yields whatever the parser
//! recovered.
//!
//! Bounds: at most [`MAX_SYMBOLS_PER_FILE`] symbols per file; names longer than
//! [`MAX_NAME_BYTES`] are left out; signatures are the name's line, trimmed and cut at
//! [`MAX_SIGNATURE_BYTES`]. The caller bounds the file size (the search index passes at most
//! its `max_file_bytes`).

use std::sync::OnceLock;
use std::sync::atomic::AtomicUsize;

use tree_sitter::Language;
use tree_sitter_tags::{TagsConfiguration, TagsContext};

/// Most symbols kept for one file (generated tables can define hundreds of thousands).
pub const MAX_SYMBOLS_PER_FILE: usize = 20_000;
/// Longest name kept, in bytes; longer "names" are parser recoveries of garbage.
pub const MAX_NAME_BYTES: usize = 200;
/// Longest signature, in bytes (cut on a character boundary).
pub const MAX_SIGNATURE_BYTES: usize = 200;

/// Why a file yielded no symbols.
#[derive(Debug, thiserror::Error)]
pub enum SymbolError {
    /// A tags query did not compile against its grammar: a bug of this crate, which its tests
    /// exercise for every grammar.
    #[error("the {grammar} tags query does not compile: {detail}")]
    Query {
        /// The grammar's name.
        grammar: &'static str,
        /// The tree-sitter error.
        detail: String,
    },
    /// The parser gave up (it was cancelled or the grammar does not match the parser).
    #[error("the {grammar} parser could not parse the file: {detail}")]
    Parse {
        /// The grammar's name.
        grammar: &'static str,
        /// The tree-sitter error.
        detail: String,
    },
}

/// A grammar symbols are extracted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Grammar {
    /// `.rs`
    Rust,
    /// `.go`
    Go,
    /// `.py`, `.pyi`
    Python,
    /// `.js`, `.mjs`, `.cjs`, `.jsx`
    JavaScript,
    /// `.ts`, `.mts`, `.cts`
    TypeScript,
    /// `.tsx`
    Tsx,
    /// `.java`
    Java,
    /// `.c`
    C,
    /// `.cc`, `.cpp`, `.cxx`, `.hpp`, `.hh`, `.hxx` and `.h` (the C++ grammar also parses C
    /// headers, the C grammar does not parse C++ ones).
    Cpp,
}

/// Every grammar, in a fixed order (the index of a grammar's configuration).
pub const GRAMMARS: [Grammar; 9] = [
    Grammar::Rust,
    Grammar::Go,
    Grammar::Python,
    Grammar::JavaScript,
    Grammar::TypeScript,
    Grammar::Tsx,
    Grammar::Java,
    Grammar::C,
    Grammar::Cpp,
];

/// Patterns put before the C grammar's tags: a function *definition* spans its body (the
/// grammar's own pattern tags the declarator only, which it keeps for prototypes).
const C_EXTRA: &str = r#"
(function_definition declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(function_definition declarator: (pointer_declarator declarator: (function_declarator declarator: (identifier) @name))) @definition.function
"#;

/// C++ additions on top of [`C_EXTRA`]: methods defined in a class or as `Type::name`, and
/// namespaces as parents.
const CPP_EXTRA: &str = r#"
(function_definition declarator: (function_declarator declarator: (field_identifier) @name)) @definition.method
(function_definition declarator: (function_declarator declarator: (qualified_identifier name: (identifier) @name))) @definition.method
(function_definition declarator: (reference_declarator (function_declarator declarator: (identifier) @name))) @definition.function
(namespace_definition name: (namespace_identifier) @name) @definition.module
"#;

/// Rust additions: `impl` blocks (named by their type, so that methods have a parent),
/// constants and statics.
const RUST_EXTRA: &str = r#"
(impl_item type: (type_identifier) @name) @definition.implementation
(impl_item type: (generic_type type: (type_identifier) @name)) @definition.implementation
(impl_item type: (scoped_type_identifier name: (type_identifier) @name)) @definition.implementation
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.constant
"#;

/// Java additions: constructors and enums, which the grammar's query leaves out.
const JAVA_EXTRA: &str = r#"
(constructor_declaration name: (identifier) @name) @definition.method
(enum_declaration name: (identifier) @name) @definition.class
(record_declaration name: (identifier) @name) @definition.class
"#;

/// Go additions: the grammar's query tags every type *use* as a reference; nothing to add
/// for definitions but constants and package variables.
const GO_EXTRA: &str = r#"
(source_file (const_declaration (const_spec name: (identifier) @name) @definition.constant))
(source_file (var_declaration (var_spec name: (identifier) @name) @definition.constant))
"#;

impl Grammar {
    /// The grammar for a path, by its extension; `None` for languages without symbols.
    pub fn for_path(path: &str) -> Option<Grammar> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let (_, ext) = name.rsplit_once('.')?;
        Some(match ext {
            "rs" => Grammar::Rust,
            "go" => Grammar::Go,
            "py" | "pyi" => Grammar::Python,
            "js" | "mjs" | "cjs" | "jsx" => Grammar::JavaScript,
            "ts" | "mts" | "cts" => Grammar::TypeScript,
            "tsx" => Grammar::Tsx,
            "java" => Grammar::Java,
            "c" => Grammar::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" | "h" => Grammar::Cpp,
            _ => return None,
        })
    }

    /// The language name, as the search `lang` filter spells it.
    pub fn lang(self) -> &'static str {
        match self {
            Grammar::Rust => "rust",
            Grammar::Go => "go",
            Grammar::Python => "python",
            Grammar::JavaScript => "javascript",
            Grammar::TypeScript | Grammar::Tsx => "typescript",
            Grammar::Java => "java",
            Grammar::C => "c",
            Grammar::Cpp => "cpp",
        }
    }

    fn index(self) -> usize {
        GRAMMARS.iter().position(|g| *g == self).unwrap_or(0)
    }

    /// The grammar's tree-sitter language (what `crates/highlight` parses with, so both
    /// crates map a path to the same grammar).
    pub fn language(self) -> Language {
        match self {
            Grammar::Rust => tree_sitter_rust::LANGUAGE.into(),
            Grammar::Go => tree_sitter_go::LANGUAGE.into(),
            Grammar::Python => tree_sitter_python::LANGUAGE.into(),
            Grammar::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
            Grammar::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Grammar::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
            Grammar::Java => tree_sitter_java::LANGUAGE.into(),
            Grammar::C => tree_sitter_c::LANGUAGE.into(),
            Grammar::Cpp => tree_sitter_cpp::LANGUAGE.into(),
        }
    }

    /// The tags query: our patterns first (the lowest pattern wins when two tag one name),
    /// then the grammar's own `tags.scm`. TypeScript's query is written to extend
    /// JavaScript's, as the tree-sitter CLI combines them.
    fn tags_query(self) -> String {
        match self {
            Grammar::Rust => format!("{RUST_EXTRA}\n{}", tree_sitter_rust::TAGS_QUERY),
            Grammar::Go => format!("{GO_EXTRA}\n{}", tree_sitter_go::TAGS_QUERY),
            Grammar::Python => tree_sitter_python::TAGS_QUERY.to_owned(),
            Grammar::JavaScript => tree_sitter_javascript::TAGS_QUERY.to_owned(),
            Grammar::TypeScript | Grammar::Tsx => format!(
                "{}\n{}",
                tree_sitter_typescript::TAGS_QUERY,
                tree_sitter_javascript::TAGS_QUERY
            ),
            Grammar::Java => format!("{JAVA_EXTRA}\n{}", tree_sitter_java::TAGS_QUERY),
            Grammar::C => format!("{C_EXTRA}\n{}", tree_sitter_c::TAGS_QUERY),
            Grammar::Cpp => format!("{C_EXTRA}\n{CPP_EXTRA}\n{}", tree_sitter_cpp::TAGS_QUERY),
        }
    }

    fn configuration(self) -> Result<&'static TagsConfiguration, SymbolError> {
        static CONFIGS: [OnceLock<Result<TagsConfiguration, String>>; GRAMMARS.len()] =
            [const { OnceLock::new() }; GRAMMARS.len()];
        CONFIGS[self.index()]
            .get_or_init(|| {
                let source = self.tags_query();
                let mut config = TagsConfiguration::new(self.language(), &source, "")
                    .map_err(|e| e.to_string())?;
                // Only definitions are kept, so reference patterns (every call, every type
                // use) would cost matches for nothing: about half the extraction time.
                for pattern in 0..config.query.pattern_count() {
                    let start = config.query.start_byte_for_pattern(pattern);
                    let end = config.query.end_byte_for_pattern(pattern);
                    if !source
                        .get(start..end)
                        .is_some_and(|text| text.contains("@definition."))
                    {
                        config.query.disable_pattern(pattern);
                    }
                }
                Ok(config)
            })
            .as_ref()
            .map_err(|detail| SymbolError::Query {
                grammar: self.lang(),
                detail: detail.clone(),
            })
    }
}

/// What a symbol is, as the tags query names its capture (`@definition.<kind>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SymbolKind {
    /// A free function.
    Function,
    /// A function inside a class, interface or `impl` (or tagged a method by the grammar).
    Method,
    /// A class; also a Rust struct, enum, union or type alias (the Rust grammar's choice).
    Class,
    /// An interface, a Rust trait.
    Interface,
    /// A module or namespace.
    Module,
    /// A macro definition.
    Macro,
    /// A type definition (C `typedef`, Go `type`).
    Type,
    /// A constant or module-level variable.
    Constant,
    /// A Rust `impl` block, named by its type.
    Implementation,
    /// Another kind a grammar's query names.
    Other,
}

impl SymbolKind {
    /// The kind's name in answers.
    pub fn as_str(self) -> &'static str {
        match self {
            SymbolKind::Function => "function",
            SymbolKind::Method => "method",
            SymbolKind::Class => "class",
            SymbolKind::Interface => "interface",
            SymbolKind::Module => "module",
            SymbolKind::Macro => "macro",
            SymbolKind::Type => "type",
            SymbolKind::Constant => "constant",
            SymbolKind::Implementation => "impl",
            SymbolKind::Other => "other",
        }
    }

    /// The kind named `name` by [`SymbolKind::as_str`] or by a tags capture.
    pub fn from_name(name: &str) -> SymbolKind {
        match name {
            "function" => SymbolKind::Function,
            "method" => SymbolKind::Method,
            "class" => SymbolKind::Class,
            "interface" => SymbolKind::Interface,
            "module" => SymbolKind::Module,
            "macro" => SymbolKind::Macro,
            "type" => SymbolKind::Type,
            "constant" => SymbolKind::Constant,
            "implementation" | "impl" => SymbolKind::Implementation,
            _ => SymbolKind::Other,
        }
    }

    /// A stable number for storage.
    pub fn to_u8(self) -> u8 {
        self as u8
    }

    /// The kind stored as [`SymbolKind::to_u8`]; unknown numbers are [`SymbolKind::Other`].
    pub fn from_u8(value: u8) -> SymbolKind {
        const ALL: [SymbolKind; 10] = [
            SymbolKind::Function,
            SymbolKind::Method,
            SymbolKind::Class,
            SymbolKind::Interface,
            SymbolKind::Module,
            SymbolKind::Macro,
            SymbolKind::Type,
            SymbolKind::Constant,
            SymbolKind::Implementation,
            SymbolKind::Other,
        ];
        ALL.get(usize::from(value))
            .copied()
            .unwrap_or(SymbolKind::Other)
    }

    fn contains_methods(self) -> bool {
        matches!(
            self,
            SymbolKind::Class | SymbolKind::Interface | SymbolKind::Implementation
        )
    }
}

/// One definition in a file. Lines are 1-based and inclusive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// What it is.
    pub kind: SymbolKind,
    /// The defined name, as written.
    pub name: String,
    /// The line of the name.
    pub line: u32,
    /// The first line of the definition (a doc comment the grammar attaches is not included).
    pub start_line: u32,
    /// The last line of the definition.
    pub end_line: u32,
    /// The innermost definition containing this one: an index into the same file's list.
    pub parent: Option<u32>,
    /// The name's line, trimmed, at most [`MAX_SIGNATURE_BYTES`].
    pub signature: String,
}

/// Extracts symbols; holds a parser and a query cursor, so keep one per thread.
pub struct Extractor {
    context: TagsContext,
}

impl Default for Extractor {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Extractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extractor").finish_non_exhaustive()
    }
}

/// Start offsets of a text's lines, to turn byte offsets into 1-based line numbers and
/// line numbers into lines.
pub struct LineStarts(Vec<usize>);

impl LineStarts {
    /// The line starts of `source`.
    pub fn new(source: &[u8]) -> LineStarts {
        let mut starts = Vec::with_capacity(source.len() / 32 + 1);
        starts.push(0);
        starts.extend(memchr::memchr_iter(b'\n', source).map(|at| at + 1));
        LineStarts(starts)
    }

    /// The 1-based line holding byte `at`.
    pub fn line(&self, at: usize) -> u32 {
        self.0.partition_point(|&start| start <= at) as u32
    }

    /// Line `line` (1-based) of `source` without its line break; empty past the end.
    pub fn text<'a>(&self, source: &'a [u8], line: u32) -> &'a [u8] {
        let index = line.saturating_sub(1) as usize;
        let start = self.0.get(index).copied().unwrap_or(source.len());
        let end = self
            .0
            .get(index + 1)
            .map_or(source.len(), |next| next.saturating_sub(1));
        source.get(start..end.max(start)).unwrap_or(&[])
    }
}

/// The signature shown for a definition whose name is on `line` (without its line break):
/// the line trimmed, cut at [`MAX_SIGNATURE_BYTES`] on a character boundary.
pub fn signature(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    text[..text.floor_char_boundary(MAX_SIGNATURE_BYTES)].to_owned()
}

impl Extractor {
    /// A new extractor.
    pub fn new() -> Extractor {
        Extractor {
            context: TagsContext::new(),
        }
    }

    /// The definitions of `source` (a file in `grammar`'s language), in the order they start.
    pub fn extract(&mut self, grammar: Grammar, source: &[u8]) -> Result<Vec<Symbol>, SymbolError> {
        self.extract_with(grammar, source, None)
    }

    /// [`Extractor::extract`] that stops with an error once `cancel` is non-zero (a call's
    /// budget flag): a parse of a large file must not outlive the call that asked for it.
    pub fn extract_within(
        &mut self,
        grammar: Grammar,
        source: &[u8],
        cancel: &AtomicUsize,
    ) -> Result<Vec<Symbol>, SymbolError> {
        self.extract_with(grammar, source, Some(cancel))
    }

    fn extract_with(
        &mut self,
        grammar: Grammar,
        source: &[u8],
        cancel: Option<&AtomicUsize>,
    ) -> Result<Vec<Symbol>, SymbolError> {
        let config = grammar.configuration()?;
        let parse_error = |e: tree_sitter_tags::Error| SymbolError::Parse {
            grammar: grammar.lang(),
            detail: e.to_string(),
        };
        let (tags, _) = self
            .context
            .generate_tags(config, source, cancel)
            .map_err(parse_error)?;
        let lines = LineStarts::new(source);
        // (start byte, end byte, symbol): sorted to find parents by containment.
        let mut found: Vec<(usize, usize, Symbol)> = Vec::new();
        for tag in tags {
            let tag = tag.map_err(parse_error)?;
            if !tag.is_definition || tag.name_range.len() > MAX_NAME_BYTES {
                continue;
            }
            let Some(name) = source
                .get(tag.name_range.clone())
                .and_then(|b| std::str::from_utf8(b).ok())
            else {
                continue;
            };
            if name.trim().is_empty() {
                continue;
            }
            let line = lines.line(tag.name_range.start);
            let last_byte = tag.range.end.saturating_sub(1).max(tag.range.start);
            found.push((
                tag.range.start,
                tag.range.end,
                Symbol {
                    kind: SymbolKind::from_name(config.syntax_type_name(tag.syntax_type_id)),
                    name: name.to_owned(),
                    line,
                    start_line: lines.line(tag.range.start),
                    end_line: lines.line(last_byte).max(line),
                    parent: None,
                    signature: signature(lines.text(source, line)),
                },
            ));
            if found.len() >= MAX_SYMBOLS_PER_FILE {
                break;
            }
        }
        // Outer definitions before the ones they contain.
        found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        let mut open: Vec<(usize, u32)> = Vec::new(); // (end byte, index) of containing symbols
        let mut symbols = Vec::with_capacity(found.len());
        for (start, end, mut symbol) in found {
            while open
                .last()
                .is_some_and(|&(open_end, _)| open_end < end || open_end <= start)
            {
                open.pop();
            }
            if let Some(&(_, parent)) = open.last() {
                symbol.parent = Some(parent);
                // A function directly inside a class or impl is a method (Python tags
                // every `def` a function).
                let parent_kind = symbols
                    .get(parent as usize)
                    .map(|p: &Symbol| p.kind)
                    .unwrap_or(SymbolKind::Other);
                if symbol.kind == SymbolKind::Function && parent_kind.contains_methods() {
                    symbol.kind = SymbolKind::Method;
                }
            }
            // The Rust query calls every function in a `{ }` item list a method, a `mod`'s
            // included.
            if grammar == Grammar::Rust
                && symbol.kind == SymbolKind::Method
                && !symbol
                    .parent
                    .and_then(|p| symbols.get(p as usize))
                    .is_some_and(|p: &Symbol| p.kind.contains_methods())
            {
                symbol.kind = SymbolKind::Function;
            }
            let index = symbols.len() as u32;
            open.push((end, index));
            symbols.push(symbol);
        }
        Ok(symbols)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grammar_query_compiles() {
        for grammar in GRAMMARS {
            if let Err(error) = grammar.configuration() {
                panic!("{error}");
            }
        }
    }

    #[test]
    fn paths_choose_grammars() {
        assert_eq!(Grammar::for_path("src/main.rs"), Some(Grammar::Rust));
        assert_eq!(Grammar::for_path("a/b.tsx"), Some(Grammar::Tsx));
        assert_eq!(Grammar::for_path("include/x.h"), Some(Grammar::Cpp));
        assert_eq!(Grammar::for_path("README.md"), None);
        assert_eq!(Grammar::for_path("Makefile"), None);
        assert_eq!(Grammar::for_path(".rs"), Some(Grammar::Rust));
    }

    #[test]
    fn kinds_round_trip_through_storage() {
        for n in 0..=9u8 {
            assert_eq!(SymbolKind::from_u8(n).to_u8(), n);
        }
        assert_eq!(SymbolKind::from_u8(200), SymbolKind::Other);
    }

    #[test]
    fn lines_and_parents_of_a_nested_definition() {
        let source = b"struct A;\n\nimpl A {\n    fn f(&self) {\n        1;\n    }\n}\n";
        let symbols = Extractor::new().extract(Grammar::Rust, source).unwrap();
        let rows: Vec<_> = symbols
            .iter()
            .map(|s| (s.kind, s.name.as_str(), s.start_line, s.end_line, s.parent))
            .collect();
        assert_eq!(
            rows,
            [
                (SymbolKind::Class, "A", 1, 1, None),
                (SymbolKind::Implementation, "A", 3, 7, None),
                (SymbolKind::Method, "f", 4, 6, Some(1)),
            ]
        );
        assert_eq!(symbols[2].signature, "fn f(&self) {");
    }

    #[test]
    fn garbage_yields_no_error() {
        let mut extractor = Extractor::new();
        for grammar in GRAMMARS {
            let symbols = extractor
                .extract(grammar, b"}}}{{ fn class def (( \xff\xfe \0")
                .unwrap();
            assert!(symbols.len() <= 3, "{grammar:?}: {symbols:?}");
        }
    }
}
