//! Issue 34 point 8: search hits carry the byte ranges of the query's matches (for the
//! website's highlighting) through the service: code hits, commit and diff hits, a server
//! plugin's `on_search_results` (a hit keeps its marks unless its snippet changed), and a
//! cluster replica's wire type (older replicas send none; marks that do not fit are
//! dropped). Never in the JSON answers (SPEC §9).

use std::ops::Range;

use pyplugin::{HostConfig, PluginHost};
use service::{
    CallContext, SearchAnswer, SearchHit, SearchKind, SearchRequest, Service, ServiceConfig,
};
use testgit::SourceRepo;

const REPO: &str = "test/repo";

fn texts(text: &str, marks: &[Range<u32>]) -> Vec<String> {
    assert!(search::marks_fit(text, marks), "{marks:?} in {text:?}");
    marks
        .iter()
        .map(|m| text[m.start as usize..m.end as usize].to_owned())
        .collect()
}

/// The JSON answer (SPEC §9) has no `marks` or `subject_marks` anywhere.
fn assert_no_marks(json: &serde_json::Value) {
    let keys = ["marks", "subject_marks"];
    for repo in json["repos"].as_array().unwrap() {
        for hit in repo["hits"].as_array().unwrap() {
            assert!(keys.iter().all(|k| hit.get(k).is_none()), "{hit}");
        }
    }
}

fn hits(answer: &SearchAnswer) -> Vec<&SearchHit> {
    answer.repos.iter().flat_map(|r| &r.hits).collect()
}

/// Code hits: a regex's matches, word boundaries judged on the line; absent from the JSON.
#[tokio::test]
async fn issue34_code_hits_carry_marks_not_serialized() {
    let source = SourceRepo::with_files(&[(
        "src/lib.rs",
        b"fn alpha() {}\nfn beta() { fnx(); fn_gamma() }\n",
    )]);
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    service.index(REPO.into(), |_| {}).await.expect("index");
    let answer = service
        .search(
            &CallContext::default(),
            SearchRequest {
                query: r"\bfn\b \w+".into(),
                repo: Some(REPO.into()),
                regex: true,
                case_sensitive: true,
                ..SearchRequest::default()
            },
        )
        .await
        .unwrap();
    let found: Vec<(u64, Vec<String>)> = hits(&answer)
        .iter()
        .map(|h| {
            let snippet = h.snippet.as_deref().unwrap();
            (h.line.unwrap(), texts(snippet, &h.marks))
        })
        .collect();
    assert_eq!(
        found,
        [
            (1, vec!["fn alpha".to_owned()]),
            (2, vec!["fn beta".to_owned()])
        ]
    );
    assert_no_marks(&serde_json::to_value(&answer).unwrap());
}

/// Commit hits mark their subject and matched line, diff hits their line (the history
/// search's own regex); the diff search leaves the subject unmarked.
#[tokio::test]
async fn issue34_history_hits_carry_marks() {
    let source = SourceRepo::with_files(&[("a.txt", b"one\n")]);
    source.commit(
        &[("a.txt", b"one\nthe Needle here, needle there\n")],
        "Add a needle\n\nbody needle",
    );
    let service = Service::new(source.store(REPO, ""), ServiceConfig::default());
    service.index_history(REPO.into()).await.expect("history");
    let ctx = CallContext::default();
    let search = |kind| {
        service.search(
            &ctx,
            SearchRequest {
                query: "needle".into(),
                repo: Some(REPO.into()),
                kind,
                ..SearchRequest::default()
            },
        )
    };
    let commits = search(SearchKind::Commit).await.unwrap();
    let [commit] = hits(&commits)[..] else {
        panic!("{commits:?}")
    };
    let subject = commit.subject.as_deref().unwrap();
    assert_eq!(texts(subject, &commit.subject_marks), ["needle"]);
    assert_eq!(
        texts(commit.snippet.as_deref().unwrap(), &commit.marks),
        ["needle"]
    );
    let diffs = search(SearchKind::Diff).await.unwrap();
    let [diff] = hits(&diffs)[..] else {
        panic!("{diffs:?}")
    };
    assert_eq!(
        texts(diff.snippet.as_deref().unwrap(), &diff.marks),
        ["Needle", "needle"]
    );
    assert!(diff.subject_marks.is_empty());
    assert_no_marks(&serde_json::to_value(&diffs).unwrap());
}

/// `on_search_results` reorders, drops and notes hits: each returned hit keeps its own
/// marks (a changed snippet would lose them, but `pyplugin` refuses such a change).
#[tokio::test]
async fn issue34_plugin_reordered_hits_keep_their_marks() {
    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(
        plugins.path().join("rank.py"),
        "def on_search_results(result):\n    hits = [h for h in result['hits'] if h['path'] != 'c.txt']\n    hits.reverse()\n    for h in hits:\n        if h['path'] == 'b.txt':\n            h['note'] = 'both'\n    return {'hits': hits}\n",
    )
    .unwrap();
    let source = SourceRepo::with_files(&[
        ("a.txt", b"x needle y\n"),
        ("b.txt", b"needle needle\n"),
        ("c.txt", b"needle\n"),
        ("d.txt", b"yy NEEDLE\n"),
    ]);
    let mut config = HostConfig::new(plugins.path().to_path_buf());
    config.enabled = true;
    let host = tokio::task::spawn_blocking(move || PluginHost::start(config))
        .await
        .unwrap();
    let service =
        Service::with_server_plugins(source.store(REPO, ""), ServiceConfig::default(), host);
    service.index(REPO.into(), |_| {}).await.expect("index");
    let answer = service
        .search(
            &CallContext::default(),
            SearchRequest {
                query: "needle".into(),
                repo: Some(REPO.into()),
                ..SearchRequest::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(service.server_plugins_status().host.hook_failures, []);
    let found: Vec<(&str, Vec<String>)> = hits(&answer)
        .iter()
        .map(|h| {
            (
                h.path.as_str(),
                texts(h.snippet.as_deref().unwrap(), &h.marks),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("d.txt", vec!["NEEDLE".to_owned()]),
            ("b.txt", vec!["needle".to_owned(), "needle".to_owned()]),
            ("a.txt", vec!["needle".to_owned()]),
        ]
    );
}

/// The replicas' wire type: marks travel (only when there are some); an older replica's
/// hit without them reads as unmarked.
#[test]
fn issue34_shard_hits_carry_marks_compatibly() {
    let hit: service::ShardHit = serde_json::from_value(serde_json::json!({
        "tier": "line", "repo": "o/r", "commit": "c", "path": "a", "line": 1, "snippet": "abc"
    }))
    .unwrap();
    assert!(hit.marks.is_empty());
    let marked = service::ShardHit {
        marks: vec![0..1, 2..3],
        ..hit.clone()
    };
    let json = serde_json::to_value(&marked).unwrap();
    assert_eq!(
        json["marks"],
        serde_json::json!([{"start": 0, "end": 1}, {"start": 2, "end": 3}])
    );
    let back: service::ShardHit = serde_json::from_value(json).unwrap();
    assert_eq!(back, marked);
    assert!(serde_json::to_value(&hit).unwrap().get("marks").is_none());
}
