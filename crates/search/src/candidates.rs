//! Candidate selection: the documents of a generation that the trigram query of a compiled
//! request admits (posting lists intersected and united), narrowed to text documents passing
//! the request's filters. Only these are verified.

use crate::plan::Compiled;
use crate::store::{DocKind, Generation};
use crate::trigram::TrigramQuery;

/// At most this many trigram posting lists are intersected per AND: the rarest ones. More
/// would cost decoding time and can only shrink a candidate set that verification fixes.
const MAX_AND_LISTS: usize = 12;

/// The text documents of `generation` that may hold a match of `compiled` and pass its
/// filters, in id (path) order.
pub(crate) fn select(generation: &Generation, compiled: &Compiled) -> Vec<u32> {
    let docs = &generation.docs;
    match evaluate(generation, &compiled.plan) {
        Some(ids) => ids,
        None => (0..docs.len() as u32).collect(),
    }
    .into_iter()
    .filter(|&i| {
        docs.get(i as usize)
            .is_some_and(|d| d.kind == DocKind::Text && compiled.filter.allows(d))
    })
    .collect()
}

/// Candidate documents of a generation: `None` for all of them.
fn evaluate(generation: &Generation, query: &TrigramQuery) -> Option<Vec<u32>> {
    match query {
        TrigramQuery::All => None,
        TrigramQuery::Trigram(t) => Some(generation.posting_list(*t)),
        TrigramQuery::And(parts) => {
            // Trigram leaves rarest first, capped; composite parts after.
            let mut leaves = Vec::new();
            let mut others = Vec::new();
            for part in parts {
                match part {
                    TrigramQuery::Trigram(t) => match generation.posting_count(*t) {
                        None => return Some(Vec::new()),
                        Some(n) => leaves.push((n, *t)),
                    },
                    other => others.push(other),
                }
            }
            leaves.sort_unstable_by_key(|(n, _)| *n);
            leaves.truncate(MAX_AND_LISTS);
            let mut result: Option<Vec<u32>> = None;
            for (_, t) in leaves {
                let list = generation.posting_list(t);
                result = Some(match result {
                    None => list,
                    Some(acc) => intersect(&acc, &list),
                });
                if result.as_ref().is_some_and(Vec::is_empty) {
                    return result;
                }
            }
            for other in others {
                if let Some(list) = evaluate(generation, other) {
                    result = Some(match result {
                        None => list,
                        Some(acc) => intersect(&acc, &list),
                    });
                }
            }
            result
        }
        TrigramQuery::Or(parts) => {
            let mut acc: Vec<u32> = Vec::new();
            for part in parts {
                let list = evaluate(generation, part)?;
                acc = union(&acc, &list);
            }
            Some(acc)
        }
    }
}

/// The ids in both ascending lists, ascending.
pub(crate) fn intersect(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len().min(b.len())));
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                out.push(a[i]);
                i += 1;
                j += 1;
            }
        }
    }
    out
}

fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(a.len() + b.len()));
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(&x), Some(&y)) if x == y => {
                i += 1;
                j += 1;
                x
            }
            (Some(&x), Some(&y)) if x < y => {
                i += 1;
                x
            }
            (Some(_), Some(&y)) | (None, Some(&y)) => {
                j += 1;
                y
            }
            (Some(&x), None) => {
                i += 1;
                x
            }
            (None, None) => break,
        };
        out.push(next);
    }
    out
}
