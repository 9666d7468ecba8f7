#!/usr/bin/env bash
# Runs every check CI runs: formatting, clippy with warnings denied, the committed Wasm fixtures
# against their sources (when the wasm32 target is installed), the Rust workspace (unit,
# integration, property tests), the end-to-end tests that drive the real `csg` binary with
# the official Python MCP SDK, the website's tests in headless Chromium, and the container image
# (built with podman from Debian packages and run end to end).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-test-venv

export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

echo "== cargo fmt --check"
cargo fmt --all -- --check

echo "== cargo clippy (warnings are errors)"
cargo clippy --locked --workspace --all-targets -- -D warnings

echo "== Wasm fixtures match their sources"
if rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  crates/wasmplugin/testdata/build-fixture.sh --check
else
  echo "SKIPPED: fixture check needs the wasm32-unknown-unknown target (rustup target add wasm32-unknown-unknown); the committed artifacts are used as they are"
fi

# One build: `cargo test` also builds target/debug/csg (the CLI's integration tests need it),
# with the same feature set, so a separate `cargo build` would only compile dependencies twice.
echo "== cargo test"
cargo test --locked --workspace

# The server-plugin host without its `python` feature: it must build, lint clean and report
# itself unavailable (P-1); the binary without it must build. Only the crates above the host
# are checked again.
echo "== pyplugin without Python"
cargo clippy --locked -p pyplugin --no-default-features --all-targets -- -D warnings
cargo clippy --locked -p csg --no-default-features -- -D warnings
cargo test --locked -p pyplugin --no-default-features

echo "== end-to-end (Python MCP SDK against target/debug/csg)"
CSG_BIN="$PWD/target/debug/csg" .venv/bin/python -m pytest -q tests/e2e

echo "== website in a real browser (headless Chromium, playwright-core; screenshots in target/browser-artifacts)"
(cd tests/browser && CSG_BIN="$PWD/../../target/debug/csg" npm test --silent)

# The image with the debug binary built above (a cold release build would take most of CI's
# time budget; `scripts/image.sh` alone builds the release image), on a debootstrapped base
# (cached in target/image/), then runs it with podman (~10 s).
echo "== container image (scripts/test-image.sh: podman, the dev binary, the Python MCP SDK)"
CSG_IMAGE_PROFILE=dev scripts/test-image.sh
