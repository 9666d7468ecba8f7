#!/usr/bin/env bash
# The container image end to end (issue 32): builds it with scripts/image.sh, runs it with
# podman, and checks what a deployment relies on:
#
#   - a repository mounted read-only from the host, owned by another UID than the container's
#     user (git's safe.directory must not refuse it), registered inside the container with
#     `csg repo add`; a second one registered through the JSON API (POST /sourcegraph/api/repos
#     with an operator's token) from an HTTP source on the host;
#   - reads and searches over MCP with the official Python SDK (.venv) through the published
#     port; a server plugin in /app/plugins (turned on by the entrypoint because the directory
#     holds a plugin file) whose alias and read note show in the answers;
#   - csg runs as the image's non-root user; the image's HEALTHCHECK asks /healthz and passes;
#   - `podman stop` (SIGTERM) ends it cleanly (exit code 0) within the grace period;
#   - started again on the same /data volume, it answers without registering anything again.
#
# Every wait is bounded; the containers, the volume, the HTTP server and the temp directory go
# on any exit. Prints `image test: ok (N s)` at the end. CSG_IMAGE_REF=REF tests REF instead of
# building the image.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
started=$(date +%s)

die() {
  echo "test-image.sh: FAILED: $*" >&2
  exit 1
}

say() {
  echo "test-image.sh: $*" >&2
}

export CONTAINERS_CONF="$root/deploy/container/containers.conf"
# The grace period `podman stop` gives before SIGKILL; csg's own drain is --shutdown-grace (10 s).
GRACE_S=20

if ! .venv/bin/python -c 'import mcp' 2>/dev/null; then
  scripts/setup.sh --with-test-venv
fi

# CSG_IMAGE_REF: test that image instead of building one (e.g. one built by docker).
ref=${CSG_IMAGE_REF:-$(scripts/image.sh | tail -n 1)}
[[ $ref == */csg:* ]] || die "scripts/image.sh did not print an image reference (got: $ref)"
say "testing $ref"

mkdir -p "$root/target/image"
work=$(mktemp -d "$root/target/image/test.XXXXXX")
name="csg-image-test-$$"
volume="csg-image-test-$$-data"
http_pid=""

cleanup() {
  local code=$?
  if [ "$code" -ne 0 ] && podman container exists "$name" 2>/dev/null; then
    echo "---- the container's last log lines" >&2
    podman logs --tail 40 "$name" >&2 2>&1 || true
  fi
  podman rm -f -t 0 "$name" >/dev/null 2>&1 || true
  podman volume rm -f "$volume" >/dev/null 2>&1 || true
  if [ -n "$http_pid" ]; then
    kill "$http_pid" 2>/dev/null || true
    wait "$http_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---- the repositories and the plugin -----------------------------------------------------------
repo="$work/repo"
mkdir -p "$repo/src"
git -C "$repo" init -q -b main
printf '# image test\n\nThe mounted repository.\n' >"$repo/README.md"
printf 'pub fn answer() -> u32 {\n    42\n}\n' >"$repo/src/lib.rs"
git -C "$repo" add -A
git -C "$repo" -c user.name=test -c user.email=test@example.invalid commit -q -m "first"
commit=$(git -C "$repo" rev-parse HEAD)

# The JSON API registers remote sources only: a bare copy served over Git's dumb HTTP protocol
# on the podman bridge's gateway address, which the container reaches.
served="$work/served"
mkdir -p "$served"
git clone -q --bare "$repo" "$served/remote.git"
git -C "$served/remote.git" update-server-info
# Owned by a UID that is neither root nor the container's 10001, readable by everyone: what a
# repository checked out by some user on the host looks like from inside the container.
chown -R 4242:4242 "$repo"
chmod -R a+rX "$repo"
gateway=$(podman network inspect podman --format '{{range .Subnets}}{{.Gateway}}{{end}}' 2>/dev/null || true)
[ -n "$gateway" ] || gateway=10.88.0.1
http_port=$(free_port)

plugins="$work/plugins"
mkdir -p "$plugins"
cat >"$plugins/10_image.py" <<'PY'
QUERY_ALIASES = {"answer_fn": "answer"}


def on_read_result(result):
    return {"notes": result.get("notes", []) + ["served from the container image"]}
PY
chmod -R a+rX "$plugins"

port=$(free_port)
base="http://127.0.0.1:$port"

# podman's stderr goes to a file (shown when it fails): without systemd it reports that it cannot schedule the
# periodic health checks (`podman healthcheck run` below works without them).
run_container() {
  podman run -d --name "$name" \
    -p "127.0.0.1:$port:7878" \
    -v "$volume:/data" \
    -v "$repo:/repos/web:ro" \
    -v "$plugins:/app/plugins:ro" \
    --stop-timeout "$GRACE_S" \
    "$ref" >/dev/null 2>>"$work/podman.err" || die "podman run failed: $(tail -n 5 "$work/podman.err")"
}

# Waits (at most $1 s) until /healthz answers through the published port.
wait_healthy() {
  local limit=$1 i
  for ((i = 0; i < limit * 4; i++)); do
    if curl -fsS --max-time 2 "$base/healthz" >/dev/null 2>&1; then
      return 0
    fi
    [ "$(podman inspect --format '{{.State.Running}}' "$name" 2>/dev/null)" = true ] ||
      die "the container exited while starting"
    sleep 0.25
  done
  die "/healthz did not answer within ${limit} s"
}

# The MCP checks, with the official SDK: $1 = first|again.
mcp_checks() {
  timeout 120 .venv/bin/python - "$base/sourcegraph/mcp" "$1" "$commit" <<'PY'
import asyncio
import sys

from mcp import Client

url, phase, commit = sys.argv[1:4]


def text(result) -> str:
    assert not result.is_error, [b.text for b in result.content]
    return "\n".join(block.text for block in result.content)


async def search_until_indexed(client, arguments) -> str:
    # Indexing follows registration in the background: bounded wait for the first hit.
    for _ in range(120):
        answer = text(await client.call_tool("search", arguments))
        if "src/lib.rs:1:" in answer:
            return answer
        await asyncio.sleep(0.5)
    raise AssertionError(f"no search hit within 60 s: {answer}")


async def main() -> None:
    async with Client(url) as client:
        for repo in ("acme/web", "acme/remote"):
            read = text(await client.call_tool("read", {"repo": repo, "path": "src/lib.rs"}))
            assert commit in read, read
            assert "pub fn answer() -> u32 {" in read, read
            # The server plugin's on_read_result.
            assert "served from the container image" in read, read
            found = await search_until_indexed(client, {"query": "answer", "repo": repo})
            assert commit in found, found
        # The server plugin's QUERY_ALIASES, disclosed.
        aliased = await search_until_indexed(client, {"query": "answer_fn", "repo": "acme/web"})
        assert "ArgumentsRewritten:" in aliased and "10_image.py" in aliased, aliased
    print(f"mcp ({phase}): reads, searches and the plugin's effects ok")


asyncio.run(main())
PY
}

# ---- first start -------------------------------------------------------------------------------
(cd "$served" && exec python3 -m http.server --bind "$gateway" "$http_port" >/dev/null 2>&1) &
http_pid=$!

run_container
wait_healthy 60

uid=$(podman exec "$name" id -u)
[ "$uid" = 10001 ] || die "the container's user is $uid, not 10001"
proc_uid=$(podman exec "$name" stat -c %u /proc/1)
[ "$proc_uid" = 10001 ] || die "process 1 runs as uid $proc_uid, not 10001"
comm=$(podman exec "$name" cat /proc/1/comm)
[ "$comm" = csg ] || die "process 1 is $comm, not csg (the entrypoint must exec it)"
say "csg is process 1 and runs as uid 10001"

health=$(podman inspect --format '{{json .Config.Healthcheck}}' "$name")
[[ $health == *csg-entrypoint*healthcheck* ]] || die "the image's health check is not csg-entrypoint healthcheck: $health"
grep -q '/healthz' deploy/container/entrypoint.sh || die "the health check does not ask /healthz"
podman healthcheck run "$name" >/dev/null 2>&1 || die "podman healthcheck run failed on a running server"
say "HEALTHCHECK (csg-entrypoint healthcheck: GET /healthz) passes"

# The mounted repository, registered inside the container (local paths are not accepted by the
# JSON API): git must not refuse it for its owner.
# First, that the mount really is one git would refuse: without the image's system-wide
# safe.directory (GIT_CONFIG_NOSYSTEM), git in the container reports dubious ownership.
if podman exec -e GIT_CONFIG_NOSYSTEM=1 "$name" git -C /repos/web rev-parse HEAD >/dev/null 2>&1; then
  die "git accepted /repos/web without safe.directory: the test repository is not foreign-owned"
fi
podman exec "$name" csg repo add acme/web /repos/web >"$work/repo-add.log" 2>&1 ||
  die "csg repo add of the mounted repository failed: $(tail -n 5 "$work/repo-add.log")"
podman exec "$name" csg user add ops --prepare >/dev/null 2>&1
token=$(podman exec "$name" csg token create ops 2>/dev/null | tail -n 1)
[[ $token == csg_* ]] || die "csg token create printed no token"
code=$(curl -sS --max-time 120 -o "$work/add.json" -w '%{http_code}' \
  -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
  -d "{\"name\": \"acme/remote\", \"source\": \"http://$gateway:$http_port/remote.git\"}" \
  "$base/sourcegraph/api/repos")
[ "$code" = 201 ] || die "POST /sourcegraph/api/repos answered $code: $(cat "$work/add.json")"
say "registered acme/web (mounted, uid 4242) and acme/remote (JSON API)"

mcp_checks first >&2

# ---- a graceful stop ----------------------------------------------------------------------------
stop_started=$(date +%s.%N)
podman stop -t "$GRACE_S" "$name" >/dev/null 2>>"$work/podman.err" ||
  die "podman stop failed: $(tail -n 5 "$work/podman.err")"
stop_took=$(python3 -c "import time; print(round(time.time() - $stop_started, 1))")
exit_code=$(podman inspect --format '{{.State.ExitCode}}' "$name")
[ "$exit_code" = 0 ] || die "csg exited with $exit_code after SIGTERM (137 would be the SIGKILL after the grace period)"
python3 -c "import sys; sys.exit(0 if $stop_took < $GRACE_S else 1)" ||
  die "the stop took ${stop_took} s, not less than the ${GRACE_S} s grace period"
say "stopped cleanly in ${stop_took} s (exit code 0)"
podman rm "$name" >/dev/null 2>>"$work/podman.err"

# ---- again, on the same volume -----------------------------------------------------------------
# The HTTP source is gone: what acme/remote answers now comes from the volume.
kill "$http_pid" 2>/dev/null || true
wait "$http_pid" 2>/dev/null || true
http_pid=""
run_container
wait_healthy 60
mcp_checks again >&2

say "image test: ok ($(($(date +%s) - started)) s)"
