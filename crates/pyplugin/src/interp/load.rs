//! Loading an epoch: the plugin files listed and read, each compiled and run into a fresh
//! module, its names (P-4), tables (P-8) and `REQUIRES` (P-9) checked; then `on_startup`.

use super::convert::to_value;
use super::traceback::describe;
use super::{Interpreter, Payload, PyFile};
use crate::ToolCatalog;
use crate::hookset::{self, Hook};
use crate::names::{self, Binding};
use crate::startup_payload;
use crate::tables::{self, FileTables, Tables};
use crate::{EpochData, FileStatus, HostConfig, HostError, MAX_FILE_BYTES, Rejection};
use pyo3::prelude::*;
use pyo3::types::{PyModule, PyString};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::SystemTime;

impl Interpreter {
    pub(super) fn load_epoch(
        &self,
        py: Python<'_>,
        config: &HostConfig,
        epoch: u64,
    ) -> (Result<EpochData, HostError>, Option<Vec<PyFile>>) {
        let names = match list_plugin_files(&config.directory) {
            Ok(names) => names,
            Err(error) => return (Err(HostError::Directory(error)), None),
        };
        let mut files = Vec::new();
        let mut statuses = Vec::new();
        let mut rejected = Vec::new();
        let mut merged = Tables::default();
        let mut derived = Sha256::new();
        let mut any_derived = false;
        for (index, name) in names.into_iter().enumerate() {
            let source = match read_source(&config.directory.join(&name)) {
                Ok(source) => source,
                Err(reason) => {
                    rejected.push(Rejection {
                        file: name,
                        reasons: vec![reason],
                    });
                    continue;
                }
            };
            let module_name = format!("_csg_plugin_h{}_e{epoch}_{index}", self.id);
            match self.load_file(py, &name, &source, &module_name, &config.tools) {
                Ok((hooks, tables, table_names)) => {
                    if hooks.contains_key(&Hook::SourceFile) {
                        any_derived = true;
                        derived.update(name.as_bytes());
                        derived.update([0]);
                        derived.update(&source);
                        derived.update([0]);
                    }
                    merged.merge(&name, tables);
                    let mut hook_names: Vec<Hook> = hooks.keys().copied().collect();
                    hook_names.sort();
                    statuses.push(FileStatus {
                        file: name.clone(),
                        hooks: hook_names.iter().map(|h| h.name().to_owned()).collect(),
                        tables: table_names,
                        sha256: hex(&Sha256::digest(&source)),
                    });
                    files.push(PyFile {
                        file: name.clone(),
                        module_name,
                        hooks,
                    });
                }
                Err(reasons) => {
                    rejected.push(Rejection {
                        file: name,
                        reasons,
                    });
                }
            }
        }
        let mut defined = [false; Hook::ALL.len()];
        for (i, hook) in Hook::ALL.iter().enumerate() {
            defined[i] = files.iter().any(|f| f.hooks.contains_key(hook));
        }
        let failures = statuses.iter().map(|_| Default::default()).collect();
        let data = EpochData {
            number: epoch,
            loaded_at: SystemTime::now(),
            files: statuses,
            rejected,
            tables: merged,
            derived_fingerprint: if any_derived {
                hex(&derived.finalize())
            } else {
                String::new()
            },
            defined,
            disabled: Mutex::new(Vec::new()),
            failures,
            release: None,
        };
        (Ok(data), Some(files))
    }

    /// Compiles and runs one file into a fresh module, then checks its names (P-4), tables
    /// (P-8) and `REQUIRES` (P-9). `Err` lists every reason to reject it. All of it is one
    /// watched step: besides the top-level code, looking at the names runs plugin code too (a
    /// `__class__` property, a `__signature__`, a table's `__del__`).
    #[allow(clippy::type_complexity)]
    fn load_file(
        &self,
        py: Python<'_>,
        name: &str,
        source: &[u8],
        module_name: &str,
        catalog: &ToolCatalog,
    ) -> Result<(HashMap<Hook, Py<PyAny>>, FileTables, Vec<String>), Vec<String>> {
        let (loaded, interrupted) = self.timed(format!("{name} (loading)"), || {
            let loaded = self.load_module(py, name, source, module_name, catalog);
            // Whatever the check leaves (the module on a rejection, the objects it made) is
            // freed inside the step: a `__del__` runs under the watchdog.
            loaded.map_err(|error| {
                let reasons = error.into_reasons(py, name);
                let _ = py
                    .import("sys")
                    .and_then(|s| s.getattr("modules"))
                    .and_then(|m| m.del_item(module_name));
                reasons
            })
        });
        if interrupted {
            return Err(vec![format!(
                "{name}: loading it (its top-level code, or the names it defines as the host \
                 inspected them) ran longer than the {} ms time limit and was interrupted",
                self.timeout.as_millis()
            )]);
        }
        loaded
    }

    #[allow(clippy::type_complexity)]
    fn load_module(
        &self,
        py: Python<'_>,
        name: &str,
        source: &[u8],
        module_name: &str,
        catalog: &ToolCatalog,
    ) -> Result<(HashMap<Hook, Py<PyAny>>, FileTables, Vec<String>), LoadError> {
        let builtins = py.import("builtins")?;
        let module = PyModule::new(py, module_name)?;
        module.setattr("__file__", name)?;
        // Registered under a name of this load only (never reused), because `dataclasses`
        // and friends look a class's module up in `sys.modules` while the file runs.
        py.import("sys")?
            .getattr("modules")?
            .set_item(module_name, &module)?;
        // Compiled from the file's bytes, as CPython compiles a file: a UTF-8 BOM and a PEP 263
        // coding cookie are honoured, and bytes that are not valid in the declared (or the
        // default UTF-8) encoding are a SyntaxError naming the line.
        let code = builtins.getattr("compile")?.call1((
            pyo3::types::PyBytes::new(py, source),
            name,
            "exec",
            0,
            true,
        ))?;
        let (ran, interrupted) = self.timed(format!("{name} (top-level code)"), || {
            builtins
                .getattr("exec")
                .and_then(|exec| exec.call1((code, module.dict())))
        });
        if interrupted {
            return Err(LoadError::Reasons(vec![format!(
                "{name}: its top-level code ran longer than the {} ms time limit",
                self.timeout.as_millis()
            )]));
        }
        ran?;
        let types = py.import("types")?;
        let module_type = types.getattr("ModuleType")?;
        let function_type = types.getattr("FunctionType")?;
        let inspect = py.import("inspect")?;
        let mut reasons = Vec::new();
        let mut hooks = HashMap::new();
        let mut tables = FileTables::default();
        let mut table_names = Vec::new();
        // A snapshot of the names: inspecting a value may run plugin code that changes the
        // module's dict, which a live iteration would not survive.
        for (key, value) in module.dict().copy()?.iter() {
            let Ok(key) = key.cast_into::<PyString>() else {
                continue;
            };
            let key = key.to_string_lossy().into_owned();
            if key.starts_with('_') {
                continue;
            }
            // An error here (a `__class__` property that raises, or the watchdog's interrupt)
            // rejects the file: going on would run the same plugin code again.
            let binding = if value.is_instance(&module_type)? {
                Binding::Module
            } else if value.is_instance(&function_type)?
                && value
                    .getattr("__module__")
                    .ok()
                    .and_then(|m| m.extract::<String>().ok())
                    .as_deref()
                    == Some(module_name)
            {
                Binding::LocalFunction
            } else {
                Binding::Other
            };
            if let Err(reason) = names::check_name(name, &key, binding) {
                reasons.push(reason);
                continue;
            }
            if let Some(hook) = Hook::from_name(&key) {
                let one_argument = inspect
                    .getattr("signature")
                    .and_then(|signature| signature.call1((&value,)))
                    .and_then(|signature| signature.getattr("bind")?.call1((py.None(),)))
                    .is_ok();
                if one_argument {
                    hooks.insert(hook, value.unbind());
                } else {
                    reasons.push(format!(
                        "{name}: {key} must take exactly one argument (the payload)"
                    ));
                }
            } else if key == hookset::REQUIRES {
                match to_value(&value) {
                    Ok(pins) => {
                        if let Err(reason) = tables::check_requires(&pins) {
                            reasons.push(format!("{name}: {reason}"));
                        }
                    }
                    Err(why) => reasons.push(format!("{name}: REQUIRES {why}")),
                }
            } else if hookset::TABLES.contains(&key.as_str()) {
                let checked = to_value(&value)
                    .map_err(|why| format!("{key} {why}"))
                    .and_then(|table| {
                        tables::check_table(&key, &table, name, catalog, &mut tables)
                    });
                match checked {
                    Ok(()) => table_names.push(key),
                    Err(reason) => reasons.push(format!("{name}: {reason}")),
                }
            }
        }
        if reasons.is_empty() {
            Ok((hooks, tables, table_names))
        } else {
            Err(LoadError::Reasons(reasons))
        }
    }

    pub(super) fn startup(
        &self,
        py: Python<'_>,
        data: &EpochData,
        files: &[PyFile],
        config: &HostConfig,
    ) {
        if !data.defined[0] {
            return;
        }
        let names: Vec<String> = data.files.iter().map(|f| f.file.clone()).collect();
        let payload = startup_payload(
            data.number,
            &names,
            Value::Object(config.startup_settings.clone()),
            Value::Object(config.secrets.clone()),
        );
        let mut payload = Payload::Value(payload);
        let _ = self.pipeline(py, data, files, Hook::Startup, &mut payload, None);
    }
}

/// Why a file did not load: Python raised, or the checks found reasons.
enum LoadError {
    Python(PyErr),
    Reasons(Vec<String>),
}

impl From<PyErr> for LoadError {
    fn from(error: PyErr) -> Self {
        LoadError::Python(error)
    }
}

impl LoadError {
    fn into_reasons(self, py: Python<'_>, file: &str) -> Vec<String> {
        match self {
            LoadError::Python(error) => vec![format!("{file}: {}", describe(py, &error))],
            LoadError::Reasons(reasons) => reasons,
        }
    }
}

/// The `.py` files of the plugins directory in sorted name order (P-6). Sub-directories
/// (`__pycache__` among them), hidden files and other extensions are ignored.
fn list_plugin_files(directory: &std::path::Path) -> Result<Vec<String>, String> {
    let entries = std::fs::read_dir(directory).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            "it does not exist: create it, or point SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY at the right place".to_owned()
        }
        _ => e.kind().to_string(),
    })?;
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if !name.ends_with(".py") || name.starts_with('.') {
            continue;
        }
        if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_file()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

fn read_source(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if size > MAX_FILE_BYTES {
        return Err(format!(
            "{name}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit of a plugin file"
        ));
    }
    // Bytes, not text: the encoding is Python's to decide (a BOM, a coding cookie).
    std::fs::read(path).map_err(|e| format!("{name}: could not be read ({})", e.kind()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
