#!/usr/bin/env bash
# Rebuilds the committed Wasm fixtures of the plugin host's tests (SPEC W-37) from their Rust
# source and checks them. Idempotent: an artifact is only rewritten when its bytes change.
#
#   crates/wasmplugin/testdata/build-fixture.sh           # rebuild, update changed artifacts
#   crates/wasmplugin/testdata/build-fixture.sh --check   # rebuild, fail if any artifact differs
#
# Needs the wasm32-unknown-unknown target (`rustup target add wasm32-unknown-unknown`) and
# python3; CI and the host's tests need neither, they use the committed artifacts.
set -euo pipefail
check=false
case "${1:-}" in
  --check) check=true ;;
  "") ;;
  *) echo "build-fixture: unknown argument $1 (expected nothing or --check)" >&2; exit 2 ;;
esac
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cd "$root"

target=wasm32-unknown-unknown
if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  echo "build-fixture: the $target target is missing: rustup target add $target" >&2
  exit 1
fi

# package name -> artifact name (<metadata name>.sourcegraph.wasm)
packages=(echo reader related-content evidence-chain)

# Size over speed, no debug info, no symbol names (the `name` section is most of the rest), one
# codegen unit with LTO so unused SDK code is dropped. Profile settings come from the
# environment so the workspace's own release profile stays as it is. The custom section
# `sourcegraph.plugin.v1` survives `strip = "symbols"` (checked below).
export CARGO_PROFILE_RELEASE_OPT_LEVEL=s
export CARGO_PROFILE_RELEASE_LTO=true
export CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1
export CARGO_PROFILE_RELEASE_DEBUG=false
export CARGO_PROFILE_RELEASE_STRIP=symbols
export CARGO_PROFILE_RELEASE_PANIC=abort
export CARGO_PROFILE_RELEASE_INCREMENTAL=false
# Panic-location strings embed source paths: keep the builder's home directory and checkout
# location out of the committed bytes (and the artifacts reproducible across machines).
cargo_home="${CARGO_HOME:-$HOME/.cargo}"
export RUSTFLAGS="--remap-path-prefix=$cargo_home/registry/src=/cargo/registry/src --remap-path-prefix=$root=."

args=()
for p in "${packages[@]}"; do args+=(-p "$p"); done
cargo build --locked --release --target "$target" "${args[@]}"

target_dir="$(cargo metadata --locked --format-version 1 --no-deps |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"

artifacts=()
stale=false
for p in "${packages[@]}"; do
  built="$target_dir/$target/release/${p//-/_}.wasm"
  dest="$here/$p.sourcegraph.wasm"
  if cmp -s "$built" "$dest"; then
    echo "build-fixture: $p.sourcegraph.wasm unchanged"
  elif $check; then
    echo "build-fixture: $p.sourcegraph.wasm differs from what its source builds to; run $0 and commit" >&2
    stale=true
  else
    cp "$built" "$dest.tmp" && mv "$dest.tmp" "$dest"
    echo "build-fixture: $p.sourcegraph.wasm updated"
  fi
  artifacts+=("$dest")
done

if $stale; then
  exit 1
fi

# Contract check: exactly one metadata section whose name matches the file, ABI 2, the four
# exports, and imports from module `sourcegraph` only (no WASI, no `env`).
python3 "$here/wasm-info.py" --check "${artifacts[@]}"

echo "build-fixture: sizes"
for a in "${artifacts[@]}"; do
  printf '  %8d  %s\n' "$(wc -c < "$a")" "${a#"$root"/}"
done
