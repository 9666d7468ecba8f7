//! The naming rules of users and tokens.

/// Most bytes in a user or token name.
const MAX_NAME: usize = 64;

/// Whether `name` is a valid user name: 1 to 64 ASCII letters, digits, `.`, `_` or `-`,
/// starting with a letter or digit (so it never reads as a command-line flag).
pub fn valid_user_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Whether `name` is a valid token name: 1 to 64 bytes, no control characters.
pub(crate) fn valid_token_name(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len()) && !name.chars().any(char::is_control)
}

/// An identity provider's group name as a grant may name it: 1 to 256 bytes without control
/// characters (providers allow spaces and most punctuation in group names).
pub(crate) fn valid_group_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 256 && !name.chars().any(char::is_control)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_names() {
        for good in ["alice", "a", "ci-bot.2", "Bob_1"] {
            assert!(valid_user_name(good), "{good}");
        }
        for bad in ["", "-alice", ".x", "a b", "ä", &"x".repeat(65), "a/b"] {
            assert!(!valid_user_name(bad), "{bad}");
        }
    }

    #[test]
    fn token_names() {
        assert!(valid_token_name("laptop 2026"));
        assert!(!valid_token_name(""));
        assert!(!valid_token_name("a\nb"));
        assert!(!valid_token_name(&"x".repeat(65)));
    }
}
