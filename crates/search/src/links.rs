//! Many names looked up at once for links (the file page of issue 34 links each name of a
//! file to its definitions): one pinned generation for all of them, no signatures (a link
//! needs a path and a line), and a deadline, so a page of thousands of names costs
//! microseconds per name and never holds the page up.

use std::time::Instant;

use symbols::SymbolKind;

use crate::indexes::Indexes;
use crate::navigate::MAX_DEFINITIONS;

/// One definition of a name, as a link needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionSite {
    /// Repository-relative path.
    pub path: String,
    /// The line of the name.
    pub line: u32,
    /// What it defines.
    pub kind: SymbolKind,
}

/// Where one name is defined in a generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameSites {
    /// In path and line order (as [`Indexes::definitions`] answers), at most the limit.
    pub sites: Vec<DefinitionSite>,
    /// Definitions found in all.
    pub total: u64,
}

/// What [`Indexes::definition_sites`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitesAnswer {
    /// Full SHA of the indexed commit every site is valid at.
    pub commit: String,
    /// The sites of the names looked up, in the order asked: `None` for a name without a
    /// definition. Shorter than the names asked when the deadline came first.
    pub names: Vec<Option<NameSites>>,
}

impl Indexes {
    /// The definitions of each of `names` in `repo`'s current generation, at most `limit`
    /// per name (clamped to 1..=[`MAX_DEFINITIONS`]), until `deadline`; `None` when the
    /// repository has no index or its symbol table is still being written. The caller
    /// checks access: this looks in `repo` only.
    pub fn definition_sites(
        &self,
        repo: &str,
        names: &[&str],
        limit: usize,
        deadline: Instant,
    ) -> Option<SitesAnswer> {
        let generation = self.slot(repo)?.current()?;
        let table = generation.symbols()?;
        let limit = limit.clamp(1, MAX_DEFINITIONS);
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            if Instant::now() > deadline {
                break;
            }
            let mut found = table.named(name);
            if found.is_empty() {
                out.push(None);
                continue;
            }
            let path = |doc: u32| {
                generation
                    .docs
                    .get(doc as usize)
                    .map_or("", |d| d.path.as_str())
            };
            found.sort_by(|a, b| {
                path(a.doc)
                    .cmp(path(b.doc))
                    .then(a.symbol.line.cmp(&b.symbol.line))
            });
            let total = found.len() as u64;
            let sites = found
                .into_iter()
                .take(limit)
                .map(|stored| DefinitionSite {
                    path: path(stored.doc).to_owned(),
                    line: stored.symbol.line,
                    kind: stored.symbol.kind,
                })
                .collect();
            out.push(Some(NameSites { sites, total }));
        }
        Some(SitesAnswer {
            commit: generation.meta.commit.clone(),
            names: out,
        })
    }
}
