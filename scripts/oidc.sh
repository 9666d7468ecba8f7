#!/usr/bin/env bash
# A throwaway OpenID Provider for the OAuth tests (tests/oidc/provider.mjs: panva's oidc-provider
# on a loopback port, logging in and consenting by itself), and nothing else.
#
#   scripts/oidc.sh install         installs tests/oidc's npm packages as its package-lock.json
#                                   pins them, unless they already are
#   scripts/oidc.sh start DIR PORT  installs them if needed, then starts the provider in the
#                                   background with issuer http://127.0.0.1:PORT, its process id
#                                   in DIR/pid, its output in DIR/log and its private signing keys
#                                   in DIR/private-jwks.json; waits until it listens and prints
#                                   the issuer as the last line
#   scripts/oidc.sh stop DIR        stops the provider whose id DIR/pid holds
#
# Every command is idempotent: `start` leaves a provider of DIR running on PORT alone, `stop` of
# one that is not running does nothing. The provider keeps everything but its keys in memory: a
# restart forgets every client, grant and token.
set -euo pipefail
# shellcheck source=process.sh
. "$(dirname "$0")/process.sh"
package=$(cd "$(dirname "$0")/../tests/oidc" && pwd -P)

READY_BOUND_S=30

die() {
  echo "oidc.sh: $*" >&2
  exit 1
}

usage() {
  die "usage: $0 install | start DIR PORT | stop DIR"
}

install() {
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 ||
    die "node and npm are missing; run: scripts/setup.sh --with-test-venv"
  # The same stamp as scripts/setup.sh's: the lock file's hash, written once `npm ci` succeeded.
  local stamp="$package/node_modules/.lock.sha256" want
  want=$(sha256sum "$package/package-lock.json" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    echo "oidc.sh: installing the identity provider's npm packages" >&2
    (cd "$package" && npm ci --no-audit --no-fund --loglevel=error) >&2 ||
      die "npm ci failed in $package"
    echo "$want" >"$stamp"
  fi
}

# 0 while process $1 runs (a zombie, which `kill -0` still reaches, does not).

# The process id DIR/pid names, if that process runs and is this provider; empty otherwise (a
# stale file left by a crash, or an id the system has given to another program since).
running_pid() {
  local dir=$1 pid
  [ -f "$dir/pid" ] || return 0
  pid=$(tr -cd '0-9' <"$dir/pid")
  [ -n "$pid" ] || return 0
  if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$package/provider.mjs"; then
    echo "$pid"
  fi
}

start() {
  local dir=$1 port=$2
  if ! [[ $port =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
    die "PORT must be a number from 1 to 65535, not '$port'"
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd -P)
  local issuer="http://127.0.0.1:$port"
  if [ -n "$(running_pid "$dir")" ]; then
    [ "$(cat "$dir/issuer" 2>/dev/null)" = "$issuer" ] ||
      die "the provider of $dir already runs as $(cat "$dir/issuer" 2>/dev/null || echo 'another issuer'); stop it first: $0 stop $dir"
    echo "$issuer"
    return 0
  fi
  install
  rm -f "$dir/pid" "$dir/issuer" "$dir/private-jwks.json"
  # Every descriptor redirected: the provider outlives this script and must not hold its
  # caller's pipes open.
  node "$package/provider.mjs" --port "$port" --dir "$dir" </dev/null >"$dir/log" 2>&1 &
  local pid=$!
  echo "$pid" >"$dir/pid"
  local i tries=$((READY_BOUND_S * 10))
  for i in $(seq 1 "$tries"); do
    if grep -qsx "ready $issuer" "$dir/log"; then
      echo "$issuer" >"$dir/issuer"
      echo "$issuer"
      return 0
    fi
    alive "$pid" || break
    [ "$i" -eq "$tries" ] || sleep 0.1
  done
  local why="exited before it listened on port $port"
  if alive "$pid"; then
    why="did not listen on port $port within ${READY_BOUND_S} s"
    kill -TERM "$pid" 2>/dev/null || true
  fi
  rm -f "$dir/pid"
  die "the provider $why; the end of $dir/log:
$(tail -n 20 "$dir/log")"
}

stop() {
  local dir=$1 pid
  [ -d "$dir" ] || return 0
  pid=$(running_pid "$dir")
  if [ -z "$pid" ]; then
    rm -f "$dir/pid" "$dir/issuer"
    return 0
  fi
  terminate "$pid"
  rm -f "$dir/pid" "$dir/issuer"
}

case "${1:-}" in
  install)
    [ $# -eq 1 ] || usage
    install
    ;;
  start)
    [ $# -eq 3 ] || usage
    start "$2" "$3"
    ;;
  stop)
    [ $# -eq 2 ] || usage
    stop "$2"
    ;;
  *) usage ;;
esac
