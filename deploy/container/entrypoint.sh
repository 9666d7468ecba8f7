#!/bin/bash
# The image's entrypoint (deploy/Containerfile).
#
#   csg-entrypoint healthcheck   exits 0 when http://127.0.0.1:${CSG_HEALTH_PORT:-7878}/healthz
#                                answers 200 within 4 s (the image's HEALTHCHECK; no curl here)
#   csg-entrypoint COMMAND...    turns server plugins on when /app/plugins holds plugin files
#                                (unless SOURCEGRAPH_SERVER_PLUGINS_ENABLED is set), then execs
#                                COMMAND: it replaces this shell, so csg is process 1 and the
#                                runtime's SIGTERM reaches it (a graceful stop, O-6)
set -euo pipefail

healthcheck() {
  local port=${CSG_HEALTH_PORT:-7878} status
  # A bounded exchange: a listener that accepts but never answers fails the check.
  # shellcheck disable=SC2016 # the inner script expands its own $1
  status=$(timeout 4 bash -c '
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" >&3 || exit 1
    IFS= read -r line <&3 || exit 1
    printf "%s" "$line"
  ' _ "$port" 2>/dev/null) || {
    echo "healthcheck: no answer from http://127.0.0.1:$port/healthz" >&2
    exit 1
  }
  case "$status" in
    "HTTP/1."?" 200"*) exit 0 ;;
    *)
      echo "healthcheck: /healthz answered: ${status%$'\r'}" >&2
      exit 1
      ;;
  esac
}

if [ "${1:-}" = healthcheck ]; then
  healthcheck
fi

# Plugins are one Python file each (README, "Server plugins"). An empty or absent directory
# leaves them off, as csg's default is, rather than starting a plugin host with nothing to host.
dir=${SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY:-/app/plugins}
if [ -z "${SOURCEGRAPH_SERVER_PLUGINS_ENABLED:-}" ] && [ -d "$dir" ] &&
  [ -n "$(find "$dir" -maxdepth 1 -name '*.py' -print -quit 2>/dev/null)" ]; then
  export SOURCEGRAPH_SERVER_PLUGINS_ENABLED=true
fi

exec "$@"
