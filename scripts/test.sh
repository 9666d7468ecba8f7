#!/usr/bin/env bash
# Runs every test: the Rust workspace (unit, integration, property tests) and the
# end-to-end tests that drive the real `csg` binary with the official Python MCP SDK.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-test-venv

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}
# One build: `cargo test` also builds target/debug/csg (the CLI's integration tests need it),
# with the same feature set, so a separate `cargo build` would only compile dependencies twice.
cargo test --locked --workspace

echo "== end-to-end (Python MCP SDK against target/debug/csg)"
CSG_BIN="$PWD/target/debug/csg" .venv/bin/python -m pytest -q tests/e2e
