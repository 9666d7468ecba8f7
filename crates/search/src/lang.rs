//! The `lang` filter: language names mapped to file extensions (and a few file names).
//!
//! | lang | aliases | extensions / names |
//! |---|---|---|
//! | rust | rs | `.rs` |
//! | python | py | `.py` `.pyi` |
//! | markdown | md | `.md` `.markdown` |
//! | javascript | js | `.js` `.mjs` `.cjs` `.jsx` |
//! | typescript | ts | `.ts` `.tsx` `.mts` `.cts` |
//! | go | golang | `.go` |
//! | java | | `.java` |
//! | kotlin | kt | `.kt` `.kts` |
//! | c | | `.c` `.h` |
//! | cpp | c++ | `.cc` `.cpp` `.cxx` `.hpp` `.hh` `.hxx` `.h` |
//! | csharp | c#, cs | `.cs` |
//! | ruby | rb | `.rb` |
//! | php | | `.php` |
//! | swift | | `.swift` |
//! | scala | | `.scala` |
//! | haskell | hs | `.hs` |
//! | shell | sh, bash | `.sh` `.bash` `.zsh` |
//! | toml | | `.toml` |
//! | yaml | yml | `.yaml` `.yml` |
//! | json | | `.json` |
//! | html | | `.html` `.htm` |
//! | css | | `.css` `.scss` |
//! | sql | | `.sql` |
//! | wat | | `.wat` `.wast` |
//! | text | txt | `.txt` |
//! | make | makefile | `Makefile` `.mk` |
//! | dockerfile | docker | `Dockerfile` |

use crate::error::SearchError;

/// (name, aliases, extensions, exact file names)
type LangRow = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

const LANGS: &[LangRow] = &[
    ("rust", &["rs"], &["rs"], &[]),
    ("python", &["py"], &["py", "pyi"], &[]),
    ("markdown", &["md"], &["md", "markdown"], &[]),
    ("javascript", &["js"], &["js", "mjs", "cjs", "jsx"], &[]),
    ("typescript", &["ts"], &["ts", "tsx", "mts", "cts"], &[]),
    ("go", &["golang"], &["go"], &[]),
    ("java", &[], &["java"], &[]),
    ("kotlin", &["kt"], &["kt", "kts"], &[]),
    ("c", &[], &["c", "h"], &[]),
    (
        "cpp",
        &["c++"],
        &["cc", "cpp", "cxx", "hpp", "hh", "hxx", "h"],
        &[],
    ),
    ("csharp", &["c#", "cs"], &["cs"], &[]),
    ("ruby", &["rb"], &["rb"], &[]),
    ("php", &[], &["php"], &[]),
    ("swift", &[], &["swift"], &[]),
    ("scala", &[], &["scala"], &[]),
    ("haskell", &["hs"], &["hs"], &[]),
    ("shell", &["sh", "bash"], &["sh", "bash", "zsh"], &[]),
    ("toml", &[], &["toml"], &[]),
    ("yaml", &["yml"], &["yaml", "yml"], &[]),
    ("json", &[], &["json"], &[]),
    ("html", &[], &["html", "htm"], &[]),
    ("css", &[], &["css", "scss"], &[]),
    ("sql", &[], &["sql"], &[]),
    ("wat", &[], &["wat", "wast"], &[]),
    ("text", &["txt"], &["txt"], &[]),
    (
        "make",
        &["makefile"],
        &["mk"],
        &["Makefile", "makefile", "GNUmakefile"],
    ),
    ("dockerfile", &["docker"], &[], &["Dockerfile"]),
];

/// A resolved `lang` filter.
#[derive(Debug, Clone)]
pub(crate) struct LangFilter {
    name: &'static str,
    extensions: &'static [&'static str],
    names: &'static [&'static str],
}

/// The language a document is filtered by: its path's, or one a derived-state transform set
/// (P-21).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum DocLang {
    /// As [`lang_of`] maps the path.
    #[default]
    FromPath,
    /// No language: no `lang` filter matches the document.
    Unknown,
    /// This language; a known name or alias is stored as its canonical name, any other
    /// lower-cased (so no `lang` filter matches it).
    Named(String),
}

/// Longest language name a document keeps (longer ones are cut).
pub const MAX_LANG_BYTES: usize = 64;

impl DocLang {
    /// The language `name` (a name or alias of the `lang` table, or any other word).
    pub fn named(name: &str) -> DocLang {
        match LangFilter::parse(name) {
            Ok(filter) => DocLang::Named(filter.name.to_owned()),
            Err(_) => {
                let name = name.trim().to_lowercase();
                DocLang::Named(name[..name.floor_char_boundary(MAX_LANG_BYTES)].to_owned())
            }
        }
    }
}

impl LangFilter {
    /// Resolves a language name or alias (case-insensitive).
    pub(crate) fn parse(lang: &str) -> Result<Self, SearchError> {
        let wanted = lang.trim().to_ascii_lowercase();
        LANGS
            .iter()
            .find(|(name, aliases, _, _)| *name == wanted || aliases.contains(&wanted.as_str()))
            .map(|(name, _, extensions, names)| LangFilter {
                name,
                extensions,
                names,
            })
            .ok_or_else(|| SearchError::UnknownLang {
                lang: lang.to_owned(),
                known: known_langs().join(", "),
            })
    }

    /// Whether a document at `path` with language `lang` is of this language.
    pub(crate) fn matches_doc(&self, path: &str, lang: &DocLang) -> bool {
        match lang {
            DocLang::FromPath => self.matches(path),
            DocLang::Unknown => false,
            DocLang::Named(name) => name == self.name,
        }
    }

    /// Whether a repository-relative path is a file of this language.
    pub(crate) fn matches(&self, path: &str) -> bool {
        let name = path.rsplit('/').next().unwrap_or(path);
        if self.names.contains(&name) {
            return true;
        }
        match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => self
                .extensions
                .iter()
                .any(|known| known.eq_ignore_ascii_case(ext)),
            _ => false,
        }
    }
}

/// The language of a repository-relative path, as the `lang` filter names it (the first row of
/// the table that matches: `.h` is `c`).
pub fn lang_of(path: &str) -> Option<&'static str> {
    LANGS.iter().find_map(|(name, _, extensions, names)| {
        let filter = LangFilter {
            name,
            extensions,
            names,
        };
        filter.matches(path).then_some(*name)
    })
}

/// The canonical language names the `lang` filter accepts.
pub fn known_langs() -> Vec<&'static str> {
    LANGS.iter().map(|(name, _, _, _)| *name).collect()
}
