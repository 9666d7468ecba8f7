"""Fixtures of the end-to-end MCP tests: a real Git repository and the real `csg serve`.

The binary is `$CSG_BIN`, or `<repo>/target/debug/csg` (build it first: `cargo build -p csg`).
"""

from __future__ import annotations

import contextlib
import os
import queue
import subprocess
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
REPO_NAME = "test/e2e"
GUIDE = "# Guide\nline two\nline three\n"
START_TIMEOUT_S = 120.0
TOOLS = [
    "availability",
    "blame",
    "commit",
    "definitions",
    "diff",
    "discovery",
    "list",
    "log",
    "outline",
    "plugin_status",
    "read",
    "read_many",
    "references",
    "reload_plugins",
    "resolve",
    "search",
]
"""Every built-in MCP tool, sorted (server-plugin presets come on top of these)."""


@dataclass(frozen=True)
class GitRepo:
    path: Path
    commit: str


@dataclass(frozen=True)
class Server:
    endpoint: str
    """The URL `csg serve` printed, e.g. `http://127.0.0.1:PORT/sourcegraph/mcp?plugins=auto`."""
    commit: str
    repo: str = REPO_NAME

    @property
    def base(self) -> str:
        """The endpoint without its query."""
        parts = urllib.parse.urlsplit(self.endpoint)
        return urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))

    def url(self, query: str = "") -> str:
        return self.base + query


def _git(cwd: Path, *args: str) -> str:
    env = dict(os.environ)
    # A developer's global Git config (signing, hooks, templates) must not change the fixture.
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_AUTHOR_NAME="E2E",
        GIT_AUTHOR_EMAIL="e2e@example.invalid",
        GIT_COMMITTER_NAME="E2E",
        GIT_COMMITTER_EMAIL="e2e@example.invalid",
    )
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed: {done.stderr}")
    return done.stdout


@pytest.fixture(scope="session")
def git_repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """`docs/guide.md` (3 lines), `big.txt` (600 lines), `empty.txt`, `src/lib.rs`."""
    work = tmp_path_factory.mktemp("repo")
    (work / "docs").mkdir()
    (work / "src").mkdir()
    (work / "docs" / "guide.md").write_text(GUIDE)
    (work / "big.txt").write_text("".join(f"line {n}\n" for n in range(1, 601)))
    (work / "empty.txt").write_text("")
    (work / "src" / "lib.rs").write_text("pub fn answer() -> u32 {\n    42\n}\n")
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "initial")
    return GitRepo(path=work, commit=_git(work, "rev-parse", "HEAD").strip())


def csg_bin() -> Path:
    binary = Path(os.environ.get("CSG_BIN", REPO_ROOT / "target" / "debug" / "csg"))
    if not binary.is_file():
        pytest.fail(f"csg binary not found at {binary}; build it (cargo build -p csg) or set CSG_BIN")
    return binary


@pytest.fixture(scope="session")
def server(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`csg serve` on a free loopback port, stopped at the end of the session."""
    yield from _serve(git_repo, REPO_NAME, tmp_path_factory)


PLUGIN_REPO_NAME = "test/plugins"
TESTDATA = REPO_ROOT / "crates" / "wasmplugin" / "testdata"


@pytest.fixture(scope="session")
def plugin_repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """`kb/` with the committed `related-content` example plugin, its `related.json`, a guide
    and two related documents; `notes.md` outside the plugin directory."""
    work = tmp_path_factory.mktemp("plugin-repo")
    kb = work / "kb"
    (kb / "refs").mkdir(parents=True)
    (kb / "related-content.sourcegraph.wasm").write_bytes((TESTDATA / "related-content.sourcegraph.wasm").read_bytes())
    (kb / "related.json").write_text('{"guide.md": ["refs/glossary.md", "refs/policy.md"]}')
    (kb / "guide.md").write_text("# Guide\nbody\n")
    (kb / "refs" / "glossary.md").write_text("# Glossary\n")
    (kb / "refs" / "policy.md").write_text("Policy\n")
    (work / "notes.md").write_text("notes\n")
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "plugins")
    return GitRepo(path=work, commit=_git(work, "rev-parse", "HEAD").strip())


@pytest.fixture(scope="session")
def plugin_server(plugin_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`csg serve` over the plugin repository."""
    for running in _serve(plugin_repo, PLUGIN_REPO_NAME, tmp_path_factory):
        yield Server(endpoint=running.endpoint, commit=running.commit, repo=PLUGIN_REPO_NAME)


SERVER_PLUGIN = """\
QUERY_ALIASES = {"answer_fn": "answer"}
TOOL_PRESETS = {
    "search_rust": {
        "tool": "search",
        "description": "Search the Rust sources of the e2e repository.",
        "arguments": {"repo": "test/e2e", "lang": "rust"},
    },
}
"""


@pytest.fixture(scope="session")
def server_plugins_server(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`csg serve` with server plugins on: one file with `QUERY_ALIASES` and a `TOOL_PRESETS` tool."""
    plugins = tmp_path_factory.mktemp("server-plugins")
    (plugins / "10_tables.py").write_text(SERVER_PLUGIN)
    env = {"SOURCEGRAPH_SERVER_PLUGINS_ENABLED": "true", "SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY": str(plugins)}
    yield from _serve(git_repo, REPO_NAME, tmp_path_factory, env)


@dataclass(frozen=True)
class TokenServer:
    server: Server
    reader: str
    """A token of a user without the prepare capability."""
    operator: str
    """A token of a user with it."""


@pytest.fixture(scope="session")
def token_server(git_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenServer]:
    """`csg serve --public-read false`, with users and tokens made by `csg user|token` first."""
    data_dir = tmp_path_factory.mktemp("token-data")

    def csg(*args: str) -> str:
        done = subprocess.run(
            [str(csg_bin()), "--data-dir", str(data_dir), *args], capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    csg("user", "add", "reader")
    csg("user", "add", "ops", "--prepare")
    reader, operator = csg("token", "create", "reader"), csg("token", "create", "ops")
    for running in _serve(git_repo, REPO_NAME, tmp_path_factory, extra=["--public-read", "false"], data_dir=data_dir):
        yield TokenServer(server=running, reader=reader, operator=operator)


def _serve(
    repo: GitRepo,
    name: str,
    tmp_path_factory: pytest.TempPathFactory,
    env: dict[str, str] | None = None,
    extra: list[str] | None = None,
    data_dir: Path | None = None,
) -> Iterator[Server]:
    data_dir = data_dir or tmp_path_factory.mktemp("data")
    log_path = tmp_path_factory.mktemp("log") / "csg.stderr"
    args = ["--listen", "127.0.0.1:0", "--repo", f"{name}={repo.path}", *(extra or [])]
    with serving(data_dir, args, log_path, env) as endpoint:
        yield Server(endpoint=endpoint, commit=repo.commit, repo=name)


@contextlib.contextmanager
def serving(
    data_dir: Path, args: list[str], log_path: Path, env: dict[str, str] | None = None
) -> Iterator[str]:
    """`csg --data-dir DATA_DIR serve ARGS` (its log in `log_path`, `env` on top of ours) until
    the block ends: the MCP endpoint it printed. Always stopped, SIGTERM then SIGKILL."""
    command = [str(csg_bin()), "--data-dir", str(data_dir), "serve", *args]
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "CSG_LOG": os.environ.get("CSG_LOG", "info"), **(env or {})},
        )
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            # Keeps draining stdout for the server's whole life so it never blocks on a full
            # pipe.
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        try:
            yield _wait_for_endpoint(process, lines, log_path)
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def _wait_for_endpoint(process: subprocess.Popen[str], lines: queue.Queue[str | None], log_path: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    seen: list[str] = []
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            if process.poll() is not None:
                break
            continue
        if line is None:
            break
        seen.append(line)
        if line.startswith("MCP endpoint: "):
            return line[len("MCP endpoint: ") :].strip()
    process.kill()
    pytest.fail(
        "csg serve did not print `MCP endpoint: <url>`"
        f" (exit code {process.poll()}).\nstdout:\n{''.join(seen)}\nstderr:\n{log_path.read_text()}"
    )
