//! `/metrics`: the Prometheus text exposition (O-4), written one group of families at a
//! time in a fixed order — base queries, the durations of enrichment (W-38) and
//! maintenance, their failures and the plugin catalog cache, repository plugins, the search
//! index, server plugins (P-23) and the access layer. Caches show hits beside lookups, so a
//! dashboard divides.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use service::{HookFailures, HostState, OpSnapshot, Service, StatsSnapshot};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// An exposition as an HTTP answer, in the text format's media type.
pub(super) struct Exposition(pub(super) String);

impl IntoResponse for Exposition {
    fn into_response(self) -> Response {
        (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            self.0,
        )
            .into_response()
    }
}

/// Every family, in the order dashboards and tests know them.
pub(super) fn render(service: &Service) -> String {
    let stats = service.stats();
    let mut out = String::new();
    base_queries(&mut out, &stats);
    durations(&mut out, &stats);
    failures_and_catalog_cache(&mut out, &stats, service);
    repository_plugins(&mut out, service);
    search_index(&mut out, service);
    admission(&mut out, service);
    server_plugins(&mut out, service);
    access(&mut out);
    cluster(&mut out, service);
    out
}

/// Base queries by operation: calls, errors and latency.
fn base_queries(out: &mut String, stats: &StatsSnapshot) {
    let base = stats.by_operation();
    labelled_counter(
        out,
        "csg_queries_total",
        "Base queries answered, by operation.",
        base.map(|(operation, op)| (operation, op.calls)),
    );
    labelled_counter(
        out,
        "csg_query_errors_total",
        "Base queries that failed, by operation.",
        base.map(|(operation, op)| (operation, op.errors)),
    );
    histogram(
        out,
        "csg_query_duration_seconds",
        "Latency of base queries, without plugin enrichment (R-7).",
        &base,
    );
}

/// Enrichment apart from the base queries (W-38), then the maintenance work.
fn durations(out: &mut String, stats: &StatsSnapshot) {
    histogram(
        out,
        "csg_enrichment_duration_seconds",
        "Latency of repository-plugin enrichment of reads (W-38).",
        &[("", stats.enrichment)],
    );
    histogram(
        out,
        "csg_site_file_duration_seconds",
        "Latency of the website's file views: highlighted lines and raw bytes (not base queries).",
        &[("highlight", stats.highlight), ("raw", stats.raw)],
    );
    histogram(
        out,
        "csg_sync_duration_seconds",
        "Duration of repository fetches.",
        &[("", stats.sync)],
    );
    histogram(
        out,
        "csg_index_build_duration_seconds",
        "Duration of index builds that did work.",
        &[("", stats.index_build)],
    );
    histogram(
        out,
        "csg_prepare_duration_seconds",
        "Duration of prepare calls (A-3), whole: their fetches and builds count above too.",
        &[("", stats.prepare)],
    );
}

/// What went wrong in the timed work above, and the plugin catalog cache.
fn failures_and_catalog_cache(out: &mut String, stats: &StatsSnapshot, service: &Service) {
    single_series(
        out,
        "counter",
        &[
            (
                "csg_enrichments_with_diagnostics_total",
                "Enrichments that reported a diagnostic (the read itself succeeded).",
                stats.enrichment.errors,
            ),
            (
                "csg_sync_failures_total",
                "Repository fetches that failed; the last good state kept serving.",
                stats.sync.errors,
            ),
            (
                "csg_plugin_catalog_hits_total",
                "Plugin catalog lookups answered from the cache.",
                service.plugin_catalog_hits(),
            ),
            (
                "csg_plugin_discoveries_total",
                "Plugin catalogs discovered (catalog cache misses).",
                service.plugin_discoveries(),
            ),
        ],
    );
}

/// The repository-plugin runtime's own figures (W-38), never mixed into the base-query ones;
/// absent when there is no runtime.
fn repository_plugins(out: &mut String, service: &Service) {
    let Some(plugins) = service.plugin_stats() else {
        return;
    };
    single_series(
        out,
        "counter",
        &[
            (
                "csg_plugin_executions_total",
                "Repository-plugin executions.",
                plugins.executions,
            ),
            (
                "csg_plugin_compiles_total",
                "Plugin modules compiled.",
                plugins.compiles,
            ),
            (
                "csg_plugin_compile_cache_hits_total",
                "Compiled-module cache hits.",
                plugins.compile_cache_hits,
            ),
            (
                "csg_plugin_instantiations_total",
                "Plugin instances created.",
                plugins.instantiations,
            ),
            (
                "csg_plugin_instance_reuses_total",
                "Executions on a reused idle instance.",
                plugins.instance_reuses,
            ),
            (
                "csg_plugin_host_reads_total",
                "Files read by plugins through the host.",
                plugins.host_reads,
            ),
            (
                "csg_plugin_faults_total",
                "Plugin executions and compiles that ended in a diagnostic.",
                plugins.faults.total(),
            ),
            (
                "csg_plugin_busy_total",
                "Plugin executions refused with PLUGIN_BUSY (every slot taken).",
                plugins.faults.busy,
            ),
        ],
    );
}

/// Searches, index builds and the result cache; absent when there is no index.
fn search_index(out: &mut String, service: &Service) {
    let Some(index) = service.index_stats() else {
        return;
    };
    single_series(
        out,
        "counter",
        &[
            ("csg_searches_total", "Searches answered.", index.searches),
            (
                "csg_search_errors_total",
                "Searches that ended in an error.",
                index.search_errors,
            ),
            (
                "csg_index_builds_total",
                "Index generations built.",
                index.builds,
            ),
            (
                "csg_index_build_errors_total",
                "Index builds that failed.",
                index.build_errors,
            ),
            (
                "csg_index_documents_reused_total",
                "Documents reused from a previous index generation.",
                index.documents_reused,
            ),
            (
                "csg_index_documents_read_total",
                "Documents read from Git while indexing.",
                index.documents_read,
            ),
            (
                "csg_search_result_cache_hits_total",
                "Searches answered from the result cache (of csg_searches_total).",
                index.result_cache_hits,
            ),
        ],
    );
    single_series(
        out,
        "gauge",
        &[
            (
                "csg_search_result_cache_entries",
                "Ranked hit lists held by the search result cache.",
                index.result_cache_entries,
            ),
            (
                "csg_search_result_cache_bytes",
                "Estimated bytes held by the search result cache.",
                index.result_cache_bytes,
            ),
            (
                "csg_repos_indexed",
                "Repositories with a current index generation.",
                index.repos_indexed,
            ),
        ],
    );
}

/// The server-plugin subsystem (O-4, P-23): its state, calls that gave up waiting for the
/// interpreter, and each file's hook failures. Everything here is read from flags and
/// counters the host keeps outside the interpreter, so a wedged or busy interpreter never
/// delays a scrape.
fn server_plugins(out: &mut String, service: &Service) {
    let host = service.server_plugins();
    server_plugins_state(out, &host.state());
    single_series(
        out,
        "counter",
        &[(
            "csg_server_plugins_interpreter_wait_timeouts_total",
            "Calls answered as without server plugins because they did not get the plugin \
             interpreter within the hook time limit (P-23).",
            host.interpreter_wait_timeouts(),
        )],
    );
    hook_failures(out, &host.hook_failures());
}

/// The access layer's token checks.
fn access(out: &mut String) {
    let auth = &crate::auth::COUNTERS;
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    single_series(
        out,
        "counter",
        &[
            (
                "csg_auth_authenticated_total",
                "Calls with a valid API token.",
                load(&auth.authenticated),
            ),
            (
                "csg_auth_refused_total",
                "Calls refused for a wrong, revoked or malformed API token.",
                load(&auth.refused),
            ),
            (
                "csg_auth_rate_limited_total",
                "Calls refused because their address presented too many wrong tokens.",
                load(&auth.rate_limited),
            ),
            (
                "csg_auth_token_in_url_total",
                "Calls refused because they carried a token in the URL.",
                load(&auth.token_in_url),
            ),
        ],
    );
}

/// Cluster mode (issue 31): routing and ownership. Absent in the embedded default.
fn cluster(out: &mut String, service: &Service) {
    let Some(cluster) = service.cluster_status() else {
        return;
    };
    let routed = &crate::wire::COUNTERS;
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    single_series(
        out,
        "counter",
        &[
            (
                "csg_cluster_forwarded_total",
                "Calls forwarded to an owner replica and answered by it.",
                load(&routed.forwarded),
            ),
            (
                "csg_cluster_forward_failovers_total",
                "Forwarding attempts that moved on to the next owner.",
                load(&routed.failovers),
            ),
            (
                "csg_cluster_forward_unanswered_total",
                "Forwarded calls no owner answered (503).",
                load(&routed.unanswered),
            ),
            (
                "csg_cluster_from_replicas_total",
                "Calls other replicas forwarded to this one.",
                load(&routed.from_replicas),
            ),
            (
                "csg_cluster_search_parts_answered_total",
                "Parts of searches over every repository other replicas answered.",
                load(&crate::peers::COUNTERS.answered),
            ),
            (
                "csg_cluster_search_parts_failed_total",
                "Parts of searches over every repository another replica did not answer.",
                load(&crate::peers::COUNTERS.failed),
            ),
        ],
    );
    let me = &cluster.self_url;
    let owned = cluster
        .repositories
        .iter()
        .filter(|repo| repo.owners.contains(me))
        .count();
    let live = cluster.membership.members.iter().filter(|m| m.live).count();
    single_series(
        out,
        "gauge",
        &[
            (
                "csg_cluster_members_live",
                "Replicas whose heartbeat lease runs, as this one sees them.",
                live as u64,
            ),
            (
                "csg_cluster_repositories_owned",
                "Repositories this replica owns.",
                owned as u64,
            ),
            (
                "csg_cluster_repositories_served",
                "Repositories this replica owns and holds.",
                cluster.served_here as u64,
            ),
            (
                "csg_cluster_database_reachable",
                "1 while this replica's heartbeats reach the metadata database.",
                u64::from(cluster.membership.database_reachable),
            ),
        ],
    );
}

/// The server-plugin subsystem's state as one gauge per state, 1 for the current one (O-4,
/// P-23): a wedged interpreter shows as `csg_server_plugins_state{state="wedged"} 1`.
fn server_plugins_state(out: &mut String, current: &HostState) {
    let name = "csg_server_plugins_state";
    let _ = writeln!(
        out,
        "# HELP {name} State of the server-plugin subsystem: 1 for the current state \
         (wedged: every hook is bypassed until a restart).\n# TYPE {name} gauge"
    );
    for state in ["disabled", "unavailable", "active", "wedged"] {
        let value = u8::from(current.name() == state);
        let _ = writeln!(out, "{name}{{state=\"{state}\"}} {value}");
    }
}

/// Failures of each plugin file's hooks in the current epoch (P-7, P-23): a file whose
/// `on_source_file` keeps failing shows here even though the index build went on.
fn hook_failures(out: &mut String, failures: &[HookFailures]) {
    let name = "csg_server_plugin_hook_failures_total";
    let _ = writeln!(
        out,
        "# HELP {name} Failures of a server plugin file's hook since its epoch loaded (a \
         reload starts again from 0).\n# TYPE {name} counter"
    );
    for failure in failures {
        let _ = writeln!(
            out,
            "{name}{{file=\"{}\",hook=\"{}\"}} {}",
            label_value(&failure.file),
            failure.hook,
            failure.count
        );
    }
}

/// A Prometheus label value: backslash, double quote and line feed escaped (file names are
/// the operator's, any bytes).
fn label_value(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One counter family with an `operation` label.
fn labelled_counter<const N: usize>(
    out: &mut String,
    name: &str,
    help: &str,
    values: [(&str, u64); N],
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (operation, value) in values {
        let _ = writeln!(out, "{name}{{operation=\"{operation}\"}} {value}");
    }
}

/// Admission per class (O-9): each heavy class's slots, how many are held and how many
/// calls were refused as busy.
fn admission(out: &mut String, service: &Service) {
    let classes = service.admission_stats();
    for (name, kind, help, value) in [
        (
            "csg_class_slots",
            "gauge",
            "Slots of a heavy class's pool (O-9).",
            (|c: &service::ClassStats| c.slots as u64) as fn(&service::ClassStats) -> u64,
        ),
        (
            "csg_class_slots_busy",
            "gauge",
            "Slots of a heavy class held right now.",
            |c| c.busy as u64,
        ),
        (
            "csg_class_refused_total",
            "counter",
            "Calls of a heavy class refused as busy (HTTP 503) since start.",
            |c| c.refused,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for class in &classes {
            let _ = writeln!(
                out,
                "{name}{{class=\"{}\"}} {}",
                class.class.name(),
                value(class)
            );
        }
    }
}

/// One histogram family in seconds; an empty label value means an unlabelled series.
fn histogram(out: &mut String, name: &str, help: &str, series: &[(&str, OpSnapshot)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    for (operation, op) in series {
        let label = if operation.is_empty() {
            String::new()
        } else {
            format!("operation=\"{operation}\",")
        };
        for (bound, count) in service::LATENCY_BUCKETS_MICROS.iter().zip(op.buckets) {
            let le = *bound as f64 / 1e6;
            let _ = writeln!(out, "{name}_bucket{{{label}le=\"{le}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{{label}le=\"+Inf\"}} {}", op.calls);
        let braces = if label.is_empty() {
            String::new()
        } else {
            format!("{{{}}}", label.trim_end_matches(','))
        };
        let sum = op.total_micros as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {}", op.calls);
    }
}

/// Families of one unlabelled series each, of one `kind` (`counter` or `gauge`).
fn single_series(out: &mut String, kind: &str, families: &[(&str, &str, u64)]) {
    for (name, help, value) in families {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// O-4: a file name in a label cannot end the label or the line.
    #[test]
    fn o4_label_values_are_escaped() {
        assert_eq!(label_value("a\"b\\c\nd.py"), "a\\\"b\\\\c\\nd.py");
    }

    /// O-4: an unlabelled histogram has cumulative buckets, `+Inf` at the count, and bare
    /// `_sum`/`_count`; a labelled one puts its label first in every series.
    #[test]
    fn o4_histogram_series() {
        let op = OpSnapshot {
            calls: 2,
            total_micros: 1_500_000,
            buckets: [2; service::LATENCY_BUCKETS_MICROS.len()],
            ..OpSnapshot::default()
        };
        let mut out = String::new();
        histogram(&mut out, "x_seconds", "X.", &[("", op)]);
        assert!(out.starts_with("# HELP x_seconds X.\n# TYPE x_seconds histogram\n"));
        assert!(out.contains("\nx_seconds_bucket{le=\"+Inf\"} 2\n"), "{out}");
        assert!(
            out.ends_with("\nx_seconds_sum 1.5\nx_seconds_count 2\n"),
            "{out}"
        );
        let mut out = String::new();
        histogram(&mut out, "x_seconds", "X.", &[("read", op)]);
        assert!(
            out.contains("\nx_seconds_bucket{operation=\"read\",le=\"+Inf\"} 2\n"),
            "{out}"
        );
        assert!(
            out.ends_with(
                "\nx_seconds_sum{operation=\"read\"} 1.5\nx_seconds_count{operation=\"read\"} 2\n"
            ),
            "{out}"
        );
    }
}
