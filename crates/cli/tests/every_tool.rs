//! Issue 30's proofs over the real transports, against the `csg` binary: a tool is defined
//! once, in `tools::TOOLS`, and every face a running `csg serve` shows (MCP `tools/list` over
//! Streamable HTTP, the JSON API routes, the server-plugin preset targets and reserved names,
//! `csg plugins api`, the README) is that table; and every repository-naming tool takes an
//! `ALIASES` alias (P-22) and answers a private repository the caller may not read exactly as
//! an unknown one, over MCP and over HTTP alike.
//!
//! Each test starts its own server on a free loopback port in a temp data directory and is
//! bounded as a whole ([`LIMIT`]): a hang is a failure, and the server is killed either way.

mod common;

use common::{
    Got, Server, arguments, csg, mcp_call, repository_naming_tools, source, user_with_token,
    wait_indexed, within,
};
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use testgit::answers::{repos_named, untimed};
use tools::{Limits, ToolDef};

/// The public repository the tests read.
const REPO: &str = "acme/docs";
/// The same source registered private: nobody but a granted user may read it.
const PRIVATE: &str = "acme/secret";
/// A name nothing is registered under.
const UNKNOWN: &str = "acme/nothing";
/// `ALIASES` keys of the server plugin: `kb` names [`REPO`], `vault` names [`PRIVATE`].
const ALIAS: &str = "kb";
const PRIVATE_ALIAS: &str = "vault";

/// The repository-naming tools issue 30 lists; the test also derives them from the table
/// (a `repo` argument) and requires both lists to agree, so a new one cannot be left out.
const REPOSITORY_NAMING: [&str; 13] = [
    "read",
    "read_many",
    "search",
    "list",
    "resolve",
    "log",
    "commit",
    "diff",
    "blame",
    "outline",
    "definitions",
    "references",
    "availability",
];

/// The limits `csg serve` runs with in these tests, each unlike its default, so a text that
/// stated the defaults instead of the configured values (M-4) would not match.
fn served_config() -> service::ServiceConfig {
    service::ServiceConfig {
        read_budget: 128 * 1024,
        batch_budget: 1024 * 1024,
        max_batch_items: 12,
        ..service::ServiceConfig::default()
    }
}

/// The `csg serve` flags that set [`served_config`].
fn served_flags() -> Vec<String> {
    let config = served_config();
    vec![
        "--read-budget-bytes".into(),
        config.read_budget.to_string(),
        "--batch-budget-bytes".into(),
        config.batch_budget.to_string(),
        "--max-batch-items".into(),
        config.max_batch_items.to_string(),
    ]
}

/// Runs `body` within [`LIMIT`]; a test that does not finish in time fails (and drops its
/// server, which kills it).
/// `csg serve` on a free loopback port with the [`served_config`] limits and server plugins
/// on from `plugins`.
async fn start(data: &Path, plugins: &Path) -> Server {
    let plugins = plugins.to_str().expect("a UTF-8 path");
    Server::spawn(
        data,
        &served_flags(),
        &[
            ("SOURCEGRAPH_SERVER_PLUGINS_ENABLED", "true"),
            ("SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY", plugins),
        ],
    )
    .await
}

/// Issue 30, proof 1 (M-3, M-4, M-5, R-6, P-8, P-14, P-22): a running server's faces are the
/// table. MCP `tools/list` has exactly the table's tools, in order, with their titles,
/// descriptions and input schemas under the configured limits and their annotations, then
/// the server plugins' presets; every tool's route answers (GET and POST alike for a
/// read-only tool, POST only and GET 405 otherwise); the server plugins may target exactly
/// the table's presetable tools with their schemas and may not take a reserved name; `csg
/// plugins api` and the README hold the blocks generated from the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn i30_m5_r6_p22_every_face_of_the_server_is_the_tools_table() {
    within(every_face_is_the_table()).await;
}

async fn every_face_is_the_table() {
    let limits = Limits::new(&served_config());
    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins directory");
    // One file per tool, each a preset `p_<tool>` of it: a file loads only if the server
    // lets a preset target that tool (an invalid entry rejects its whole file).
    for tool in tools::TOOLS {
        std::fs::write(
            plugins.join(format!("target_{}.py", tool.name())),
            format!(
                "TOOL_PRESETS = {{\"p_{name}\": {{\"tool\": \"{name}\", \"description\": \
                 \"{name}, as a preset.\"}}}}\n",
                name = tool.name()
            ),
        )
        .expect("plugin file");
    }
    // One file per reserved name, each a preset of that name: every one is refused.
    let reserved: BTreeSet<&str> = tools::reserved_names().collect();
    for name in &reserved {
        std::fs::write(
            plugins.join(format!("reserved_{name}.py")),
            format!(
                "TOOL_PRESETS = {{\"{name}\": {{\"tool\": \"discovery\", \"description\": \
                 \"Takes a reserved name.\"}}}}\n"
            ),
        )
        .expect("plugin file");
    }
    let (source, first) = source();
    csg(
        &data,
        &["repo", "add", REPO, source.path().to_str().expect("utf-8")],
    )
    .await;
    let ops = user_with_token(&data, "ops", true).await;
    let server = start(&data, &plugins).await;
    wait_indexed(&server, REPO, None).await;

    // The table itself: names unique, the presetable tools are the preset targets.
    let presetable: Vec<&str> = tools::TOOLS
        .iter()
        .filter(|tool| tool.presetable())
        .map(|tool| tool.name())
        .collect();
    let targets = tools::preset_targets(&limits);
    assert_eq!(
        targets.keys().map(String::as_str).collect::<BTreeSet<_>>(),
        presetable.iter().copied().collect::<BTreeSet<_>>()
    );

    // MCP tools/list: the table in order, then one preset per presetable tool.
    let client = server.mcp(None).await;
    let listed = client.list_all_tools().await.expect("tools/list");
    let listed: Vec<Value> = listed
        .iter()
        .map(|tool| serde_json::to_value(tool).expect("a tool serialises"))
        .collect();
    assert!(
        listed.len() >= tools::TOOLS.len(),
        "{} tools listed for {} in the table",
        listed.len(),
        tools::TOOLS.len()
    );
    let (built_in, presets) = listed.split_at(tools::TOOLS.len());
    for (tool, advertised) in tools::TOOLS.iter().zip(built_in) {
        let name = tool.name();
        let hints = tool.annotations();
        assert_eq!(advertised["name"], json!(name));
        assert_eq!(advertised["title"], json!(tool.title()), "{name}");
        assert_eq!(
            advertised["description"],
            json!(tool.description(&limits)),
            "{name}: the description states the configured limits"
        );
        assert_eq!(
            advertised["inputSchema"],
            Value::Object(tool.input_schema(&limits)),
            "{name}"
        );
        assert_eq!(
            advertised["annotations"],
            json!({
                "readOnlyHint": hints.read_only,
                "destructiveHint": hints.destructive,
                "idempotentHint": hints.idempotent,
                "openWorldHint": hints.open_world,
            }),
            "{name}"
        );
    }
    let mut expected_presets: Vec<String> = presetable.iter().map(|t| format!("p_{t}")).collect();
    expected_presets.sort();
    let mut preset_names: Vec<String> = presets
        .iter()
        .map(|p| p["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    preset_names.sort();
    assert_eq!(
        preset_names, expected_presets,
        "the presets that loaded are exactly those of presetable tools"
    );
    for preset in presets {
        let name = preset["name"].as_str().unwrap_or_default();
        let target = &name["p_".len()..];
        let base = tools::find(target).expect("a tool of the table");
        assert_eq!(preset["title"], json!(format!("Preset of {target}")));
        assert_eq!(
            preset["inputSchema"], targets[target],
            "{name}: without fixed arguments a preset takes its target's schema"
        );
        let base_listed = built_in
            .iter()
            .find(|t| t["name"] == json!(base.name()))
            .expect("listed");
        assert_eq!(preset["annotations"], base_listed["annotations"], "{name}");
    }
    client.cancel().await.expect("the MCP client closes");

    // The server plugins' view: which files loaded and why the others were refused.
    let (status, plugin_status) = server.get("plugin_status", &json!({}), Some(&ops)).await;
    assert_eq!(status, 200, "{plugin_status}");
    assert_eq!(plugin_status["state"], "active", "{plugin_status}");
    let loaded: BTreeSet<String> = plugin_status["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["file"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(
        loaded,
        presetable
            .iter()
            .map(|t| format!("target_{t}.py"))
            .collect::<BTreeSet<_>>(),
        "{plugin_status}"
    );
    let rejected: BTreeMap<String, String> = plugin_status["rejected"]
        .as_array()
        .expect("rejected")
        .iter()
        .map(|r| {
            (
                r["file"].as_str().unwrap_or_default().to_owned(),
                r["reasons"].to_string(),
            )
        })
        .collect();
    // The refusal names the server's preset targets: exactly the table's.
    let one_of = format!(
        "(one of {})",
        targets.keys().cloned().collect::<Vec<_>>().join(", ")
    );
    for tool in tools::TOOLS.iter().filter(|tool| !tool.presetable()) {
        let file = format!("target_{}.py", tool.name());
        let reason = rejected
            .get(&file)
            .unwrap_or_else(|| panic!("{file} is refused: {plugin_status}"));
        assert!(
            reason.contains("not a tool a preset can use") && reason.contains(&one_of),
            "{file}: {reason}"
        );
    }
    for name in &reserved {
        let file = format!("reserved_{name}.py");
        let reason = rejected
            .get(&file)
            .unwrap_or_else(|| panic!("{file} is refused: {plugin_status}"));
        assert!(
            reason.contains("is the name of a built-in tool"),
            "{file}: {reason}"
        );
    }
    assert_eq!(
        rejected.len(),
        reserved.len() + tools::TOOLS.len() - presetable.len(),
        "{plugin_status}"
    );

    // The JSON API: a route per tool; a read-only one answers GET and POST alike.
    let (status, _) = server.get("no_such_tool", &json!({}), None).await;
    assert_eq!(status, 404, "a route the table does not have");
    for tool in tools::TOOLS {
        let name = tool.name();
        let args = arguments(name, REPO, &first);
        if tool.annotations().read_only {
            let (get_status, by_get) = server.get(name, &args, Some(&ops)).await;
            let (post_status, by_post) = server.post(name, &args, Some(&ops)).await;
            assert_eq!(get_status, 200, "GET {name}: {by_get}");
            assert_eq!(post_status, 200, "POST {name}: {by_post}");
            assert_eq!(untimed(by_get), untimed(by_post), "{name}: GET and POST");
        } else {
            let (status, body) = server.get(name, &args, Some(&ops)).await;
            assert_eq!(status, 405, "GET {name}: {body}");
            let (status, body) = server.post(name, &args, Some(&ops)).await;
            assert_eq!(status, 200, "POST {name}: {body}");
        }
    }
    drop(server);

    // `csg plugins api`: its presets block is the table's.
    let api = csg(&data, &["plugins", "api"]).await;
    let defaults = Limits::new(&service::ServiceConfig::default());
    let regenerated = tools::reference::replace_block(
        &api,
        "# <generated:presets>",
        "# </generated:presets>",
        &tools::reference::plugin_api_presets(&defaults),
    )
    .expect("`csg plugins api` has a presets block");
    assert!(
        regenerated == api,
        "`csg plugins api` lists other preset targets than the table"
    );

    // The README's tools table.
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("README.md");
    let regenerated = tools::reference::replace_block(
        &readme,
        "<!-- generated:tools -->",
        "<!-- /generated:tools -->",
        &tools::reference::readme_tools_table(&defaults),
    )
    .expect("the README has a tools block");
    assert!(
        regenerated == readme,
        "the README's tools table differs from the table; run `CSG_BLESS=1 cargo test -p tools`"
    );
}

/// One caller's view of a server: an MCP session and the HTTP token.
struct Caller {
    who: &'static str,
    token: Option<String>,
    mcp: RunningService<RoleClient, ()>,
}

impl Caller {
    async fn new(server: &Server, who: &'static str, token: Option<String>) -> Caller {
        let mcp = server.mcp(token.as_deref()).await;
        Caller { who, token, mcp }
    }

    /// `tool` about `repo` on every face: MCP, HTTP POST and, for a read-only tool, HTTP GET.
    async fn every_face(
        &self,
        server: &Server,
        tool: &dyn ToolDef,
        repo: &str,
        first: &str,
    ) -> Vec<(&'static str, Got)> {
        let name = tool.name();
        let args = arguments(name, repo, first);
        let token = self.token.as_deref();
        let (error, texts) = mcp_call(&self.mcp, name, &args).await;
        let mut got = vec![("MCP", Got::Mcp(error, texts))];
        let (status, body) = server.post(name, &args, token).await;
        got.push(("HTTP POST", Got::Http(status, untimed(body))));
        if tool.annotations().read_only {
            let (status, body) = server.get(name, &args, token).await;
            got.push(("HTTP GET", Got::Http(status, untimed(body))));
        }
        got
    }
}

/// Issue 30, proof 2 (P-22, A-2, A-4, A-3): every repository-naming tool, over MCP and over
/// HTTP, answers an `ALIASES` alias exactly as the real name (the answer naming the real
/// repository), and answers a private repository the caller may not read — under its name
/// and under an alias — exactly as a repository that does not exist (HTTP: the same status
/// and message; MCP: the same `isError` text). `prepare` (HTTP only) takes the alias too, and
/// refuses a caller without the capability alike for private and unknown repositories. A
/// granted user gets answers where the others are refused: the refusals are about access.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn p22_a4_every_repository_naming_tool_over_mcp_and_http() {
    within(every_repository_naming_tool()).await;
}

async fn every_repository_naming_tool() {
    let limits = Limits::new(&served_config());
    let naming = repository_naming_tools(&limits);
    assert_eq!(
        naming.iter().map(|t| t.name()).collect::<Vec<_>>(),
        REPOSITORY_NAMING,
        "the table's repository-naming tools are issue 30's"
    );

    let tmp = tempfile::tempdir().expect("tempdir");
    let data = tmp.path().join("data");
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).expect("plugins directory");
    std::fs::write(
        plugins.join("aliases.py"),
        format!("ALIASES = {{\"{ALIAS}\": \"{REPO}\", \"{PRIVATE_ALIAS}\": \"{PRIVATE}\"}}\n"),
    )
    .expect("plugin file");
    let (source, first) = source();
    let path = source.path().to_str().expect("utf-8");
    csg(&data, &["repo", "add", REPO, path]).await;
    csg(&data, &["repo", "add", PRIVATE, path, "--private"]).await;
    let reader = user_with_token(&data, "reader", false).await;
    let granted = user_with_token(&data, "granted", false).await;
    csg(&data, &["grant", "granted", PRIVATE]).await;
    let ops = user_with_token(&data, "ops", true).await;

    let server = start(&data, &plugins).await;
    wait_indexed(&server, REPO, Some(&reader)).await;
    wait_indexed(&server, PRIVATE, Some(&granted)).await;
    let (status, plugin_status) = server.get("plugin_status", &json!({}), Some(&ops)).await;
    assert_eq!(status, 200);
    assert_eq!(
        plugin_status["files"][0]["tables"],
        json!(["ALIASES"]),
        "{plugin_status}"
    );

    let reader = Caller::new(&server, "reader", Some(reader)).await;
    let anonymous = Caller::new(&server, "anonymous", None).await;
    let granted = Caller::new(&server, "granted", Some(granted)).await;

    for &tool in &naming {
        let name = tool.name();
        // P-22: the alias answers as the real name, on every face.
        let by_alias = reader.every_face(&server, tool, ALIAS, &first).await;
        let by_name = reader.every_face(&server, tool, REPO, &first).await;
        for ((face, aliased), (_, named)) in by_alias.iter().zip(&by_name) {
            let case = format!("{name} over {face}");
            assert!(!named.failed(), "{case} with the real name: {named:?}");
            assert_eq!(
                aliased, named,
                "{case}: the alias `{ALIAS}` against `{REPO}`"
            );
            match aliased {
                Got::Http(_, body) => {
                    let mut named_repos = Vec::new();
                    repos_named(body, &mut named_repos);
                    assert!(
                        !named_repos.is_empty() && named_repos.iter().all(|r| r == REPO),
                        "{case} names the real repository: {body}"
                    );
                }
                Got::Mcp(_, texts) => {
                    let text = texts.join("\n");
                    assert!(text.contains(REPO), "{case} names {REPO}: {text}");
                    assert!(
                        !text.contains(&format!("Repo: {ALIAS}\n")),
                        "{case} names the alias as the repository: {text}"
                    );
                }
            }
        }

        // not readable is unknown, under the name and under an alias, for every caller
        // who may not read it.
        for caller in [&reader, &anonymous] {
            let private = caller.every_face(&server, tool, PRIVATE, &first).await;
            let aliased = caller
                .every_face(&server, tool, PRIVATE_ALIAS, &first)
                .await;
            let unknown = caller.every_face(&server, tool, UNKNOWN, &first).await;
            for (((face, private), (_, aliased)), (_, unknown)) in
                private.iter().zip(&aliased).zip(&unknown)
            {
                let case = format!("{name} over {face} by {}", caller.who);
                assert_eq!(
                    private,
                    &unknown.renamed(UNKNOWN, PRIVATE),
                    "{case}: `{PRIVATE}` against `{UNKNOWN}`"
                );
                assert_eq!(
                    aliased, private,
                    "{case}: `{PRIVATE_ALIAS}` against `{PRIVATE}`"
                );
                match (name, private) {
                    ("availability", Got::Http(status, body)) => {
                        assert_eq!(*status, 200, "{case}: {body}");
                        assert_eq!(body["visible"], json!(false), "{case}: {body}");
                    }
                    ("availability", Got::Mcp(error, _)) => assert!(!error, "{case}"),
                    (_, Got::Http(status, body)) => {
                        assert_eq!(*status, 404, "{case}: {body}");
                        assert_eq!(body["error"]["kind"], json!("not_found"), "{case}: {body}");
                    }
                    (_, Got::Mcp(error, texts)) => {
                        assert!(*error, "{case}: {texts:?}");
                    }
                }
            }
        }

        // The control: a granted user reads it, under its name and its alias.
        for repo in [PRIVATE, PRIVATE_ALIAS] {
            for (face, got) in granted.every_face(&server, tool, repo, &first).await {
                assert!(
                    !got.failed(),
                    "{name} of {repo} over {face} by granted: {got:?}"
                );
                if let ("availability", Got::Http(_, body)) = (name, &got) {
                    assert_eq!(body["visible"], json!(true), "{body}");
                }
            }
        }
    }

    // prepare (HTTP only, A-3): the alias is the real name for an operator; a caller without
    // the capability is refused alike for a private, an aliased and an unknown repository.
    let prepare = |repo: &str, action: &str| {
        let mut body = json!({"repo": repo, "action": action});
        if matches!(action, "pin" | "unpin") {
            body["revision"] = json!(first);
        }
        body
    };
    for action in ["pin", "unpin", "reindex", "sync"] {
        let (status, aliased) = server
            .post("prepare", &prepare(ALIAS, action), Some(&ops))
            .await;
        assert_eq!(status, 200, "prepare {action} of {ALIAS}: {aliased}");
        let (status, named) = server
            .post("prepare", &prepare(REPO, action), Some(&ops))
            .await;
        assert_eq!(status, 200, "prepare {action} of {REPO}: {named}");
        assert_eq!(
            untimed(aliased.clone()),
            untimed(named),
            "prepare {action}: the alias against the name"
        );
        let mut named_repos = Vec::new();
        repos_named(&aliased, &mut named_repos);
        assert!(
            named_repos.iter().all(|r| r == REPO),
            "prepare {action} names the real repository: {aliased}"
        );
        for caller in [&reader, &anonymous] {
            let token = caller.token.as_deref();
            let (status, private) = server
                .post("prepare", &prepare(PRIVATE, action), token)
                .await;
            let aliased = server
                .post("prepare", &prepare(PRIVATE_ALIAS, action), token)
                .await;
            let unknown = server
                .post("prepare", &prepare(UNKNOWN, action), token)
                .await;
            let case = format!("prepare {action} by {}", caller.who);
            let expected = if token.is_some() { 403 } else { 401 };
            assert_eq!(status, expected, "{case}: {private}");
            assert_eq!(
                Got::Http(status, private.clone()),
                Got::Http(unknown.0, unknown.1).renamed(UNKNOWN, PRIVATE),
                "{case}"
            );
            assert_eq!((status, private), aliased, "{case}: the alias");
        }
    }

    for caller in [reader, anonymous, granted] {
        caller.mcp.cancel().await.expect("the MCP client closes");
    }
    drop(server);
}
