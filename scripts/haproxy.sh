#!/usr/bin/env bash
# HAProxy in front of cluster-mode replicas, for tests and local clusters (issue 31).
#
#   scripts/haproxy.sh install               installs Debian's haproxy if it is missing
#   scripts/haproxy.sh start CONFIG PIDFILE  checks CONFIG, then runs haproxy in the background
#                                            with it, its process id in PIDFILE
#   scripts/haproxy.sh stop PIDFILE          stops the haproxy whose id PIDFILE holds
#
# Every command is idempotent: `start` leaves a running haproxy of PIDFILE alone (stop it first
# to load a changed CONFIG), `stop` of one that is not running does nothing. deploy/haproxy.cfg
# is the configuration to start with; its addresses come from CSG_LB_* variables with loopback
# defaults, so a test sets those in the environment of `start` (see the top of that file).
# Nothing here touches the system's own haproxy service or /etc/haproxy.
set -euo pipefail
# shellcheck source=process.sh
. "$(dirname "$0")/process.sh"

die() {
  echo "haproxy.sh: $*" >&2
  exit 1
}

usage() {
  die "usage: $0 install | start CONFIG PIDFILE | stop PIDFILE"
}

is_root() {
  [ "$(id -u)" -eq 0 ]
}

install() {
  if command -v haproxy >/dev/null 2>&1; then
    return 0
  fi
  echo "haproxy.sh: installing Debian's haproxy" >&2
  local sudo=""
  is_root || sudo="sudo"
  $sudo apt-get update -qq
  # Debian's package also enables a system-wide haproxy whose default configuration listens
  # on nothing; the tests never use it and start their own below.
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq haproxy >/dev/null
  command -v haproxy >/dev/null 2>&1 || die "haproxy is installed but not on PATH"
}

# The process id PIDFILE names, if that process runs and is a haproxy; empty otherwise (a
# stale file left by a crash, or an id the system has given to another program since).
running_pid() {
  local pidfile=$1 pid comm
  [ -f "$pidfile" ] || return 0
  # haproxy -D writes one id per line (one process unless nbproc was set); the first is enough.
  pid=$(head -n 1 "$pidfile" | tr -cd '0-9')
  [ -n "$pid" ] || return 0
  comm=$(cat "/proc/$pid/comm" 2>/dev/null || true)
  if [ "$comm" = "haproxy" ]; then
    echo "$pid"
  fi
}

start() {
  local config=$1 pidfile=$2
  command -v haproxy >/dev/null 2>&1 || die "haproxy not found; run: $0 install"
  [ -f "$config" ] || die "no configuration file at $config"
  if [ -n "$(running_pid "$pidfile")" ]; then
    return 0
  fi
  mkdir -p "$(dirname "$pidfile")"
  rm -f "$pidfile"
  # -c first: a bad configuration (or a CSG_LB_* address that does not parse) is reported
  # with haproxy's own message instead of a daemon that never appears.
  local check
  if ! check=$(haproxy -c -f "$config" 2>&1); then
    die "the configuration $config is invalid:
$check"
  fi
  # -D: daemon mode (haproxy forks, the parent exits once the listeners are bound and the
  # pid file is written); -p: that pid file. A bind failure (port in use) fails here.
  local out
  if ! out=$(haproxy -D -f "$config" -p "$pidfile" 2>&1); then
    die "haproxy did not start:
$out"
  fi
  local i
  for i in $(seq 1 50); do
    if [ -n "$(running_pid "$pidfile")" ]; then
      return 0
    fi
    [ "$i" -eq 50 ] || sleep 0.1
  done
  die "haproxy exited right after starting; run it in the foreground to see why: haproxy -db -f $config"
}

stop() {
  local pidfile=$1 pid
  pid=$(running_pid "$pidfile")
  if [ -z "$pid" ]; then
    rm -f "$pidfile"
    return 0
  fi
  # SIGTERM: a hard stop (SIGUSR1 would wait for every open connection, which in a test can be
  # an idle keep-alive client's for minutes).
  terminate "$pid"
  rm -f "$pidfile"
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
