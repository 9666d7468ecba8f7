//! The host contract of seed 002 (SPEC P-2..P-13) against real plugin files run by the real
//! embedded CPython.
#![cfg(feature = "python")]

mod common;

use common::{check_config, host, plugin_dir, write};
use pyplugin::{
    Hook, HostConfig, PageGroup, PageLine, PluginHost, SearchPage, State, check_directory,
};
use serde_json::{Value, json};
use std::time::Duration;

fn read_payload() -> Value {
    Hook::ReadResult.sample_payload()
}

#[test]
fn p2_empty_file_is_a_valid_plugin_that_changes_nothing() {
    let dir = plugin_dir(&[("empty.py", "")]);
    let host = host(dir.path());
    let status = host.status();
    assert_eq!(status.state, State::Active);
    assert_eq!(status.files.len(), 1, "{status:?}");
    assert!(status.rejected.is_empty(), "{status:?}");
    let epoch = host.current().unwrap();
    for hook in Hook::ALL {
        assert!(!epoch.defines(hook), "{hook:?}");
        let out = epoch.run_blocking(hook, hook.sample_payload());
        assert_eq!(out.value, hook.sample_payload());
        assert!(out.changed_by.is_empty() && out.failures.is_empty());
    }
}

#[test]
fn p2_a_missing_hook_does_not_run_and_p6_files_pipe_in_name_order() {
    // b.py defines only on_read_result; a.py only on_tool_call: each runs where defined.
    let dir = plugin_dir(&[
        (
            "20_second.py",
            "def on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"second\"]}\n",
        ),
        (
            "10_first.py",
            "def on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"first\"]}\n",
        ),
        (
            "30_other.py",
            "def on_tool_call(call):\n    return {\"arguments\": {\"query\": \"x\"}}\n",
        ),
    ]);
    let host = host(dir.path());
    let epoch = host.current().unwrap();
    let out = epoch.run_blocking(Hook::ReadResult, read_payload());
    assert_eq!(out.value["notes"], json!(["first", "second"]));
    assert_eq!(out.changed_by, ["10_first.py", "20_second.py"]);
    assert!(!epoch.defines(Hook::SearchResults));
    let names: Vec<_> = host.status().files.iter().map(|f| f.file.clone()).collect();
    assert_eq!(names, ["10_first.py", "20_second.py", "30_other.py"]);
}

#[test]
fn p3_mutating_the_payload_without_returning_changes_nothing() {
    let dir = plugin_dir(&[
        (
            "a.py",
            "def on_read_result(result):\n    result[\"notes\"].append(\"sneaky\")\n    result[\"items\"].clear()\n",
        ),
        // The next file sees a fresh copy: the mutation above did not leak into it.
        (
            "b.py",
            "def on_read_result(result):\n    return {\"notes\": [str(len(result[\"items\"])) + \" items, notes=\" + repr(result[\"notes\"])]}\n",
        ),
    ]);
    let host = host(dir.path());
    let out = host
        .current()
        .unwrap()
        .run_blocking(Hook::ReadResult, read_payload());
    assert_eq!(out.value["notes"], json!(["2 items, notes=[]"]));
    assert_eq!(out.value["items"], read_payload()["items"]);
}

#[test]
fn p3_a_result_that_is_not_plain_data_is_discarded() {
    let dir = plugin_dir(&[(
        "a.py",
        "def on_read_result(result):\n    return {\"notes\": {\"a set\"}}\n",
    )]);
    let host = host(dir.path());
    let out = host
        .current()
        .unwrap()
        .run_blocking(Hook::ReadResult, read_payload());
    assert_eq!(out.value, read_payload());
    assert!(
        out.failures[0].message.contains("set"),
        "{:?}",
        out.failures
    );
}

#[test]
fn p4_typos_reject_the_file_and_name_the_nearest_while_helpers_and_imports_pass() {
    let dir = plugin_dir(&[
        (
            "a_typo.py",
            "def on_serch_results(result):\n    return None\n",
        ),
        ("b_table.py", "QUERY_ALIAS = {\"k8s\": \"kubernetes\"}\n"),
        (
            "c_fine.py",
            "import re\nfrom os import path\n_WORDS = re.compile(r\"\\w+\")\nMAX = None\n\
             def _helper(x):\n    return x\n\
             def on_read_result(result):\n    return {\"notes\": [_helper(\"ok\")]}\n",
        ),
    ]);
    let host = host(dir.path());
    let status = host.status();
    let rejected: Vec<_> = status.rejected.iter().map(|r| r.file.as_str()).collect();
    // `MAX` in c_fine.py is an upper-case public name too: that file is rejected as well,
    // which shows the rule holds for constants; the next case checks the accepted forms.
    assert_eq!(
        rejected,
        ["a_typo.py", "b_table.py", "c_fine.py"],
        "{status:?}"
    );
    let typo = &status.rejected[0].reasons[0];
    assert!(
        typo.contains("a_typo.py") && typo.contains("on_serch_results"),
        "{typo}"
    );
    assert!(typo.contains("did you mean on_search_results?"), "{typo}");
    assert!(
        typo.contains(
            "on_startup, on_tool_call, on_search_results, on_read_result, on_source_file"
        ),
        "{typo}"
    );
    let table = &status.rejected[1].reasons[0];
    assert!(
        table.contains("did you mean QUERY_ALIASES?") && table.contains("REQUIRES"),
        "{table}"
    );

    write(
        dir.path(),
        "c_fine.py",
        "import re\nfrom os import path\n_WORDS = re.compile(r\"\\w+\")\n\
         def _helper(x):\n    return x\n\
         def on_read_result(result):\n    return {\"notes\": [_helper(\"ok\")]}\n",
    );
    let status = host.reload().unwrap();
    assert_eq!(status.files.len(), 1, "{status:?}");
    assert_eq!(status.files[0].file, "c_fine.py");
    let out = host
        .current()
        .unwrap()
        .run_blocking(Hook::ReadResult, read_payload());
    assert_eq!(out.value["notes"], json!(["ok"]));
}

#[test]
fn p8_a_bad_table_entry_is_named_with_the_reason() {
    let dir = plugin_dir(&[
        ("bad.py", "ALIASES = {\"kb\": \"acme/kb\", \"docs\": 7}\n"),
        (
            "good.py",
            "QUERY_ALIASES = {\"k8s\": \"kubernetes\"}\n\
             TOOL_PRESETS = {\"search_docs\": {\"tool\": \"search\", \"description\": \"Docs.\", \"arguments\": {\"path\": \"docs/**\"}}}\n",
        ),
    ]);
    let host = host(dir.path());
    let status = host.status();
    assert_eq!(status.rejected.len(), 1);
    let reason = &status.rejected[0].reasons[0];
    assert!(
        reason.contains("ALIASES[\"docs\"]") && reason.contains("int"),
        "{reason}"
    );
    let epoch = host.current().unwrap();
    let tables = epoch.tables();
    assert_eq!(tables.query_aliases["k8s"].value, "kubernetes");
    assert_eq!(
        tables.tool_presets["search_docs"].arguments["path"],
        "docs/**"
    );
    assert!(
        tables.aliases.is_empty(),
        "the rejected file's tables are not used"
    );
}

#[test]
fn p9_requires_mismatch_names_both_sides() {
    let dir = plugin_dir(&[
        ("new.py", "REQUIRES = {\"HOOKS_VERSION\": \">=2\"}\n"),
        (
            "ok.py",
            "REQUIRES = {\"HOOKS_VERSION\": \">=1,<2\", \"HOST_CONTRACT_VERSION\": 1, \"PRODUCT\": \"context-sourcegraph\"}\n",
        ),
        ("other.py", "REQUIRES = {\"PRODUCT\": \"help-search\"}\n"),
    ]);
    let status = host(dir.path()).status();
    let files: Vec<_> = status.files.iter().map(|f| f.file.as_str()).collect();
    assert_eq!(files, ["ok.py"]);
    let hooks = &status.rejected[0].reasons[0];
    assert!(
        hooks.contains("\">=2\"") && hooks.contains("HOOKS_VERSION = 1"),
        "{hooks}"
    );
    let product = &status.rejected[1].reasons[0];
    assert!(
        product.contains("help-search") && product.contains("context-sourcegraph"),
        "{product}"
    );
}

#[test]
fn p5_an_exception_is_logged_with_traceback_the_call_answers_without_it_and_it_stays_off_until_reload()
 {
    let dir = plugin_dir(&[
        (
            "a_fails.py",
            "def on_read_result(result):\n    return {\"notes\": [1 / 0]}\n",
        ),
        (
            "b_works.py",
            "def on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"b\"]}\n",
        ),
    ]);
    let host = host(dir.path());
    let epoch = host.current().unwrap();
    let out = epoch.run_blocking(Hook::ReadResult, read_payload());
    assert_eq!(
        out.value["notes"],
        json!(["b"]),
        "as if a_fails.py were absent"
    );
    let failure = &out.failures[0];
    assert_eq!(
        (failure.file.as_str(), failure.hook.as_str()),
        ("a_fails.py", "on_read_result")
    );
    assert!(failure.message.contains("Traceback"), "{}", failure.message);
    assert!(
        failure.message.contains("a_fails.py\", line 2"),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains("ZeroDivisionError"),
        "{}",
        failure.message
    );

    let again = epoch.run_blocking(Hook::ReadResult, read_payload());
    assert!(again.failures.is_empty(), "disabled: not run again");
    assert_eq!(again.value["notes"], json!(["b"]));
    let status = host.status();
    assert_eq!(status.disabled.len(), 1);
    assert_eq!(status.disabled[0].file, "a_fails.py");
    assert!(
        status.disabled[0].reason.contains("ZeroDivisionError"),
        "{:?}",
        status.disabled
    );

    write(
        dir.path(),
        "a_fails.py",
        "def on_read_result(result):\n    return {\"notes\": [\"a\"]}\n",
    );
    host.reload().unwrap();
    let out = host
        .current()
        .unwrap()
        .run_blocking(Hook::ReadResult, read_payload());
    assert_eq!(out.value["notes"], json!(["a", "b"]));
    assert!(host.status().disabled.is_empty());
}

#[test]
fn p5_sys_exit_in_a_hook_is_caught_like_any_failure() {
    let dir = plugin_dir(&[(
        "exits.py",
        "import sys\ndef on_tool_call(call):\n    sys.exit(3)\n",
    )]);
    let host = host(dir.path());
    let payload = Hook::ToolCall.sample_payload();
    let out = host
        .current()
        .unwrap()
        .run_blocking(Hook::ToolCall, payload.clone());
    assert_eq!(out.value, payload);
    assert!(
        out.failures[0].message.contains("SystemExit"),
        "{:?}",
        out.failures
    );
    assert_eq!(
        host.state(),
        State::Active,
        "the process and the host live on"
    );
    assert!(!host.current().unwrap().defines(Hook::ToolCall));
}

#[test]
fn p12_a_call_keeps_the_epoch_it_started_with() {
    let dir = plugin_dir(&[(
        "n.py",
        "def on_read_result(result):\n    return {\"notes\": [\"old\"]}\n",
    )]);
    let host = host(dir.path());
    let old = host.current().unwrap();
    write(
        dir.path(),
        "n.py",
        "def on_read_result(result):\n    return {\"notes\": [\"new\"]}\n",
    );
    let status = host.reload().unwrap();
    assert_eq!(status.epoch, old.number() + 1);
    let new = host.current().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (a, b) = runtime.block_on(async {
        tokio::join!(
            old.run(Hook::ReadResult, read_payload()),
            new.run(Hook::ReadResult, read_payload())
        )
    });
    assert_eq!(a.value["notes"], json!(["old"]));
    assert_eq!(b.value["notes"], json!(["new"]));
}

#[test]
fn p11_on_startup_sees_secrets_as_booleans_only() {
    let out = tempfile::tempdir().unwrap();
    let dump = out.path().join("startup.json");
    let dir = plugin_dir(&[(
        "s.py",
        &format!(
            "import json\ndef on_startup(info):\n    open({:?}, \"w\").write(json.dumps(info))\n",
            dump.to_str().unwrap()
        ),
    )]);
    let mut config = HostConfig::new(dir.path().to_path_buf());
    config.secrets = pyplugin::redact_secrets([
        (
            "SOURCEGRAPH_API_TOKEN".to_owned(),
            "s3cr3t-token-value".to_owned(),
        ),
        ("CSG_SIGNING_KEY".to_owned(), String::new()),
        ("CSG_LISTEN".to_owned(), "127.0.0.1:7878".to_owned()),
        ("HOME".to_owned(), "/root".to_owned()),
    ]);
    let _host = PluginHost::start(config);
    let text = std::fs::read_to_string(&dump).unwrap();
    assert!(!text.contains("s3cr3t"), "{text}");
    let info: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        info["secrets"],
        json!({"SOURCEGRAPH_API_TOKEN": true, "CSG_SIGNING_KEY": false})
    );
    assert_eq!(info["epoch"], 1);
    assert_eq!(info["plugin_files"], json!(["s.py"]));
    assert_eq!(info["hooks_version"], 1);
}

#[test]
fn p10_an_invalid_search_result_is_discarded_for_the_unmodified_one() {
    let dir = plugin_dir(&[
        (
            "a.py",
            "def on_search_results(result):\n    h = dict(result[\"hits\"][0]); h[\"path\"] = \"secret.txt\"\n    return {\"hits\": [h]}\n",
        ),
        (
            "b.py",
            "def on_search_results(result):\n    return {\"hits\": list(reversed(result[\"hits\"]))}\n",
        ),
    ]);
    let host = host(dir.path());
    let payload = Hook::SearchResults.sample_payload();
    let out = host
        .current()
        .unwrap()
        .run_blocking(Hook::SearchResults, payload.clone());
    let reversed: Vec<Value> = payload["hits"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .cloned()
        .collect();
    assert_eq!(
        out.value["hits"],
        Value::Array(reversed),
        "b.py applied to the original"
    );
    assert_eq!(out.changed_by, ["b.py"]);
    assert!(
        out.failures[0].message.contains("not one of the hits"),
        "{:?}",
        out.failures
    );
}

/// A search page with hits in two repositories (the typed payload of `on_search_results`).
fn two_repo_page() -> SearchPage {
    let line = |path: &str, line, snippet: &str| PageLine {
        path: path.into(),
        line,
        snippet: snippet.into(),
    };
    SearchPage {
        query: "deploy".into(),
        caller: json!({"authenticated": true}),
        groups: vec![
            PageGroup {
                repo: "acme/infra".into(),
                commit: "a".repeat(40),
                lines: vec![
                    line("k8s.yaml", 3, "kind: Deployment"),
                    line("ci.yml", 9, "deploy: ✓"),
                ],
            },
            PageGroup {
                repo: "acme/kb".into(),
                commit: "b".repeat(40),
                lines: vec![line("docs/deploy.md", 1, "# Deploy")],
            },
        ],
    }
}

#[test]
fn p3_a_search_page_reaches_hooks_as_its_plain_data_and_pipes_like_it() {
    // The seen files record what each call sees; rev.py reverses the hits and notes the first.
    let dir = plugin_dir(&[(
        "20_rev.py",
        "def on_search_results(result):\n    hits = list(reversed(result['hits']))\n    hits[0]['note'] = 'newest first'\n    return {'hits': hits}\n",
    )]);
    for name in ["10", "30"] {
        let log = dir.path().join(format!("seen_{name}.json"));
        let source = format!(
            "import json\ndef on_search_results(result):\n    with open({log:?}, 'a') as f:\n        f.write(json.dumps(result, separators=(',', ':'), ensure_ascii=False) + '\\n')\n"
        );
        write(dir.path(), &format!("{name}_seen.py"), &source);
    }
    let host = host(dir.path());
    let epoch = host.current().unwrap();
    let page = two_repo_page();
    let typed = epoch.run_search_blocking(page.clone());
    let plain = epoch.run_blocking(Hook::SearchResults, page.to_value());
    assert_eq!(typed.changed_by, ["20_rev.py"], "{:?}", typed.failures);
    assert_eq!(
        typed, plain,
        "the typed page pipes exactly like its plain data"
    );
    let hits = typed.value["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 3);
    assert_eq!(hits[0]["path"], "docs/deploy.md");
    assert_eq!(hits[0]["note"], "newest first");
    assert_eq!(hits[2]["repo"], "acme/infra");
    let seen = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let first: Vec<String> = seen("seen_10.json").lines().map(str::to_owned).collect();
    assert_eq!(first.len(), 2);
    assert_eq!(first[0], serde_json::to_string(&page.to_value()).unwrap());
    assert_eq!(
        first[0], first[1],
        "the same dict, key order included, either way"
    );
    let last: Vec<String> = seen("seen_30.json").lines().map(str::to_owned).collect();
    assert_eq!(last[0], last[1]);
    assert_eq!(last[0], serde_json::to_string(&typed.value).unwrap());
}

#[test]
fn p2_a_search_page_no_hook_changes_comes_back_as_no_change() {
    let dir = plugin_dir(&[(
        "a.py",
        "def on_search_results(result):\n    result['hits'].clear()\n    return None\n",
    )]);
    let host = host(dir.path());
    let out = host.current().unwrap().run_search_blocking(two_repo_page());
    assert!(
        out.changed().is_none() && out.failures.is_empty(),
        "{out:?}"
    );
    assert_eq!(out.value, Value::Null);
}

#[test]
fn p2_only_py_files_load_and_nothing_is_written_into_the_directory() {
    let dir = plugin_dir(&[
        ("notes.txt", "def on_serch(): pass"),
        (".hidden.py", "on_typo = 1"),
        (
            "a.py",
            "import json\ndef on_tool_call(call):\n    return None\n",
        ),
    ]);
    std::fs::create_dir(dir.path().join("__pycache__")).unwrap();
    write(
        &dir.path().join("__pycache__"),
        "b.py",
        "syntax error here (",
    );
    let host = host(dir.path());
    let status = host.status();
    assert_eq!(status.files.len(), 1, "{status:?}");
    assert!(status.rejected.is_empty(), "{status:?}");
    host.current()
        .unwrap()
        .run_blocking(Hook::ToolCall, Hook::ToolCall.sample_payload());
    let mut listed: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    listed.sort();
    assert_eq!(listed, [".hidden.py", "__pycache__", "a.py", "notes.txt"]);
    assert_eq!(
        std::fs::read_dir(dir.path().join("__pycache__"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn p2_a_syntax_error_rejects_only_that_file() {
    let dir = plugin_dir(&[
        ("a.py", "def on_tool_call(call)\n    return None\n"),
        ("b.py", "x = 1\n"),
    ]);
    let status = host(dir.path()).status();
    assert_eq!(status.files.len(), 1);
    assert!(
        status.rejected[0].reasons[0].contains("SyntaxError"),
        "{status:?}"
    );
}

#[test]
fn p7_the_derived_fingerprint_follows_only_derived_state_sources() {
    let dir = plugin_dir(&[
        ("a.py", "def on_source_file(file):\n    return None\n"),
        ("b.py", "def on_read_result(result):\n    return None\n"),
    ]);
    let host = host(dir.path());
    let first = host.current().unwrap().derived_fingerprint().to_owned();
    assert_eq!(first.len(), 64);
    write(
        dir.path(),
        "b.py",
        "def on_read_result(result):\n    return {\"notes\": []}\n",
    );
    host.reload().unwrap();
    assert_eq!(host.current().unwrap().derived_fingerprint(), first);
    write(
        dir.path(),
        "a.py",
        "def on_source_file(file):\n    return {\"skip\": True}\n",
    );
    host.reload().unwrap();
    let second = host.current().unwrap().derived_fingerprint().to_owned();
    assert_ne!(second, first);
    std::fs::remove_file(dir.path().join("a.py")).unwrap();
    host.reload().unwrap();
    assert_eq!(host.current().unwrap().derived_fingerprint(), "");
}

#[test]
fn p1_a_disabled_host_reads_nothing_and_refuses_reload() {
    let dir = plugin_dir(&[("a.py", "raise SystemExit('must never run')\n")]);
    let mut config = HostConfig::new(dir.path().to_path_buf());
    config.enabled = false;
    let host = PluginHost::start(config);
    assert_eq!(host.state(), State::Disabled);
    assert!(host.current().is_none());
    let err = host.reload().unwrap_err();
    assert!(
        err.to_string()
            .contains("SOURCEGRAPH_SERVER_PLUGINS_ENABLED=true"),
        "{err}"
    );
}

#[test]
fn p13_dry_run_of_a_good_and_a_bad_directory() {
    let good = plugin_dir(&[
        ("example.py", pyplugin::EXAMPLE),
        (
            "notes.py",
            "def on_read_result(result):\n    return {\"notes\": result[\"notes\"] + [\"see the handbook\"]}\n\
             def on_source_file(file):\n    return {\"skip\": True} if file[\"path\"].endswith(\".min.js\") else None\n",
        ),
    ]);
    let report = check_directory(check_config(
        good.path().to_path_buf(),
        Duration::from_secs(2),
    ));
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.files.len(), 2);
    assert_eq!(
        report.runs.len(),
        2,
        "each defined hook ran once: {report:?}"
    );

    let bad = plugin_dir(&[
        (
            "a.py",
            "def on_read_result(result):\n    return {\"notes\": \"not a list\"}\n",
        ),
        ("b.py", "TOOL_PRESET = {}\n"),
    ]);
    let report = check_directory(check_config(
        bad.path().to_path_buf(),
        Duration::from_secs(2),
    ));
    assert!(!report.ok());
    assert_eq!(report.rejected[0].file, "b.py");
    let run = &report.runs[0];
    assert!(
        run.failure.as_deref().unwrap().contains("must be a list"),
        "{run:?}"
    );

    let missing = check_directory(check_config(
        good.path().join("nope"),
        Duration::from_secs(2),
    ));
    assert!(!missing.ok() && missing.error.as_deref().unwrap().contains("does not exist"));
}
