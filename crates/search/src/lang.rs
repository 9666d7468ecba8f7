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

use crate::SearchError;

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
    extensions: &'static [&'static str],
    names: &'static [&'static str],
}

impl LangFilter {
    /// Resolves a language name or alias (case-insensitive).
    pub(crate) fn parse(lang: &str) -> Result<Self, SearchError> {
        let wanted = lang.trim().to_ascii_lowercase();
        LANGS
            .iter()
            .find(|(name, aliases, _, _)| *name == wanted || aliases.contains(&wanted.as_str()))
            .map(|(_, _, extensions, names)| LangFilter { extensions, names })
            .ok_or_else(|| SearchError::UnknownLang {
                lang: lang.to_owned(),
                known: known_langs().join(", "),
            })
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
        let filter = LangFilter { extensions, names };
        filter.matches(path).then_some(*name)
    })
}

/// The canonical language names the `lang` filter accepts.
pub fn known_langs() -> Vec<&'static str> {
    LANGS.iter().map(|(name, _, _, _)| *name).collect()
}
