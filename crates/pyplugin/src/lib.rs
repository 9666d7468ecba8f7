//! Server plugins (SPEC section 7, seed 002): one-file Python plugins in the operator's plugins
//! directory that adapt this server without a rebuild.
//!
//! The host contract is the seed's: a plugin is one `.py` file (no base class, registration or
//! manifest); only the returned value is applied; a typo in a hook or table name rejects the
//! file loudly; a failing hook is logged with its traceback, isolated and disabled until the
//! next reload; files run in sorted name order and every hook is a pipeline; each reload builds
//! a new immutable *epoch* and a call keeps the epoch it started with.
//!
//! All Python runs on one thread that owns the interpreter ([`PluginHost::start`]); callers
//! hand it plain data ([`serde_json::Value`]) and get plain data back, so no caller ever holds
//! the interpreter inside an async task. A watchdog bounds every hook call (P-23).
//!
//! Only this crate knows Python. It knows nothing of the service, the index or a transport:
//! the service passes payloads in and applies [`Outcome`]s itself.

// Without Python the loaders of names and tables have no caller; they stay compiled so the
// feature switch cannot hide a build break in them.
#![cfg_attr(not(feature = "python"), allow(dead_code, unused_mut))]

#[doc(hidden)]
pub mod fuzzing;
mod hookset;
#[cfg(feature = "python")]
mod interp;
mod names;
mod schema;
mod tables;

pub use hookset::{
    Applied, HOOKS_VERSION, HOST_CONTRACT_VERSION, Hook, HookClass, MAX_HIT_NOTE_CHARS,
    MAX_NOTE_BYTES, MAX_NOTES, PRODUCT, PageGroup, PageLine, SearchPage, Step, TABLES, apply,
    apply_in_place, startup_payload,
};
pub use tables::{Sourced, Tables, ToolPreset};

use arc_swap::ArcSwapOption;
use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

/// The hook reference shipped in the binary (P-14): `csg plugins api` prints it.
pub const PLUGIN_API: &str = include_str!("../assets/plugin_api.py");
/// What `csg plugins init DIR` writes as `example.py` (P-14): every hook and table, commented out.
pub const EXAMPLE: &str = include_str!("../assets/example.py");

/// Default per-call time limit of a hook (P-23).
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(2);
/// Default time the interpreter thread gets to come back after an interrupt before the
/// subsystem is declared wedged (P-23).
pub const DEFAULT_WEDGE_GRACE: Duration = Duration::from_secs(2);
/// Largest plugin file loaded.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// How the host is set up.
#[derive(Debug, Clone)]
pub struct HostConfig {
    /// `SOURCEGRAPH_SERVER_PLUGINS_ENABLED`: off means the directory is never read (P-1).
    pub enabled: bool,
    /// `SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY`.
    pub directory: PathBuf,
    /// Per-call time limit of a hook.
    pub hook_timeout: Duration,
    /// How long an interrupted hook may take to come back before the host is wedged.
    pub wedge_grace: Duration,
    /// `SOURCEGRAPH_SERVER_PLUGINS_STRICT`: a failing derived-state hook fails the build.
    pub strict: bool,
    /// `settings` of the `on_startup` payload: plain, non-secret settings.
    pub startup_settings: Map<String, Value>,
    /// `secrets` of the `on_startup` payload: name → set or not (P-11), see [`redact_secrets`].
    pub secrets: Map<String, Value>,
    /// The server's tools as `TOOL_PRESETS` sees them (P-8, P-22). Empty: no preset loads.
    pub tools: Arc<ToolCatalog>,
}

impl HostConfig {
    /// A configuration for `directory` with the defaults, enabled.
    pub fn new(directory: PathBuf) -> Self {
        HostConfig {
            enabled: true,
            directory,
            hook_timeout: DEFAULT_HOOK_TIMEOUT,
            wedge_grace: DEFAULT_WEDGE_GRACE,
            strict: false,
            startup_settings: Map::new(),
            secrets: Map::new(),
            tools: Arc::default(),
        }
    }
}

/// The server's tools as server plugins see them. This crate knows no transport and no tool
/// table: the binary fills it from the `tools` crate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolCatalog {
    /// Tool name → the input schema `tools/list` advertises, for every tool a `TOOL_PRESETS`
    /// entry may target. A preset's fixed arguments are checked against it at load.
    pub preset_targets: BTreeMap<String, Value>,
    /// Names a preset may not take (every tool's and operation's).
    pub reserved: std::collections::BTreeSet<String>,
}

/// The secret-looking settings among `vars` (names with `TOKEN`, `KEY`, `SECRET` or
/// `PASSWORD` under the `CSG_` and `SOURCEGRAPH_` prefixes), each replaced by whether it is set
/// (P-11). The values never leave this function.
pub fn redact_secrets(vars: impl IntoIterator<Item = (String, String)>) -> Map<String, Value> {
    let mut out = Map::new();
    for (name, value) in vars {
        let ours = name.starts_with("CSG_") || name.starts_with("SOURCEGRAPH_");
        let secret = ["TOKEN", "KEY", "SECRET", "PASSWORD"]
            .iter()
            .any(|word| name.contains(word));
        if ours && secret {
            out.insert(name, Value::Bool(!value.is_empty()));
        }
    }
    out
}

/// Why a reload was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum HostError {
    /// P-1.
    #[error(
        "server plugins are disabled: set SOURCEGRAPH_SERVER_PLUGINS_ENABLED=true and restart to use them"
    )]
    Disabled,
    /// Built without the `python` feature, or the interpreter did not start.
    #[error("server plugins are unavailable: {0}")]
    Unavailable(String),
    /// P-23.
    #[error(
        "server plugins are wedged ({0}); every hook is bypassed until the server is restarted, \
         and reload is refused"
    )]
    Wedged(String),
    /// The plugins directory could not be listed.
    #[error("the server plugins directory could not be read: {0}")]
    Directory(String),
    /// A reload could not start: something else (a plugin's own thread) holds the
    /// interpreter. Nothing changed; calls answer as without server plugins while it lasts.
    #[error(
        "the reload did not start: {0}; nothing changed, and calls answer as without server \
         plugins while it lasts. Reload again once it lets go, or restart the server"
    )]
    Busy(String),
}

/// A hook call that did not apply: it raised, overran, or returned an invalid result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Failure {
    /// The plugin file.
    pub file: String,
    /// The hook's function name.
    pub hook: String,
    /// What went wrong (with the traceback for an exception).
    pub message: String,
}

/// The result of one hook pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The payload after the last file's hook. When nothing applied (`changed_by` empty) it
    /// is the input, or `Null` if the host wedged while this call ran or the input was a
    /// [`SearchPage`]: read it through [`Outcome::changed`].
    pub value: Value,
    /// Files whose result changed the payload, in order.
    pub changed_by: Vec<String>,
    /// Files whose hook failed this call (their step was skipped).
    pub failures: Vec<Failure>,
    /// `on_source_file` asked to skip the file.
    pub stopped: bool,
}

impl Outcome {
    /// The new payload, when some file changed it.
    pub fn changed(&self) -> Option<&Value> {
        (!self.changed_by.is_empty()).then_some(&self.value)
    }

    /// The unchanged outcome for `payload` (no file defines the hook, or the host is bypassed).
    pub fn unchanged(payload: Value) -> Self {
        Outcome {
            value: payload,
            changed_by: Vec::new(),
            failures: Vec::new(),
            stopped: false,
        }
    }
}

/// One loaded file, as status shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileStatus {
    /// File name in the plugins directory.
    pub file: String,
    /// Hooks it defines.
    pub hooks: Vec<String>,
    /// Tables it declares.
    pub tables: Vec<String>,
    /// SHA-256 of its source.
    pub sha256: String,
}

/// A file that did not load, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    /// File name in the plugins directory.
    pub file: String,
    /// Every reason found, in order.
    pub reasons: Vec<String>,
}

/// A hook disabled until the next reload (P-5, P-23).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Disabled {
    /// The plugin file.
    pub file: String,
    /// The hook's function name.
    pub hook: String,
    /// Why (the first line of the failure).
    pub reason: String,
}

/// How often one file's hook failed in the current epoch (P-5, P-7): each failure dropped that
/// file's part of one call's or one indexed file's pipeline, the other files' parts applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookFailures {
    /// The plugin file.
    pub file: String,
    /// The hook's function name.
    pub hook: String,
    /// Failures since the epoch loaded (a disabled derived-state hook counts once per file it
    /// left untransformed).
    pub count: u64,
}

/// A plugin file whose code overran the time limit while an epoch holding it was released
/// (P-23): a `__del__` (or another finalizer) of its objects that the watchdog interrupted.
/// The release goes on without it. The status shows the faults of the latest epoch released
/// (a later release that goes well clears them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReleaseFault {
    /// The plugin file; `one of a.py, b.py` when the interrupted code was freed with the
    /// epoch's reference cycles and is not defined in one of its files.
    pub file: String,
    /// The epoch whose release it overran.
    pub epoch: u64,
    /// What happened and what to do.
    pub reason: String,
}

/// The subsystem's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// `SOURCEGRAPH_SERVER_PLUGINS_ENABLED` is not true (P-1).
    Disabled,
    /// No Python in this build, or the interpreter failed to start.
    Unavailable(String),
    /// Loaded and serving hooks.
    Active,
    /// A hook did not come back from an interrupt: everything is bypassed until restart (P-23).
    Wedged(String),
}

impl State {
    /// `disabled`, `unavailable`, `active` or `wedged`.
    pub fn name(&self) -> &'static str {
        match self {
            State::Disabled => "disabled",
            State::Unavailable(_) => "unavailable",
            State::Active => "active",
            State::Wedged(_) => "wedged",
        }
    }

    /// Why the subsystem is unavailable or wedged.
    pub fn reason(&self) -> Option<&str> {
        match self {
            State::Unavailable(reason) | State::Wedged(reason) => Some(reason),
            State::Disabled | State::Active => None,
        }
    }
}

/// JSON shows the state as `"state": "wedged", "state_reason": "…"`.
impl Serialize for State {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// What `plugin_status` shows (P-12).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Status {
    /// Subsystem state.
    pub state: State,
    /// Why it is unavailable or wedged, and what to do; null otherwise.
    pub state_reason: Option<String>,
    /// Current epoch (0 before the first load).
    pub epoch: u64,
    /// When the current epoch was loaded (Unix ms).
    pub loaded_at_unix_ms: u64,
    /// Files loaded in the current epoch, in run order.
    pub files: Vec<FileStatus>,
    /// Files rejected at the last load.
    pub rejected: Vec<Rejection>,
    /// Hooks disabled in the current epoch.
    pub disabled: Vec<Disabled>,
    /// Each file's hooks that failed in the current epoch, with how often.
    pub hook_failures: Vec<HookFailures>,
    /// Plugin files whose code was interrupted while an epoch holding them was released.
    pub release_faults: Vec<ReleaseFault>,
    /// Whether the last reload succeeded (a rejected file still counts as a good reload).
    pub last_reload_ok: bool,
    /// The last reload's error, when it failed.
    pub last_reload_error: Option<String>,
    /// The derived-state fingerprint of the current epoch (empty: no derived-state hook).
    pub derived_fingerprint: String,
    /// Per-call time limit of a hook, in milliseconds.
    pub hook_timeout_ms: u64,
    /// Calls answered as without server plugins because they did not get the interpreter
    /// within the hook time limit (queued behind a long job, or a plugin thread holding the
    /// interpreter), since start (P-23).
    pub interpreter_wait_timeouts: u64,
    /// HOST_CONTRACT_VERSION, HOOKS_VERSION, PRODUCT.
    pub host_contract_version: i64,
    /// This server's hook set version.
    pub hooks_version: i64,
    /// The product name.
    pub product: &'static str,
}

/// The immutable part of an epoch, shared by every call that runs on it.
#[derive(Debug)]
pub(crate) struct EpochData {
    pub number: u64,
    pub loaded_at: SystemTime,
    pub files: Vec<FileStatus>,
    pub rejected: Vec<Rejection>,
    pub tables: Tables,
    pub derived_fingerprint: String,
    /// For each hook of [`Hook::ALL`], whether any loaded file defines it.
    pub defined: [bool; Hook::ALL.len()],
    /// (file index, hook) → why disabled.
    pub disabled: Mutex<Vec<(usize, Hook, String)>>,
    /// For each loaded file, its failures of each hook of [`Hook::ALL`] in this epoch.
    pub failures: Vec<[AtomicU64; Hook::ALL.len()]>,
    #[cfg(feature = "python")]
    pub release: Option<interp::Releaser>,
}

impl Drop for EpochData {
    fn drop(&mut self) {
        #[cfg(feature = "python")]
        if let Some(release) = &self.release {
            release.release(self.number);
        }
    }
}

impl EpochData {
    pub(crate) fn is_disabled(&self, file: usize, hook: Hook) -> bool {
        self.disabled
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(f, h, _)| *f == file && *h == hook)
    }

    pub(crate) fn disable(&self, file: usize, hook: Hook, reason: &str) {
        let mut disabled = self.disabled.lock().unwrap_or_else(PoisonError::into_inner);
        if !disabled.iter().any(|(f, h, _)| *f == file && *h == hook) {
            disabled.push((file, hook, summary(reason).to_owned()));
        }
    }

    pub(crate) fn count_failure(&self, file: usize, hook: Hook) {
        if let Some(counts) = self.failures.get(file) {
            counts[hook.ordinal()].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The non-zero failure counts, in file order then hook order.
    fn failure_counts(&self) -> Vec<HookFailures> {
        let mut out = Vec::new();
        for (file, counts) in self.files.iter().zip(&self.failures) {
            for (hook, count) in Hook::ALL.iter().zip(counts) {
                let count = count.load(Ordering::Relaxed);
                if count > 0 {
                    out.push(HookFailures {
                        file: file.file.clone(),
                        hook: hook.name().to_owned(),
                        count,
                    });
                }
            }
        }
        out
    }
}

/// One epoch: the plugin set a call runs on from start to finish (P-12).
#[derive(Clone, Debug)]
pub struct Epoch {
    data: Arc<EpochData>,
    #[cfg(feature = "python")]
    host: Arc<interp::Interpreter>,
}

impl Epoch {
    /// The epoch number (grows with every reload).
    pub fn number(&self) -> u64 {
        self.data.number
    }

    /// The epoch's tables, merged over its files in run order.
    pub fn tables(&self) -> &Tables {
        &self.data.tables
    }

    /// The fingerprint of the sources of the files that define derived-state hooks (P-7):
    /// hex SHA-256, empty when none does.
    pub fn derived_fingerprint(&self) -> &str {
        &self.data.derived_fingerprint
    }

    /// Whether running `hook` can have an effect: a loaded file defines it and not every such
    /// file has it disabled. A `false` answer costs no trip to the interpreter.
    pub fn defines(&self, hook: Hook) -> bool {
        let index = Hook::ALL.iter().position(|h| *h == hook).unwrap_or(0);
        if !self.data.defined[index] {
            return false;
        }
        let defining = self
            .data
            .files
            .iter()
            .enumerate()
            .filter(|(_, file)| file.hooks.iter().any(|h| h == hook.name()));
        let disabled = self
            .data
            .disabled
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        defining
            .into_iter()
            .any(|(i, _)| !disabled.iter().any(|(f, h, _)| *f == i && *h == hook))
    }

    /// Runs `hook` over every file that defines it, in order, on the interpreter thread (P-6).
    /// Never fails: a failing step is skipped and reported in [`Outcome::failures`]; when the
    /// host is wedged the payload comes back unchanged.
    pub async fn run(&self, hook: Hook, payload: Value) -> Outcome {
        if !self.defines(hook) {
            return Outcome::unchanged(payload);
        }
        #[cfg(feature = "python")]
        {
            let payload = interp::Payload::Value(payload);
            self.host.run(self.data.clone(), hook, payload).await
        }
        #[cfg(not(feature = "python"))]
        {
            Outcome::unchanged(payload)
        }
    }

    /// Announces that [`Epoch::run`] of `hook` will follow shortly (after a search, say):
    /// the interpreter thread gets ready meanwhile instead of being woken when the job
    /// comes. A hint only: nothing happens when the epoch does not define `hook`.
    pub fn expect(&self, hook: Hook) {
        #[cfg(feature = "python")]
        if self.defines(hook) {
            self.host.expect();
        }
        #[cfg(not(feature = "python"))]
        let _ = hook;
    }

    /// [`Epoch::run`] for a caller that is not on an async runtime (the index builder's
    /// threads). Must not be called from an async task.
    pub fn run_blocking(&self, hook: Hook, payload: Value) -> Outcome {
        if !self.defines(hook) {
            return Outcome::unchanged(payload);
        }
        #[cfg(feature = "python")]
        {
            let payload = interp::Payload::Value(payload);
            self.host.run_blocking(self.data.clone(), hook, payload)
        }
        #[cfg(not(feature = "python"))]
        {
            Outcome::unchanged(payload)
        }
    }

    /// `on_search_results` over `page`, like [`Epoch::run_blocking`] with
    /// [`SearchPage::to_value`] but cheaper: the page goes to Python without a plain-data tree,
    /// and [`Outcome::value`] is `Null` unless a file changed the page (read it through
    /// [`Outcome::changed`]). Must not be called from an async task.
    pub fn run_search_blocking(&self, page: SearchPage) -> Outcome {
        if !self.defines(Hook::SearchResults) {
            return Outcome::unchanged(Value::Null);
        }
        #[cfg(feature = "python")]
        {
            let payload = interp::Payload::Search(page);
            self.host
                .run_blocking(self.data.clone(), Hook::SearchResults, payload)
        }
        #[cfg(not(feature = "python"))]
        {
            let _ = page;
            Outcome::unchanged(Value::Null)
        }
    }
}

/// The server-plugin subsystem of one process. Cheap to clone.
#[derive(Clone)]
pub struct PluginHost {
    inner: Arc<HostInner>,
}

struct HostInner {
    config: HostConfig,
    /// Disabled or unavailable: the reason no interpreter runs.
    off: Option<State>,
    /// The epoch new calls run on: loaded without a lock, replaced whole by a reload.
    current: ArcSwapOption<Epoch>,
    /// Serialises reloads (P-12): each gets the next epoch number and publishes in order, so
    /// the last reload's hooks are the ones applied and `plugin_status` shows them.
    reloading: Mutex<()>,
    /// The last epoch number handed out; never reused, also after a failed load.
    epochs: AtomicU64,
    last_reload: Mutex<Result<(), String>>,
    #[cfg(feature = "python")]
    interpreter: Option<Arc<interp::Interpreter>>,
}

impl Drop for HostInner {
    fn drop(&mut self) {
        #[cfg(feature = "python")]
        if let Some(interpreter) = &self.interpreter {
            interpreter.stop();
        }
    }
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl PluginHost {
    /// A host that is switched off (P-1): nothing is read, every hook is bypassed.
    pub fn disabled() -> Self {
        Self::off(HostConfig::new(PathBuf::new()), State::Disabled)
    }

    fn off(config: HostConfig, state: State) -> Self {
        PluginHost {
            inner: Arc::new(HostInner {
                config,
                off: Some(state),
                current: ArcSwapOption::empty(),
                reloading: Mutex::new(()),
                epochs: AtomicU64::new(0),
                last_reload: Mutex::new(Ok(())),
                #[cfg(feature = "python")]
                interpreter: None,
            }),
        }
    }

    /// Starts the host: when enabled, the interpreter thread and its watchdog, then the first
    /// load of the directory (epoch 1, with `on_startup`). A directory that cannot be read is
    /// reported in the status; the server runs without plugins then.
    pub fn start(config: HostConfig) -> Self {
        if !config.enabled {
            return Self::off(config, State::Disabled);
        }
        #[cfg(feature = "python")]
        {
            match interp::Interpreter::start(&config) {
                Ok(interpreter) => {
                    let host = PluginHost {
                        inner: Arc::new(HostInner {
                            config,
                            off: None,
                            current: ArcSwapOption::empty(),
                            reloading: Mutex::new(()),
                            epochs: AtomicU64::new(0),
                            last_reload: Mutex::new(Ok(())),
                            interpreter: Some(interpreter),
                        }),
                    };
                    if let Err(error) = host.reload() {
                        tracing::error!(%error, "server plugins did not load");
                    }
                    host
                }
                Err(reason) => Self::off(config, State::Unavailable(reason)),
            }
        }
        #[cfg(not(feature = "python"))]
        {
            Self::off(
                config,
                State::Unavailable(
                    "this csg was built without Python support (cargo feature `python`)".into(),
                ),
            )
        }
    }

    /// The host's configuration.
    pub fn config(&self) -> &HostConfig {
        &self.inner.config
    }

    /// The subsystem's state now.
    pub fn state(&self) -> State {
        if let Some(off) = &self.inner.off {
            return off.clone();
        }
        #[cfg(feature = "python")]
        if let Some(reason) = self.inner.interpreter.as_ref().and_then(|i| i.wedged()) {
            return State::Wedged(reason);
        }
        State::Active
    }

    /// The epoch a new call runs on; `None` when the subsystem is off or wedged (calls then
    /// answer as without server plugins).
    pub fn current(&self) -> Option<Epoch> {
        if self.state() != State::Active {
            return None;
        }
        self.inner.current.load_full().map(|epoch| (*epoch).clone())
    }

    /// Re-reads the directory into a new epoch (P-12); calls in flight finish on theirs.
    /// Blocks until the interpreter thread has loaded it: call it off the async runtime.
    pub fn reload(&self) -> Result<Status, HostError> {
        match self.state() {
            State::Disabled => return Err(HostError::Disabled),
            State::Unavailable(reason) => return Err(HostError::Unavailable(reason)),
            State::Wedged(reason) => return Err(HostError::Wedged(reason)),
            State::Active => {}
        }
        #[cfg(feature = "python")]
        {
            let Some(interpreter) = &self.inner.interpreter else {
                return Err(HostError::Unavailable("no interpreter".into()));
            };
            // Two reloads at once would share an epoch number, and the release of one would
            // drop the other's modules: the hooks would go dead while the status said active.
            let _reloading = self
                .inner
                .reloading
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let number = self.inner.epochs.fetch_add(1, Ordering::SeqCst) + 1;
            let loaded = interpreter.load(&self.inner.config, number);
            let result = match loaded {
                Ok(data) => {
                    let epoch = Epoch {
                        data: Arc::new(data),
                        host: interpreter.clone(),
                    };
                    for rejection in &epoch.data.rejected {
                        tracing::warn!(file = %rejection.file, reasons = ?rejection.reasons, "server plugin rejected");
                    }
                    tracing::info!(
                        epoch = epoch.number(),
                        files = epoch.data.files.len(),
                        rejected = epoch.data.rejected.len(),
                        "server plugins loaded"
                    );
                    let epoch = Arc::new(epoch);
                    self.inner.current.store(Some(epoch.clone()));
                    Ok(epoch)
                }
                Err(error) => Err(error),
            };
            *self
                .inner
                .last_reload
                .lock()
                .unwrap_or_else(PoisonError::into_inner) =
                result.as_ref().map(|_| ()).map_err(|e| e.to_string());
            // The status of the epoch this reload made, not of whatever is current once it
            // is read: a reload queued behind this one may have published its own by then.
            result.map(|epoch| self.status_of(Some(epoch.as_ref()), Ok(())))
        }
        #[cfg(not(feature = "python"))]
        {
            Err(HostError::Unavailable("no Python".into()))
        }
    }

    /// Calls answered as without server plugins because they did not get the interpreter in
    /// time (see [`Status::interpreter_wait_timeouts`]); for metrics.
    pub fn interpreter_wait_timeouts(&self) -> u64 {
        #[cfg(feature = "python")]
        if let Some(interpreter) = &self.inner.interpreter {
            return interpreter.wait_timeouts();
        }
        0
    }

    /// Plugin files whose code overran the time limit while an epoch holding them was
    /// released (see [`ReleaseFault`]), in file-name order.
    pub fn release_faults(&self) -> Vec<ReleaseFault> {
        #[cfg(feature = "python")]
        if let Some(interpreter) = &self.inner.interpreter {
            return interpreter.release_faults();
        }
        Vec::new()
    }

    /// Each loaded file's hooks that failed in the current epoch, with how often (for
    /// metrics: reads counters only, never waits on the interpreter).
    pub fn hook_failures(&self) -> Vec<HookFailures> {
        self.inner
            .current
            .load()
            .as_ref()
            .map(|epoch| epoch.data.failure_counts())
            .unwrap_or_default()
    }

    /// What `plugin_status` shows (P-12).
    pub fn status(&self) -> Status {
        let epoch = self.inner.current.load_full();
        let last = self
            .inner
            .last_reload
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.status_of(epoch.as_deref(), last)
    }

    /// The status with `epoch` as the current one and `last` as the last reload's result.
    fn status_of(&self, epoch: Option<&Epoch>, last: Result<(), String>) -> Status {
        let (number, loaded_at, files, rejected, disabled, failures, derived) = match epoch {
            Some(epoch) => {
                let data = &epoch.data;
                let disabled = data
                    .disabled
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .map(|(file, hook, reason)| Disabled {
                        file: data
                            .files
                            .get(*file)
                            .map(|f| f.file.clone())
                            .unwrap_or_default(),
                        hook: hook.name().to_owned(),
                        reason: reason.clone(),
                    })
                    .collect();
                (
                    data.number,
                    unix_ms(data.loaded_at),
                    data.files.clone(),
                    data.rejected.clone(),
                    disabled,
                    data.failure_counts(),
                    data.derived_fingerprint.clone(),
                )
            }
            None => Default::default(),
        };
        let state = self.state();
        Status {
            state_reason: match &state {
                State::Wedged(reason) => Some(format!(
                    "{reason}; every hook is bypassed: restart the server to use server plugins again"
                )),
                other => other.reason().map(str::to_owned),
            },
            state,
            epoch: number,
            loaded_at_unix_ms: loaded_at,
            files,
            rejected,
            disabled,
            hook_failures: failures,
            release_faults: self.release_faults(),
            last_reload_ok: last.is_ok(),
            last_reload_error: last.err(),
            derived_fingerprint: derived,
            hook_timeout_ms: self.inner.config.hook_timeout.as_millis() as u64,
            interpreter_wait_timeouts: self.interpreter_wait_timeouts(),
            host_contract_version: HOST_CONTRACT_VERSION,
            hooks_version: HOOKS_VERSION,
            product: PRODUCT,
        }
    }
}

/// The one line that says what a failure was: the exception line of a traceback (its last
/// line), else the first line.
pub fn summary(message: &str) -> &str {
    let message = message.trim_end();
    if message.contains("Traceback (most recent call last)") {
        message.lines().last().unwrap_or_default()
    } else {
        message.lines().next().unwrap_or_default()
    }
}

fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The result of a dry-run (P-13): the load report and one run of every hook on its sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckReport {
    /// Files that loaded, in run order.
    pub files: Vec<FileStatus>,
    /// Files that did not.
    pub rejected: Vec<Rejection>,
    /// Each (file, hook) run on the documented sample payload: `None` = fine.
    pub runs: Vec<CheckRun>,
    /// Set when the directory could not be checked at all.
    pub error: Option<String>,
}

/// One hook run of a dry-run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckRun {
    /// The plugin file.
    pub file: String,
    /// The hook's function name.
    pub hook: String,
    /// `None` when it ran and its result is valid; else what went wrong.
    pub failure: Option<String>,
}

impl CheckReport {
    /// Whether the directory is good: nothing rejected, nothing failed.
    pub fn ok(&self) -> bool {
        self.error.is_none()
            && self.rejected.is_empty()
            && self.runs.iter().all(|run| run.failure.is_none())
    }
}

/// Dry-run of a plugins directory (P-13): no data, no index, no server. Loads and validates
/// every file as the server would, then runs each file's hooks once, alone, on the documented
/// sample payloads. `config` gives the directory, the hook time limit and the tools
/// presets are checked against; it is loaded as if enabled.
pub fn check_directory(mut config: HostConfig) -> CheckReport {
    config.enabled = true;
    let host = PluginHost::start(config);
    let failed = |error: String| CheckReport {
        files: Vec::new(),
        rejected: Vec::new(),
        runs: Vec::new(),
        error: Some(error),
    };
    if let State::Unavailable(reason) = host.state() {
        return failed(reason);
    }
    if let Err(error) = &*host
        .inner
        .last_reload
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
    {
        return failed(error.clone());
    }
    let Some(epoch) = host.current() else {
        return failed("the plugins did not load".into());
    };
    let mut runs = Vec::new();
    #[cfg(feature = "python")]
    for (index, file) in epoch.data.files.iter().enumerate() {
        for hook in Hook::ALL {
            if !file.hooks.iter().any(|h| h == hook.name()) {
                continue;
            }
            let failure = if hook == Hook::Startup {
                // Already run once by the load, on the real start-up payload.
                epoch
                    .data
                    .disabled
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .iter()
                    .find(|(f, h, _)| *f == index && *h == hook)
                    .map(|(_, _, reason)| reason.clone())
            } else {
                epoch
                    .host
                    .run_single(&epoch.data, index, hook, hook.sample_payload())
            };
            runs.push(CheckRun {
                file: file.file.clone(),
                hook: hook.name().to_owned(),
                failure,
            });
        }
    }
    CheckReport {
        files: epoch.data.files.clone(),
        rejected: epoch.data.rejected.clone(),
        runs,
        error: None,
    }
}
