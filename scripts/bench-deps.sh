#!/usr/bin/env bash
# Installs the baselines the benchmarks compare against, if they are missing: ripgrep (`rg`) for
# bench/search. Idempotent: does nothing when `rg` is already on PATH.
set -euo pipefail
if command -v rg >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "bench-deps: rg is missing and apt-get is not available; install ripgrep (e.g. cargo install ripgrep)" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get install -y -q ripgrep >/dev/null || {
  $sudo apt-get update -q >/dev/null
  $sudo apt-get install -y -q ripgrep >/dev/null
}
command -v rg >/dev/null
