//! One function per page; each answers the whole HTML document.

use std::ops::Range;

use crate::frame::{
    Tab, breadcrumbs, display_path, layout, layout_for_search, permalink, repo_header,
    repo_header_at, short_sha,
};
use crate::paths::{blob_url, commit_url, plugins_url, repo_url, tree_url};
use crate::readme::{RenderedReadme, readme_section};
use crate::size::human_size;
use crate::{Chrome, ClientConfig};
use maud::{Markup, html};
use service::{
    AvailabilityAnswer, EntryKind, LineChange, ListAnswer, ListEntry, PluginDiscovery, PluginInfo,
    RepoSummary, SearchAnswer, SearchHit, SearchKind, SearchRepoHits, SearchRequest, TokenInfo,
    rfc3339,
};

/// `/sourcegraph/`: the repositories the caller may read.
pub fn repositories(chrome: &Chrome, repos: &[RepoSummary]) -> String {
    layout(
        chrome,
        "Repositories",
        html! {
            h1 { "Repositories" }
            @if repos.is_empty() {
                p.empty {
                    "No repositories to show. An operator registers one with "
                    code { "csg repo add OWNER/NAME SOURCE" }
                    @if chrome.user.is_none() { "; private ones appear once you sign in" }
                    "."
                }
            } @else {
                table.list {
                    thead { tr { th { "Repository" } th { "Default branch" } th { "Head" } th { "Search index" } th { "Last sync" } } }
                    tbody {
                        @for repo in repos {
                            tr {
                                td { a href=(repo_url(&repo.name)) { (repo.name) } }
                                td { (repo.default_branch.as_deref().unwrap_or("–")) }
                                td { @if let Some(head) = &repo.head { (short_sha(head)) } @else { "–" } }
                                td { @if repo.indexed { "built" } @else { "not built yet" } }
                                td {
                                    (repo.last_sync.as_deref().unwrap_or("never"))
                                    @if let Some(error) = &repo.last_sync_error {
                                        div.error { "Sync failed: " (error) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// `/sourcegraph/repos/<owner>/<name>`: facts about the repository, its tree at the head and
/// the top directory's README (`readme`, read at the head) below it; a permalink to the same
/// tree at the head's full SHA.
pub fn repository(
    chrome: &Chrome,
    repo: &RepoSummary,
    tree: Result<&ListAnswer, &str>,
    readme: Option<&RenderedReadme>,
) -> String {
    let commits_rev = repo.default_branch.as_deref().or(repo.head.as_deref());
    layout(
        chrome,
        &repo.name,
        html! {
            (repo_header_at(&repo.name, Tab::Files, None, commits_rev))
            dl.facts {
                dt { "Default branch" } dd { (repo.default_branch.as_deref().unwrap_or("–")) }
                dt { "Head" } dd.sha { @if let Some(head) = &repo.head { code { (head) } } @else { "not synced yet" } }
                @if !repo.registered_path.is_empty() {
                    dt { "Registered path" } dd { code { (repo.registered_path) } }
                }
                dt { "Last sync" } dd { (repo.last_sync.as_deref().unwrap_or("never")) }
                @if let Some(error) = &repo.last_sync_error {
                    dt { "Last sync error" } dd.error { (error) }
                }
                dt { "Search index" } dd { @if repo.indexed { "built from the head" } @else { "not built yet" } }
            }
            @match tree {
                Ok(listing) => {
                    p.meta {
                        "Commit " (short_sha(&listing.commit)) " "
                        (permalink(&tree_url(&repo.name, &listing.commit, "")))
                    }
                    (entries(&repo.name, &listing.commit, listing))
                }
                Err(message) => p.error { (message) },
            }
            @if let Some(readme) = readme { (readme_section(readme)) }
        },
    )
}

/// `/-/tree/<rev>/<path>`, with the directory's README (`readme`) below the entries; at a
/// branch or tag, a permalink to the same tree at the full SHA.
pub fn tree(
    chrome: &Chrome,
    repo: &str,
    rev: &str,
    listing: &ListAnswer,
    readme: Option<&RenderedReadme>,
) -> String {
    layout(
        chrome,
        &format!("{} · {repo}", display_path(&listing.path)),
        html! {
            (repo_header_at(repo, Tab::Files, Some(&listing.commit), Some(rev)))
            (breadcrumbs(repo, rev, &listing.path))
            p.meta {
                "Commit " (short_sha(&listing.commit))
                @if rev != listing.commit {
                    " " (permalink(&tree_url(repo, &listing.commit, &listing.path)))
                }
            }
            (entries(repo, rev, listing))
            @if let Some(readme) = readme { (readme_section(readme)) }
        },
    )
}

/// The entries of one listing, directories first.
fn entries(repo: &str, rev: &str, listing: &ListAnswer) -> Markup {
    let mut sorted: Vec<&ListEntry> = listing.entries.iter().collect();
    sorted.sort_by_key(|e| (e.kind != EntryKind::Directory, e.path.as_str()));
    let base = listing.path.trim_end_matches('/');
    html! {
        @if sorted.is_empty() {
            p.empty { "This directory is empty." }
        } @else {
            div.scroll { table.files {
                tbody {
                    @for entry in sorted {
                        @let name = entry.path.strip_prefix(base).unwrap_or(&entry.path).trim_start_matches('/');
                        tr {
                            td.kind { (kind_label(entry.kind)) }
                            td {
                                @match entry.kind {
                                    EntryKind::Directory => a href=(tree_url(repo, rev, &entry.path)) { (name) "/" },
                                    EntryKind::File | EntryKind::Executable => a href=(blob_url(repo, rev, &entry.path)) { (name) },
                                    EntryKind::Symlink | EntryKind::Submodule => span { (name) },
                                }
                            }
                            td.size {
                                @if let Some(size) = entry.size {
                                    span title={ (size) " bytes" } { (human_size(size)) }
                                }
                            }
                        }
                    }
                }
            } }
            @if listing.truncated {
                p.meta { "Not every entry is shown: the listing was cut at its limit." }
            }
        }
    }
}

fn kind_label(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Executable => "exec",
        EntryKind::Directory => "dir",
        EntryKind::Symlink => "link",
        EntryKind::Submodule => "submodule",
    }
}

/// `/-/plugins[?rev=<sha>]`: what discovery found at the commit (W-6). Every field but the
/// directory comes from the plugin: it is shown as text, never as markup.
pub fn plugins(chrome: &Chrome, rev: Option<&str>, answer: &AvailabilityAnswer) -> String {
    layout(
        chrome,
        &format!("Plugins · {}", answer.repo),
        html! {
            (repo_header(&answer.repo, Tab::Plugins, rev))
            form.inline method="get" action=(plugins_url(&answer.repo, None)) {
                label { "Revision " input type="text" name="rev" value=(rev.unwrap_or("")) placeholder="head of the default branch"; }
                button type="submit" { "Show" }
            }
            @if let Some(commit) = &answer.commit {
                p.meta {
                    "At commit " (short_sha(commit))
                    // Opened at the head, a branch or a tag: the same tab at the full SHA.
                    @if rev != Some(commit.as_str()) {
                        " " (permalink(&plugins_url(&answer.repo, Some(commit))))
                    }
                }
            }
            @if !answer.readable {
                p.error { (answer.reason.as_deref().unwrap_or("This revision cannot be read.")) }
            }
            @match &answer.plugins {
                Some(PluginDiscovery::Found(found)) if found.is_empty() => p.empty { "No repository plugins at this commit." },
                Some(PluginDiscovery::Found(found)) => (plugin_table(found)),
                Some(PluginDiscovery::Failed(message)) => p.error { "Discovery failed: " (message) },
                None => {},
            }
        },
    )
}

fn plugin_table(found: &[PluginInfo]) -> Markup {
    html! {
        table.list.plugins {
            thead { tr { th { "Name" } th { "Title" } th { "Description" } th { "Version" } th { "Directory" } th { "Operations" } th { "Default" } th { "Input schema" } th { "Diagnostics" } } }
            tbody {
                @for plugin in found {
                    tr {
                        td { code { (plugin.name) } }
                        td { (plugin.title.as_deref().unwrap_or("")) }
                        td.description { (plugin.description.as_deref().unwrap_or("")) }
                        td { (plugin.version.as_deref().unwrap_or("")) }
                        td { code { (display_path(&plugin.directory)) } }
                        td { (plugin.operations.join(", ")) }
                        td { @if plugin.default_enabled { "on" } @else { "off" } }
                        // Compact JSON, bounded by discovery; shown, never interpreted (W-3).
                        td.schema { @if let Some(schema) = &plugin.input_schema { code { (schema) } } }
                        td.error { (plugin.diagnostic.as_deref().unwrap_or("")) }
                    }
                }
            }
        }
    }
}

/// `/sourcegraph/search`: the form, and the hits of a query that was given.
pub fn search(
    chrome: &Chrome,
    request: &SearchRequest,
    answer: Option<Result<&SearchAnswer, &str>>,
) -> String {
    layout_for_search(
        chrome,
        "Search",
        html! {
            h1 { "Search" }
            form.search method="get" action="/sourcegraph/search" {
                input #site-search type="search" name="q" value=(request.query) placeholder="text or regular expression" aria-keyshortcuts="/" autofocus;
                input type="text" name="repo" value=(request.repo.as_deref().unwrap_or("")) placeholder="owner/name (all)";
                input type="text" name="path" value=(request.path.as_deref().unwrap_or("")) placeholder="path glob";
                input type="text" name="lang" value=(request.lang.as_deref().unwrap_or("")) placeholder="language";
                input type="text" name="rev" value=(request.revision.as_deref().unwrap_or("")) placeholder="revision (head)" title="a branch, tag or commit SHA of the repository";
                select name="type" title="code: lines and file names; commit: commit messages; diff: lines added or removed by commits" {
                    @for kind in [SearchKind::Code, SearchKind::Commit, SearchKind::Diff] {
                        option value=(kind.name()) selected[request.kind == kind] { (kind.name()) }
                    }
                }
                @if request.kind != SearchKind::Code {
                    input type="text" name="author" value=(request.author.as_deref().unwrap_or("")) placeholder="author";
                    input type="text" name="since" value=(request.since.as_deref().unwrap_or("")) placeholder="since (YYYY-MM-DD)";
                    input type="text" name="until" value=(request.until.as_deref().unwrap_or("")) placeholder="until (YYYY-MM-DD)";
                }
                label { input type="checkbox" name="regex" value="true" checked[request.regex]; " regex" }
                label { input type="checkbox" name="case" value="true" checked[request.case_sensitive]; " match case" }
                button type="submit" { "Search" }
            }
            @match answer {
                None => {},
                Some(Err(message)) => p.error { (message) },
                Some(Ok(answer)) => (search_hits(request, answer)),
            }
        },
    )
}

fn search_hits(request: &SearchRequest, answer: &SearchAnswer) -> Markup {
    let count: usize = answer.repos.iter().map(|r| r.hits.len()).sum();
    html! {
        @if let Some(rewrite) = &answer.query_rewrite {
            p.meta { "The query was rewritten by " code { (rewrite.files.join(", ")) } "." }
        }
        @for repo in &answer.not_indexed {
            p.meta { (repo) ": not indexed yet, not searched." }
        }
        @for repo in &answer.not_searched {
            p.meta { (repo) ": the replicas that hold it did not answer, not searched; search again shortly." }
        }
        @if count == 0 { p.empty { "No hits." } }
        @if request.kind != SearchKind::Code {
            @for repo in &answer.repos {
                (history_hits(repo))
            }
        }
        @for repo in answer.repos.iter().filter(|_| request.kind == SearchKind::Code) {
            section.hits {
                h2 { a href=(repo_url(&repo.repo)) { (repo.repo) } " " (short_sha(&repo.commit)) }
                ul {
                    @for hit in &repo.hits {
                        li {
                            @if let Some(line) = hit.line {
                                a href={ (blob_url(&repo.repo, &repo.commit, &hit.path)) "#L" (line) } { (hit.path) ":" (line) }
                                @if let Some(snippet) = &hit.snippet { " " code.snippet { (marked(snippet, &hit.marks)) } }
                            } @else {
                                a href=(blob_url(&repo.repo, &repo.commit, &hit.path)) { (hit.path) }
                                @if let Some(why) = &hit.path_only { " (name only: " (why) ")" }
                            }
                            @if let Some(note) = &hit.note { span.note { " " (note) } }
                        }
                    }
                }
            }
        }
        @if let Some(cursor) = &answer.next_cursor {
            form.inline method="get" action="/sourcegraph/search" {
                @for (name, value) in search_parameters(request) {
                    input type="hidden" name=(name) value=(value);
                }
                input type="hidden" name="cursor" value=(cursor);
                button type="submit" { "Next page" }
            }
        }
    }
}

/// `text` (a hit's snippet or subject) with the byte ranges `marks` in `<mark>`: the query's
/// matches as the search engine found them, with the very regex it matched the line with
/// (`search::Hit::Line`'s marks), so literal text and regular expressions (anchors, `\b`,
/// case folding) are marked alike and exactly. All of it escaped. A range out of order,
/// overlapping, empty, outside the text or off a character boundary is skipped (marks cross
/// a cluster's network; a page never fails over them).
fn marked(text: &str, marks: &[Range<u32>]) -> Markup {
    let mut parts: Vec<(&str, bool)> = Vec::new();
    let mut at = 0;
    for mark in marks {
        let (start, end) = (mark.start as usize, mark.end as usize);
        let fits = at <= start
            && start < end
            && end <= text.len()
            && text.is_char_boundary(start)
            && text.is_char_boundary(end);
        if fits {
            parts.push((&text[at..start], false));
            parts.push((&text[start..end], true));
            at = end;
        }
    }
    parts.push((&text[at..], false));
    html! {
        @for (text, hit) in parts.into_iter().filter(|(text, _)| !text.is_empty()) {
            @if hit { mark { (text) } } @else { (text) }
        }
    }
}

/// The query-string parameters of the search page that give `request` (without its cursor):
/// what the next-page form carries.
fn search_parameters(request: &SearchRequest) -> Vec<(&'static str, &str)> {
    let text = [
        ("repo", &request.repo),
        ("path", &request.path),
        ("lang", &request.lang),
        ("rev", &request.revision),
        ("author", &request.author),
        ("since", &request.since),
        ("until", &request.until),
    ];
    let mut out = vec![("q", request.query.as_str())];
    out.extend(
        text.into_iter()
            .filter_map(|(name, value)| value.as_deref().map(|v| (name, v))),
    );
    if request.kind != SearchKind::Code {
        out.push(("type", request.kind.name()));
    }
    if request.regex {
        out.push(("regex", "true"));
    }
    if request.case_sensitive {
        out.push(("case", "true"));
    }
    out
}

/// One repository's commit or diff hits: a line per commit (short SHA linking to the commit
/// page, date, author, subject), its diff hits under it (`path:line`, `+`/`-`, text); the
/// query's matches marked where the search found them: in a commit hit's subject, or in the
/// matched message line shown after it when the subject has none; in a diff hit's line.
fn history_hits(repo: &SearchRepoHits) -> Markup {
    let mut groups: Vec<(&SearchHit, Vec<&SearchHit>)> = Vec::new();
    for hit in &repo.hits {
        match groups.last_mut() {
            Some((first, lines)) if hit.change.is_some() && first.commit == hit.commit => {
                lines.push(hit);
            }
            _ => groups.push((
                hit,
                hit.change.is_some().then_some(hit).into_iter().collect(),
            )),
        }
    }
    html! {
        section.hits {
            h2 { a href=(repo_url(&repo.repo)) { (repo.repo) } " history from " (short_sha(&repo.commit)) }
            ul {
                @for (first, lines) in &groups {
                    @let commit = first.commit.as_deref().unwrap_or_default();
                    li {
                        a href=(commit_url(&repo.repo, commit)) { (short_sha(commit)) }
                        @if let Some(date) = &first.date { " " span.meta { (date) } }
                        @if let Some(author) = &first.author { " " (author) }
                        @if let Some(subject) = &first.subject { " — " (marked(subject, &first.subject_marks)) }
                        @if first.change.is_none() && first.subject_marks.is_empty() && !first.marks.is_empty() {
                            @if let Some(snippet) = &first.snippet { " " code.snippet { (marked(snippet, &first.marks)) } }
                        }
                        @if !lines.is_empty() {
                            ul {
                                @for hit in lines {
                                    @let sign = if hit.change == Some(LineChange::Removed) { "-" } else { "+" };
                                    li {
                                        @if hit.change == Some(LineChange::Added) {
                                            a href={ (blob_url(&repo.repo, commit, &hit.path)) "#L" (hit.line.unwrap_or_default()) } { (hit.path) ":" (hit.line.unwrap_or_default()) }
                                        } @else {
                                            (hit.path) ":" (hit.line.unwrap_or_default())
                                        }
                                        " " code.snippet { (sign) (marked(hit.snippet.as_deref().unwrap_or_default(), &hit.marks)) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `/sourcegraph/connect` (M-6): the client configuration for this deployment, with copy
/// buttons. [`ClientConfig::token_required`]: anonymous callers cannot read here.
pub fn connect_page(chrome: &Chrome, config: &ClientConfig) -> String {
    let block = |id: &str, label: &str, text: &str| {
        html! {
            section.config {
                h2 { (label) }
                button.copy type="button" data-copy=(id) { "Copy" }
                pre id=(id) { (text) }
            }
        }
    };
    layout(
        chrome,
        "Connect",
        html! {
            h1 { "Connect an agent" }
            p { "MCP endpoint (Streamable HTTP): " code id="endpoint" { (config.url) } }
            @if config.oauth {
                section.oauth #oauth-clients {
                    h2 { "Sign in with your company account" }
                    p {
                        "This server takes access tokens of your company's identity provider. "
                        "Claude Code, VS Code, Cursor and Codex sign in by themselves from the "
                        "endpoint URL alone: add the server without a token, and the client "
                        "opens your browser to sign in when the server asks for it."
                    }
                    @if !config.token_required {
                        p {
                            "Calls without a token read public repositories here, so a client "
                            "is not asked to sign in for reading, and without signing in it sees "
                            "no private repository. To read the private repositories granted to "
                            "you, start the sign-in from a client that lets you (Codex: "
                            code { (config.codex_login_command()) }
                            ") or use an API token."
                        }
                    }
                    ul {
                        li {
                            strong { "Claude Code: " }
                            code { (config.claude_add_command()) }
                            ", then "
                            code { "/mcp" }
                            " in Claude Code: choose the server and sign in."
                        }
                        li {
                            strong { "VS Code: " }
                            "run "
                            em { "MCP: Add Server" }
                            ", choose HTTP and paste the endpoint URL; VS Code opens the browser to sign in."
                        }
                        li {
                            strong { "Cursor: " }
                            "the JSON configuration below, without "
                            code { "headers" }
                            " (an entry with just its "
                            code { "url" }
                            "); Cursor offers to log in to the server."
                        }
                        li {
                            strong { "Codex: " }
                            code { (config.codex_add_command()) }
                            ", then "
                            code { (config.codex_login_command()) }
                            " (without a "
                            code { "bearer_token_env_var" }
                            " line, which would send a token instead)."
                        }
                    }
                    p {
                        "API tokens keep working beside this, for clients and scripts that do "
                        "not sign in: the configurations with a token header below."
                    }
                }
            }
            @if config.token_required {
                @if config.oauth {
                    p { "Every call needs a token here: the client's own sign-in above, or an API token in the header. " }
                } @else {
                    p { "This server needs an API token: use the form with the header. " }
                }
            }
            p {
                "Tokens go in the "
                code { "Authorization" }
                " header, never in the URL. "
                @if chrome.user.is_some() {
                    a href="/sourcegraph/settings/tokens" { "Create a token" } "."
                } @else {
                    "Sign in to create one, or ask an operator ("
                    code { "csg token create USER" }
                    ")."
                }
            }
            (block("config-json", "Client configuration (JSON)", &config.json))
            (block("config-json-token", "With a token (JSON, headers)", &config.json_with_token))
            (block("config-codex", "Codex (~/.codex/config.toml; the token in SOURCEGRAPH_API_TOKEN)", &config.codex_toml))
        },
    )
}

/// `/sourcegraph/settings/tokens`: the signed-in user's tokens; `created` is a secret made
/// just now, shown this once.
pub fn tokens(chrome: &Chrome, list: &[TokenInfo], created: Option<&str>) -> String {
    layout(
        chrome,
        "Tokens",
        html! {
            h1 { "API tokens" }
            @if let Some(secret) = created {
                section.created {
                    p { "Your new token. Copy it now: it is not shown again." }
                    button.copy type="button" data-copy="new-token" { "Copy" }
                    pre id="new-token" { (secret) }
                }
            }
            form.inline method="post" action="/sourcegraph/settings/tokens" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                label { "Name " input type="text" name="name" maxlength="64" placeholder="laptop"; }
                button type="submit" { "Create token" }
            }
            @if list.is_empty() {
                p.empty { "No tokens yet." }
            } @else {
                table.list {
                    thead { tr { th { "Name" } th { "Created" } th { "Last used" } th { "State" } th {} } }
                    tbody {
                        @for token in list {
                            tr {
                                td { (token.name) }
                                td { (rfc3339(token.created)) }
                                td { (token.last_used.map(rfc3339).unwrap_or_else(|| "never".into())) }
                                td { @if let Some(revoked) = token.revoked { "revoked " (rfc3339(revoked)) } @else { "active" } }
                                td {
                                    @if token.revoked.is_none() {
                                        form.inline method="post" action="/sourcegraph/settings/tokens/revoke" {
                                            input type="hidden" name="csrf" value=(chrome.csrf);
                                            input type="hidden" name="id" value=(token.id);
                                            button type="submit" { "Revoke" }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// The path that starts a sign-in through the identity provider (A-6).
pub const PROVIDER_SIGN_IN_PATH: &str = "/sourcegraph/sign-in/provider";

/// `/sourcegraph/sign-in`: through the identity provider when the server has a website
/// client there, or by pasting a token.
pub fn sign_in(chrome: &Chrome, error: Option<&str>) -> String {
    layout(
        chrome,
        "Sign in",
        html! {
            h1 { "Sign in" }
            @if let Some(error) = error { p.error { (error) } }
            @if chrome.provider_sign_in {
                p { a.button #provider-sign-in href=(PROVIDER_SIGN_IN_PATH) { "Sign in with your company account" } }
                p.meta { "Or with an API token:" }
            }
            form method="post" action="/sourcegraph/sign-in" {
                input type="hidden" name="csrf" value=(chrome.csrf);
                label { "API token " input type="password" name="token" autocomplete="off" required; }
                button type="submit" { "Sign in" }
            }
            p.meta { "An operator creates your first token with " code { "csg token create USER" } "." }
        },
    )
}

/// The page a sign-in through the identity provider ends on: it moves on to the repository
/// list by itself (a navigation that starts here, which sends the new session's cookie).
pub fn signed_in_page(chrome: &Chrome) -> String {
    let page = layout(
        chrome,
        "Signed in",
        html! {
            h1 { "Signed in" }
            p { a #continue href="/sourcegraph/" { "Continue to the repositories" } }
        },
    );
    page.replacen(
        "<head>",
        "<head><meta http-equiv=\"refresh\" content=\"0;url=/sourcegraph/\">",
        1,
    )
}

/// A page for a refusal or a failure: what was wrong and what to do.
pub fn error_page(chrome: &Chrome, title: &str, message: &str) -> String {
    layout(
        chrome,
        title,
        html! {
            h1 { (title) }
            p.error { (message) }
            p { a href="/sourcegraph/" { "All repositories" } }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 34 point 8: the marks a hit carries are marked, the rest escaped; a regular
    /// expression's hits as well as a literal's (the page does not re-match the query);
    /// marks that do not fit the text are skipped, never a failed page.
    #[test]
    fn hit_marks_are_marked() {
        assert_eq!(
            marked("a <B> b <b>", &[2..5, 8..11]).into_string(),
            "a <mark>&lt;B&gt;</mark> b <mark>&lt;b&gt;</mark>"
        );
        assert_eq!(marked("fn é() {}", &[]).into_string(), "fn é() {}");
        assert_eq!(
            marked("été x", &[0..1, 3..3, 6..7, 4..9, 0..2]).into_string(),
            "été <mark>x</mark>"
        );
        let hit = |snippet: &str, marks: Vec<Range<u32>>| SearchHit {
            path: "src/<lib>.rs".into(),
            line: Some(3),
            snippet: Some(snippet.into()),
            marks,
            ..SearchHit::default()
        };
        let answer = SearchAnswer {
            repos: vec![SearchRepoHits {
                repo: "o/r".into(),
                commit: "c".repeat(40),
                hits: vec![
                    hit("fn main() { fn go() }", vec![0..7, 12..17]),
                    hit("x fnord", Vec::new()),
                ],
            }],
            next_cursor: None,
            not_indexed: Vec::new(),
            not_searched: Vec::new(),
            stats: service::SearchStatsAnswer::default(),
            query_rewrite: None,
        };
        let request = SearchRequest {
            query: r"\bfn \w+".into(),
            regex: true,
            ..SearchRequest::default()
        };
        let page = search_hits(&request, &answer).into_string();
        assert!(
            page.contains("<mark>fn main</mark>() { <mark>fn go</mark>() }"),
            "{page}"
        );
        assert!(page.contains("x fnord"), "{page}");
        assert!(page.contains("src/&lt;lib&gt;.rs:3"), "{page}");
    }

    /// Issue 34 point 8: commit hits mark their subject (or, when the subject has no match,
    /// show the matched message line marked); diff hits their line.
    #[test]
    // `vec![a..b]` is a list of one mark (a byte range), not the range's numbers.
    #[allow(clippy::single_range_in_vec_init)]
    fn history_hit_marks_are_marked() {
        let commit = "d".repeat(40);
        let subject = SearchHit {
            commit: Some(commit.clone()),
            subject: Some("Fix the parser".into()),
            subject_marks: vec![8..14],
            snippet: Some("Fix the parser".into()),
            marks: vec![8..14],
            ..SearchHit::default()
        };
        let body = SearchHit {
            subject: Some("Tidy up".into()),
            snippet: Some("see parser.rs".into()),
            marks: vec![4..10],
            subject_marks: Vec::new(),
            ..subject.clone()
        };
        let diff = SearchHit {
            path: "src/a.rs".into(),
            line: Some(2),
            change: Some(LineChange::Added),
            snippet: Some("let parser = 1;".into()),
            marks: vec![4..10],
            subject_marks: Vec::new(),
            ..subject.clone()
        };
        let repo = |hits| SearchRepoHits {
            repo: "o/r".into(),
            commit: commit.clone(),
            hits,
        };
        let page = history_hits(&repo(vec![subject])).into_string();
        assert!(page.contains("Fix the <mark>parser</mark>"), "{page}");
        assert!(!page.contains("code class=\"snippet\""), "{page}");
        let page = history_hits(&repo(vec![body])).into_string();
        assert!(page.contains("Tidy up"), "{page}");
        assert!(page.contains("see <mark>parser</mark>.rs"), "{page}");
        let page = history_hits(&repo(vec![diff])).into_string();
        assert!(page.contains("+let <mark>parser</mark> = 1;"), "{page}");
        assert!(page.contains("Fix the parser"), "{page}");
    }

    /// Cluster mode: repositories no replica answered for are named on the search page,
    /// escaped like every repository text.
    #[test]
    fn search_names_what_was_not_searched() {
        let answer = SearchAnswer {
            repos: Vec::new(),
            next_cursor: None,
            not_indexed: vec!["a/building".into()],
            not_searched: vec!["b/<gone>".into()],
            stats: service::SearchStatsAnswer::default(),
            query_rewrite: None,
        };
        let page = search_hits(&SearchRequest::default(), &answer).into_string();
        assert!(page.contains("a/building: not indexed yet"), "{page}");
        assert!(
            page.contains("b/&lt;gone&gt;: the replicas that hold it did not answer"),
            "{page}"
        );
        assert!(!page.contains("<gone>"), "{page}");
    }
}
