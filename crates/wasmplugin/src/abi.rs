//! The JSON ABI 2 as the host checks it, below both discovery and the runtime: the static
//! checks of an artifact before it is compiled (W-1, W-23, W-24), the limits they check
//! against, and the shape of an execution's output (W-16).
//!
//! The static checks: valid core module, the four exports with their exact types, no import
//! but the `sourcegraph` host functions, one 32-bit memory whose initial size fits MEMORY_MIB.
//! They run at discovery too (W-6: `availability` shows a module that can never run as
//! broken), and again before Cranelift so that a wrong module costs a validation pass, not a compile,
//! and so that each failure gets its own code: the pooling allocator would otherwise reject an
//! oversized memory inside `Module::new` with an error indistinguishable from any other.

use wasmparser::types::{EntityType, Types, TypesRef};
use wasmparser::{CompositeInnerType, ValType, Validator};

use crate::{Code, Diagnostic, PluginConfig};
use serde_json::Value;

/// The import module of the host functions (W-22).
pub(crate) const HOST_MODULE: &str = "sourcegraph";

const PAGE_BYTES: u64 = 65_536;

/// Largest initial table an instance slot holds (Rust plugins use a few hundred entries).
pub(crate) const TABLE_ELEMENTS: usize = 10_000;

/// Largest linear memory of a 32-bit module: MEMORY_MIB is clamped to it.
const MAX_MEMORY_BYTES: u64 = 4 << 30;

/// MEMORY_MIB in bytes, clamped to what a 32-bit module can address.
pub(crate) fn memory_bytes(config: &PluginConfig) -> u64 {
    config
        .memory_mib
        .saturating_mul(1 << 20)
        .min(MAX_MEMORY_BYTES)
}

/// The limits the static module checks use, at discovery and before compiling alike.
pub(crate) fn static_limits(config: &PluginConfig) -> StaticLimits {
    StaticLimits {
        memory_bytes: memory_bytes(config),
        table_elements: TABLE_ELEMENTS as u64,
    }
}

/// Limits a module is checked against.
pub(crate) struct StaticLimits {
    /// MEMORY_MIB in bytes.
    pub memory_bytes: u64,
    /// Largest initial table the instance pool holds.
    pub table_elements: u64,
}

/// Checks `bytes`; Ok means the module may be compiled and linked.
pub(crate) fn check(bytes: &[u8], limits: &StaticLimits) -> Result<(), Diagnostic> {
    let types = Validator::new().validate_all(bytes).map_err(|error| {
        // wasmparser's message describes the guest's bytes only (no host detail) and tells the
        // plugin author what is wrong; it is cut to keep the diagnostic line short.
        Diagnostic::new(
            Code::Artifact,
            format!(
                "not a valid WebAssembly module: {}",
                short(&error.to_string())
            ),
        )
    })?;
    let view = types.as_ref();
    let (Some(imports), Some(exports)) = (view.core_imports(), view.core_exports()) else {
        return Err(Diagnostic::new(
            Code::Artifact,
            "a component is not a plugin; plugins are core modules",
        ));
    };
    check_imports(&types, imports)?;
    check_exports(&types, exports)?;
    check_memory(view, limits)?;
    check_table(view, limits)
}

/// Only the `sourcegraph` host functions, each with its exact type (W-22, W-23, W-24).
fn check_imports<'a>(
    types: &Types,
    imports: impl Iterator<Item = (&'a str, &'a str, EntityType)>,
) -> Result<(), Diagnostic> {
    for (module, name, ty) in imports {
        if module != HOST_MODULE {
            return Err(abi(format!(
                "imports {}::{}; only the `sourcegraph` host functions exist (no WASI)",
                short(module),
                short(name)
            )));
        }
        let wanted: (&[ValType], &[ValType]) = match name {
            "read_file" | "read_files" => (&[ValType::I32, ValType::I32], &[ValType::I64]),
            "last_error" => (&[], &[ValType::I64]),
            _ => {
                return Err(abi(format!(
                    "imports unknown host function sourcegraph::{}",
                    short(name)
                )));
            }
        };
        if signature(types, ty) != Some(wanted) {
            return Err(abi(format!(
                "imports sourcegraph::{name} with the wrong type"
            )));
        }
    }
    Ok(())
}

/// The memory and the three functions of the ABI exported, each with its exact type (W-1).
fn check_exports<'a>(
    types: &Types,
    exports: impl Iterator<Item = (&'a str, EntityType)>,
) -> Result<(), Diagnostic> {
    let mut memory_found = false;
    let mut funcs_found = [false; 3];
    for (name, ty) in exports {
        let wanted: (usize, &[ValType], &[ValType]) = match name {
            "memory" => {
                match ty {
                    EntityType::Memory(memory) if !memory.memory64 && !memory.shared => {
                        memory_found = true
                    }
                    _ => {
                        return Err(abi(
                            "exports `memory` that is not a 32-bit unshared linear memory".into(),
                        ));
                    }
                }
                continue;
            }
            "alloc" => (0, &[ValType::I32], &[ValType::I32]),
            "dealloc" => (1, &[ValType::I32, ValType::I32], &[]),
            "enrich" => (2, &[ValType::I32, ValType::I32], &[ValType::I64]),
            _ => continue,
        };
        if signature(types, ty) != Some((wanted.1, wanted.2)) {
            return Err(abi(format!("exports `{name}` with the wrong type")));
        }
        funcs_found[wanted.0] = true;
    }
    if !memory_found {
        return Err(abi("does not export `memory`".into()));
    }
    for (found, name) in funcs_found.iter().zip(["alloc", "dealloc", "enrich"]) {
        if !found {
            return Err(abi(format!("does not export `{name}`")));
        }
    }
    Ok(())
}

/// Exactly one linear memory, its initial size within MEMORY_MIB (W-26).
fn check_memory(view: TypesRef<'_>, limits: &StaticLimits) -> Result<(), Diagnostic> {
    if view.memory_count() != 1 {
        return Err(abi(format!(
            "declares {} linear memories; the ABI has exactly one",
            view.memory_count()
        )));
    }
    let memory = view.memory_at(0);
    let page = memory.page_size_log2.map_or(PAGE_BYTES, |log2| {
        1u64.checked_shl(log2).unwrap_or(u64::MAX)
    });
    let initial = memory.initial.saturating_mul(page);
    if initial > limits.memory_bytes {
        return Err(Diagnostic::new(
            Code::Memory,
            format!(
                "initial linear memory of {} MiB is over MEMORY_MIB ({} MiB)",
                initial.div_ceil(1 << 20),
                limits.memory_bytes >> 20
            ),
        ));
    }
    Ok(())
}

/// At most one table, within what an instance slot holds.
fn check_table(view: TypesRef<'_>, limits: &StaticLimits) -> Result<(), Diagnostic> {
    if view.table_count() > 1 {
        return Err(Diagnostic::new(
            Code::Artifact,
            "the module declares more than one table; the host allows one",
        ));
    }
    if view.table_count() == 1 && view.table_at(0).initial > limits.table_elements {
        return Err(Diagnostic::new(
            Code::Artifact,
            format!(
                "the module's table is over the host's limit of {} elements",
                limits.table_elements
            ),
        ));
    }
    Ok(())
}

/// Parameter and result types of a function entity (None for any other kind of entity).
fn signature(types: &Types, ty: EntityType) -> Option<(&[ValType], &[ValType])> {
    let (EntityType::Func(id) | EntityType::FuncExact(id)) = ty else {
        return None;
    };
    match &types[id].composite_type.inner {
        CompositeInnerType::Func(func) => Some((func.params(), func.results())),
        _ => None,
    }
}

fn abi(what: String) -> Diagnostic {
    Diagnostic::new(Code::Abi, format!("the module {what}"))
}

/// Untrusted or verbose text cut to a length that keeps a diagnostic on one short line.
fn short(text: &str) -> String {
    const MAX: usize = 120;
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

/// The `attachments` array of one execution's output, or why the output is not the ABI 2
/// shape `{"attachments":[…]}` (W-16): not JSON, not an object, no array. The runtime uses it
/// too, so an instance whose output is invalid is never parked for reuse (W-32).
pub(crate) fn attachments_of(output: &str) -> Result<Vec<Value>, String> {
    match serde_json::from_str::<Value>(output) {
        Ok(Value::Object(mut fields)) => match fields.remove("attachments") {
            Some(Value::Array(list)) => Ok(list),
            _ => Err("output has no `attachments` array".into()),
        },
        Ok(_) => Err("output is not a JSON object".into()),
        Err(error) => Err(format!("output is not valid JSON: {error}")),
    }
}
