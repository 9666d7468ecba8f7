//! The compile child on its own, for this crate's tests (`CARGO_BIN_EXE_wasmplugin-compile-child`)
//! and for embedders without a program of their own to start: `csg` is its own compile child.

fn main() -> std::process::ExitCode {
    wasmplugin::runtime::compile_child_if_asked().unwrap_or_else(|| {
        eprintln!(
            "wasmplugin-compile-child: started by the plugin runtime with {} only",
            wasmplugin::runtime::COMPILE_CHILD_ARG
        );
        std::process::ExitCode::from(2)
    })
}
