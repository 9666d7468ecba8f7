//! The execution runtime of repository plugins (W-1, W-13..W-16, W-22..W-27, W-30, W-32,
//! W-35, W-36): compiles artifacts once per digest, keeps idle instances per isolation key, and
//! runs one `enrich` call at a time per instance inside time, memory, read and output budgets.
//!
//! Design, in short:
//! - One wasmtime [`Engine`] per [`Runtime`]: no WASI, no disk cache, pooling allocator sized to
//!   CONCURRENCY + IDLE_INSTANCES slots with `max_memory_size` = MEMORY_MIB, copy-on-write
//!   memory images, an [`InstancePre`] per module linked against the three `sourcegraph`
//!   functions only.
//! - Compiles run one at a time (the `parallel-compilation` feature is off, so Cranelift itself
//!   is serial too), in a child process when [`PluginConfig::compiler`] names one, so that a
//!   compile can be stopped part-way; see [`Runtime::module`].
//! - Time: one engine-wide ticker thread increments the epoch every [`EPOCH_TICK`]; each store's
//!   epoch callback compares the wall clock with its own request deadline. The epoch is never
//!   bumped per call, so a timeout never disturbs another execution.
//! - Any fault discards the instance: wasmtime does not poison an instance after a trap, so
//!   reuse after a fault would run a guest whose invariants are broken.

mod child;
mod compiler;
mod host;
pub(crate) use host::parse_paths_for_fuzzing;
mod pool;
mod stats;

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use wasmtime::{
    Config, Engine, InstanceAllocationStrategy, InstancePre, Linker, Memory,
    PoolConcurrencyLimitError, PoolingAllocationConfig, Store, Trap, TypedFunc, UpdateDeadline,
};

use crate::abi::{self, TABLE_ELEMENTS, attachments_of, memory_bytes, static_limits};
pub use crate::config::{COMPILE_CHILD_ARG, CompileCommand};
use crate::{Code, Diagnostic, PluginConfig};
pub use child::compile_child_if_asked;
use host::{Budget, ExecCounters, GuestFns, HostFault, HostState};
use pool::IdlePool;
use stats::{Counters, add, bump};
pub use stats::{FaultCounts, RuntimeStats};

/// How often the engine-wide ticker advances the epoch: the granularity of timeouts.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Reads files for one plugin execution. Paths are relative to the plugin directory, as the
/// plugin gave them (the implementor validates and resolves them; the runtime only forwards).
///
/// Epochs do not tick inside a host call: an implementor stops at the request deadline
/// itself, and refuses a file over `max_bytes` (FILE_BYTES) before reading it. The runtime
/// checks the length again after the read, so a careless implementor costs time, never the
/// budget.
pub trait HostFiles: Send + Sync {
    /// The raw bytes of `path` if it has at most `max_bytes`, or why not.
    fn read(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, HostReadError>;
}

/// Why a host read gave no bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostReadError {
    /// The file has this many bytes, over the `max_bytes` asked for (a budget refusal).
    TooLarge(u64),
    /// Any other refusal, as a caller-safe message (no host paths): the plugin receives it
    /// through `last_error` or as a `read_files` item error.
    Refused(String),
}

impl From<String> for HostReadError {
    fn from(message: String) -> Self {
        Self::Refused(message)
    }
}

/// What one successful execution produced.
#[derive(Debug)]
pub struct Executed {
    /// The output text. Its shape is checked by the caller ([`crate::Attachments::absorb`]);
    /// the runtime only checked it to decide whether the instance may be reused (W-32).
    pub output: String,
    /// PLUGIN_READ_BUDGET when a budget refused a host read: the output still counts (the
    /// guest decided what to do with the refusal, W-22), but the overrun is reported and the
    /// instance discarded (W-27).
    pub read_budget: Option<Diagnostic>,
}

/// Identity of a reusable instance (W-32): instances are never shared across different keys
/// (nor across different modules under one key: several plugins may share a directory).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InstanceKey {
    /// The storage root the repository lives in.
    pub storage_root: String,
    /// The repository.
    pub repo: String,
    /// The full commit SHA.
    pub commit: String,
    /// The plugin directory, repository-relative.
    pub plugin_dir: String,
    /// The call's `args`, as canonical JSON.
    pub args: String,
}

/// The runtime could not start (an operator error, not a plugin diagnostic).
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// wasmtime refused the engine configuration (e.g. the pool's virtual memory).
    #[error("could not create the Wasm engine: {0}")]
    Engine(String),
    /// A runtime thread (epoch ticker or compile worker) could not be spawned.
    #[error("could not start the plugin runtime's {0} thread: {1}")]
    Thread(&'static str, std::io::Error),
}

/// What [`Runtime::prepare_module`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrepareOutcome {
    /// The module was cached already; nothing changed.
    Cached,
    /// The module was compiled and cached (in a free slot or in place of a module no read
    /// used).
    Compiled,
    /// Not cached: every cache slot holds a module a read used since it was cached, and
    /// preparation never evicts one. Not an error.
    NoRoom,
}

/// A compiled, linked plugin module, ready to instantiate. Shared via `Arc` with the cache.
pub struct Module {
    digest: String,
    pre: InstancePre<HostState>,
    compile_time: Duration,
}

impl Module {
    /// The artifact digest this module was compiled from.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// How long validation, compilation and linking took.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }
}

impl fmt::Debug for Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Module")
            .field("digest", &self.digest)
            .field("compile_time", &self.compile_time)
            .finish()
    }
}

/// The plugin runtime: one per process.
pub struct Runtime {
    shared: Arc<Shared>,
    /// Dropping the sender stops the ticker.
    ticker: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
    worker: Option<JoinHandle<()>>,
}

/// State shared with the compile worker.
struct Shared {
    config: PluginConfig,
    /// MEMORY_MIB in bytes (clamped to 4 GiB).
    memory_bytes: u64,
    /// What the engine was made from, for a compile child's engine to match it.
    engine_settings: EngineSettings,
    engine: Engine,
    linker: Linker<HostState>,
    compiler: compiler::Compiler,
    pool: Mutex<IdlePool>,
    /// Executions holding a concurrency slot.
    running: AtomicUsize,
    counters: Counters,
}

impl Shared {
    fn static_limits(&self) -> abi::StaticLimits {
        static_limits(&self.config)
    }

    fn pool(&self) -> MutexGuard<'_, IdlePool> {
        // A panic while holding the pool lock leaves a consistent list; keep using it.
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops the idle instances of module `digest` (stores are dropped outside the lock).
    fn purge_idle(&self, digest: &str) {
        let purged = self.pool().purge(digest);
        drop(purged);
    }
}

/// What the engine's configuration is made from. A compile child makes its engine from the
/// same values, because wasmtime loads compiled code only into an engine configured alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EngineSettings {
    /// MEMORY_MIB in bytes (clamped to 4 GiB).
    memory_bytes: u64,
    /// Instance slots of the pooling allocator.
    slots: u32,
}

/// The one engine configuration: the runtime's and every compile child's.
fn wasm_config(settings: EngineSettings) -> Config {
    let mut pooling = PoolingAllocationConfig::new();
    pooling
        .total_core_instances(settings.slots)
        .total_memories(settings.slots)
        .total_tables(settings.slots)
        .max_memories_per_module(1)
        .max_tables_per_module(1)
        .table_elements(TABLE_ELEMENTS)
        .max_memory_size(usize::try_from(settings.memory_bytes).unwrap_or(usize::MAX));
    let mut wasm = Config::new();
    wasm.epoch_interruption(true)
        .memory_init_cow(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pooling));
    wasm
}

impl Runtime {
    /// Builds the engine and starts the epoch ticker and the compile worker.
    pub fn new(config: PluginConfig) -> Result<Self, RuntimeError> {
        let memory_bytes = memory_bytes(&config);
        // Every execution holds one instance and every idle instance one more: the pool never
        // needs more slots than that (an evicted idle instance is dropped before its slot is
        // needed again; an exhausted pool would be reported as PLUGIN_BUSY).
        let slots = u32::try_from(config.concurrency.saturating_add(config.idle_instances))
            .unwrap_or(u32::MAX)
            .max(1);
        let engine_settings = EngineSettings {
            memory_bytes,
            slots,
        };
        let engine = Engine::new(&wasm_config(engine_settings))
            .map_err(|error| RuntimeError::Engine(error.to_string()))?;
        let linker =
            host::linker(&engine).map_err(|error| RuntimeError::Engine(error.to_string()))?;

        let shared = Arc::new(Shared {
            pool: Mutex::new(IdlePool::new(config.idle_instances)),
            config,
            memory_bytes,
            engine_settings,
            engine,
            linker,
            compiler: compiler::Compiler::default(),
            running: AtomicUsize::new(0),
            counters: Counters::default(),
        });

        let (stop, stopped) = mpsc::channel::<()>();
        let engine = shared.engine.clone();
        let ticker = std::thread::Builder::new()
            .name("wasmplugin-epoch".into())
            .stack_size(64 << 10)
            .spawn(move || {
                // recv_timeout doubles as the sleep: a dropped sender ends the loop at once.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    engine.increment_epoch();
                }
            })
            .map_err(|error| RuntimeError::Thread("epoch ticker", error))?;
        let mut runtime = Self {
            shared: shared.clone(),
            ticker: Some((stop, ticker)),
            worker: None,
        };
        let worker = std::thread::Builder::new()
            .name("wasmplugin-compile".into())
            // Cranelift's recursion is shallow, but an untrusted module should not find the
            // default 2 MiB limit.
            .stack_size(8 << 20)
            .spawn(move || compiler::work(shared))
            .map_err(|error| RuntimeError::Thread("compile worker", error))?;
        runtime.worker = Some(worker);
        Ok(runtime)
    }

    /// The compiled module for an artifact whose content digest is `digest` (the caller passes
    /// the Git blob id).
    ///
    /// A cache hit (CACHE_ENTRIES, LRU) returns at once. A miss queues a compile and waits for
    /// it only until `deadline` (None: no deadline; background preparation uses
    /// [`Runtime::prepare_module`]), then answers PLUGIN_TIMEOUT; a caller arriving for the same
    /// digest meanwhile joins that compile. A call with a deadline is a read: the module it
    /// gets is marked as used by a read, which [`Runtime::prepare_module`] never evicts. At
    /// most CONCURRENCY callers wait at once; a further one gets PLUGIN_BUSY. A miss shares
    /// `artifact` with the queued job instead of copying it; the last caller to give up on a
    /// job not started yet removes it from the queue, artifact and all. An artifact over
    /// ARTIFACT_BYTES is refused before anything else is done with it.
    ///
    /// Compiles run one at a time (W-30), those reads wait for first and the smallest first.
    /// A compile that finishes after every caller gave up is dropped: not cached, never
    /// executed; the next caller compiles again ([`RuntimeStats::compiles_dropped_late`]).
    /// With a compile child ([`PluginConfig::compiler`], O-9):
    /// - a compile every caller gave up on (a preparation waiting for it keeps it going) is
    ///   stopped within a poll interval (10 ms): the child is killed, the compile forgotten,
    ///   nothing cached ([`RuntimeStats::compiles_abandoned`]);
    /// - a compile no read waits for (only a preparation or a caller without deadline) is
    ///   stopped at once when a read waits for another one, and queued again;
    /// - a compile a read waits for is stopped (and queued again) once a read of a smaller
    ///   artifact has waited behind it for half of TIMEOUT, so that one large artifact never
    ///   makes the first use of every other plugin time out;
    /// - no compile runs longer than 12 × TIMEOUT (two minutes by default): past that it is
    ///   stopped, and its artifact is refused at once for the next ten minutes (PLUGIN_ARTIFACT),
    ///   as is one the compiler refused or died on.
    ///
    /// Without a compile child, compiles run on the worker thread and are never stopped: one
    /// every caller gave up on runs to its end (a caller arriving meanwhile joins it) and is
    /// dropped if nobody waits for it then.
    ///
    /// Diagnostics: PLUGIN_ARTIFACT (over ARTIFACT_BYTES, not a valid core module, over the
    /// host's table or instance limits, or no module within the compile cap), PLUGIN_ABI (a
    /// missing or mistyped `memory`/`alloc`/`dealloc`/`enrich` export, any import but
    /// `sourcegraph::{read_file, read_files, last_error}` with their types, WASI included),
    /// PLUGIN_MEMORY (initial memory over MEMORY_MIB: the pooling allocator could not
    /// instantiate it, so it is refused here, before compiling), PLUGIN_BUSY (too many callers
    /// waiting; the compile child could not be started). Failures of the static checks are
    /// not remembered: they cost a validation pass, not a compile.
    pub fn module(
        &self,
        digest: &str,
        artifact: &Arc<[u8]>,
        deadline: Option<Instant>,
    ) -> Result<Arc<Module>, Diagnostic> {
        let started = Instant::now();
        let (outcome, hit) = compiler::module(&self.shared, digest, artifact, deadline);
        if let Err(diagnostic) = &outcome {
            self.shared.counters.fault(diagnostic.code);
        }
        tracing::debug!(
            digest,
            cache_hit = hit,
            wait_us = started.elapsed().as_micros() as u64,
            fault = outcome.as_ref().err().map_or("none", |d| d.code.as_str()),
            "plugin module"
        );
        outcome
    }

    /// Background preparation of the module of `digest` (W-31): like [`Runtime::module`] without
    /// a deadline, except that it never evicts a module a read used since it was cached (a read
    /// being a `module` call with a deadline), whatever the order it happens in.
    ///
    /// A hit answers [`PrepareOutcome::Cached`] and changes nothing (neither the module's
    /// recency nor whether a read used it). A miss compiles only if the module can be cached in
    /// a free slot or in place of a module no read used ([`PrepareOutcome::Compiled`]), and
    /// the prepared module enters as least recently used, so until a read uses it, it is the
    /// first a read's miss evicts. When every slot holds a module a read used, nothing is
    /// compiled, or a module compiled while reads filled the cache is dropped:
    /// [`PrepareOutcome::NoRoom`], counted in [`RuntimeStats::preparations_without_room`],
    /// not as a fault. It waits like any caller and counts against CONCURRENCY (PLUGIN_BUSY).
    ///
    /// Diagnostics: those of [`Runtime::module`] but PLUGIN_TIMEOUT.
    pub fn prepare_module(
        &self,
        digest: &str,
        artifact: &Arc<[u8]>,
    ) -> Result<PrepareOutcome, Diagnostic> {
        let started = Instant::now();
        let outcome = compiler::prepare(&self.shared, digest, artifact).map(|got| match got {
            compiler::Got::Hit(_) => PrepareOutcome::Cached,
            compiler::Got::Compiled { cached: true, .. } => PrepareOutcome::Compiled,
            compiler::Got::Compiled { cached: false, .. } | compiler::Got::NoRoom => {
                PrepareOutcome::NoRoom
            }
        });
        match &outcome {
            Err(diagnostic) => self.shared.counters.fault(diagnostic.code),
            Ok(PrepareOutcome::NoRoom) => bump(&self.shared.counters.preparations_without_room),
            Ok(_) => {}
        }
        tracing::debug!(
            digest,
            outcome = ?outcome.as_ref().ok(),
            wait_us = started.elapsed().as_micros() as u64,
            fault = outcome.as_ref().err().map_or("none", |d| d.code.as_str()),
            "plugin module prepared"
        );
        outcome
    }

    /// Whether `digest` is compiled and cached.
    pub fn is_cached(&self, digest: &str) -> bool {
        self.shared.compiler.is_cached(digest)
    }

    /// The counters since start-up.
    pub fn stats(&self) -> RuntimeStats {
        self.shared.counters.snapshot()
    }

    /// Idle instances currently pooled.
    pub fn idle_instances(&self) -> usize {
        self.shared.pool().len()
    }

    /// One execution of `enrich` with `input` (the JSON ABI 2 request), returning the output
    /// text (its JSON shape is checked by the caller) and any read-budget overrun.
    ///
    /// Takes one of CONCURRENCY slots (none free: PLUGIN_BUSY at once, no queue), an idle
    /// instance for `key` and this module (else a fresh one), writes the input into a buffer
    /// from the guest's `alloc`, calls `enrich`, bounds-checks the packed result, copies it,
    /// and deallocs input and output with their exact lengths. On success with an output of
    /// the ABI 2 shape (`{"attachments":[…]}`) the instance is parked for `key`; after any
    /// fault, budget overrun or output of another shape it is dropped (W-27, W-32).
    ///
    /// Diagnostics: PLUGIN_TIMEOUT (deadline, checked by the epoch callback and by every
    /// host import), PLUGIN_BUSY, PLUGIN_TRAP (any trap, in `alloc`, `enrich`, `dealloc` or
    /// at start), PLUGIN_MEMORY (a memory growth over MEMORY_MIB; an input that cannot fit),
    /// PLUGIN_OUTPUT (out-of-bounds, null or input-aliasing output, over OUTPUT_BYTES —
    /// refused before copying — or not UTF-8), PLUGIN_ABI (`alloc` returned 0, also for
    /// length 0 where W-16 requires a non-zero pointer, or a buffer outside memory).
    pub fn execute(
        &self,
        module: &Module,
        key: &InstanceKey,
        input: &[u8],
        files: &dyn HostFiles,
        deadline: Instant,
    ) -> Result<Executed, Diagnostic> {
        self.execute_reported(module, key, input, files, deadline).0
    }

    /// [`Runtime::execute`], also answering what the execution did (W-36), whatever its
    /// outcome, so a caller can log one line per enrichment.
    pub fn execute_reported(
        &self,
        module: &Module,
        key: &InstanceKey,
        input: &[u8],
        files: &dyn HostFiles,
        deadline: Instant,
    ) -> (Result<Executed, Diagnostic>, ExecutionReport) {
        let started = Instant::now();
        let mut report = Report::default();
        let outcome = self.run(module, key, input, files, deadline, &mut report);
        let counters = &self.shared.counters;
        // A read-budget overrun is counted by `read_budget_hits`, not as a fault.
        if let Err(diagnostic) = &outcome {
            counters.fault(diagnostic.code);
        }
        add(&counters.host_reads, report.reads.files);
        add(&counters.host_read_bytes, report.reads.bytes);
        add(&counters.read_budget_hits, report.reads.budget_hits);
        // W-36: timings, reads and the fault code only; never args, input or output.
        tracing::debug!(
            digest = module.digest(),
            total_us = started.elapsed().as_micros() as u64,
            instantiate_us = report.instantiate.as_micros() as u64,
            execute_us = report.execute.as_micros() as u64,
            host_read_us = report.reads.read_time.as_micros() as u64,
            read_calls = report.reads.calls,
            read_files = report.reads.files,
            read_bytes = report.reads.bytes,
            read_budget_hits = report.reads.budget_hits,
            instance_reused = report.reused,
            fault = outcome.as_ref().err().map_or("none", |d| d.code.as_str()),
            "plugin execution"
        );
        let summary = ExecutionReport {
            instance_reused: report.reused,
            instantiate: report.instantiate,
            execute: report.execute,
            host_read: report.reads.read_time,
            read_calls: report.reads.calls,
            read_bytes: report.reads.bytes,
        };
        (outcome, summary)
    }

    fn run(
        &self,
        module: &Module,
        key: &InstanceKey,
        input: &[u8],
        files: &dyn HostFiles,
        deadline: Instant,
        report: &mut Report,
    ) -> Result<Executed, Diagnostic> {
        let shared = &*self.shared;
        if Instant::now() >= deadline {
            return Err(Diagnostic::new(
                Code::Timeout,
                "the request deadline passed before the plugin ran",
            ));
        }
        let _slot = Slot::take(&shared.running, shared.config.concurrency).ok_or_else(|| {
            Diagnostic::new(
                Code::Busy,
                format!(
                    "{} plugin executions are already running (CONCURRENCY)",
                    shared.config.concurrency
                ),
            )
        })?;
        bump(&shared.counters.executions);
        let input_len = u32::try_from(input.len())
            .ok()
            .filter(|&len| u64::from(len) <= shared.memory_bytes);
        let Some(input_len) = input_len else {
            return Err(Diagnostic::new(
                Code::Memory,
                format!(
                    "the input of {} bytes cannot fit MEMORY_MIB ({} MiB)",
                    input.len(),
                    shared.memory_bytes >> 20
                ),
            ));
        };

        let taken = shared.pool().take(key, module.digest());
        let mut live = match taken {
            Some(live) => {
                report.reused = true;
                bump(&shared.counters.instance_reuses);
                live
            }
            None => {
                let instantiating = Instant::now();
                let live = Live::new(shared, module, files, deadline);
                report.instantiate = instantiating.elapsed();
                bump(&shared.counters.instantiations);
                live?
            }
        };

        let executing = Instant::now();
        live.store.data_mut().begin(files, deadline);
        live.store.set_epoch_deadline(1);
        let outcome = live.call(input, input_len, shared.config.output_bytes);
        report.reads = live.store.data_mut().end();
        report.execute = executing.elapsed();

        let output = outcome.and_then(|bytes| {
            String::from_utf8(bytes)
                .map_err(|_| Diagnostic::new(Code::Output, "the output is not valid UTF-8"))
        })?;
        let read_budget = report.reads.first_budget_refusal.as_ref().map(|first| {
            Diagnostic::new(
                Code::ReadBudget,
                format!(
                    "{} host read(s) refused by a budget; first: {first}",
                    report.reads.budget_hits
                ),
            )
        });
        // W-27, W-32: an instance that overran a budget or answered something that is not
        // the ABI 2 shape is never reused; the caller diagnoses the shape (PLUGIN_OUTPUT).
        let well_formed = attachments_of(&output).is_ok();
        if read_budget.is_none() && well_formed {
            let evicted = shared.pool().put(key, module.digest(), live);
            drop(evicted);
        }
        Ok(Executed {
            output,
            read_budget,
        })
    }
}

impl Drop for Runtime {
    /// W-35: stops the ticker and the compile worker (after its current compile) and drops the
    /// idle instances.
    fn drop(&mut self) {
        self.shared.compiler.shut_down();
        if let Some((stop, ticker)) = self.ticker.take() {
            drop(stop);
            let _ = ticker.join();
        }
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        let idle = self.shared.pool().clear();
        drop(idle);
    }
}

/// What one execution did (W-36): timing segments and host-read counters, never its input
/// or output.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExecutionReport {
    /// An idle instance was reused (no instantiation).
    pub instance_reused: bool,
    /// Time to instantiate (zero on reuse).
    pub instantiate: Duration,
    /// Time inside the guest's calls, host reads included.
    pub execute: Duration,
    /// Time inside host reads.
    pub host_read: Duration,
    /// READ_CALLS spent.
    pub read_calls: u64,
    /// Bytes returned by host reads.
    pub read_bytes: u64,
}

/// What one execution did, for the debug log.
#[derive(Default)]
struct Report {
    reused: bool,
    instantiate: Duration,
    execute: Duration,
    reads: ExecCounters,
}

/// One of the CONCURRENCY execution slots, released on drop.
struct Slot<'a>(&'a AtomicUsize);

impl<'a> Slot<'a> {
    fn take(running: &'a AtomicUsize, limit: usize) -> Option<Self> {
        running
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()?;
        Some(Self(running))
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An instance with its store, leased exclusively by one execution or parked in the pool.
struct Live {
    store: Store<HostState>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    dealloc: TypedFunc<(i32, i32), ()>,
    enrich: TypedFunc<(i32, i32), i64>,
}

impl Live {
    /// A fresh instance; the start function (if any) runs under `deadline`.
    fn new(
        shared: &Shared,
        module: &Module,
        files: &dyn HostFiles,
        deadline: Instant,
    ) -> Result<Self, Diagnostic> {
        let budget = Budget {
            read_calls: shared.config.read_calls,
            read_bytes: shared.config.read_bytes,
            file_bytes: shared.config.file_bytes,
        };
        let memory_bytes = usize::try_from(shared.memory_bytes).unwrap_or(usize::MAX);
        let mut store = Store::new(&shared.engine, HostState::new(memory_bytes, budget));
        store.limiter(|state| &mut state.limits);
        store.epoch_deadline_callback(|mut context| {
            let state = context.data_mut();
            if Instant::now() >= state.deadline {
                state.timed_out = true;
                Ok(UpdateDeadline::Interrupt)
            } else {
                // Not yet: look again at the next tick.
                Ok(UpdateDeadline::Continue(1))
            }
        });
        store.data_mut().begin(files, deadline);
        store.set_epoch_deadline(1);
        let instance = module.pre.instantiate(&mut store);
        store.data_mut().end();
        let instance = instance.map_err(|error| classify(&error, store.data(), "instantiation"))?;

        // The static checks guarantee these exports; a failure here is still an ABI failure.
        let missing = |what: &str| {
            Diagnostic::new(
                Code::Abi,
                format!("the module does not export a usable `{what}`"),
            )
        };
        let memory = instance
            .get_memory(&mut store, "memory")
            .ok_or_else(|| missing("memory"))?;
        let alloc = instance
            .get_typed_func::<i32, i32>(&mut store, "alloc")
            .map_err(|_| missing("alloc"))?;
        let dealloc = instance
            .get_typed_func::<(i32, i32), ()>(&mut store, "dealloc")
            .map_err(|_| missing("dealloc"))?;
        let enrich = instance
            .get_typed_func::<(i32, i32), i64>(&mut store, "enrich")
            .map_err(|_| missing("enrich"))?;
        store.data_mut().guest = Some(GuestFns {
            memory,
            alloc: alloc.clone(),
        });
        Ok(Self {
            store,
            memory,
            alloc,
            dealloc,
            enrich,
        })
    }

    /// alloc + write input, enrich, check and copy the output, dealloc both. Returns the raw
    /// output bytes (UTF-8 is checked by the caller).
    fn call(
        &mut self,
        input: &[u8],
        input_len: u32,
        output_limit: u64,
    ) -> Result<Vec<u8>, Diagnostic> {
        let in_ptr = self
            .alloc
            .call(&mut self.store, input_len as i32)
            .map_err(|e| self.fault(&e, "alloc"))? as u32;
        if in_ptr == 0 {
            // W-16: even a zero-length allocation must return a non-zero pointer; a module
            // breaking that contract is an ABI failure (not an output one: enrich never ran).
            return Err(Diagnostic::new(
                Code::Abi,
                format!("alloc({input_len}) returned 0"),
            ));
        }
        let in_start = in_ptr as usize;
        let in_end = in_start.checked_add(input.len());
        let dest =
            in_end.and_then(|end| self.memory.data_mut(&mut self.store).get_mut(in_start..end));
        let Some(dest) = dest else {
            return Err(Diagnostic::new(
                Code::Abi,
                "alloc returned a buffer outside the module's memory",
            ));
        };
        dest.copy_from_slice(input);

        let packed = self
            .enrich
            .call(&mut self.store, (in_ptr as i32, input_len as i32))
            .map_err(|e| self.fault(&e, "enrich"))?;
        self.check_deadline()?;
        let packed = packed as u64;
        let (out_ptr, out_len) = ((packed >> 32) as u32, packed as u32);
        if u64::from(out_len) > output_limit {
            return Err(Diagnostic::new(
                Code::Output,
                format!("the output of {out_len} bytes is over OUTPUT_BYTES ({output_limit})"),
            ));
        }
        if out_ptr == 0 {
            return Err(Diagnostic::new(
                Code::Output,
                "enrich returned a null output pointer",
            ));
        }
        let memory_size = self.memory.data_size(&self.store) as u64;
        let out_end = u64::from(out_ptr)
            .checked_add(u64::from(out_len))
            .filter(|&end| end <= memory_size);
        let Some(out_end) = out_end else {
            return Err(Diagnostic::new(
                Code::Output,
                format!("the output buffer ({out_ptr}, {out_len}) is outside the module's memory"),
            ));
        };
        let in_end = u64::from(in_ptr) + u64::from(input_len);
        let overlaps = u64::from(out_ptr) < in_end && u64::from(in_ptr) < out_end;
        if overlaps || out_ptr == in_ptr {
            return Err(Diagnostic::new(
                Code::Output,
                "the output buffer aliases the input buffer",
            ));
        }
        let output = self.memory.data(&self.store)[out_ptr as usize..out_end as usize].to_vec();

        self.dealloc
            .call(&mut self.store, (in_ptr as i32, input_len as i32))
            .map_err(|e| self.fault(&e, "dealloc"))?;
        self.dealloc
            .call(&mut self.store, (out_ptr as i32, out_len as i32))
            .map_err(|e| self.fault(&e, "dealloc"))?;
        self.check_deadline()?;
        Ok(output)
    }

    /// A call that returned in time may still have overrun: a host import saw the deadline, or
    /// the call ended between two ticks past it. Either way the request has no time left.
    fn check_deadline(&mut self) -> Result<(), Diagnostic> {
        let state = self.store.data_mut();
        if state.timed_out || Instant::now() >= state.deadline {
            state.timed_out = true;
            return Err(timeout());
        }
        Ok(())
    }

    fn fault(&self, error: &wasmtime::Error, phase: &str) -> Diagnostic {
        classify(error, self.store.data(), phase)
    }
}

fn timeout() -> Diagnostic {
    Diagnostic::new(Code::Timeout, "the plugin ran past the request deadline")
}

/// Maps a failed guest call (or instantiation) to a diagnostic. The store's flags come first:
/// a deadline or a refused memory growth surfaces as a generic trap or limiter error.
fn classify(error: &wasmtime::Error, state: &HostState, phase: &str) -> Diagnostic {
    if state.timed_out || matches!(error.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        return timeout();
    }
    if state.limits.memory_fault {
        return Diagnostic::new(
            Code::Memory,
            "the plugin's linear memory would grow past MEMORY_MIB",
        );
    }
    if let Some(fault) = error.downcast_ref::<HostFault>() {
        return Diagnostic::new(fault.code, fault.message.clone());
    }
    if error.downcast_ref::<PoolConcurrencyLimitError>().is_some() {
        return Diagnostic::new(Code::Busy, "no free plugin instance slot");
    }
    if let Some(trap) = error.downcast_ref::<Trap>() {
        // wasmtime's trap text is a short fixed description ("wasm trap: out of bounds memory
        // access"); nothing else of the error chain is shown.
        let text = trap.to_string();
        let text = text.strip_prefix("wasm trap: ").unwrap_or(&text);
        return Diagnostic::new(Code::Trap, format!("{phase} trapped: {text}"));
    }
    tracing::debug!(phase, %error, "plugin call failed");
    Diagnostic::new(Code::Trap, format!("{phase} failed"))
}
