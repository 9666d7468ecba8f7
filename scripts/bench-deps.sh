#!/usr/bin/env bash
# The baselines the search benchmarks compare against (issue 4, issue 33):
# Debian's `ripgrep` (`rg`) and `codesearch` (Russ Cox's `cindex` and `csearch`).
#
#   scripts/bench-deps.sh           installs whichever of them is missing (idempotent: does
#                                   nothing when `rg`, `cindex` and `csearch` are on PATH)
#
# bench/search calls it before it builds; the benches name it when a baseline is missing.
set -euo pipefail

die() {
  echo "bench-deps.sh: $*" >&2
  exit 1
}

[ $# -eq 0 ] || die "usage: $0 (no arguments)"

is_root() {
  [ "$(id -u)" -eq 0 ]
}

# The Debian packages whose programs are not on PATH: ripgrep gives rg, codesearch gives
# cindex and csearch.
missing() {
  command -v rg >/dev/null 2>&1 || echo ripgrep
  if ! command -v cindex >/dev/null 2>&1 || ! command -v csearch >/dev/null 2>&1; then
    echo codesearch
  fi
}

install() {
  local packages
  mapfile -t packages < <(missing)
  if [ ${#packages[@]} -eq 0 ]; then
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 ||
    die "${packages[*]} missing and apt-get is not available; install them with the system's package manager"
  echo "bench-deps.sh: installing Debian's ${packages[*]}" >&2
  local sudo=""
  is_root || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # A package list that is old or absent (a fresh machine) finds nothing: update once and retry.
  $sudo apt-get install -y -qq "${packages[@]}" >/dev/null 2>&1 || {
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "${packages[@]}" >/dev/null
  }
  [ -z "$(missing)" ] || die "installed ${packages[*]} but rg, cindex or csearch is still not on PATH"
}

install
