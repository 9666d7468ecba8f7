//! Guest-side SDK for Context Source Graph repository plugins (JSON ABI 2, SPEC §6).
//!
//! A repository plugin is a core Wasm module (`wasm32-unknown-unknown`, no WASI) committed to a
//! repository as `<name>.sourcegraph.wasm`. This crate supplies everything the ABI asks for, so a
//! plugin is a function and one macro call:
//!
//! ```
//! use sourcegraph_plugin_sdk::{Attachment, Input};
//!
//! sourcegraph_plugin_sdk::plugin! {
//!     metadata: r#"{"name": "hello", "abi_version": 2,
//!                  "operations": ["read", "read_many"], "default_enabled": true}"#,
//!     enrich: enrich,
//! }
//!
//! fn enrich(input: Input) -> Result<Vec<Attachment>, String> {
//!     Ok(input.files.iter().map(|f| Attachment::item(&f.item_id, "hello")).collect())
//! }
//! # fn main() {
//! #     let input = br#"{"abi_version":2,"operation":"read","repository":"r","commit":"c",
//! #         "root":"","args":{},"files":[{"item_id":"read-0","path":"a.md",
//! #         "repository_path":"a.md","start_line":1,"end_line":1,"content":"x",
//! #         "truncated":false,"has_more":false}]}"#;
//! #     assert_eq!(__sourcegraph_run(input),
//! #                br#"{"attachments":[{"item_id":"read-0","text":"hello"}]}"#);
//! # }
//! ```
//!
//! Build with `cargo build --release --target wasm32-unknown-unknown` and commit the `.wasm` as
//! `hello.sourcegraph.wasm`.
//!
//! What the macro provides:
//! * the exports `alloc(len) -> ptr` (never 0, not even for `len == 0`), `dealloc(ptr, len)` (the
//!   exact length given to `alloc`) and `enrich(ptr, len) -> (ptr << 32 | len)`;
//! * the metadata JSON in exactly one custom section named [`METADATA_SECTION`];
//! * on the host target only, a `#[test]` checking the metadata with [`validate_metadata`].
//!
//! Failure behaviour (documented contract of [`run`]): when the author's function returns `Err`,
//! or the host's input is not JSON ABI 2, the output is a single whole-batch attachment
//! `"<plugin name>: <error>"` — never invalid output. A *panic* cannot be caught: the target
//! aborts on panic, which the host sees as a trap (`PLUGIN_TRAP`, body kept, instance discarded).
//! Plugins should therefore return `Err` rather than `unwrap`.
//!
//! Host reads ([`read_file`], [`read_files`]) take paths relative to the plugin directory. On a
//! non-Wasm target they read from [`mock`], so plugin logic can be unit-tested with `cargo test`.

#![warn(missing_docs)]

use serde::de::{DeserializeOwned, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::fmt;
use std::marker::PhantomData;

/// Re-exported so plugins can use `serde_json::Value` (e.g. [`Input::args`]) without pinning
/// their own version.
pub use serde_json;

/// The only JSON ABI version this SDK speaks (the host rejects any other `abi_version`).
pub const ABI_VERSION: u32 = 2;

/// Name of the custom section holding the metadata JSON; it keeps `v1` although the ABI is 2.
pub const METADATA_SECTION: &str = "sourcegraph.plugin.v1";

/// Upper bound the host applies to the metadata section (`SOURCEGRAPH_PLUGINS_METADATA_BYTES`
/// default); [`validate_metadata`] refuses larger metadata so a plugin is not silently ignored.
pub const METADATA_MAX_BYTES: usize = 262_144;

/// The JSON document the host passes to `enrich` (JSON ABI 2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Input {
    /// Always [`ABI_VERSION`].
    pub abi_version: u32,
    /// `"read"` or `"read_many"`.
    pub operation: String,
    /// Repository name, e.g. `example/knowledge`.
    pub repository: String,
    /// Full commit SHA every read of this execution is pinned to.
    pub commit: String,
    /// The plugin directory relative to the repository root (`""` for the root itself).
    #[serde(default)]
    pub root: String,
    /// Caller-supplied business arguments (`{}` when none; `null` is normalised to `{}`).
    #[serde(default = "empty_object", deserialize_with = "null_as_empty_object")]
    pub args: Value,
    /// The successfully read ranges of this plugin directory's group, in request order.
    #[serde(default)]
    pub files: Vec<FileInput>,
}

/// One successfully read range handed to the plugin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileInput {
    /// `read-<n>`: the item's position in the original request; use it in [`Attachment::item`].
    pub item_id: String,
    /// Path relative to the plugin directory.
    pub path: String,
    /// Path relative to the repository root (the plugin's `root` joined with `path`).
    pub repository_path: String,
    /// First line actually returned (1-based).
    pub start_line: u64,
    /// Last line actually returned.
    pub end_line: u64,
    /// The returned text of those lines.
    #[serde(default)]
    pub content: String,
    /// Whether the base read cut the range short.
    #[serde(default)]
    pub truncated: bool,
    /// Whether the file continues after `end_line`; `None` when the host does not know.
    #[serde(default)]
    pub has_more: Option<bool>,
    /// Where a continuation read would start, when there is one.
    #[serde(default)]
    pub next_start_line: Option<u64>,
}

/// One piece of text the host appends: after an item's body (`item_id` set) or as a final
/// standalone block for the whole batch (`item_id` absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The [`FileInput::item_id`] this text belongs to; `None` for a whole-batch attachment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    /// Opaque UTF-8 text (Markdown, YAML, …); the host neither parses nor labels it.
    pub text: String,
}

impl Attachment {
    /// An attachment appended after the body of the item `item_id`.
    pub fn item(item_id: impl Into<String>, text: impl Into<String>) -> Self {
        Attachment {
            item_id: Some(item_id.into()),
            text: text.into(),
        }
    }

    /// A whole-batch attachment, shown as its own block after all items.
    pub fn batch(text: impl Into<String>) -> Self {
        Attachment {
            item_id: None,
            text: text.into(),
        }
    }
}

/// The JSON document `enrich` returns: `{"attachments": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    /// Attachments in the order the host should append them.
    pub attachments: Vec<Attachment>,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

fn null_as_empty_object<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    let v = Value::deserialize(d)?;
    Ok(if v.is_null() { empty_object() } else { v })
}

impl Input {
    /// The argument `key` of `args`, if `args` is an object holding it.
    pub fn arg(&self, key: &str) -> Option<&Value> {
        self.args.get(key)
    }

    /// The string argument `key`: `Ok(None)` when absent or `null`, `Err` when of another type
    /// (so a mistyped argument is reported rather than silently ignored).
    pub fn arg_str(&self, key: &str) -> Result<Option<&str>, String> {
        match self.arg(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("args.{key} must be a string")),
        }
    }

    /// `args` deserialised into the plugin's own argument type.
    pub fn args_as<T: DeserializeOwned>(&self) -> Result<T, String> {
        T::deserialize(&self.args).map_err(|e| format!("invalid args: {e}"))
    }
}

/// A JSON object deserialised as key/value pairs in document order.
///
/// serde_json's own map sorts keys (its order-preserving mode needs another dependency); plugin
/// configuration files such as `related.json` are easier to reason about in the author's order.
/// Duplicate keys are kept as separate entries.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OrderedMap<V>(pub Vec<(String, V)>);

impl<V> OrderedMap<V> {
    /// The first value stored under `key`.
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Entries in document order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &V)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct OrderedVisitor<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for OrderedVisitor<V> {
            type Value = OrderedMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, V>()? {
                    entries.push(entry);
                }
                Ok(OrderedMap(entries))
            }
        }
        d.deserialize_map(OrderedVisitor(PhantomData))
    }
}

/// Runs one `enrich` call on raw input bytes and returns the output JSON bytes.
///
/// This is the whole guest-side contract minus the memory handling, so it is what host-side
/// tests exercise. It never returns invalid output: an input that is not JSON ABI 2 or an `Err`
/// from `f` becomes exactly one whole-batch attachment `"<name>: <message>"`, where `<name>` is
/// the `name` field of `metadata`. Panics inside `f` are not caught (see the crate docs).
pub fn run<F>(metadata: &str, input: &[u8], f: F) -> Vec<u8>
where
    F: FnOnce(Input) -> Result<Vec<Attachment>, String>,
{
    let attachments = match serde_json::from_slice::<Input>(input) {
        Ok(input) => f(input),
        Err(e) => Err(format!("invalid enrich input: {e}")),
    }
    .unwrap_or_else(|message| {
        vec![Attachment::batch(format!(
            "{}: {message}",
            plugin_name(metadata)
        ))]
    });
    // Serialising plain strings cannot fail; the fallback keeps the "never invalid" promise
    // without a panic path.
    serde_json::to_vec(&Output { attachments })
        .unwrap_or_else(|_| br#"{"attachments":[]}"#.to_vec())
}

/// `path` with leading `./` and `/` removed, so `./a.md`, `/a.md` and `a.md` name one file
/// when a plugin compares paths from its own configuration with the input's.
pub fn normalize_path(path: &str) -> &str {
    let mut path = path;
    loop {
        if let Some(rest) = path.strip_prefix("./") {
            path = rest;
        } else if let Some(rest) = path.strip_prefix('/') {
            path = rest;
        } else {
            return path;
        }
    }
}

/// The `name` field of a metadata JSON document, or `"plugin"` when it has none.
pub fn plugin_name(metadata: &str) -> String {
    #[derive(Deserialize)]
    struct NameOnly {
        name: String,
    }
    serde_json::from_str::<NameOnly>(metadata)
        .map(|m| m.name)
        .unwrap_or_else(|_| "plugin".to_owned())
}

/// Checks metadata the way the host will (SPEC W-3/W-4), so mistakes show up in `cargo test`
/// instead of as a diagnostic after the artifact is committed.
///
/// Required: `name` (non-empty, no `/`), `abi_version` exactly 2, `operations` an array of
/// strings. Optional fields must have their documented types: `title`, `description`, `version`
/// strings, `default_enabled` a boolean (the host counts only `true`), `input_schema` an object
/// or boolean.
pub fn validate_metadata(metadata: &str) -> Result<(), String> {
    if metadata.len() > METADATA_MAX_BYTES {
        return Err(format!(
            "metadata is {} bytes, over the host's {METADATA_MAX_BYTES}",
            metadata.len()
        ));
    }
    let value: Value =
        serde_json::from_str(metadata).map_err(|e| format!("metadata is not JSON: {e}"))?;
    let obj = value.as_object().ok_or("metadata must be a JSON object")?;
    match obj.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() && !name.contains('/') => {}
        _ => return Err("metadata.name must be a non-empty string without '/'".into()),
    }
    if obj.get("abi_version").and_then(Value::as_u64) != Some(u64::from(ABI_VERSION)) {
        return Err(format!("metadata.abi_version must be {ABI_VERSION}"));
    }
    match obj.get("operations").and_then(Value::as_array) {
        Some(ops) if ops.iter().all(Value::is_string) => {}
        _ => return Err("metadata.operations must be an array of strings".into()),
    }
    for key in ["title", "description", "version"] {
        if obj.get(key).is_some_and(|v| !v.is_string()) {
            return Err(format!("metadata.{key} must be a string"));
        }
    }
    if obj.get("default_enabled").is_some_and(|v| !v.is_boolean()) {
        return Err("metadata.default_enabled must be a boolean".into());
    }
    if obj
        .get("input_schema")
        .is_some_and(|v| !v.is_object() && !v.is_boolean())
    {
        return Err("metadata.input_schema must be an object or a boolean".into());
    }
    Ok(())
}

/// Reads a file of the same repository and commit, relative to the plugin directory
/// (import `sourcegraph.read_file`). `Err` carries the host's `last_error` diagnostic; budget
/// overruns are errors too, so a plugin can degrade instead of failing.
pub fn read_file(path: &str) -> Result<Vec<u8>, String> {
    sys::read_file(path)
}

/// Reads several files in one host call (import `sourcegraph.read_files`), one result per path
/// in the same order. The outer `Err` means the whole request failed (e.g. malformed request or
/// a malformed reply); per-file failures are the inner `Err`s.
pub fn read_files(paths: &[&str]) -> Result<Vec<Result<Vec<u8>, String>>, String> {
    let results = sys::read_files(paths)?;
    if results.len() != paths.len() {
        return Err(format!(
            "read_files returned {} results for {} paths",
            results.len(),
            paths.len()
        ));
    }
    Ok(results)
}

/// Decodes the little-endian reply of `read_files`: `u32 count`, then per item `u32 status`
/// (0 file, 1 error), `u32 length` and that many bytes (content, or a UTF-8 error message).
///
/// Strict: a short buffer, an unknown status or trailing bytes is an error, because a reply
/// that does not parse exactly cannot be trusted to line up with the requested paths.
pub fn decode_read_files(buf: &[u8]) -> Result<Vec<Result<Vec<u8>, String>>, String> {
    fn take_u32(rest: &mut &[u8], what: &str) -> Result<u32, String> {
        let (head, tail) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| format!("read_files reply ends inside {what}"))?;
        *rest = tail;
        Ok(u32::from_le_bytes(*head))
    }
    let mut rest = buf;
    let count = take_u32(&mut rest, "the item count")?;
    // The count is untrusted: never reserve more than the remaining bytes could describe.
    let mut items = Vec::with_capacity((count as usize).min(rest.len() / 8));
    for i in 0..count {
        let status = take_u32(&mut rest, "an item status")?;
        let len = take_u32(&mut rest, "an item length")? as usize;
        if rest.len() < len {
            return Err(format!("read_files item {i} is longer than the reply"));
        }
        let (bytes, tail) = rest.split_at(len);
        rest = tail;
        items.push(match status {
            0 => Ok(bytes.to_vec()),
            1 => Err(String::from_utf8_lossy(bytes).into_owned()),
            other => return Err(format!("read_files item {i} has unknown status {other}")),
        });
    }
    if !rest.is_empty() {
        return Err(format!(
            "read_files reply has {} trailing bytes",
            rest.len()
        ));
    }
    Ok(items)
}

/// Encodes a `read_files` reply (the inverse of [`decode_read_files`]); used by [`mock`] and
/// handy for tests that feed the decoder.
pub fn encode_read_files(items: &[Result<Vec<u8>, String>]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(items.len() as u32).to_le_bytes());
    for item in items {
        let (status, bytes): (u32, &[u8]) = match item {
            Ok(content) => (0, content),
            Err(message) => (1, message.as_bytes()),
        };
        out.extend_from_slice(&status.to_le_bytes());
        out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        out.extend_from_slice(bytes);
    }
    out
}

/// Splits a packed `(pointer << 32) | length` value into its unsigned halves.
pub fn unpack(packed: i64) -> (u32, u32) {
    let packed = packed as u64;
    ((packed >> 32) as u32, packed as u32)
}

/// Packs a pointer and a length the way `enrich` and the host imports return them.
pub fn pack(ptr: u32, len: u32) -> i64 {
    ((u64::from(ptr) << 32) | u64::from(len)) as i64
}

/// Guest memory management shared by the exports and the host import wrappers.
///
/// Every buffer crossing the boundary is a byte allocation with alignment 1 and size
/// `max(len, 1)`: the size is at least 1 so a zero-length allocation still yields a unique
/// non-zero pointer (W-16), and `dealloc` recomputes the same layout from the exact length.
mod memory {
    use std::alloc::Layout;

    fn layout(len: u32) -> Option<Layout> {
        Layout::from_size_align((len as usize).max(1), 1).ok()
    }

    /// Allocates `len` bytes; null when the request is impossible or memory is exhausted
    /// (the host treats a 0 pointer as an allocation failure rather than the guest aborting).
    pub fn alloc(len: u32) -> *mut u8 {
        match layout(len) {
            // SAFETY: the layout has a non-zero size.
            Some(layout) => unsafe { std::alloc::alloc(layout) },
            None => std::ptr::null_mut(),
        }
    }

    /// Frees a buffer from [`alloc`].
    ///
    /// # Safety
    /// `ptr` must come from [`alloc`] with this exact `len` and not have been freed.
    pub unsafe fn dealloc(ptr: *mut u8, len: u32) {
        if ptr.is_null() {
            return;
        }
        if let Some(layout) = layout(len) {
            // SAFETY: guaranteed by the caller; same layout as the allocation.
            unsafe { std::alloc::dealloc(ptr, layout) }
        }
    }

    /// Takes ownership of a host-written buffer allocated with [`alloc`].
    #[cfg(target_arch = "wasm32")]
    ///
    /// # Safety
    /// `ptr` must be a live [`alloc`] allocation of exactly `len` bytes, fully initialised.
    pub unsafe fn take(ptr: u32, len: u32) -> Vec<u8> {
        let ptr = ptr as usize as *mut u8;
        if len == 0 {
            // A zero-length buffer is a 1-byte allocation a Vec cannot own: free it here.
            unsafe { dealloc(ptr, 0) };
            return Vec::new();
        }
        // SAFETY: a Vec<u8> with capacity `len` frees with Layout(len, 1), exactly the layout
        // `alloc(len)` used, so the Vec may own the buffer (and no copy is needed).
        unsafe { Vec::from_raw_parts(ptr, len as usize, len as usize) }
    }
}

/// The real host imports, module `sourcegraph` (W-22/W-23).
#[cfg(target_arch = "wasm32")]
mod sys {
    use crate::{decode_read_files, memory, unpack};

    // Declared with distinct Rust names so they cannot clash with the public wrappers; a Wasm
    // import is only emitted when referenced, so a plugin that never calls `read_files` does not
    // import it.
    #[link(wasm_import_module = "sourcegraph")]
    unsafe extern "C" {
        #[link_name = "read_file"]
        fn host_read_file(path_ptr: *const u8, path_len: usize) -> i64;
        #[link_name = "read_files"]
        fn host_read_files(paths_ptr: *const u8, paths_len: usize) -> i64;
        #[link_name = "last_error"]
        fn host_last_error() -> i64;
    }

    /// Takes ownership of a non-zero packed host buffer.
    fn take_packed(packed: i64) -> Result<Vec<u8>, String> {
        let (ptr, len) = unpack(packed);
        if ptr == 0 {
            return Err("host returned a null buffer".into());
        }
        // SAFETY: the host allocated it with our `alloc(len)` and handed ownership to us.
        Ok(unsafe { memory::take(ptr, len) })
    }

    fn last_error() -> String {
        // SAFETY: no arguments; the result is a host buffer we own (or 0).
        let packed = unsafe { host_last_error() };
        if packed == 0 {
            return "host call failed without a diagnostic".into();
        }
        match take_packed(packed) {
            Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
            Err(e) => e,
        }
    }

    pub fn read_file(path: &str) -> Result<Vec<u8>, String> {
        // SAFETY: the host only reads `path.len()` bytes at `path.as_ptr()` during the call.
        let packed = unsafe { host_read_file(path.as_ptr(), path.len()) };
        if packed == 0 {
            return Err(last_error());
        }
        take_packed(packed)
    }

    pub fn read_files(paths: &[&str]) -> Result<Vec<Result<Vec<u8>, String>>, String> {
        let request = serde_json::to_vec(paths).map_err(|e| e.to_string())?;
        // SAFETY: as for `read_file`.
        let packed = unsafe { host_read_files(request.as_ptr(), request.len()) };
        if packed == 0 {
            return Err(last_error());
        }
        decode_read_files(&take_packed(packed)?)
    }
}

/// Off-Wasm stand-ins for the host imports, backed by [`mock`].
#[cfg(not(target_arch = "wasm32"))]
mod sys {
    pub fn read_file(path: &str) -> Result<Vec<u8>, String> {
        crate::mock::read(path)
    }

    pub fn read_files(paths: &[&str]) -> Result<Vec<Result<Vec<u8>, String>>, String> {
        let items: Vec<_> = paths.iter().map(|p| crate::mock::read(p)).collect();
        // Round-trip through the wire format so plugin tests also exercise the decoder.
        crate::decode_read_files(&crate::encode_read_files(&items))
    }
}

/// Host-target test double for the `sourcegraph` imports: a per-thread file map that
/// [`read_file`] and [`read_files`] serve when the code does not run inside Wasm.
#[cfg(not(target_arch = "wasm32"))]
pub mod mock {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    thread_local! {
        static FILES: RefCell<Option<BTreeMap<String, Vec<u8>>>> = const { RefCell::new(None) };
    }

    /// Replaces this thread's plugin directory contents with `files` (path → bytes).
    pub fn set_files<P: Into<String>, B: Into<Vec<u8>>>(files: impl IntoIterator<Item = (P, B)>) {
        let map = files
            .into_iter()
            .map(|(p, b)| (p.into(), b.into()))
            .collect();
        FILES.with(|f| *f.borrow_mut() = Some(map));
    }

    /// Forgets this thread's files: reads fail as they would outside any host.
    pub fn clear() {
        FILES.with(|f| *f.borrow_mut() = None);
    }

    pub(crate) fn read(path: &str) -> Result<Vec<u8>, String> {
        FILES.with(|f| match &*f.borrow() {
            None => Err("no host: call mock::set_files first".into()),
            Some(files) => files
                .get(path)
                .cloned()
                .ok_or_else(|| format!("{path}: file not found")),
        })
    }
}

/// Implementation details of [`plugin!`]; not part of the API.
#[doc(hidden)]
pub mod __private {
    use crate::{memory, pack};

    /// Copies a string into a fixed-size array at compile time (the custom-section static must
    /// be an array, not a reference, for its bytes to land in the section).
    pub const fn to_array<const N: usize>(s: &str) -> [u8; N] {
        let bytes = s.as_bytes();
        let mut out = [0u8; N];
        let mut i = 0;
        while i < N {
            out[i] = bytes[i];
            i += 1;
        }
        out
    }

    pub fn alloc(len: i32) -> i32 {
        memory::alloc(len as u32) as usize as i32
    }

    /// # Safety
    /// See [`memory::dealloc`].
    pub unsafe fn dealloc(ptr: i32, len: i32) {
        unsafe { memory::dealloc(ptr as u32 as usize as *mut u8, len as u32) }
    }

    /// The `enrich` export: reads the input in place (the host frees it afterwards), runs the
    /// plugin and copies the result into a fresh allocation, which therefore never aliases the
    /// input. Returns 0 only if that allocation fails.
    ///
    /// # Safety
    /// `ptr`/`len` must describe readable guest memory (the host's input buffer).
    pub unsafe fn enrich(ptr: i32, len: i32, run: fn(&[u8]) -> Vec<u8>) -> i64 {
        let (ptr, len) = (ptr as u32 as usize, len as u32 as usize);
        let input: &[u8] = if len == 0 || ptr == 0 {
            &[]
        } else {
            // SAFETY: guaranteed by the caller.
            unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }
        };
        let output = run(input);
        let Ok(out_len) = u32::try_from(output.len()) else {
            return 0;
        };
        let out = memory::alloc(out_len);
        if out.is_null() {
            return 0;
        }
        // SAFETY: `out` has room for `out_len` bytes and is a fresh allocation.
        unsafe { std::ptr::copy_nonoverlapping(output.as_ptr(), out, output.len()) };
        pack(out as usize as u32, out_len)
    }
}

/// Declares a plugin: embeds its metadata and exports the ABI around its `enrich` function.
///
/// ```ignore
/// sourcegraph_plugin_sdk::plugin! {
///     metadata: include_str!("metadata.json"),   // or a string literal
///     enrich: my_enrich,                          // fn(Input) -> Result<Vec<Attachment>, String>
/// }
/// ```
///
/// Invoke it once per crate, at the crate root of a `cdylib`. It defines:
/// * a `#[used]` static placed in the custom section [`METADATA_SECTION`] (on Wasm; a second
///   invocation is a duplicate-symbol error, which keeps the section unique);
/// * the exports `alloc`, `dealloc`, `enrich` (on Wasm; under other Rust names so the author's
///   function may itself be called `enrich`);
/// * `pub fn __sourcegraph_run(&[u8]) -> Vec<u8>`, the [`run`] entry point for host-side tests;
/// * on non-Wasm targets with `cfg(test)`, a test that the metadata passes [`validate_metadata`].
#[macro_export]
macro_rules! plugin {
    (metadata: $metadata:expr, enrich: $enrich:path $(,)?) => {
        const __SOURCEGRAPH_PLUGIN_METADATA_JSON: &str = $metadata;

        #[cfg_attr(target_arch = "wasm32", unsafe(link_section = "sourcegraph.plugin.v1"))]
        #[used]
        #[allow(dead_code)]
        static __SOURCEGRAPH_PLUGIN_METADATA: [u8; __SOURCEGRAPH_PLUGIN_METADATA_JSON.len()] =
            $crate::__private::to_array(__SOURCEGRAPH_PLUGIN_METADATA_JSON);

        /// Runs the plugin on raw `enrich` input and returns the output JSON (see
        /// `sourcegraph_plugin_sdk::run`); the `enrich` export and host-side tests call it.
        #[doc(hidden)]
        pub fn __sourcegraph_run(input: &[u8]) -> ::std::vec::Vec<u8> {
            $crate::run(__SOURCEGRAPH_PLUGIN_METADATA_JSON, input, $enrich)
        }

        #[cfg(target_arch = "wasm32")]
        #[unsafe(export_name = "alloc")]
        extern "C" fn __sourcegraph_alloc(len: i32) -> i32 {
            $crate::__private::alloc(len)
        }

        #[cfg(target_arch = "wasm32")]
        #[unsafe(export_name = "dealloc")]
        extern "C" fn __sourcegraph_dealloc(ptr: i32, len: i32) {
            // SAFETY: the ABI obliges the host to pass back a pointer from `alloc` with its
            // exact length.
            unsafe { $crate::__private::dealloc(ptr, len) }
        }

        #[cfg(target_arch = "wasm32")]
        #[unsafe(export_name = "enrich")]
        extern "C" fn __sourcegraph_enrich(ptr: i32, len: i32) -> i64 {
            // SAFETY: the host passes the buffer it filled after calling `alloc(len)`.
            unsafe { $crate::__private::enrich(ptr, len, __sourcegraph_run) }
        }

        #[cfg(all(test, not(target_arch = "wasm32")))]
        mod __sourcegraph_plugin_metadata {
            #[test]
            fn metadata_is_valid_for_the_host() {
                if let Err(e) = $crate::validate_metadata(super::__SOURCEGRAPH_PLUGIN_METADATA_JSON)
                {
                    panic!("{e}");
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const META: &str = r#"{"name":"t-plugin","abi_version":2,"operations":["read"]}"#;

    fn input_json() -> Value {
        json!({
            "abi_version": 2, "operation": "read_many", "repository": "example/knowledge",
            "commit": "0123456789abcdef0123456789abcdef01234567", "root": "docs",
            "args": {"site_url": "https://x"},
            "files": [
                {"item_id": "read-0", "path": "a.md", "repository_path": "docs/a.md",
                 "start_line": 2, "end_line": 8, "content": "x", "truncated": false,
                 "has_more": true, "next_start_line": 9},
                {"item_id": "read-2", "path": "b.md", "repository_path": "docs/b.md",
                 "start_line": 1, "end_line": 1, "content": "", "truncated": true,
                 "has_more": null}
            ]
        })
    }

    fn output(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("output is JSON")
    }

    #[test]
    fn parses_abi2_input_with_null_and_absent_optionals() {
        let input: Input = serde_json::from_value(input_json()).unwrap();
        assert_eq!(input.root, "docs");
        assert_eq!(input.files[0].has_more, Some(true));
        assert_eq!(input.files[0].next_start_line, Some(9));
        assert_eq!(input.files[1].has_more, None);
        assert_eq!(input.files[1].next_start_line, None);
        assert!(input.files[1].truncated);
        assert_eq!(input.arg_str("site_url"), Ok(Some("https://x")));
        assert_eq!(input.arg_str("missing"), Ok(None));
    }

    #[test]
    fn args_default_to_an_empty_object() {
        let mut v = input_json();
        v["args"] = Value::Null;
        let input: Input = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(input.args, json!({}));
        v.as_object_mut().unwrap().remove("args");
        let input: Input = serde_json::from_value(v).unwrap();
        assert_eq!(input.args, json!({}));
        assert!(input.arg_str("x").unwrap().is_none());
    }

    #[test]
    fn mistyped_string_arg_is_an_error() {
        let mut v = input_json();
        v["args"] = json!({"site_url": 3});
        let input: Input = serde_json::from_value(v).unwrap();
        assert!(input.arg_str("site_url").is_err());
    }

    #[test]
    fn attachments_serialise_with_optional_item_id() {
        let out = Output {
            attachments: vec![Attachment::item("read-0", "a"), Attachment::batch("b")],
        };
        assert_eq!(
            serde_json::to_string(&out).unwrap(),
            r#"{"attachments":[{"item_id":"read-0","text":"a"},{"text":"b"}]}"#
        );
    }

    #[test]
    fn run_returns_the_plugins_attachments() {
        let input = serde_json::to_vec(&input_json()).unwrap();
        let out = run(META, &input, |input| {
            Ok(input
                .files
                .iter()
                .map(|f| Attachment::item(&f.item_id, &f.path))
                .collect())
        });
        assert_eq!(
            output(&out),
            json!({"attachments": [
                {"item_id": "read-0", "text": "a.md"},
                {"item_id": "read-2", "text": "b.md"}
            ]})
        );
    }

    #[test]
    fn run_with_no_attachments_is_an_empty_array() {
        let input = serde_json::to_vec(&input_json()).unwrap();
        assert_eq!(run(META, &input, |_| Ok(vec![])), br#"{"attachments":[]}"#);
    }

    #[test]
    fn plugin_error_becomes_one_whole_batch_attachment() {
        let input = serde_json::to_vec(&input_json()).unwrap();
        let out = run(META, &input, |_| Err("related.json missing".into()));
        assert_eq!(
            output(&out),
            json!({"attachments": [{"text": "t-plugin: related.json missing"}]})
        );
    }

    #[test]
    fn invalid_input_becomes_one_whole_batch_attachment() {
        for bad in [&b""[..], b"{", b"[]", b"{\"abi_version\":2}", b"\xff\xfe"] {
            let out = output(&run(META, bad, |_| panic!("must not be called")));
            let atts = out["attachments"].as_array().unwrap();
            assert_eq!(atts.len(), 1);
            assert!(atts[0].get("item_id").is_none());
            let text = atts[0]["text"].as_str().unwrap();
            assert!(text.starts_with("t-plugin: invalid enrich input"), "{text}");
        }
    }

    #[test]
    fn plugin_name_falls_back() {
        assert_eq!(plugin_name(META), "t-plugin");
        assert_eq!(plugin_name("not json"), "plugin");
    }

    #[test]
    fn metadata_validation() {
        assert!(validate_metadata(META).is_ok());
        let full = r#"{"name":"related-content","title":"Related content","description":"d",
            "version":"0.1.0","abi_version":2,"operations":["read","read_many"],
            "default_enabled":true,"input_schema":{"type":"object"},"extra":1}"#;
        assert!(validate_metadata(full).is_ok());
        for bad in [
            "[]",
            r#"{"abi_version":2,"operations":[]}"#,
            r#"{"name":"","abi_version":2,"operations":[]}"#,
            r#"{"name":"a/b","abi_version":2,"operations":[]}"#,
            r#"{"name":"x","abi_version":1,"operations":[]}"#,
            r#"{"name":"x","abi_version":"2","operations":[]}"#,
            r#"{"name":"x","abi_version":2}"#,
            r#"{"name":"x","abi_version":2,"operations":[1]}"#,
            r#"{"name":"x","abi_version":2,"operations":[],"default_enabled":"true"}"#,
            r#"{"name":"x","abi_version":2,"operations":[],"title":1}"#,
            r#"{"name":"x","abi_version":2,"operations":[],"input_schema":"s"}"#,
        ] {
            assert!(validate_metadata(bad).is_err(), "{bad}");
        }
        let huge = format!(
            r#"{{"name":"x","abi_version":2,"operations":[],"description":"{}"}}"#,
            "a".repeat(METADATA_MAX_BYTES)
        );
        assert!(validate_metadata(&huge).is_err());
    }

    #[test]
    fn read_files_decoding_round_trips() {
        let items = vec![
            Ok(b"# Title\n".to_vec()),
            Err("missing.md: not found".to_owned()),
            Ok(Vec::new()),
        ];
        let wire = encode_read_files(&items);
        assert_eq!(&wire[..4], &3u32.to_le_bytes());
        assert_eq!(decode_read_files(&wire), Ok(items));
        assert_eq!(decode_read_files(&0u32.to_le_bytes()), Ok(vec![]));
    }

    #[test]
    fn read_files_decoding_is_exact_little_endian() {
        let wire = [
            1, 0, 0, 0, // count
            0, 0, 0, 0, // status file
            2, 0, 0, 0, // length
            b'h', b'i',
        ];
        assert_eq!(decode_read_files(&wire), Ok(vec![Ok(b"hi".to_vec())]));
    }

    #[test]
    fn read_files_decoding_rejects_malformed_replies() {
        let good = encode_read_files(&[Ok(b"abc".to_vec()), Err("e".into())]);
        // Every strict prefix is short somewhere.
        for cut in 0..good.len() {
            assert!(decode_read_files(&good[..cut]).is_err(), "prefix {cut}");
        }
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode_read_files(&trailing).is_err());
        let mut bad_status = good.clone();
        bad_status[4] = 7;
        assert!(decode_read_files(&bad_status).is_err());
        // A huge count with no items must fail, not reserve gigabytes.
        assert!(decode_read_files(&u32::MAX.to_le_bytes()).is_err());
        let huge_len = [1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff];
        assert!(decode_read_files(&huge_len).is_err());
    }

    #[test]
    fn pack_and_unpack_are_unsigned() {
        assert_eq!(
            unpack(pack(0x8000_0000, 0xffff_ffff)),
            (0x8000_0000, 0xffff_ffff)
        );
        assert_eq!(pack(1, 0), 1 << 32);
        assert!(
            pack(0xffff_ffff, 1) < 0,
            "high bit set packs to a negative i64"
        );
    }

    #[test]
    fn mock_host_reads() {
        mock::set_files([("a.md", &b"A"[..]), ("empty", &b""[..])]);
        assert_eq!(read_file("a.md"), Ok(b"A".to_vec()));
        assert_eq!(read_file("empty"), Ok(vec![]));
        assert!(read_file("nope").is_err());
        let got = read_files(&["a.md", "nope", "empty"]).unwrap();
        assert_eq!(got[0], Ok(b"A".to_vec()));
        assert!(got[1].is_err());
        assert_eq!(got[2], Ok(vec![]));
        mock::clear();
        assert!(read_file("a.md").is_err());
    }

    #[test]
    fn ordered_map_keeps_document_order() {
        let m: OrderedMap<u32> = serde_json::from_str(r#"{"z":1,"a":2,"m":3}"#).unwrap();
        let keys: Vec<_> = m.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["z", "a", "m"]);
        assert_eq!(m.get("a"), Some(&2));
        assert!(serde_json::from_str::<OrderedMap<u32>>("[]").is_err());
    }

    #[test]
    fn memory_zero_length_allocations_are_non_null_and_freeable() {
        let p = memory::alloc(0);
        assert!(!p.is_null());
        unsafe { memory::dealloc(p, 0) };
        let p = memory::alloc(5);
        assert!(!p.is_null());
        unsafe {
            std::ptr::copy_nonoverlapping(b"hello".as_ptr(), p, 5);
            memory::dealloc(p, 5);
        }
    }
}
