#!/usr/bin/env bash
# Installs what building and testing csg needs on a fresh Debian machine of this kind, and
# nothing else. Idempotent: every step checks first.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v git >/dev/null 2>&1 || need_apt+=(git)
command -v cc >/dev/null 2>&1 || need_apt+=(gcc)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
# Server plugins embed Debian's CPython 3.11 (.cargo/config.toml sets PYO3_PYTHON to it): the
# interpreter, its headers and libpython3.11.so, which the binary binds at run time.
[ -x /usr/bin/python3.11 ] || need_apt+=(python3.11)
[ -f /usr/include/python3.11/Python.h ] && [ -e /usr/lib/x86_64-linux-gnu/libpython3.11.so ] ||
  need_apt+=(libpython3.11-dev)
# The browser tests of the website: Debian's Chromium (a browser download of a test tool's
# own cannot be fetched here) and Node.js for playwright-core.
if [ "${1:-}" = "--with-test-venv" ]; then
  [ -x /usr/bin/chromium ] || need_apt+=(chromium chromium-driver)
  command -v npm >/dev/null 2>&1 || need_apt+=(nodejs npm)
  # The TLS tests of the metadata database make their throwaway CA with openssl (O-10).
  command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
# The tests only (the embedded default that `scripts/serve.sh` runs needs no external
# service): cluster mode's tests run a real PostgreSQL (Debian's postgresql, started by the
# tests in a temporary directory on a loopback port), and its end-to-end tests put Debian's
# HAProxy in front of three replicas.
if [ "${1:-}" = "--with-test-venv" ]; then
  scripts/postgres.sh install
  scripts/haproxy.sh install
fi
command -v rustup >/dev/null 2>&1 || { echo "setup: rustup is missing; install Rust with rustup first (https://rustup.rs)" >&2; exit 1; }

# The pinned toolchain (rust-toolchain.toml). Checked before any cargo call, since rustup's
# cargo proxy would otherwise try to download it on first use.
channel=$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)
host=$(rustc +stable -vV 2>/dev/null | sed -n 's/^host: //p')
host=${host:-x86_64-unknown-linux-gnu}
toolchains="${RUSTUP_HOME:-$HOME/.rustup}/toolchains"
if ! rustup toolchain list | grep -q "^$channel-$host"; then
  stable_version=$(rustc +stable --version 2>/dev/null | cut -d' ' -f2)
  if [ "$stable_version" = "$channel" ] && [ -d "$toolchains/stable-$host" ]; then
    # The installed stable toolchain is that release: name it, instead of downloading it again.
    echo "setup: using the installed stable toolchain as $channel" >&2
    ln -s "$toolchains/stable-$host" "$toolchains/$channel-$host"
  else
    echo "setup: installing Rust $channel through rustup" >&2
    rustup toolchain install "$channel" --profile minimal --component rustfmt --component clippy
  fi
fi
for component in rustfmt clippy; do
  rustup +"$channel" component list --installed | grep -q "^$component" ||
    rustup +"$channel" component add "$component"
done
command -v cargo >/dev/null 2>&1 || { echo "setup: cargo is missing; install Rust with rustup first" >&2; exit 1; }

# The Python venv for the end-to-end tests (official MCP SDK as the client).
if [ "${1:-}" = "--with-test-venv" ]; then
  stamp=.venv/.requirements.sha256
  want=$(sha256sum tests/e2e/requirements.txt | cut -d' ' -f1)
  if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "setup: preparing .venv for the end-to-end tests" >&2
    python3 -m venv .venv
    .venv/bin/pip install -q --disable-pip-version-check -r tests/e2e/requirements.txt
    echo "$want" > "$stamp"
  fi
  # The npm packages as each package-lock.json pins them: playwright-core for the browser tests
  # (it downloads no browser: the tests drive /usr/bin/chromium), and oidc-provider for the
  # identity provider of the OAuth tests (tests/oidc, started by scripts/oidc.sh).
  for npm_dir in tests/browser tests/oidc; do
    stamp=$npm_dir/node_modules/.lock.sha256
    want=$(sha256sum "$npm_dir/package-lock.json" | cut -d' ' -f1)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
      echo "setup: installing the npm packages of $npm_dir" >&2
      (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error)
      echo "$want" > "$stamp"
    fi
  done
fi
