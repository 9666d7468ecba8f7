//! The typo check of P-4: a public name shaped like a hook or a table must be one.

use crate::hookset::{Hook, REQUIRES, TABLES};

/// What a top-level name of a loaded file is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Binding {
    /// A function defined in the file itself.
    LocalFunction,
    /// An imported module.
    Module,
    /// Anything else (an imported function, a class, a value).
    Other,
}

/// Checks one public (not `_`-prefixed) top-level name; `Err` is the rejection message.
pub(crate) fn check_name(file: &str, name: &str, binding: Binding) -> Result<(), String> {
    let hooks: Vec<&str> = Hook::ALL.iter().map(|h| h.name()).collect();
    if Hook::from_name(name).is_some() {
        return if binding == Binding::LocalFunction {
            Ok(())
        } else {
            Err(format!(
                "{file}: {name} must be a function defined in the file (a hook of this server), \
                 not an imported or assigned value"
            ))
        };
    }
    if binding == Binding::LocalFunction
        && (name.starts_with("on_") || nearest(name, &hooks).1 <= 2)
    {
        let (near, _) = nearest(name, &hooks);
        return Err(format!(
            "{file}: {name} is not a hook of this server; did you mean {near}? Allowed hooks: {}. \
             Name a helper function with a leading underscore.",
            hooks.join(", ")
        ));
    }
    let upper = name.chars().any(|c| c.is_ascii_uppercase())
        && !name.chars().any(|c| c.is_ascii_lowercase());
    if upper && binding != Binding::Module && !TABLES.contains(&name) && name != REQUIRES {
        let mut allowed: Vec<&str> = TABLES.to_vec();
        allowed.push(REQUIRES);
        let (near, _) = nearest(name, &allowed);
        return Err(format!(
            "{file}: {name} is not a table of this server; did you mean {near}? Allowed \
             upper-case names: {}. Name a private constant with a leading underscore.",
            allowed.join(", ")
        ));
    }
    Ok(())
}

/// The allowed name closest to `name` and its edit distance.
fn nearest<'a>(name: &str, allowed: &[&'a str]) -> (&'a str, usize) {
    allowed
        .iter()
        .map(|candidate| (*candidate, strsim::levenshtein(name, candidate)))
        .min_by_key(|(_, distance)| *distance)
        .unwrap_or(("", usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p4_typos_name_the_nearest_and_the_allowed_list() {
        let err = check_name("a.py", "on_serch_results", Binding::LocalFunction).unwrap_err();
        assert!(err.contains("did you mean on_search_results?"), "{err}");
        assert!(err.contains("on_startup, on_tool_call"), "{err}");
        let err = check_name("a.py", "QUERY_ALIAS", Binding::Other).unwrap_err();
        assert!(err.contains("did you mean QUERY_ALIASES?"), "{err}");
        assert!(err.contains("TOOL_PRESETS, REQUIRES"), "{err}");
        // Within distance 2 of a hook, even without the on_ prefix.
        assert!(check_name("a.py", "on_startup_", Binding::LocalFunction).is_err());
        assert!(check_name("a.py", "n_startup", Binding::LocalFunction).is_err());
        // Free: lower-case helpers far from any hook, imports, other values.
        assert!(check_name("a.py", "rewrite", Binding::LocalFunction).is_ok());
        assert!(check_name("a.py", "re", Binding::Module).is_ok());
        assert!(check_name("a.py", "on_event", Binding::Other).is_ok());
        assert!(check_name("a.py", "QUERY_ALIASES", Binding::Other).is_ok());
        assert!(check_name("a.py", "on_startup", Binding::LocalFunction).is_ok());
        assert!(check_name("a.py", "on_startup", Binding::Other).is_err());
    }
}
