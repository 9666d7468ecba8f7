//! The store data of one instance and the host imports of module `sourcegraph` (W-22, W-23).
//!
//! Every buffer handed to the guest is allocated with the guest's own `alloc` (re-entering the
//! guest from inside the import) and belongs to the guest afterwards. Budget overruns and bad
//! requests are soft: the import returns 0 and `last_error` explains; only a broken guest
//! (a trap inside `alloc`, or `alloc` handing out memory it does not have) ends the execution.

use std::time::{Duration, Instant};

use wasmtime::{
    AsContextMut, Caller, Engine, Linker, Memory, ResourceLimiter, StoreLimits, StoreLimitsBuilder,
    TypedFunc,
};

use super::{HostFiles, HostReadError};
use crate::Code;
use crate::abi::HOST_MODULE;

/// Per-store data. Everything under `exec` is reset for each execution on a pooled instance.
pub(super) struct HostState {
    pub limits: Limits,
    pub budget: Budget,
    /// The current request's wall-clock deadline (checked by the epoch callback and by imports).
    pub deadline: Instant,
    /// Set once the deadline was seen passed; the execution then ends in PLUGIN_TIMEOUT.
    pub timed_out: bool,
    pub exec: ExecCounters,
    /// The guest's memory and allocator, once instantiation finished.
    pub guest: Option<GuestFns>,
    files: Option<FilesRef>,
}

/// Host-read budgets of one execution (W-26).
#[derive(Clone, Copy, Debug)]
pub(super) struct Budget {
    pub read_calls: u64,
    pub read_bytes: u64,
    pub file_bytes: u64,
}

/// What the host imports did during one execution (for the debug log and the stats).
#[derive(Default, Debug)]
pub(super) struct ExecCounters {
    /// READ_CALLS spent (each `read_file` and each path of `read_files`).
    pub calls: u64,
    /// Files returned.
    pub files: u64,
    /// Bytes returned (counted against READ_BYTES).
    pub bytes: u64,
    /// Time spent in `HostFiles::read`.
    pub read_time: Duration,
    /// Reads refused by a budget.
    pub budget_hits: u64,
    /// The first budget refusal's message: the execution's PLUGIN_READ_BUDGET diagnostic.
    pub first_budget_refusal: Option<String>,
    /// The message of the most recent failed host call (W-22).
    pub last_error: Option<String>,
}

/// Handles the imports need to hand buffers to the guest.
#[derive(Clone)]
pub(super) struct GuestFns {
    pub memory: Memory,
    pub alloc: TypedFunc<i32, i32>,
}

/// A fault the host detected inside an import, carried through wasmtime as the call's error.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(super) struct HostFault {
    pub code: Code,
    pub message: String,
}

impl HostState {
    pub fn new(memory_bytes: usize, budget: Budget) -> Self {
        Self {
            limits: Limits::new(memory_bytes),
            budget,
            // Until an execution sets its own deadline, any guest code traps at its first check.
            deadline: Instant::now(),
            timed_out: false,
            exec: ExecCounters::default(),
            guest: None,
            files: None,
        }
    }

    /// Starts an execution: fresh per-execution state, the request's deadline and reader.
    ///
    /// The reader must stay borrowed until [`HostState::end`]: `Runtime::execute` calls both
    /// around its guest calls and the store never leaves that function in between.
    pub fn begin(&mut self, files: &dyn HostFiles, deadline: Instant) {
        self.deadline = deadline;
        self.timed_out = false;
        self.limits.memory_fault = false;
        self.exec = ExecCounters::default();
        self.files = Some(FilesRef::new(files));
    }

    /// Ends an execution: forgets the reader and returns what the imports did.
    pub fn end(&mut self) -> ExecCounters {
        self.files = None;
        std::mem::take(&mut self.exec)
    }

    fn files(&self) -> Option<&dyn HostFiles> {
        // SAFETY: `files` is only Some between `begin` and `end`, which `Runtime::execute` calls
        // around the guest calls of one execution while it holds the `&dyn HostFiles` borrow;
        // host imports run only inside those guest calls, on the same thread.
        self.files.map(|files| unsafe { &*files.0 })
    }
}

/// The `&dyn HostFiles` of the current execution with its lifetime erased, because store data
/// must be `'static` while the reader is borrowed for one call only. See [`HostState::files`].
#[derive(Clone, Copy)]
struct FilesRef(*const (dyn HostFiles + 'static));

// SAFETY: `HostFiles: Send + Sync`, so the pointee may be used from whichever thread runs the
// store; the pointer is only dereferenced while the borrow it came from is alive.
unsafe impl Send for FilesRef {}
// SAFETY: as above; the pointer is never written through.
unsafe impl Sync for FilesRef {}

impl FilesRef {
    fn new(files: &dyn HostFiles) -> Self {
        let short: *const (dyn HostFiles + '_) = files;
        // SAFETY: only the trait object's lifetime bound changes (same fat-pointer layout);
        // validity while dereferenced is argued at `HostState::files`.
        let erased: *const (dyn HostFiles + 'static) = unsafe { std::mem::transmute(short) };
        Self(erased)
    }
}

/// `StoreLimits` (MEMORY_MIB, one instance, one memory, one table, trap on failed growth)
/// plus a flag recording that a memory growth was refused, so the resulting trap is reported
/// as PLUGIN_MEMORY rather than PLUGIN_TRAP.
pub(super) struct Limits {
    inner: StoreLimits,
    pub memory_fault: bool,
}

impl Limits {
    fn new(memory_bytes: usize) -> Self {
        let inner = StoreLimitsBuilder::new()
            .memory_size(memory_bytes)
            .instances(1)
            .memories(1)
            .tables(1)
            .trap_on_grow_failure(true)
            .build();
        Self {
            inner,
            memory_fault: false,
        }
    }
}

impl ResourceLimiter for Limits {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum);
        if !matches!(allowed, Ok(true)) {
            self.memory_fault = true;
        }
        allowed
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.memory_fault = true;
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

/// The linker every module is pre-instantiated with: the three host functions, nothing else
/// (no WASI is ever linked).
pub(super) fn linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    linker.func_wrap(HOST_MODULE, "read_file", read_file)?;
    linker.func_wrap(HOST_MODULE, "read_files", read_files)?;
    linker.func_wrap(HOST_MODULE, "last_error", last_error)?;
    Ok(linker)
}

/// Packs a guest buffer as the ABI returns it: pointer high 32 bits, length low 32 bits.
pub(super) fn pack(ptr: u32, len: u32) -> i64 {
    ((u64::from(ptr) << 32) | u64::from(len)) as i64
}

/// Records a failed host call and returns the ABI's failure value.
fn fail(caller: &mut Caller<'_, HostState>, message: impl Into<String>) -> i64 {
    caller.data_mut().exec.last_error = Some(message.into());
    0
}

/// Whether the request deadline passed. Epochs do not tick inside host calls, so imports check
/// the wall clock themselves; once passed, the guest is made to trap at its next epoch check
/// and the execution ends in PLUGIN_TIMEOUT whatever the guest does with the 0 it gets.
fn past_deadline(caller: &mut Caller<'_, HostState>) -> bool {
    if Instant::now() < caller.data().deadline {
        return false;
    }
    caller.data_mut().timed_out = true;
    caller.as_context_mut().set_epoch_deadline(0);
    true
}

/// Copies a guest buffer out; None when it is not inside the guest's memory.
fn guest_bytes(
    caller: &mut Caller<'_, HostState>,
    memory: Memory,
    ptr: i32,
    len: i32,
) -> Option<Vec<u8>> {
    let start = ptr as u32 as usize;
    let end = start.checked_add(len as u32 as usize)?;
    memory.data(&*caller).get(start..end).map(<[u8]>::to_vec)
}

/// Allocates `len` bytes with the guest's `alloc`, lets `fill` write them, and returns the
/// packed buffer; Ok(None) when `alloc` returned 0 (the guest may be out of memory: soft).
fn give(
    caller: &mut Caller<'_, HostState>,
    guest: &GuestFns,
    len: usize,
    fill: impl FnOnce(&mut [u8]),
) -> wasmtime::Result<Option<i64>> {
    let Ok(len32) = u32::try_from(len) else {
        return Ok(None);
    };
    // A trap inside `alloc` propagates as the execution's error (PLUGIN_TRAP/PLUGIN_MEMORY).
    let ptr = guest.alloc.call(&mut *caller, len32 as i32)? as u32;
    if ptr == 0 {
        return Ok(None);
    }
    let start = ptr as usize;
    let dest = start
        .checked_add(len)
        .and_then(|end| guest.memory.data_mut(&mut *caller).get_mut(start..end));
    let Some(dest) = dest else {
        return Err(wasmtime::Error::new(HostFault {
            code: Code::Abi,
            message: "alloc returned a buffer outside the module's memory".into(),
        }));
    };
    fill(dest);
    Ok(Some(pack(ptr, len32)))
}

/// One file through the budgets: Ok(bytes) or the caller-safe reason it was refused. A
/// budget refusal is soft for the guest (W-22) but recorded for the execution's diagnostic.
fn read_one(caller: &mut Caller<'_, HostState>, path: &str) -> Result<Vec<u8>, String> {
    let refused = read_within_budget(caller, path);
    if let Err((message, true)) = &refused {
        let exec = &mut caller.data_mut().exec;
        exec.budget_hits += 1;
        exec.first_budget_refusal
            .get_or_insert_with(|| message.clone());
    }
    refused.map_err(|(message, _)| message)
}

/// [`read_one`] proper: the refusal says whether it was a budget.
fn read_within_budget(
    caller: &mut Caller<'_, HostState>,
    path: &str,
) -> Result<Vec<u8>, (String, bool)> {
    let budget = caller.data().budget;
    let state = caller.data_mut();
    if state.exec.calls >= budget.read_calls {
        return Err((
            format!(
                "read budget spent: at most {} reads per execution (READ_CALLS)",
                budget.read_calls
            ),
            true,
        ));
    }
    state.exec.calls += 1;
    let Some(files) = state.files() else {
        return Err(("host reads are not available here".into(), false));
    };
    let started = Instant::now();
    let read = files.read(path, budget.file_bytes);
    let state = caller.data_mut();
    state.exec.read_time += started.elapsed();
    let over_file_bytes = |len: u64| {
        (
            format!(
                "file is {len} bytes, over FILE_BYTES ({})",
                budget.file_bytes
            ),
            true,
        )
    };
    let bytes = match read {
        Ok(bytes) => bytes,
        Err(HostReadError::TooLarge(len)) => return Err(over_file_bytes(len)),
        Err(HostReadError::Refused(message)) => return Err((message, false)),
    };
    let len = bytes.len() as u64;
    if len > budget.file_bytes {
        return Err(over_file_bytes(len));
    }
    if state.exec.bytes.saturating_add(len) > budget.read_bytes {
        return Err((
            format!(
                "reading {len} more bytes would pass READ_BYTES ({}) for this execution",
                budget.read_bytes
            ),
            true,
        ));
    }
    state.exec.bytes += len;
    state.exec.files += 1;
    Ok(bytes)
}

/// The common start of a host read: the deadline, the guest's exports, and the request
/// bytes at (`ptr`, `len`). `Err` carries the packed failure to return to the guest.
fn request(
    caller: &mut Caller<'_, HostState>,
    ptr: i32,
    len: i32,
    what: &str,
) -> Result<(GuestFns, Vec<u8>), i64> {
    if past_deadline(caller) {
        return Err(fail(caller, "deadline passed"));
    }
    let Some(guest) = caller.data().guest.clone() else {
        return Err(fail(
            caller,
            "host reads are not available while the module starts",
        ));
    };
    let Some(bytes) = guest_bytes(caller, guest.memory, ptr, len) else {
        return Err(fail(
            caller,
            format!("{what} buffer is outside the module's memory"),
        ));
    };
    Ok((guest, bytes))
}

/// `read_file(path_ptr, path_len) -> i64` (W-22).
fn read_file(
    mut caller: Caller<'_, HostState>,
    path_ptr: i32,
    path_len: i32,
) -> wasmtime::Result<i64> {
    let (guest, path) = match request(&mut caller, path_ptr, path_len, "path") {
        Ok(found) => found,
        Err(failed) => return Ok(failed),
    };
    let Ok(path) = String::from_utf8(path) else {
        return Ok(fail(&mut caller, "path is not valid UTF-8"));
    };
    let bytes = match read_one(&mut caller, &path) {
        Ok(bytes) => bytes,
        Err(message) => return Ok(fail(&mut caller, message)),
    };
    if past_deadline(&mut caller) {
        return Ok(fail(&mut caller, "deadline passed"));
    }
    match give(&mut caller, &guest, bytes.len(), |dest| {
        dest.copy_from_slice(&bytes)
    })? {
        Some(packed) => Ok(packed),
        None => Ok(fail(
            &mut caller,
            format!("alloc({}) returned 0", bytes.len()),
        )),
    }
}

/// `read_files(paths_ptr, paths_len) -> i64` (W-23): a JSON array of paths in, little-endian
/// `u32 count` then per item `u32 status (0 file, 1 error)`, `u32 length`, bytes out.
///
/// The request is parsed where it lies in guest memory, and only as many paths as READ_CALLS
/// has left are taken out of it: the paths after those are only checked to be strings and
/// counted, each answered by the same budget error, so a request of millions of paths costs
/// the host no allocation per path (the answer is written into the guest's own memory).
fn read_files(
    mut caller: Caller<'_, HostState>,
    paths_ptr: i32,
    paths_len: i32,
) -> wasmtime::Result<i64> {
    let read_calls = caller.data().budget.read_calls;
    let (guest, paths, count) = match requested_paths(&mut caller, paths_ptr, paths_len) {
        Ok(found) => found,
        Err(failed) => return Ok(failed),
    };
    let mut items: Vec<Result<Vec<u8>, String>> = Vec::with_capacity(paths.kept.len());
    for path in &paths.kept {
        if past_deadline(&mut caller) {
            return Ok(fail(&mut caller, "deadline passed"));
        }
        items.push(read_one(&mut caller, path));
    }
    // The paths READ_CALLS has no reads left for: one budget error each, counted as such.
    let spent = format!("read budget spent: at most {read_calls} reads per execution (READ_CALLS)");
    if paths.rest > 0 {
        let exec = &mut caller.data_mut().exec;
        exec.budget_hits += paths.rest;
        exec.first_budget_refusal
            .get_or_insert_with(|| spent.clone());
    }
    let Some(total) = answer_bytes(&items, paths.rest, &spent) else {
        return Ok(fail(&mut caller, "answer would be larger than 4 GiB"));
    };
    let written = give(&mut caller, &guest, total, |dest| {
        write_answer(dest, count, &items, paths.rest, &spent)
    })?;
    match written {
        Some(packed) => Ok(packed),
        None => Ok(fail(&mut caller, format!("alloc({total}) returned 0"))),
    }
}

/// The start of `read_files`: the deadline, the guest's exports, and the request at (`ptr`,
/// `len`) parsed, keeping as many paths as READ_CALLS has reads left for; with the number of
/// items the answer has. `Err` carries the packed failure to return to the guest.
fn requested_paths(
    caller: &mut Caller<'_, HostState>,
    ptr: i32,
    len: i32,
) -> Result<(GuestFns, Paths, u32), i64> {
    if past_deadline(caller) {
        return Err(fail(caller, "deadline passed"));
    }
    let Some(guest) = caller.data().guest.clone() else {
        return Err(fail(
            caller,
            "host reads are not available while the module starts",
        ));
    };
    let left = caller
        .data()
        .budget
        .read_calls
        .saturating_sub(caller.data().exec.calls);
    let keep = usize::try_from(left).unwrap_or(usize::MAX);
    let start = ptr as u32 as usize;
    let parsed = start
        .checked_add(len as u32 as usize)
        .and_then(|end| guest.memory.data(&*caller).get(start..end))
        .map(|request| parse_paths(request, keep));
    let paths = match parsed {
        None => {
            return Err(fail(
                caller,
                "request buffer is outside the module's memory",
            ));
        }
        Some(None) => return Err(fail(caller, "request is not a JSON array of path strings")),
        Some(Some(paths)) => paths,
    };
    let count = u64::try_from(paths.kept.len())
        .ok()
        .and_then(|kept| kept.checked_add(paths.rest))
        .and_then(|count| u32::try_from(count).ok());
    let Some(count) = count else {
        return Err(fail(caller, "request has too many paths"));
    };
    Ok((guest, paths, count))
}

/// The size of a `read_files` answer, `None` when it would not fit in 4 GiB.
fn answer_bytes(items: &[Result<Vec<u8>, String>], rest: u64, spent: &str) -> Option<usize> {
    let payload = |item: &Result<Vec<u8>, String>| match item {
        Ok(bytes) => bytes.len(),
        Err(message) => message.len(),
    };
    items
        .iter()
        .try_fold(4usize, |sum, item| {
            sum.checked_add(8)?.checked_add(payload(item))
        })
        .and_then(|sum| {
            let rest = usize::try_from(rest).ok()?;
            sum.checked_add(rest.checked_mul(8 + spent.len())?)
        })
        .filter(|&total| u32::try_from(total).is_ok())
}

/// Writes a `read_files` answer of [`answer_bytes`] bytes into `dest`: the count, each item,
/// then the `spent` error once for each of the `rest` paths.
fn write_answer(
    dest: &mut [u8],
    count: u32,
    items: &[Result<Vec<u8>, String>],
    rest: u64,
    spent: &str,
) {
    dest[..4].copy_from_slice(&count.to_le_bytes());
    let mut at = 4;
    let mut put = |status: u32, bytes: &[u8]| {
        // Lengths fit u32: the total was checked by `answer_bytes`.
        dest[at..at + 4].copy_from_slice(&status.to_le_bytes());
        dest[at + 4..at + 8].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        dest[at + 8..at + 8 + bytes.len()].copy_from_slice(bytes);
        at += 8 + bytes.len();
    };
    for item in items {
        match item {
            Ok(bytes) => put(0, bytes),
            Err(message) => put(1, message.as_bytes()),
        }
    }
    for _ in 0..rest {
        put(1, spent.as_bytes());
    }
}

/// The paths of a `read_files` request: the first ones, at most as many as were asked to be
/// kept, and how many strings follow them.
struct Paths {
    kept: Vec<String>,
    rest: u64,
}

/// [`parse_paths`] for the fuzz target `wasm_plugin` (`fuzzing.rs`, issue 43): the paths
/// kept and how many follow them.
pub(crate) fn parse_paths_for_fuzzing(request: &[u8], keep: usize) -> Option<(Vec<String>, u64)> {
    parse_paths(request, keep).map(|paths| (paths.kept, paths.rest))
}

/// Parses a `read_files` request, keeping at most `keep` paths (None: not a JSON array of
/// strings).
fn parse_paths(request: &[u8], keep: usize) -> Option<Paths> {
    use serde::de::DeserializeSeed;
    let mut reader = serde_json::Deserializer::from_slice(request);
    let paths = PathsSeed { keep }.deserialize(&mut reader).ok()?;
    reader.end().ok()?;
    Some(paths)
}

struct PathsSeed {
    keep: usize,
}

impl<'de> serde::de::DeserializeSeed<'de> for PathsSeed {
    type Value = Paths;

    fn deserialize<D: serde::Deserializer<'de>>(self, reader: D) -> Result<Paths, D::Error> {
        reader.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for PathsSeed {
    type Value = Paths;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON array of path strings")
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Paths, A::Error> {
        let mut kept = Vec::new();
        while kept.len() < self.keep {
            match seq.next_element::<String>()? {
                Some(path) => kept.push(path),
                None => return Ok(Paths { kept, rest: 0 }),
            }
        }
        let mut rest = 0u64;
        while seq.next_element::<AnyString>()?.is_some() {
            rest += 1;
        }
        Ok(Paths { kept, rest })
    }
}

/// A JSON string, checked and dropped without being kept.
struct AnyString;

impl<'de> serde::Deserialize<'de> for AnyString {
    fn deserialize<D: serde::Deserializer<'de>>(reader: D) -> Result<Self, D::Error> {
        reader.deserialize_str(AnyString)
    }
}

impl<'de> serde::de::Visitor<'de> for AnyString {
    type Value = AnyString;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a path string")
    }

    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<AnyString, E> {
        Ok(AnyString)
    }
}

/// `last_error() -> i64` (W-22): the most recent failure message of this execution, or 0.
fn last_error(mut caller: Caller<'_, HostState>) -> wasmtime::Result<i64> {
    let (Some(message), Some(guest)) = (
        caller.data().exec.last_error.clone(),
        caller.data().guest.clone(),
    ) else {
        return Ok(0);
    };
    // A 0 from `alloc` here is answered with 0 and leaves the message in place.
    Ok(give(&mut caller, &guest, message.len(), |dest| {
        dest.copy_from_slice(message.as_bytes())
    })?
    .unwrap_or(0))
}
