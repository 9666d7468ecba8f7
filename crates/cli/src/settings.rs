//! The settings of `csg`, each defined once (O-3): its flag, `CSG_*` variable, TOML key,
//! type and range, default and help. The command line (`--help` included), the config file
//! parser, the validation at start and the README's configuration table are all made from
//! [`SETTINGS`] by `config`, so a setting cannot be documented, parsed or checked in one place
//! and forgotten in another.
//!
//! Adding a setting: a field in [`Settings`], one [`Def`] in [`SETTINGS`], then
//! `CSG_BLESS=1 cargo test -p csg readme` to write its README row.

use crate::setting::{Def, DefaultValue, Field, Scope};
use service::ServiceConfig;
use std::time::Duration;

/// The longest retention window (about 100 years): longer ones would overflow time
/// arithmetic.
const MAX_RETENTION_DAYS: u64 = 36_500;

/// The settings, in the order `--help` and the README list them.
pub const SETTINGS: &[Def] = &[
    Def {
        key: "config",
        flag: "config",
        env: "CSG_CONFIG",
        in_file: false,
        scope: Scope::Global,
        value_name: "FILE",
        field: Field::Path(|s| &mut s.config),
        default: DefaultValue::Derived("none"),
        help: "TOML configuration file; its keys are the settings' names with underscores \
               (`read_budget_bytes = 262144`). Lowest precedence above the defaults.",
    },
    Def {
        key: "data_dir",
        flag: "data-dir",
        env: "CSG_DATA_DIR",
        in_file: true,
        scope: Scope::Global,
        value_name: "DIR",
        field: Field::Path(|s| &mut s.data_dir),
        default: DefaultValue::Derived("`$XDG_DATA_HOME/csg`, else `~/.local/share/csg`"),
        help: "Data directory (SQLite metadata, mirrors, indexes).",
    },
    Def {
        key: "database_url",
        flag: "database",
        env: "CSG_DATABASE_URL",
        in_file: true,
        scope: Scope::Global,
        value_name: "URL",
        field: Field::Secret(|s| &mut s.database),
        default: DefaultValue::Derived("none: the embedded SQLite in the data directory"),
        help: "Cluster mode: the PostgreSQL database the replicas share for their metadata \
               (`postgres://USER:PASS@HOST:PORT/DB`); the admin commands then act on it too. \
               Mirrors and indexes stay in each replica's data directory. TLS as libpq: \
               `?sslmode=verify-full&sslrootcert=CA.pem` (`disable`, `prefer` (default), \
               `require`, `verify-ca`, `verify-full`; without `sslrootcert` the system's CAs).",
    },
    Def {
        key: "log_format",
        flag: "log-format",
        env: "CSG_LOG_FORMAT",
        in_file: true,
        scope: Scope::Global,
        value_name: "FORMAT",
        field: Field::Choice(&["text", "json"], |s| &mut s.log_format),
        default: DefaultValue::Value(|| "text".into()),
        help: "Log format (logs go to stderr; `CSG_LOG` sets the levels).",
    },
    Def {
        key: "retention_days",
        flag: "retention-days",
        env: "CSG_RETENTION_DAYS",
        in_file: true,
        scope: Scope::Global,
        value_name: "DAYS",
        field: Field::Count {
            min: 0,
            max: MAX_RETENTION_DAYS,
            field: |s| &mut s.retention_days,
        },
        default: DefaultValue::Value(|| "30".into()),
        help: "Retention window of former branch heads, in days (G-5).",
    },
    Def {
        key: "listen",
        flag: "listen",
        env: "CSG_LISTEN",
        in_file: true,
        scope: Scope::Serve,
        value_name: "IP:PORT",
        field: Field::Listen(|s| &mut s.listen),
        default: DefaultValue::Value(|| crate::setting::DEFAULT_LISTEN.into()),
        help: "Address to listen on (port 0 picks a free one).",
    },
    Def {
        key: "public_url",
        flag: "public-url",
        env: "CSG_PUBLIC_URL",
        in_file: true,
        scope: Scope::Serve,
        value_name: "URL",
        field: Field::Text(|s| &mut s.public_url),
        default: DefaultValue::Derived("the bound address"),
        help: "The public URL of this deployment (e.g. https://csg.example.org), used in the \
               printed client configuration, on the access page and in the Origin/Host \
               allow-lists.",
    },
    Def {
        key: "allowed_hosts",
        flag: "allowed-host",
        env: "CSG_ALLOWED_HOSTS",
        in_file: true,
        scope: Scope::Serve,
        value_name: "HOST",
        field: Field::List(|s| &mut s.allowed_hosts),
        default: DefaultValue::Derived("`localhost`, `127.0.0.1`, `::1`, the public URL's host"),
        help: "Allowed `Host` header values for MCP (DNS-rebinding protection). Without a \
               public URL the access page names the origin a visitor reached only for these. \
               Repeatable or comma-separated.",
    },
    Def {
        key: "allowed_origins",
        flag: "allowed-origin",
        env: "CSG_ALLOWED_ORIGINS",
        in_file: true,
        scope: Scope::Serve,
        value_name: "ORIGIN",
        field: Field::List(|s| &mut s.allowed_origins),
        default: DefaultValue::Derived("this server's loopback origins and the public URL"),
        help: "Allowed browser `Origin`s for MCP. Repeatable or comma-separated.",
    },
    Def {
        key: "public_read",
        flag: "public-read",
        env: "CSG_PUBLIC_READ",
        in_file: true,
        scope: Scope::Serve,
        value_name: "BOOL",
        field: Field::Bool(|s| &mut s.public_read),
        default: DefaultValue::Value(|| ServiceConfig::default().public_read.to_string()),
        help: "Whether callers without a token may read public repositories (A-2). Private \
               repositories always need a granted user's token.",
    },
    Def {
        key: "sync_interval",
        flag: "sync-interval",
        env: "CSG_SYNC_INTERVAL",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "DURATION",
        field: Field::Duration {
            min: Duration::from_millis(1),
            max: Duration::from_secs(30 * 86_400),
            field: |s| &mut s.sync_interval,
        },
        default: DefaultValue::Value(|| "60s".into()),
        help: "How often every repository is fetched and re-indexed (G-3).",
    },
    Def {
        key: "read_budget_bytes",
        flag: "read-budget-bytes",
        env: "CSG_READ_BUDGET_BYTES",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "BYTES",
        field: Field::Size {
            min: 1,
            max: usize::MAX,
            field: |s| &mut s.read_budget_bytes,
        },
        default: DefaultValue::Value(|| ServiceConfig::default().read_budget.to_string()),
        help: "Body bytes one `read` may return.",
    },
    Def {
        key: "batch_budget_bytes",
        flag: "batch-budget-bytes",
        env: "CSG_BATCH_BUDGET_BYTES",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "BYTES",
        field: Field::Size {
            min: 1,
            max: usize::MAX,
            field: |s| &mut s.batch_budget_bytes,
        },
        default: DefaultValue::Value(|| ServiceConfig::default().batch_budget.to_string()),
        help: "Body bytes one `read_many` shares across its items.",
    },
    Def {
        key: "max_batch_items",
        flag: "max-batch-items",
        env: "CSG_MAX_BATCH_ITEMS",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "N",
        field: Field::Size {
            min: 1,
            max: usize::MAX,
            field: |s| &mut s.max_batch_items,
        },
        default: DefaultValue::Value(|| ServiceConfig::default().max_batch_items.to_string()),
        help: "Items one `read_many` may ask for.",
    },
    Def {
        key: "line_cap_bytes",
        flag: "line-cap-bytes",
        env: "CSG_LINE_CAP_BYTES",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "BYTES",
        field: Field::Size {
            min: 1,
            max: usize::MAX,
            field: |s| &mut s.line_cap_bytes,
        },
        default: DefaultValue::Value(|| ServiceConfig::default().line_cap.to_string()),
        help: "A single line longer than this is cut inside the line.",
    },
    Def {
        key: "index_max_file_bytes",
        flag: "index-max-file-bytes",
        env: "CSG_INDEX_MAX_FILE_BYTES",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "BYTES",
        field: Field::Count {
            min: 1,
            max: u64::MAX,
            field: |s| &mut s.index_max_file_bytes,
        },
        default: DefaultValue::Value(|| ServiceConfig::default().index.max_file_bytes.to_string()),
        help: "Files larger than this are searchable by path only.",
    },
    Def {
        key: "history_depth",
        flag: "history-depth",
        env: "CSG_HISTORY_DEPTH",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "COMMITS",
        field: Field::Count {
            min: 0,
            max: u64::MAX,
            field: |s| &mut s.history_depth,
        },
        default: DefaultValue::Value(|| "0".to_string()),
        help: "Commits of each repository's default branch, newest first, that the commit and \
               diff search index holds; `0` (the default) indexes the whole retained history.",
    },
    Def {
        key: "blob_cache_bytes",
        flag: "blob-cache-bytes",
        env: "CSG_BLOB_CACHE_BYTES",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "BYTES",
        field: Field::Size {
            min: 0,
            max: usize::MAX,
            field: |s| &mut s.blob_cache_bytes,
        },
        default: DefaultValue::Value(|| gitstore::DEFAULT_BLOB_CACHE_BYTES.to_string()),
        help: "Bytes of decoded file text kept for repeat and continuation reads; `0` turns \
               the cache off.",
    },
    Def {
        key: "max_text_bytes",
        flag: "max-text-bytes",
        env: "CSG_MAX_TEXT_BYTES",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "BYTES",
        field: Field::Size {
            min: 1,
            max: gitstore::Text::MAX_BYTES,
            field: |s| &mut s.max_text_bytes,
        },
        default: DefaultValue::Value(|| gitstore::DEFAULT_MAX_TEXT_BYTES.to_string()),
        help: "The largest file the text tools read (`read`, `read_many`, `blame`, `outline`, \
               the file page) and diffs show: a larger one is refused from its object header, \
               before it is inflated, with where to get it instead (the raw view, `search`); \
               a diff says the file is too large to diff.",
    },
    Def {
        key: "max_searches",
        flag: "max-searches",
        env: "CSG_MAX_SEARCHES",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "N",
        field: Field::Size {
            min: 1,
            max: service::MAX_CONCURRENT_SEARCHES,
            field: |s| &mut s.max_searches,
        },
        default: DefaultValue::Computed {
            value: || ServiceConfig::default().max_concurrent_searches.to_string(),
            shown: "twice the number of cores",
        },
        help: "Searches that run at once; a further one waits 1 s, then is refused as busy \
               (HTTP 503).",
    },
    Def {
        key: "heavy_calls",
        flag: "heavy-calls",
        env: "CSG_HEAVY_CALLS",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "N",
        field: Field::Size {
            min: 1,
            max: service::MAX_HEAVY_CALLS,
            field: |s| &mut s.heavy_calls,
        },
        default: DefaultValue::Computed {
            value: || ServiceConfig::default().heavy_calls.to_string(),
            shown: "the number of cores, at least 2",
        },
        help: "Calls of one heavy class that run at once (O-9): history walks, blame, diffs, \
               raw downloads, reads of large files, README renders, searches at an unindexed \
               revision, first parses of files each have this many slots; one client (token, \
               else address) holds at most half of a class's. A further call waits 1 s, then \
               is refused as busy (HTTP 503 with `Retry-After`).",
    },
    Def {
        key: "shutdown_grace",
        flag: "shutdown-grace",
        env: "CSG_SHUTDOWN_GRACE",
        in_file: true,
        scope: Scope::ServeAndMcp,
        value_name: "DURATION",
        field: Field::Duration {
            min: Duration::ZERO,
            max: Duration::from_secs(3600),
            field: |s| &mut s.shutdown_grace,
        },
        default: DefaultValue::Value(|| "10s".into()),
        help: "On SIGTERM/Ctrl-C, how long in-flight calls and maintenance may take to finish \
               before running `git` commands are killed and the process exits (O-6).",
    },
    Def {
        key: "node_url",
        flag: "node-url",
        env: "CSG_NODE_URL",
        in_file: true,
        scope: Scope::Serve,
        value_name: "URL",
        field: Field::Text(|s| &mut s.node_url),
        default: DefaultValue::Derived("none; required with `--database`"),
        help: "Cluster mode: the URL the other replicas reach this one at \
               (`http://10.0.0.5:7878`; `https://…` with `--cluster-tls-cert`).",
    },
    Def {
        key: "cluster_secret",
        flag: "cluster-secret",
        env: "CSG_CLUSTER_SECRET",
        in_file: true,
        scope: Scope::Serve,
        value_name: "SECRET",
        field: Field::Secret(|s| &mut s.cluster_secret),
        default: DefaultValue::Derived("none; required with `--database`"),
        help: "Cluster mode: the secret every replica shares (at least 32 characters) to \
               authenticate replica-to-replica calls. Prefer the variable or the file: a flag \
               shows in the process list.",
    },
    Def {
        key: "cluster_tls_cert",
        flag: "cluster-tls-cert",
        env: "CSG_CLUSTER_TLS_CERT",
        in_file: true,
        scope: Scope::Serve,
        value_name: "FILE",
        field: Field::Path(|s| &mut s.cluster_tls_cert),
        default: DefaultValue::Derived("none: plain HTTP"),
        help: "Cluster mode: this replica's certificate chain (PEM, issued by `--cluster-ca` for \
               the host of its `--node-url`, which then starts with `https://`). The listener \
               then serves HTTPS only, to replicas, the balancer and probes alike. Needs \
               `--cluster-tls-key` and `--cluster-ca`.",
    },
    Def {
        key: "cluster_tls_key",
        flag: "cluster-tls-key",
        env: "CSG_CLUSTER_TLS_KEY",
        in_file: true,
        scope: Scope::Serve,
        value_name: "FILE",
        field: Field::Path(|s| &mut s.cluster_tls_key),
        default: DefaultValue::Derived("none"),
        help: "Cluster mode: the private key of `--cluster-tls-cert` (PEM, unencrypted).",
    },
    Def {
        key: "cluster_ca",
        flag: "cluster-ca",
        env: "CSG_CLUSTER_CA",
        in_file: true,
        scope: Scope::Serve,
        value_name: "FILE",
        field: Field::Path(|s| &mut s.cluster_ca),
        default: DefaultValue::Derived("none: `https://` node URLs cannot be called"),
        help: "Cluster mode: the CA certificates (PEM) the replicas' certificates chain to; a \
               replica verifies every `https://` node URL it calls with them, host name \
               included.",
    },
    Def {
        key: "cluster_mtls",
        flag: "cluster-mtls",
        env: "CSG_CLUSTER_MTLS",
        in_file: true,
        scope: Scope::Serve,
        value_name: "BOOL",
        field: Field::Bool(|s| &mut s.cluster_mtls),
        default: DefaultValue::Value(|| "false".into()),
        help: "Cluster mode, with `--cluster-tls-cert`: replicas present their certificates to \
               each other, and a replica takes the cluster's own routes and forwarded calls \
               only over a connection whose client certificate chains to `--cluster-ca`, in \
               addition to the cluster secret (which stays required). Clients without a \
               certificate are served as before.",
    },
    Def {
        key: "trusted_proxies",
        flag: "trusted-proxy",
        env: "CSG_TRUSTED_PROXIES",
        in_file: true,
        scope: Scope::Serve,
        value_name: "CIDR",
        field: Field::List(|s| &mut s.trusted_proxies),
        default: DefaultValue::Derived("none"),
        help: "Proxies (`10.0.0.0/8`, `::1`) whose `X-Forwarded-For` or PROXY protocol \
               header names the client that rate limits, logs and metrics key on. \
               Repeatable or comma-separated.",
    },
    Def {
        key: "oauth_issuer",
        flag: "oauth-issuer",
        env: "CSG_OAUTH_ISSUER",
        in_file: true,
        scope: Scope::Serve,
        value_name: "URL",
        field: Field::Text(|s| &mut s.oauth_issuer),
        default: DefaultValue::Derived("none: API tokens only"),
        help: "The identity provider (OAuth 2.1 authorization server) whose access tokens \
               are taken beside API tokens (A-5): its issuer URL, whose metadata gives its \
               keys. MCP clients then sign in through it by themselves. Needs `--public-url`.",
    },
    Def {
        key: "oauth_audience",
        flag: "oauth-audience",
        env: "CSG_OAUTH_AUDIENCE",
        in_file: true,
        scope: Scope::Serve,
        value_name: "URL",
        field: Field::Text(|s| &mut s.oauth_audience),
        default: DefaultValue::Derived("`<--public-url>/sourcegraph/mcp`, the canonical MCP URL"),
        help: "The resource access tokens must be issued for (their `aud`, RFC 8707); a token \
               for any other resource is refused.",
    },
    Def {
        key: "oauth_groups_claim",
        flag: "oauth-groups-claim",
        env: "CSG_OAUTH_GROUPS_CLAIM",
        in_file: true,
        scope: Scope::Serve,
        value_name: "NAME",
        field: Field::Text(|s| &mut s.oauth_groups_claim),
        default: DefaultValue::Value(|| "groups".into()),
        help: "The access-token claim that lists the caller's groups (an array of names, or \
               one space-separated string).",
    },
    Def {
        key: "oauth_group_grants",
        flag: "oauth-group-grant",
        env: "CSG_OAUTH_GROUP_GRANTS",
        in_file: true,
        scope: Scope::Serve,
        value_name: "GROUP=REPO",
        field: Field::List(|s| &mut s.oauth_group_grants),
        default: DefaultValue::Derived("none"),
        help: "Members of the identity provider's group GROUP read the private repository \
               REPO; a `*` in either matches any text (`eng=acme/*`). Repeatable or \
               comma-separated.",
    },
    Def {
        key: "oauth_prepare_groups",
        flag: "oauth-prepare-group",
        env: "CSG_OAUTH_PREPARE_GROUPS",
        in_file: true,
        scope: Scope::Serve,
        value_name: "GROUP",
        field: Field::List(|s| &mut s.oauth_prepare_groups),
        default: DefaultValue::Derived("none"),
        help: "Members of the identity provider's group GROUP hold the `prepare` capability, \
               as tokens with the `csg:prepare` scope do. Repeatable or comma-separated.",
    },
    Def {
        key: "oauth_client_id",
        flag: "oauth-client-id",
        env: "CSG_OAUTH_CLIENT_ID",
        in_file: true,
        scope: Scope::Serve,
        value_name: "ID",
        field: Field::Text(|s| &mut s.oauth_client_id),
        default: DefaultValue::Derived("none: the website signs in with API tokens only"),
        help: "The website's own client at the identity provider (A-6): visitors then sign in \
               through it (OpenID Connect, authorization code with PKCE). Register the \
               redirect URI `<--public-url>/sourcegraph/oauth/callback`. With its secret it \
               also introspects opaque access tokens (RFC 7662).",
    },
    Def {
        key: "oauth_client_secret",
        flag: "oauth-client-secret",
        env: "CSG_OAUTH_CLIENT_SECRET",
        in_file: true,
        scope: Scope::Serve,
        value_name: "SECRET",
        field: Field::Secret(|s| &mut s.oauth_client_secret),
        default: DefaultValue::Derived("none: a public client (PKCE alone)"),
        help: "The secret of `--oauth-client-id` (a confidential client). Prefer the variable \
               or the file: a flag shows in the process list.",
    },
];
