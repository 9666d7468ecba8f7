//! Counters of the runtime (W-36, W-38): plain relaxed atomics, read as a snapshot. They are
//! the plugin host's own numbers and never mixed into the base read statistics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::Code;

/// A snapshot of the runtime's counters since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Modules compiled and handed to a caller that was still waiting (and cached, unless
    /// CACHE_ENTRIES is 0 or only a preparation asked and found no room). A compile that
    /// finished with nobody waiting is counted in `compiles_dropped_late` instead.
    pub compiles: u64,
    /// `module` calls answered from the compiled-module cache.
    pub compile_cache_hits: u64,
    /// Compiles that finished after every caller had given up: dropped, not cached, never
    /// executed (W-30). In-process compiles, which nothing stops, or a compile child that
    /// answered just as its last caller gave up.
    pub compiles_dropped_late: u64,
    /// Compiles stopped part-way because every caller gave up (a compile child only, W-30,
    /// O-9): the child killed within a poll interval (10 ms), nothing cached.
    pub compiles_abandoned: u64,
    /// Compiles stopped part-way for a read that waited behind them (a compile child only,
    /// O-9); each was queued again if somebody still waited for it.
    pub compiles_preempted: u64,
    /// Compiles stopped at the compile cap (12 × TIMEOUT; a compile child only, O-9): their
    /// artifacts are refused at once for ten minutes.
    pub compiles_over_cap: u64,
    /// Queued compiles that every caller gave up on before the worker started them: skipped.
    pub compiles_skipped: u64,
    /// `prepare_module` calls that cached nothing because every cache slot held a module a
    /// read used (W-31: preparation never evicts one). Not a fault.
    pub preparations_without_room: u64,
    /// Fresh instances created.
    pub instantiations: u64,
    /// Executions that took an idle instance from the pool.
    pub instance_reuses: u64,
    /// Executions that got a concurrency slot (successful or not).
    pub executions: u64,
    /// Files returned to plugins by `read_file`/`read_files` (successful reads only).
    pub host_reads: u64,
    /// Bytes of those files.
    pub host_read_bytes: u64,
    /// Host reads refused by READ_CALLS, FILE_BYTES or READ_BYTES (soft: the call returned 0 or
    /// a per-item error and the plugin went on).
    pub read_budget_hits: u64,
    /// Diagnostics returned by `module` and `execute`, by code.
    pub faults: FaultCounts,
}

/// Diagnostics returned by the runtime, by code (the runtime returns only these codes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// PLUGIN_TIMEOUT.
    pub timeout: u64,
    /// PLUGIN_BUSY.
    pub busy: u64,
    /// PLUGIN_TRAP.
    pub trap: u64,
    /// PLUGIN_MEMORY.
    pub memory: u64,
    /// PLUGIN_OUTPUT.
    pub output: u64,
    /// PLUGIN_ABI.
    pub abi: u64,
    /// PLUGIN_ARTIFACT.
    pub artifact: u64,
}

impl FaultCounts {
    /// The count for `code` (0 for codes the runtime never returns).
    pub fn get(&self, code: Code) -> u64 {
        match code {
            Code::Timeout => self.timeout,
            Code::Busy => self.busy,
            Code::Trap => self.trap,
            Code::Memory => self.memory,
            Code::Output => self.output,
            Code::Abi => self.abi,
            Code::Artifact => self.artifact,
            _ => 0,
        }
    }

    /// All faults together.
    pub fn total(&self) -> u64 {
        self.timeout + self.busy + self.trap + self.memory + self.output + self.abi + self.artifact
    }
}

#[derive(Debug, Default)]
pub(super) struct Counters {
    pub compiles: AtomicU64,
    pub compile_cache_hits: AtomicU64,
    pub compiles_dropped_late: AtomicU64,
    pub compiles_abandoned: AtomicU64,
    pub compiles_preempted: AtomicU64,
    pub compiles_over_cap: AtomicU64,
    pub compiles_skipped: AtomicU64,
    pub preparations_without_room: AtomicU64,
    pub instantiations: AtomicU64,
    pub instance_reuses: AtomicU64,
    pub executions: AtomicU64,
    pub host_reads: AtomicU64,
    pub host_read_bytes: AtomicU64,
    pub read_budget_hits: AtomicU64,
    timeout: AtomicU64,
    busy: AtomicU64,
    trap: AtomicU64,
    memory: AtomicU64,
    output: AtomicU64,
    abi: AtomicU64,
    artifact: AtomicU64,
}

/// Adds one to a counter.
pub(super) fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Relaxed);
}

/// Adds `n` to a counter.
pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Relaxed);
}

impl Counters {
    pub fn fault(&self, code: Code) {
        let counter = match code {
            Code::Timeout => &self.timeout,
            Code::Busy => &self.busy,
            Code::Trap => &self.trap,
            Code::Memory => &self.memory,
            Code::Output => &self.output,
            Code::Abi => &self.abi,
            Code::Artifact => &self.artifact,
            // The runtime returns no other code; count it as a trap rather than lose it.
            _ => &self.trap,
        };
        bump(counter);
    }

    pub fn snapshot(&self) -> RuntimeStats {
        let get = |c: &AtomicU64| c.load(Relaxed);
        RuntimeStats {
            compiles: get(&self.compiles),
            compile_cache_hits: get(&self.compile_cache_hits),
            compiles_dropped_late: get(&self.compiles_dropped_late),
            compiles_abandoned: get(&self.compiles_abandoned),
            compiles_preempted: get(&self.compiles_preempted),
            compiles_over_cap: get(&self.compiles_over_cap),
            compiles_skipped: get(&self.compiles_skipped),
            preparations_without_room: get(&self.preparations_without_room),
            instantiations: get(&self.instantiations),
            instance_reuses: get(&self.instance_reuses),
            executions: get(&self.executions),
            host_reads: get(&self.host_reads),
            host_read_bytes: get(&self.host_read_bytes),
            read_budget_hits: get(&self.read_budget_hits),
            faults: FaultCounts {
                timeout: get(&self.timeout),
                busy: get(&self.busy),
                trap: get(&self.trap),
                memory: get(&self.memory),
                output: get(&self.output),
                abi: get(&self.abi),
                artifact: get(&self.artifact),
            },
        }
    }
}
