#!/usr/bin/env bash
# Builds csg and serves this very repository on http://127.0.0.1:7878 with the embedded
# defaults (no config file, no external service). Extra arguments go to `csg serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo run --locked --release -p csg -- serve --repo . "$@"
