//! The clients: MCP calls, the checks of their answers, and one client's loop with its record.

use super::head::SourceFile;
use super::plugins::Layout;
use super::{AVAILABILITY, CALL_TIMEOUT, READ, READ_MANY, REPO, SEARCH, SLOW, TOOLS};
use anyhow::Result;
use rmcp::RoleClient;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::Peer;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(super) fn call(name: &'static str, args: serde_json::Value) -> CallToolRequestParams {
    let serde_json::Value::Object(map) = args else {
        unreachable!("a JSON object literal")
    };
    CallToolRequestParams::new(name).with_arguments(map)
}

pub(super) fn texts(result: &CallToolResult) -> Vec<&str> {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .map(|t| t.text.as_str())
        .collect()
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    cut(line, 160)
}

pub(super) fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// An `isError` result as a failure text.
pub(super) fn tool_error(result: &CallToolResult) -> Option<String> {
    (result.is_error == Some(true)).then(|| {
        format!(
            "isError: {}",
            first_line(texts(result).first().copied().unwrap_or("(no text)"))
        )
    })
}

/// What the shared state of a run gives every client.
pub(super) struct Shared {
    /// When the load started (set once the source is ready).
    pub(super) started: std::sync::OnceLock<Instant>,
    pub(super) files: Vec<SourceFile>,
    pub(super) identifiers: Vec<String>,
    pub(super) layout: Layout,
    pub(super) head: String,
    pub(super) stop: AtomicBool,
    pub(super) calls: AtomicU64,
    pub(super) failures: AtomicU64,
    pub(super) slow: AtomicU64,
}

/// One client's record.
#[derive(Default)]
pub(super) struct Record {
    pub(super) latencies: [Vec<Duration>; 4],
    pub(super) failed: [u64; 4],
    /// (tool, error) → (count, example arguments).
    pub(super) errors: BTreeMap<(usize, String), (u64, String)>,
    /// (latency, time into the run it started at, tool, arguments) of calls over SLOW.
    pub(super) slow: Vec<(Duration, Duration, usize, String)>,
    /// `code=… plugin=…` of PluginDiagnostics lines → count.
    pub(super) diagnostics: BTreeMap<String, u64>,
    /// Reads whose answer carried an OperatorNotes block.
    pub(super) notes: u64,
}

impl Record {
    pub(super) fn merge(&mut self, other: Record) {
        for tool in 0..TOOLS.len() {
            self.latencies[tool].extend_from_slice(&other.latencies[tool]);
            self.failed[tool] += other.failed[tool];
        }
        for (key, (count, example)) in other.errors {
            let entry = self.errors.entry(key).or_insert((0, example));
            entry.0 += count;
        }
        self.slow.extend(other.slow);
        for (key, count) in other.diagnostics {
            *self.diagnostics.entry(key).or_default() += count;
        }
        self.notes += other.notes;
    }
}

/// xorshift64*: enough randomness for picking files, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// A random file and a start line: line 1 for two reads in three, else any line of it.
fn pick<'a>(shared: &'a Shared, rng: &mut Rng) -> (&'a SourceFile, u64) {
    let file = &shared.files[rng.below(shared.files.len())];
    let start = if rng.below(3) == 0 {
        1 + rng.next() % file.lines.max(1)
    } else {
        1
    };
    (file, start)
}

/// Checks the blocks of a `read`/`read_many` answer against the items asked: commit, path,
/// start line, no item error, and the attachment each applicable plugin adds (unless a
/// diagnostic names the plugin: those are counted, not failed).
fn check_read(
    shared: &Shared,
    result: &CallToolResult,
    items: &[(&SourceFile, u64)],
    record: &mut Record,
) -> Result<(), String> {
    if let Some(error) = tool_error(result) {
        return Err(error);
    }
    let blocks = texts(result);
    let mut diagnosed = HashSet::new();
    for block in &blocks {
        if let Some(lines) = block.strip_prefix("PluginDiagnostics:") {
            for line in lines.lines().filter_map(|l| l.strip_prefix("- ")) {
                let mut fields = line.split(' ');
                let code = fields.next().unwrap_or("").to_string();
                let plugin = fields.next().unwrap_or("").to_string();
                diagnosed.insert(plugin.trim_start_matches("plugin=").to_string());
                *record
                    .diagnostics
                    .entry(format!("{code} {plugin}"))
                    .or_default() += 1;
            }
        }
        if block.starts_with("OperatorNotes:") {
            record.notes += 1;
        }
    }
    for (i, (file, start)) in items.iter().enumerate() {
        let block = blocks
            .get(i)
            .ok_or_else(|| format!("{} blocks for {} items", blocks.len(), items.len()))?;
        let header = block.split("\n\n").next().unwrap_or("");
        if let Some(error) = header.lines().find(|l| l.starts_with("Error: ")) {
            return Err(format!("item error: {}", cut(error, 160)));
        }
        let expect = |field: &str, value: &str| -> Result<(), String> {
            if header.lines().any(|l| l == format!("{field}: {value}")) {
                Ok(())
            } else {
                Err(format!("item without `{field}: {}`", cut(value, 60)))
            }
        };
        expect("Commit", &shared.head)?;
        expect("Path", &file.path)?;
        expect("StartLine", &start.to_string())?;
        let (root, rel) = shared.layout.echo_for(&file.path);
        let echoed = block.contains(&format!("\necho read-{i} {rel} "))
            && block.contains(&format!(" root={root} op="));
        if !echoed && !diagnosed.contains("echo") {
            return Err(format!("no echo attachment (root `{root}`)"));
        }
        if shared.layout.related_applies(&file.path)
            && !block.contains("\nrelated:\n")
            && !diagnosed.contains("related-content")
        {
            return Err("no related-content attachment".into());
        }
        if shared.layout.evidence_applies(&file.path)
            && !block.contains("\nreferences:\n")
            && !diagnosed.contains("evidence-chain")
        {
            return Err("no evidence-chain attachment".into());
        }
    }
    Ok(())
}

pub(super) fn check_availability(shared: &Shared, result: &CallToolResult) -> Result<(), String> {
    if let Some(error) = tool_error(result) {
        return Err(error);
    }
    let text = texts(result).join("\n");
    let lines: Vec<&str> = text.lines().collect();
    for want in [
        format!("Commit: {}", shared.head),
        "Readable: true".to_string(),
        "Indexed: true".to_string(),
        format!("Plugins: {}", shared.layout.artifacts),
    ] {
        if !lines.contains(&want.as_str()) {
            let got = lines
                .iter()
                .find(|l| l.starts_with(want.split(':').next().unwrap_or("")))
                .copied()
                .unwrap_or("(none)");
            return Err(format!("expected `{want}`, got `{}`", cut(got, 120)));
        }
    }
    if let Some(line) = lines
        .iter()
        .find(|l| l.trim_start().starts_with("Diagnostic: "))
    {
        return Err(format!("plugin diagnostic: {}", cut(line.trim(), 120)));
    }
    Ok(())
}

fn check_search(shared: &Shared, result: &CallToolResult) -> Result<(), String> {
    if let Some(error) = tool_error(result) {
        return Err(error);
    }
    let text = texts(result).join("\n");
    if text.contains(&format!("NotIndexed: {REPO} ")) {
        return Err(format!("{REPO} not indexed"));
    }
    if !text.contains(&format!("Repo: {REPO}\nCommit: {}\n", shared.head)) {
        return Err(format!("no hit in {REPO} at the head"));
    }
    Ok(())
}

/// One client: calls until `stop`, each checked and timed.
pub(super) async fn client_loop(id: usize, peer: Peer<RoleClient>, shared: Arc<Shared>) -> Record {
    let mut record = Record::default();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((id as u64 + 1) * 0x1000_0000_01B3));
    while !shared.stop.load(Ordering::Relaxed) {
        let roll = rng.below(100);
        let (tool, params, items) = if roll < 45 {
            let (file, start) = pick(&shared, &mut rng);
            let params = call(
                "read",
                serde_json::json!({"repo": REPO, "path": file.path, "start_line": start}),
            );
            (READ, params, vec![(file, start)])
        } else if roll < 70 {
            let items: Vec<(&SourceFile, u64)> = (0..3 + rng.below(3))
                .map(|_| pick(&shared, &mut rng))
                .collect();
            let files: Vec<serde_json::Value> = items
                .iter()
                .map(|(f, s)| serde_json::json!({"path": f.path, "start_line": s}))
                .collect();
            let params = call(
                "read_many",
                serde_json::json!({"repo": REPO, "files": files}),
            );
            (READ_MANY, params, items)
        } else if roll < 92 {
            let params = call(
                "availability",
                serde_json::json!({"repo": REPO, "include_plugins": true}),
            );
            (AVAILABILITY, params, Vec::new())
        } else {
            let query = &shared.identifiers[rng.below(shared.identifiers.len())];
            // Half over every repository (the churned one included), half over the source.
            let params = if rng.below(2) == 0 {
                call("search", serde_json::json!({"query": query}))
            } else {
                call("search", serde_json::json!({"query": query, "repo": REPO}))
            };
            (SEARCH, params, Vec::new())
        };
        let summary = cut(
            &serde_json::Value::Object(params.arguments.clone().unwrap_or_default()).to_string(),
            200,
        );
        let started = Instant::now();
        let outcome = tokio::time::timeout(CALL_TIMEOUT, peer.call_tool(params)).await;
        let elapsed = started.elapsed();
        let verdict = match outcome {
            Err(_) => Err(format!("no answer within {} s", CALL_TIMEOUT.as_secs())),
            Ok(Err(error)) => Err(format!("transport: {}", cut(&error.to_string(), 160))),
            Ok(Ok(result)) => match tool {
                READ | READ_MANY => check_read(&shared, &result, &items, &mut record),
                AVAILABILITY => check_availability(&shared, &result),
                _ => check_search(&shared, &result),
            },
        };
        record.latencies[tool].push(elapsed);
        shared.calls.fetch_add(1, Ordering::Relaxed);
        if elapsed > SLOW {
            shared.slow.fetch_add(1, Ordering::Relaxed);
            let at = started.saturating_duration_since(*shared.started.get_or_init(Instant::now));
            record.slow.push((elapsed, at, tool, summary.clone()));
        }
        if let Err(error) = verdict {
            // A stop by Ctrl-C also stops the server: what fails after it is not counted.
            if shared.stop.load(Ordering::Relaxed) {
                record.latencies[tool].pop();
                break;
            }
            record.failed[tool] += 1;
            shared.failures.fetch_add(1, Ordering::Relaxed);
            record.errors.entry((tool, error)).or_insert((0, summary)).0 += 1;
        }
    }
    record
}
