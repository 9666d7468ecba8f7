//! Who sees how much of `plugin_status` (P-12, A-3).
//!
//! A plugin's failure messages are the operator's to read: a traceback names the files of the
//! host's Python installation, and an exception message may name any path on the server (the
//! plugins directory, a file a plugin tried to open). Operators — the local caller and users
//! with the prepare capability — see the status as the host keeps it. Everyone else sees the
//! same file names, hooks, tables, states and versions, with each reason cut to its one line
//! that says what went wrong and every host path in it replaced. The transports only render
//! what this module decided.

use crate::serverplugins::{ServerPluginsStatus, StatusDetail};
use crate::{CallContext, Service};
use pyplugin::State;
use std::path::Path;

/// Longest reason an anonymous or read-only caller is shown, in characters.
const MAX_SHORT_REASON_CHARS: usize = 300;
/// What replaces the plugins directory in a reason.
const DIRECTORY_MARK: &str = "<plugins directory>";
/// What replaces any other absolute path in a reason.
const PATH_MARK: &str = "<path>";

impl Service {
    /// `plugin_status` as `ctx`'s caller may see it (P-12): the full detail for operators (the
    /// local caller, users with the prepare capability), else file names, states and one-line
    /// reasons without tracebacks or host paths, and only the stale repositories the caller
    /// may read ([`StatusDetail`] says which).
    pub fn server_plugins_status_for(&self, ctx: &CallContext) -> ServerPluginsStatus {
        let status = self.server_plugins_status();
        let operator = self
            .inner
            .check_prepare(&ctx.caller, "plugin status detail")
            .is_ok();
        if operator {
            return status;
        }
        let directory = self.inner.server_plugins.config().directory.clone();
        summarize(status, &directory, |repo| {
            gitstore::RepoName::parse(repo)
                .ok()
                .is_some_and(|name| self.inner.may_read(&ctx.caller, &name))
        })
    }
}

/// The status with every reason shortened ([`short_reason`]) and the stale repositories
/// filtered by `may_read`.
fn summarize(
    mut status: ServerPluginsStatus,
    directory: &Path,
    may_read: impl Fn(&str) -> bool,
) -> ServerPluginsStatus {
    let short = |text: &str| short_reason(text, directory);
    let host = &mut status.host;
    // The state carries its reason too (not serialized today, but a renderer may show it).
    host.state = match &host.state {
        State::Wedged(reason) => State::Wedged(short(reason)),
        State::Unavailable(reason) => State::Unavailable(short(reason)),
        other => other.clone(),
    };
    host.state_reason = host.state_reason.as_deref().map(short);
    host.last_reload_error = host.last_reload_error.as_deref().map(short);
    for rejected in &mut host.rejected {
        for reason in &mut rejected.reasons {
            *reason = short(reason);
        }
    }
    for disabled in &mut host.disabled {
        disabled.reason = short(&disabled.reason);
    }
    for fault in &mut host.release_faults {
        fault.reason = short(&fault.reason);
    }
    status.index_stale_repos.retain(|repo| may_read(repo));
    status.detail = StatusDetail::Summary;
    status
}

/// The line of `text` that says what went wrong (a traceback's last line), with the plugins
/// directory and every other absolute path replaced, at most [`MAX_SHORT_REASON_CHARS`] long.
fn short_reason(text: &str, directory: &Path) -> String {
    let mut line = pyplugin::summary(text).to_owned();
    // The directory first, by its exact text: it may hold spaces, which end a path below.
    let mut forms = vec![directory.to_string_lossy().into_owned()];
    if let Ok(canonical) = directory.canonicalize() {
        forms.push(canonical.to_string_lossy().into_owned());
    }
    for form in forms {
        let form = form.trim_end_matches('/');
        if form.len() > 1 {
            line = line.replace(form, DIRECTORY_MARK);
        }
    }
    let line = hide_paths(&line);
    if line.chars().count() <= MAX_SHORT_REASON_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(MAX_SHORT_REASON_CHARS).collect();
    cut.push('…');
    cut
}

/// `text` with every absolute path (`/…` or `~/…` starting a word, after a quote, a bracket,
/// `=` or `:`) replaced by [`PATH_MARK`]. A slash inside a word (`docs/a.md`, `1/2`) or
/// standing alone is kept.
fn hide_paths(text: &str) -> String {
    let ends_path = |c: char| c.is_whitespace() || "'\"()[]{}<>,;`".contains(c);
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut previous: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        let starts_word = previous.is_none_or(|p| p.is_whitespace() || "'\"([{<=:,`".contains(p));
        let tail = if c == '~' { &rest[1..] } else { rest };
        let next = tail.strip_prefix('/').and_then(|t| t.chars().next());
        if starts_word
            && (c == '/' || (c == '~' && tail.starts_with('/')))
            && next.is_some_and(|n| !ends_path(n))
        {
            let end = rest.find(ends_path).unwrap_or(rest.len());
            out.push_str(PATH_MARK);
            previous = rest[..end].chars().last();
            rest = &rest[end..];
            continue;
        }
        out.push(c);
        previous = Some(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p12_hide_paths_keeps_relative_paths_and_words() {
        assert_eq!(
            hide_paths("No such file or directory: '/srv/csg/secret.txt'"),
            "No such file or directory: '<path>'"
        );
        assert_eq!(
            hide_paths("File \"/usr/lib/python3.11/json/decoder.py\", line 3"),
            "File \"<path>\", line 3"
        );
        assert_eq!(hide_paths("at ~/.config/x and /a"), "at <path> and <path>");
        assert_eq!(
            hide_paths("docs/a.md, 1/2 and a / b stay"),
            "docs/a.md, 1/2 and a / b stay"
        );
        assert_eq!(hide_paths("url=https://h/x"), "url=https:<path>");
    }

    #[test]
    fn p12_short_reason_is_the_last_traceback_line_without_the_directory() {
        let directory = Path::new("/srv/my plugins");
        let traceback = "a.py: Traceback (most recent call last):\n  File \"a.py\", line 1, in \
                         <module>\n  File \"/usr/lib/python3.11/json/__init__.py\", line 346\n\
                         OSError: cannot read /srv/my plugins/data.txt";
        assert_eq!(
            short_reason(traceback, directory),
            "OSError: cannot read <plugins directory>/data.txt"
        );
        let long = "x".repeat(MAX_SHORT_REASON_CHARS + 10);
        assert_eq!(
            short_reason(&long, directory).chars().count(),
            MAX_SHORT_REASON_CHARS + 1
        );
    }
}
