"""The parts of a cluster-mode deployment (issue 31) for the end-to-end tests, all real and on
loopback: PostgreSQL started by `scripts/postgres.sh`, `csg serve` replicas sharing it, and
HAProxy with the shipped `deploy/haproxy.cfg` started by `scripts/haproxy.sh`.

Every wait here is bounded, every process started here is stopped by `Cluster.close` (also when
a test fails half-way), and the temporary directory is removed with it (`CSG_E2E_KEEP=1` keeps
it, and the logs in it, for a post-mortem).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import REPO_ROOT, _git, csg_bin

POSTGRES_SH = REPO_ROOT / "scripts" / "postgres.sh"
HAPROXY_SH = REPO_ROOT / "scripts" / "haproxy.sh"
HAPROXY_CFG = REPO_ROOT / "deploy" / "haproxy.cfg"

REPLICA_START_S = 60.0
"""How long a replica may take from exec to `/readyz` 200."""
BALANCER_UP_S = 30.0
"""How long HAProxy's health checks may take to put every replica in rotation (inter 2 s, rise 2)."""
HTTP_TIMEOUT_S = 15.0


class DeadlineExceeded(Exception):
    pass


@contextlib.contextmanager
def deadline_of(seconds: float, what: str) -> Iterator[None]:
    """Raises `DeadlineExceeded` in the main thread once `seconds` have passed (a blocking
    wait, a subprocess or an asyncio loop alike): a hang is a failure."""

    def expire(signum: int, frame: Any) -> None:
        raise DeadlineExceeded(f"{what} took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def free_port() -> int:
    """A loopback port nobody listens on right now (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"({path}: {error})"
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class Answer:
    """One HTTP answer: status and body (JSON when it parses, else text)."""

    status: int
    body: Any
    elapsed_s: float

    def json(self) -> dict[str, Any]:
        assert isinstance(self.body, dict), f"not a JSON object (HTTP {self.status}): {self.body!r}"
        return self.body


def http(
    method: str,
    url: str,
    *,
    token: str | None = None,
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = HTTP_TIMEOUT_S,
) -> Answer:
    """One request; an HTTP error status is an `Answer`, a connection failure raises `OSError`."""
    all_headers = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        all_headers["Content-Type"] = "application/json"
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=data, method=method, headers=all_headers)
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    text = raw.decode(errors="replace")
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        parsed = text
    return Answer(status=status, body=parsed, elapsed_s=time.monotonic() - started)


def wait_until(
    what: str,
    bound_s: float,
    probe: Callable[[], Any],
    ok: Callable[[Any], bool] = bool,
    interval_s: float = 0.2,
) -> Any:
    """Calls `probe` until `ok` holds for its answer, at most `bound_s`, and returns that
    answer; fails naming `what` and the last answer (or connection error) otherwise."""
    deadline = time.monotonic() + bound_s
    last: Any = None
    while True:
        try:
            last = probe()
            if ok(last):
                return last
        except OSError as error:
            last = error
        if time.monotonic() >= deadline:
            # An assertion (not pytest.fail): a bound the product must meet, so a test marked
            # xfail for that product failure (raises=AssertionError) covers it.
            raise AssertionError(f"{what}: not within {bound_s:g} s; last answer: {last!r}")
        time.sleep(interval_s)


# ---------------------------------------------------------------------------------------------
# PostgreSQL


class Postgres:
    """A PostgreSQL cluster of `scripts/postgres.sh` in `directory`, on one loopback port for
    its whole life (the replicas' `--database` URL names it)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = 0
        self.url = ""

    def install(self) -> None:
        done = subprocess.run(
            [str(POSTGRES_SH), "install"], capture_output=True, text=True, timeout=600, check=False
        )
        if done.returncode != 0:
            pytest.skip(
                "PostgreSQL server binaries are missing and `scripts/postgres.sh install` failed"
                f" (CI must install Debian's postgresql): {done.stderr.strip()}"
            )

    def start(self) -> None:
        """Starts the server (creating it on first use) and waits until it accepts connections.
        The first start tries other ports when the chosen one was taken meanwhile."""
        attempts = 1 if self.port else 3
        for attempt in range(attempts):
            port = self.port or free_port()
            done = subprocess.run(
                [str(POSTGRES_SH), "start", str(self.directory), str(port)],
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            if done.returncode == 0:
                self.port = port
                self.url = done.stdout.strip().splitlines()[-1]
                assert self.url.startswith("postgres://"), done.stdout
                return
            log = tail(self.directory / "server.log", 10)
            if "already in use" not in log or attempt == attempts - 1:
                raise RuntimeError(f"scripts/postgres.sh start failed: {done.stderr}\nserver.log:\n{log}")

    def stop(self) -> None:
        done = subprocess.run(
            [str(POSTGRES_SH), "stop", str(self.directory)], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"scripts/postgres.sh stop failed: {done.stderr}")

    def accepts_connections(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False


# ---------------------------------------------------------------------------------------------
# Replicas


class Replica:
    """One `csg serve` in cluster mode with its own data directory and port (kept across
    restarts: its node URL is its identity in the membership)."""

    def __init__(self, number: int, base: Path, env: dict[str, str], extra: list[str]) -> None:
        self.number = number
        self.name = f"csg{number}"
        self.data_dir = base / f"replica{number}"
        self.data_dir.mkdir()
        self.port = free_port()
        self.env = env
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp(self) -> str:
        return f"{self.url}/sourcegraph/mcp"

    @property
    def log(self) -> Path:
        return self.data_dir.parent / f"{self.name}.{self.starts}.log"

    def start(self) -> None:
        """Starts the process; `wait_ready` waits for it."""
        assert self.process is None or self.process.poll() is not None, f"{self.name} still runs"
        self.starts += 1
        command = [
            str(csg_bin()),
            "--data-dir",
            str(self.data_dir),
            "serve",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--node-url",
            self.url,
            *self.extra,
        ]
        with self.log.open("wb") as log:
            # The database URL and the secret come from the environment: a flag would show
            # the password in the process list.
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.env
            )

    def wait_ready(self, bound_s: float = REPLICA_START_S) -> dict[str, Any]:
        """Waits until `/readyz` answers 200; fails with the log if the process ends first."""
        deadline = time.monotonic() + bound_s
        last: Any = None
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                pytest.fail(f"{self.name} exited with {self.process.returncode}:\n{tail(self.log)}")
            try:
                answer = http("GET", f"{self.url}/readyz", timeout=2)
                last = answer
                if answer.status == 200:
                    return answer.json()
            except OSError as error:
                last = error
            time.sleep(0.1)
        pytest.fail(f"{self.name} not ready within {bound_s:g} s (last /readyz: {last!r}):\n{tail(self.log)}")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: no drain, no leave; the others notice by the missed lease."""
        if self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if not self.alive():
            return
        assert self.process is not None
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    def readyz(self) -> Answer:
        return http("GET", f"{self.url}/readyz", timeout=5)


# ---------------------------------------------------------------------------------------------
# HAProxy


class Balancer:
    """HAProxy with `deploy/haproxy.cfg`, its addresses given through the `CSG_LB_*` variables
    the file reads, started and stopped by `scripts/haproxy.sh`. Its request log (with the
    retries each request took) is received on a loopback UDP port and written to a file."""

    def __init__(self, base: Path, replicas: list[Replica], port: int | None = None) -> None:
        self.base = base
        self.port = port or free_port()
        self.stats_port = free_port()
        self.pidfile = base / "haproxy.pid"
        self.log = base / "haproxy.log"
        self.replicas = replicas
        self._syslog = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._syslog.bind(("127.0.0.1", 0))
        self._syslog.settimeout(0.5)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp(self) -> str:
        return f"{self.url}/sourcegraph/mcp"

    def _receive(self) -> None:
        with self.log.open("a") as out:
            while not self._stop.is_set():
                try:
                    data = self._syslog.recv(65536)
                except OSError:
                    continue
                out.write(data.decode(errors="replace").rstrip("\n") + "\n")
                out.flush()

    @staticmethod
    def install() -> None:
        if shutil.which("haproxy"):
            return
        done = subprocess.run([str(HAPROXY_SH), "install"], capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0 or not shutil.which("haproxy"):
            pytest.skip(
                "haproxy is missing and `scripts/haproxy.sh install` failed (CI must install Debian's"
                f" haproxy): {done.stderr.strip()}"
            )

    def start(self) -> None:
        assert HAPROXY_CFG.is_file(), f"the shipped balancer configuration {HAPROXY_CFG} is missing"
        self._thread.start()
        env = {
            **os.environ,
            "CSG_LB_BIND": f"127.0.0.1:{self.port}",
            "CSG_LB_STATS": f"127.0.0.1:{self.stats_port}",
            "CSG_LB_LOG": f"127.0.0.1:{self._syslog.getsockname()[1]}",
        }
        for replica in self.replicas:
            env[f"CSG_LB_REPLICA_{replica.number}"] = f"127.0.0.1:{replica.port}"
        done = subprocess.run(
            [str(HAPROXY_SH), "start", str(HAPROXY_CFG), str(self.pidfile)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"scripts/haproxy.sh start failed: {done.stderr}")

    def stop(self) -> None:
        subprocess.run([str(HAPROXY_SH), "stop", str(self.pidfile)], capture_output=True, timeout=60, check=False)
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self._syslog.close()

    def stats(self) -> dict[str, dict[str, str]]:
        """The backend's servers' rows of HAProxy's CSV statistics, by server name."""
        answer = http("GET", f"http://127.0.0.1:{self.stats_port}/;csv", timeout=5)
        text = answer.body if isinstance(answer.body, str) else json.dumps(answer.body)
        lines = [line for line in text.splitlines() if line.strip()]
        header = lines[0].lstrip("# ").split(",")
        rows: dict[str, dict[str, str]] = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(",")))
            if row.get("pxname") == "csg_replicas":
                rows[row["svname"]] = row
        return rows

    def all_up(self) -> bool:
        rows = self.stats()
        return all(rows.get(replica.name, {}).get("status") == "UP" for replica in self.replicas)

    def retries(self) -> dict[str, int]:
        """Retries and redispatches HAProxy counted in the backend (`wretr`, `wredis`)."""
        backend = self.stats().get("BACKEND", {})
        return {key: int(backend.get(key) or 0) for key in ("wretr", "wredis")}


# ---------------------------------------------------------------------------------------------
# The whole cluster


@dataclass(frozen=True)
class Tokens:
    operator: str
    """A token of a user with the prepare capability (registration, the cluster view)."""
    reader: str
    """A token of a user without it."""


def deadline(seconds: float) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A test's own deadline, which a module's autouse fixture reads (`with_deadlines`)."""

    def mark(test: Callable[..., Any]) -> Callable[..., Any]:
        test.deadline_s = seconds  # type: ignore[attr-defined]
        return test

    return mark


def with_deadlines(default_s: float) -> Callable[..., Iterator[None]]:
    """The autouse fixture that runs each test of a module within its `deadline` (else
    `default_s`): `_deadline = with_deadlines(120)` at module level."""

    @pytest.fixture(autouse=True)
    def _deadline(request: pytest.FixtureRequest) -> Iterator[None]:
        seconds = getattr(request.function, "deadline_s", default_s)
        with deadline_of(seconds, request.node.name):
            yield

    return _deadline


def metric_of(replica: Replica, name: str) -> float:
    """One series without labels of `replica`'s `/metrics` (scraped at its node URL)."""
    answer = http("GET", f"{replica.url}/metrics")
    assert answer.status == 200, answer
    text = answer.body if isinstance(answer.body, str) else str(answer.body)
    for line in text.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise AssertionError(f"{replica.name}'s /metrics has no {name}")


class Cluster:
    """PostgreSQL, three replicas (`--public-read false` unless asked), HAProxy in front of them, and a
    Git source repository (a bare repository the tests push to)."""

    REPLICAS = 3

    def __init__(
        self,
        replica_env: dict[str, str] | None = None,
        public_read: bool = False,
        replica_args: Callable[[str], list[str]] | None = None,
    ) -> None:
        self.replica_env = replica_env or {}
        """Environment every replica starts with on top of the cluster's (server plugins, say)."""
        self.public_read = public_read
        """Whether anonymous callers may read public repositories (`--public-read`)."""
        self.replica_args = replica_args
        """More `serve` arguments of every replica, given the balancer's URL (the deployment's
        public URL: an identity provider's settings, say)."""
        self.balancer_port = free_port()
        # /tmp, not pytest's tmp_path: the `postgres` user the server runs as (as root) must
        # be able to enter the parents of its directory, and pytest's are closed (0700).
        self.base = Path(tempfile.mkdtemp(prefix="csg-e2e-cluster-", dir="/tmp"))
        self.base.chmod(0o711)
        self.postgres = Postgres(self.base / "pg")
        self.secret = "e2e-" + secrets.token_hex(24)
        self.replicas: list[Replica] = []
        self.balancer: Balancer | None = None
        self.admin_dir = self.base / "admin"
        self.admin_dir.mkdir()
        self.source = self.base / "source.git"
        self.work = self.base / "work"
        self.tokens = Tokens(operator="", reader="")
        self.git_daemon: subprocess.Popen[bytes] | None = None
        self.git_port = 0

    @property
    def balancer_url(self) -> str:
        """HAProxy's URL: what clients call, the deployment's public URL."""
        return f"http://127.0.0.1:{self.balancer_port}"

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        self.postgres.install()
        Balancer.install()
        self.postgres.start()
        # The first admin command creates the schema; the tokens exist before any replica
        # starts, so every replica knows them from its first view.
        self.admin("user", "add", "ops", "--prepare")
        self.admin("user", "add", "reader")
        self.tokens = Tokens(
            operator=self.admin("token", "create", "ops").stdout.strip(),
            reader=self.admin("token", "create", "reader").stdout.strip(),
        )
        env = {
            **os.environ,
            "CSG_DATABASE_URL": self.postgres.url,
            "CSG_CLUSTER_SECRET": self.secret,
            "CSG_LOG": os.environ.get("CSG_LOG", "info"),
            **self.replica_env,
        }
        extra = ["--public-read", "true" if self.public_read else "false", "--trusted-proxy", "127.0.0.1"]
        if self.replica_args is not None:
            extra += self.replica_args(self.balancer_url)
        self.replicas = [Replica(n, self.base, env, extra) for n in range(1, self.REPLICAS + 1)]
        for replica in self.replicas:
            replica.start()
        for replica in self.replicas:
            replica.wait_ready()
        self.balancer = Balancer(self.base, self.replicas, self.balancer_port)
        self.balancer.start()
        wait_until("HAProxy puts every replica in rotation", BALANCER_UP_S, self.balancer.all_up)
        self._make_source()
        self._serve_source()

    def close(self) -> None:
        """Stops everything this cluster started, whatever state it is in, then removes the
        temporary directory."""
        errors: list[str] = []
        if self.balancer is not None:
            with contextlib.suppress(Exception):
                self.balancer.stop()
        if self.git_daemon is not None and self.git_daemon.poll() is None:
            self.git_daemon.kill()
            self.git_daemon.wait(timeout=10)
        for replica in self.replicas:
            try:
                replica.stop()
            except Exception as error:  # noqa: BLE001 - cleaning up: go on with the rest
                errors.append(f"{replica.name}: {error}")
        try:
            self.postgres.stop()
        except Exception as error:  # noqa: BLE001
            errors.append(f"postgres: {error}")
        if os.environ.get("CSG_E2E_KEEP") == "1":
            print(f"cluster directory kept: {self.base}")
        else:
            shutil.rmtree(self.base, ignore_errors=True)
        if errors:
            raise RuntimeError("cleaning up the cluster failed: " + "; ".join(errors))

    def logs(self, lines: int = 30) -> str:
        """The end of every log, for a failure message."""
        parts = []
        for path in sorted(self.base.glob("csg*.log")):
            parts.append(f"--- {path.name}\n{tail(path, lines)}")
        parts.append(f"--- haproxy.log\n{tail(self.base / 'haproxy.log', lines)}")
        return "\n".join(parts)

    def healthy(self) -> None:
        """Brings the cluster back to its normal state after a test that broke it: PostgreSQL
        running, every replica running and ready, every replica in HAProxy's rotation."""
        if not self.postgres.accepts_connections():
            self.postgres.start()
        for replica in self.replicas:
            if not replica.alive():
                replica.start()
        for replica in self.replicas:
            wait_until(
                f"{replica.name} ready with the database reachable",
                30,
                replica.readyz,
                lambda answer: answer.status == 200 and answer.json().get("database") == "ok",
            )
        assert self.balancer is not None
        wait_until("HAProxy puts every replica in rotation", BALANCER_UP_S, self.balancer.all_up)

    # -- the admin commands ---------------------------------------------------------------

    def admin(
        self, *args: str, replica: Replica | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """`csg --data-dir DIR ARGS` against the shared database: DIR is `replica`'s data
        directory (an operator on that replica's host), else a directory of its own."""
        data_dir = replica.data_dir if replica else self.admin_dir
        env = {**os.environ, "CSG_DATABASE_URL": self.postgres.url}
        done = subprocess.run(
            [str(csg_bin()), "--data-dir", str(data_dir), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
        if check:
            assert done.returncode == 0, f"csg {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
        return done

    # -- the source repository ------------------------------------------------------------

    def _make_source(self) -> None:
        self.work.mkdir()
        (self.work / "docs").mkdir()
        (self.work / "src").mkdir()
        (self.work / "docs" / "guide.md").write_text("# Guide\nversion one\n")
        (self.work / "src" / "lib.rs").write_text("pub fn cluster_needle() -> u32 {\n    42\n}\n")
        (self.work / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 201)))
        _git(self.work, "init", "-q", "-b", "main")
        _git(self.work, "add", ".")
        _git(self.work, "commit", "-q", "-m", "one")
        _git(self.base, "clone", "-q", "--bare", str(self.work), str(self.source))
        _git(self.work, "remote", "add", "origin", str(self.source))

    def _serve_source(self) -> None:
        """`git daemon` on loopback, so the source is also a remote URL (`git://`): the JSON
        API registers remote sources only."""
        self.git_port = free_port()
        # git-daemon itself, not `git daemon`: the wrapper would leave it running when killed.
        exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
        self.git_daemon = subprocess.Popen(
            [
                str(Path(exec_path) / "git-daemon"),
                "--reuseaddr",
                "--export-all",
                "--listen=127.0.0.1",
                f"--port={self.git_port}",
                f"--base-path={self.base}",
                str(self.base),
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=(self.base / "git-daemon.log").open("wb"),
        )
        wait_until(
            "git daemon answers",
            10,
            lambda: subprocess.run(
                ["git", "ls-remote", self.source_url], capture_output=True, timeout=5, check=False
            ).returncode
            == 0,
        )

    @property
    def source_url(self) -> str:
        """The source as a remote URL."""
        return f"git://127.0.0.1:{self.git_port}/{self.source.name}"

    def commit_and_push(self, guide: str) -> str:
        """A new commit on `main` changing `docs/guide.md`, pushed to the source; its SHA."""
        (self.work / "docs" / "guide.md").write_text(guide)
        _git(self.work, "commit", "-q", "-am", "next")
        _git(self.work, "push", "-q", "origin", "main")
        return _git(self.work, "rev-parse", "HEAD").strip()

    def head(self) -> str:
        return _git(self.source, "rev-parse", "main").strip()

    # -- views ----------------------------------------------------------------------------

    def ownership(self) -> dict[str, Any]:
        """`GET /sourcegraph/api/cluster` of the first live replica, as the operator."""
        for replica in self.replicas:
            if replica.alive():
                answer = http("GET", f"{replica.url}/sourcegraph/api/cluster", token=self.tokens.operator)
                assert answer.status == 200, answer
                return answer.json()
        raise AssertionError("no replica runs")

    def owners(self, repo: str) -> list[Replica]:
        for entry in self.ownership()["repositories"]:
            if entry["name"] == repo:
                return [r for r in self.replicas if r.url in entry["owners"]]
        raise AssertionError(f"{repo} has no owners in {self.ownership()}")


# ---------------------------------------------------------------------------------------------
# MCP


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str | None, mode: str = "2026-07-28") -> AsyncIterator[Client]:
    """The official SDK's client over Streamable HTTP with a bearer token (none: anonymous)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as client_http:
        async with Client(streamable_http_client(url, http_client=client_http), mode=mode) as client:
            yield client


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


COMMIT_LINE = re.compile(r"^Commit: ([0-9a-f]{40})$", re.MULTILINE)


def commits_in(text: str) -> set[str]:
    """Every `Commit:` header of a MCP answer (a read block, a search group)."""
    return set(COMMIT_LINE.findall(text))


# ---------------------------------------------------------------------------------------------
# Rendezvous owners, computed here as the replicas do (crates/cluster/src/rendezvous.rs)


def _siphash13(k0: int, k1: int, data: bytes) -> int:
    """SipHash-1-3 (one compression round, three finalisation rounds) of `data`."""
    mask = (1 << 64) - 1

    def rotl(x: int, b: int) -> int:
        return ((x << b) | (x >> (64 - b))) & mask

    v0, v1 = k0 ^ 0x736F6D6570736575, k1 ^ 0x646F72616E646F6D
    v2, v3 = k0 ^ 0x6C7967656E657261, k1 ^ 0x7465646279746573

    def rounds(count: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(count):
            v0 = (v0 + v1) & mask
            v1 = rotl(v1, 13) ^ v0
            v0 = rotl(v0, 32)
            v2 = (v2 + v3) & mask
            v3 = rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & mask
            v3 = rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & mask
            v1 = rotl(v1, 17) ^ v2
            v2 = rotl(v2, 32)

    tail = len(data) % 8
    for offset in range(0, len(data) - tail, 8):
        m = int.from_bytes(data[offset : offset + 8], "little")
        v3 ^= m
        rounds(1)
        v0 ^= m
    last = (len(data) & 0xFF) << 56 | int.from_bytes(data[len(data) - tail :], "little")
    v3 ^= last
    rounds(1)
    v0 ^= last
    v2 ^= 0xFF
    rounds(3)
    return v0 ^ v1 ^ v2 ^ v3


def rendezvous_owners(repo: str, node_urls: list[str], n: int = 2) -> list[str]:
    """The `n` owners of `repo` among `node_urls`, heaviest first, by the weight the replicas
    use (never changes: replicas of two versions must agree during a rolling upgrade)."""

    def weight(node: str) -> int:
        data = b"".join(
            [len(node.encode()).to_bytes(8, "little"), node.encode(), len(repo.encode()).to_bytes(8, "little"), repo.encode()]
        )
        return _siphash13(0x6373672D72656E64, 0x657A766F75732D31, data)

    return sorted(set(node_urls), key=lambda url: (-weight(url), url))[:n]
