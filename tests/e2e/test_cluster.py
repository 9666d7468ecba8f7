"""Cluster mode end to end (issue 31, "Proof"): a real PostgreSQL (`scripts/postgres.sh`), three
`csg serve` replicas sharing it, HAProxy with the shipped `deploy/haproxy.cfg`
(`scripts/haproxy.sh`), and the official Python MCP SDK as the client.

1. A repository added through one replica's admin command is read through each replica (JSON
   API and MCP) with the same full SHA; a new commit synced through one replica is the head
   every replica answers.
2. A token made once works on every replica; revoked through one, it is refused by all.
3. Load through HAProxy (concurrent MCP clients reading and searching) while one replica is
   SIGKILLed and restarted: no failed call; the replica rejoins.
4. PostgreSQL stopped under reads: reads and searches go on, `/readyz` stays 200 saying the
   database is unreachable and writes are off, a registration fails at once with a clear
   error; PostgreSQL back: reads go on and the registration works, no replica restarted.
5. A search over every repository through any replica covers every repository (the owners'
   parts merged), pages on whichever replica each page lands, and names what downed owners
   hold as not searched; a registration lands on the repository's owners only.

The cluster is started once for this module (about 10 s); each test first brings it back to
health if an earlier one left it broken. Every test has its own deadline (SIGALRM; the venv has
no pytest-timeout). Run alone with `.venv/bin/python -m pytest -q -s -rA tests/e2e/test_cluster.py`
(`-s` shows the figures: calls, failures, waits). `CSG_E2E_KEEP=1` keeps the cluster's
directory (logs included) for a post-mortem.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cluster import (
    Answer,
    Cluster,
    Replica,
    commits_in,
    deadline,
    deadline_of,
    http,
    mcp_client,
    metric_of,
    rendezvous_owners,
    text_of,
    wait_until,
    with_deadlines,
)

REPO = "acme/cluster"
GUIDE_ONE = "# Guide\nversion one\n"
GUIDE_TWO = "# Guide\nversion two\n"

REGISTRATION_BOUND_S = 15.0
"""A repository registered through one replica is served by every replica within this (a
few-kilobyte repository on loopback: one fetch and one index build)."""
SERVED_BOUND_S = 90.0
"""The same wait where registration is not what a test proves: past the 60 s maintenance round."""
HEAD_BOUND_S = 10.0
"""After a sync through one replica returned, every replica answers the new head within this."""
REVOKE_BOUND_S = 5.0
LEASE_S = 10.0
"""The membership's heartbeat lease (cluster::ClusterConfig's default)."""
CALL_TIMEOUT_S = 30.0
MODES = ["2026-07-28", "legacy"]


_deadline = with_deadlines(120)


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    running = Cluster()
    try:
        with deadline_of(600, "starting the cluster (PostgreSQL, 3 replicas, HAProxy)"):
            running.start()
        yield running
    except BaseException:
        print(running.logs())
        raise
    finally:
        running.close()


@dataclass(frozen=True)
class Registered:
    name: str
    commit: str
    at: float
    """`time.monotonic()` when the admin command returned."""


@pytest.fixture(scope="module")
def registered(cluster: Cluster) -> Registered:
    """`REPO` registered through replica 1's admin command (`csg --database … --data-dir
    <replica 1's> repo add`), as an operator on that replica's host would."""
    with deadline_of(120, "registering the repository"):
        done = cluster.admin("repo", "add", REPO, str(cluster.source), replica=cluster.replicas[0])
    commit = cluster.head()
    assert commit in done.stdout, done.stdout
    return Registered(name=REPO, commit=commit, at=time.monotonic())


# ---------------------------------------------------------------------------------------------
# Calls


def api(replica_or_url: Replica | str, tool: str, token: str, **query: Any) -> Answer:
    base = replica_or_url if isinstance(replica_or_url, str) else replica_or_url.url
    return http("GET", f"{base}/sourcegraph/api/{tool}?{urllib.parse.urlencode(query)}", token=token)


def resolve(replica: Replica | str, token: str, repo: str = REPO) -> Answer:
    return api(replica, "resolve", token, repo=repo, revision="main")


def served(answer: Answer) -> bool:
    return answer.status == 200 and isinstance(answer.body, dict) and "commit" in answer.body


def wait_served(cluster: Cluster, bound_s: float, repo: str = REPO) -> dict[str, str]:
    """Waits until every replica resolves `main` of `repo`; the SHA each answered, by replica."""
    heads = {}
    for replica in cluster.replicas:
        answer = wait_until(
            f"{replica.name} resolves {repo}@main",
            bound_s,
            lambda r=replica: resolve(r, cluster.tokens.reader, repo),
            served,
        )
        heads[replica.name] = answer.json()["commit"]
    return heads


def converged(cluster: Cluster) -> str:
    """Waits until every replica resolves `main` to the source's head and searches that very
    commit (its owners indexed it); the head. Tests whose subject is not propagation start
    from here."""
    head = cluster.head()
    token = cluster.tokens.reader
    for replica in cluster.replicas:
        wait_until(
            f"{replica.name} resolves {REPO}@main to {head[:12]}",
            SERVED_BOUND_S,
            lambda r=replica: resolve(r, token),
            lambda a: served(a) and a.json()["commit"] == head,
        )
        wait_until(
            f"{replica.name} searches {REPO} at {head[:12]}",
            SERVED_BOUND_S,
            lambda r=replica: api(r, "search", token, repo=REPO, query="cluster_needle"),
            lambda a: a.status == 200 and [group["commit"] for group in a.json()["repos"]] == [head],
        )
        wait_until(
            f"{replica.name} reads {REPO} at {head[:12]} over MCP",
            SERVED_BOUND_S,
            lambda r=replica: asyncio.run(mcp_call(r.mcp, token, "read", {"repo": REPO, "path": "docs/guide.md"})),
            lambda outcome: not outcome[0] and commits_in(outcome[1]) == {head},
            interval_s=1,
        )
    return head


async def mcp_call(url: str, token: str, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """One tool call in a session of its own: whether it is an error, and its text. (Asserting
    is left to the caller: an assertion inside the SDK's session would reach pytest wrapped in
    an exception group.)"""
    async with mcp_client(url, token) as client:
        result = await asyncio.wait_for(client.call_tool(tool, arguments), CALL_TIMEOUT_S)
    return bool(result.is_error), text_of(result)


def mcp_read(replica: Replica, token: str, path: str = "docs/guide.md", repo: str = REPO) -> str:
    """A MCP read through `replica`'s endpoint; its text (a tool error fails)."""
    is_error, text = asyncio.run(mcp_call(replica.mcp, token, "read", {"repo": repo, "path": path}))
    assert not is_error, f"MCP read of {repo} through {replica.name} ({replica.url}): {text}"
    return text


async def _search_until_indexed(url: str, token: str, arguments: dict[str, Any], bound_s: float) -> tuple[bool, str]:
    deadline_at = time.monotonic() + bound_s
    async with mcp_client(url, token) as client:
        while True:
            result = await asyncio.wait_for(client.call_tool("search", arguments), CALL_TIMEOUT_S)
            text = text_of(result)
            if (not result.is_error and "NotIndexed:" not in text) or time.monotonic() >= deadline_at:
                return bool(result.is_error), text
            await asyncio.sleep(0.2)


def mcp_search_indexed(url: str, token: str, query: str, bound_s: float, repo: str | None = REPO) -> str:
    """A search over MCP, repeated while it says the repository is not indexed yet (at most
    `bound_s`); its text."""
    arguments: dict[str, Any] = {"query": query}
    if repo:
        arguments["repo"] = repo
    is_error, text = asyncio.run(_search_until_indexed(url, token, arguments, bound_s))
    assert not is_error and "NotIndexed:" not in text, f"search through {url} after {bound_s:g} s: {text}"
    return text


# ---------------------------------------------------------------------------------------------
# 1. One repository, one SHA, on every replica
#
# The tests up to the one over MCP measure from the registration: module order matters.


@deadline(60)
def test_a_repository_added_through_one_replica_is_read_through_each_within_seconds(
    cluster: Cluster, registered: Registered
) -> None:
    cluster.healthy()
    token = cluster.tokens.reader
    owners = [r.name for r in cluster.owners(REPO)]
    print(f"\nowners of {REPO}: {owners} (registered through csg1's admin command)")
    waited = {}
    for replica in cluster.replicas:
        answer = wait_until(
            f"{replica.name} serves {REPO} after its registration through csg1 (owners {owners})",
            max(0.0, registered.at + REGISTRATION_BOUND_S - time.monotonic()),
            lambda r=replica: resolve(r, token),
            served,
        )
        waited[replica.name] = round(time.monotonic() - registered.at, 2)
        assert answer.json()["commit"] == registered.commit, (replica.name, answer.body)
    print(f"resolved through each replica after the registration (s): {waited}")


@deadline(60)
def test_a_repository_added_through_one_replica_is_searchable_through_each_within_seconds(
    cluster: Cluster, registered: Registered
) -> None:
    cluster.healthy()
    for replica in cluster.replicas:
        bound = max(0.5, registered.at + REGISTRATION_BOUND_S - time.monotonic())
        found = mcp_search_indexed(replica.mcp, cluster.tokens.reader, "cluster_needle", bound)
        assert commits_in(found) == {registered.commit}, (replica.name, found)
        assert "src/lib.rs:1:" in found, (replica.name, found)
    print(f"\nsearchable through each replica {time.monotonic() - registered.at:.2f} s after the registration")


@deadline(150)
def test_a_repository_added_through_one_replica_reads_the_same_sha_through_each_over_mcp(
    cluster: Cluster, registered: Registered
) -> None:
    """Whenever a replica answers the JSON read of the new repository, the same read over MCP
    through it answers too, with the same SHA (from the registration on, until every replica
    answered both)."""
    cluster.healthy()
    token = cluster.tokens.reader
    pending = {replica.name for replica in cluster.replicas}
    deadline_at = registered.at + SERVED_BOUND_S
    while pending and time.monotonic() < deadline_at:
        for replica in cluster.replicas:
            if replica.name not in pending:
                continue
            if api(replica, "read", token, repo=REPO, path="docs/guide.md").status != 200:
                continue
            is_error, text = asyncio.run(mcp_call(replica.mcp, token, "read", {"repo": REPO, "path": "docs/guide.md"}))
            after = time.monotonic() - registered.at
            assert not is_error, (
                f"{replica.name} answered the JSON read but not the same read over MCP ({after:.1f} s after the"
                f" registration; owners {[r.name for r in cluster.owners(REPO)]}): {text}"
            )
            assert commits_in(text) == {registered.commit}, (replica.name, text)
            assert text.endswith("\n\n" + GUIDE_ONE), (replica.name, text)
            pending.discard(replica.name)
        time.sleep(0.2)
    if pending:
        pytest.fail(f"{sorted(pending)} never answered the JSON read of {REPO} within {SERVED_BOUND_S:g} s")


@deadline(150)
def test_a_repository_added_through_one_replica_reads_the_same_sha_through_each(
    cluster: Cluster, registered: Registered
) -> None:
    cluster.healthy()
    token = cluster.tokens.reader
    heads = wait_served(cluster, SERVED_BOUND_S)
    print(f"\nresolved through every replica {time.monotonic() - registered.at:.2f} s after the registration")
    assert heads == {r.name: registered.commit for r in cluster.replicas}, heads
    for replica in cluster.replicas:
        read = api(replica, "read", token, repo=REPO, path="docs/guide.md")
        assert read.status == 200, (replica.name, read)
        assert read.json()["commit"] == registered.commit, (replica.name, read.body)
        assert read.json()["content"] == GUIDE_ONE, (replica.name, read.body)
    assert len(cluster.owners(REPO)) == 2, cluster.ownership()


@dataclass
class NewHead:
    """A new commit pushed to the source and synced through csg2's admin command, and what
    each replica answered for `main` in the seconds after the sync returned."""

    old: str
    new: str
    synced_at: float
    """`time.monotonic()` when `csg repo sync` returned."""
    arrived: dict[str, float] = field(default_factory=dict)
    """Seconds after the sync when each replica first answered the new head."""
    stale: list[str] = field(default_factory=list)
    """Answers naming the old head after the sync returned."""
    failed: Counter[str] = field(default_factory=Counter)
    """Answers naming no head (an error) meanwhile."""
    mcp: dict[str, tuple[bool, str]] = field(default_factory=dict)
    """Each replica's MCP read (is it an error, its text) right after its JSON answer named the
    new head."""


@pytest.fixture(scope="module")
def new_head(cluster: Cluster, registered: Registered) -> NewHead:
    """`csg --database … --data-dir <csg2's> repo sync` after a push, once every replica served
    the first commit; then every replica's `resolve main`, again and again, until each answered
    the new head (at most HEAD_BOUND_S)."""
    with deadline_of(150, "pushing and syncing a new commit"):
        cluster.healthy()
        heads = wait_served(cluster, SERVED_BOUND_S)
        old = cluster.head()
        assert set(heads.values()) == {old}, heads
        new = cluster.commit_and_push(GUIDE_TWO)
        done = cluster.admin("repo", "sync", REPO, replica=cluster.replicas[1])
        seen = NewHead(old=old, new=new, synced_at=time.monotonic())
        assert new in done.stdout, done.stdout
        while len(seen.arrived) < len(cluster.replicas) and time.monotonic() - seen.synced_at < HEAD_BOUND_S:
            for replica in cluster.replicas:
                if replica.name in seen.arrived:
                    continue
                answer = resolve(replica, cluster.tokens.reader)
                commit = answer.body.get("commit") if isinstance(answer.body, dict) else None
                after = time.monotonic() - seen.synced_at
                if commit == new:
                    seen.arrived[replica.name] = round(after, 3)
                    # The same read over MCP at once, in the same moment of the follow.
                    arguments = {"repo": REPO, "path": "docs/guide.md"}
                    seen.mcp[replica.name] = asyncio.run(
                        mcp_call(replica.mcp, cluster.tokens.reader, "read", arguments)
                    )
                elif commit == old:
                    seen.stale.append(f"{replica.name} answered the old head {old} {after:.2f} s after the sync")
                else:
                    seen.failed[f"{replica.name} HTTP {answer.status} {str(answer.body)[:160]}"] += 1
            time.sleep(0.02)
    print(
        f"\nnew head answered after the sync (s): {seen.arrived}; stale answers: {len(seen.stale)};"
        f" failed answers meanwhile: {dict(seen.failed)}"
    )
    return seen


@deadline(60)
def test_a_new_commit_synced_through_one_replica_is_the_head_every_replica_answers(
    cluster: Cluster, new_head: NewHead
) -> None:
    assert not new_head.stale, f"{len(new_head.stale)} stale answers, first: {new_head.stale[:3]}"
    assert set(new_head.arrived) == {r.name for r in cluster.replicas}, (
        f"only {new_head.arrived} answered {new_head.new} within {HEAD_BOUND_S:g} s"
    )
    for replica in cluster.replicas:
        read = api(replica, "read", cluster.tokens.reader, repo=REPO, path="docs/guide.md")
        assert read.status == 200 and read.json()["commit"] == new_head.new, (replica.name, read.body)
        assert read.json()["content"] == GUIDE_TWO, (replica.name, read.body)


@deadline(30)
def test_no_read_fails_while_the_replicas_follow_a_new_head(new_head: NewHead) -> None:
    assert not new_head.failed, dict(new_head.failed)


@deadline(60)
def test_a_new_commit_synced_through_one_replica_is_the_head_every_replica_answers_over_mcp(
    cluster: Cluster, new_head: NewHead
) -> None:
    assert set(new_head.mcp) == {r.name for r in cluster.replicas}, new_head.arrived
    for name, (is_error, text) in sorted(new_head.mcp.items()):
        assert not is_error, f"{name} answered the new head over the JSON API, then over MCP: {text}"
        assert commits_in(text) == {new_head.new}, (name, text)
        assert text.endswith("\n\n" + GUIDE_TWO), (name, text)
    for replica in cluster.replicas:
        assert commits_in(mcp_read(replica, cluster.tokens.reader)) == {new_head.new}, replica.name


@deadline(60)
def test_a_new_commit_synced_through_one_replica_is_the_commit_every_replica_searches(
    cluster: Cluster, new_head: NewHead
) -> None:
    for replica in cluster.replicas:
        answer = wait_until(
            f"{replica.name} searches {new_head.new[:12]} within {HEAD_BOUND_S:g} s of the sync",
            max(0.5, new_head.synced_at + HEAD_BOUND_S - time.monotonic()),
            lambda r=replica: api(r, "search", cluster.tokens.reader, repo=REPO, query="version"),
            lambda a: a.status == 200 and [g["commit"] for g in a.json()["repos"]] == [new_head.new],
        )
        assert answer.json()["repos"][0]["hits"][0]["snippet"] == "version two", (replica.name, answer.body)
    print(f"\nnew head searched through each replica {time.monotonic() - new_head.synced_at:.2f} s after the sync")


@deadline(150)
def test_a_search_over_every_repository_finds_the_hit_through_each_replica(
    cluster: Cluster, registered: Registered
) -> None:
    cluster.healthy()
    head = converged(cluster)
    for replica in cluster.replicas:
        answer = api(replica, "search", cluster.tokens.reader, query="cluster_needle")
        assert answer.status == 200, (replica.name, answer)
        body = answer.json()
        assert body["not_indexed"] == [], (replica.name, body)
        assert [group["repo"] for group in body["repos"]] == [REPO], (replica.name, body)
        assert body["repos"][0]["commit"] == head, (replica.name, body)


# ---------------------------------------------------------------------------------------------
# 2. Tokens


def token_statuses(replica: Replica, token: str) -> dict[str, int]:
    """The statuses of a token on `replica`: an API call it answers itself (discovery) and one
    naming the repository (forwarded to an owner when it is not one)."""
    return {
        "discovery": api(replica, "discovery", token).status,
        "read": api(replica, "read", token, repo=REPO, path="docs/guide.md").status,
    }


ACCEPTED = {"discovery": 200, "read": 200}
REFUSED = {"discovery": 401, "read": 401}


def make_token(cluster: Cluster, user: str) -> tuple[str, str]:
    """A user made through csg2's admin command and a token for it through csg3's: the token
    and its id."""
    _, second, third = cluster.replicas
    cluster.admin("user", "add", user, replica=second)
    made = cluster.admin("token", "create", user, "--name", f"{user}-e2e", replica=third)
    token = made.stdout.strip()
    assert token.startswith("csg_"), made.stdout
    listed = cluster.admin("token", "list", "--user", user, replica=second).stdout
    ids = [line.split("\t")[0] for line in listed.splitlines() if f"{user}-e2e" in line]
    assert len(ids) == 1, listed
    return token, ids[0]


@deadline(120)
def test_a_token_made_through_one_replica_works_on_every_replica_at_its_first_call(
    cluster: Cluster, registered: Registered
) -> None:
    cluster.healthy()
    converged(cluster)
    token, _ = make_token(cluster, "carol")
    # Each replica's first call with the token, all at once, right after `token create` returned.
    first_calls: dict[str, dict[str, int]] = {}
    threads = [
        threading.Thread(target=lambda r=replica: first_calls.__setitem__(r.name, token_statuses(r, token)))
        for replica in cluster.replicas
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=CALL_TIMEOUT_S)
    print(f"\nfirst calls with the new token: {first_calls}")
    assert first_calls == {r.name: ACCEPTED for r in cluster.replicas}, first_calls
    for replica in cluster.replicas:
        text = mcp_read(replica, token)
        assert commits_in(text), (replica.name, text)


@deadline(120)
def test_a_token_revoked_through_one_replica_is_refused_by_every_replica(
    cluster: Cluster, registered: Registered
) -> None:
    cluster.healthy()
    converged(cluster)
    token, token_id = make_token(cluster, "dave")
    for replica in cluster.replicas:
        wait_until(
            f"{replica.name} accepts the new token",
            REVOKE_BOUND_S,
            lambda r=replica: token_statuses(r, token),
            lambda statuses: statuses == ACCEPTED,
            interval_s=0.05,
        )
        assert commits_in(mcp_read(replica, token)), replica.name
    assert cluster.balancer is not None
    assert resolve(cluster.balancer.url, token).status == 200

    cluster.admin("token", "revoke", token_id, replica=cluster.replicas[0])
    revoked_at = time.monotonic()
    refused_after = {}
    for replica in cluster.replicas:
        wait_until(
            f"{replica.name} refuses the token revoked through csg1 (within {REVOKE_BOUND_S:g} s)",
            max(0.0, revoked_at + REVOKE_BOUND_S - time.monotonic()),
            lambda r=replica: token_statuses(r, token),
            lambda statuses: statuses == REFUSED,
            interval_s=0.05,
        )
        refused_after[replica.name] = round(time.monotonic() - revoked_at, 3)
    print(f"\nrevoked token refused after (s): {refused_after}")

    for replica in cluster.replicas:
        try:
            outcome = asyncio.run(mcp_call(replica.mcp, token, "read", {"repo": REPO, "path": "docs/guide.md"}))
        except Exception:  # noqa: BLE001 - the SDK raises on the 401, as it should
            continue
        pytest.fail(f"{replica.name} still answers MCP with a revoked token: {outcome}")
    for replica in cluster.replicas:
        # Still refused later: no replica brings the token back from an old view.
        assert token_statuses(replica, token) == REFUSED, replica.name
    assert resolve(cluster.balancer.url, token).status == 401


# ---------------------------------------------------------------------------------------------
# 3. Load through HAProxy while a replica dies and comes back
#
# A call *fails* when the client gets no answer or an error (a transport error, an HTTP error,
# a tool error); it is *degraded* when it answers, but not the whole answer (a search saying
# NotIndexed, a read without the expected text, another commit than the head).


@dataclass
class Load:
    """Concurrent MCP clients (the official SDK; half without a handshake, half with the
    legacy initialize) reading and searching through one URL until stopped."""

    url: str
    token: str
    head: str
    clients: int = 6
    calls: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    commits: Counter[str] = field(default_factory=Counter)
    started: float = 0.0

    def at(self) -> str:
        return f"{time.monotonic() - self.started:6.2f}s"

    def fail(self, kind: str, what: str) -> None:
        self.calls["failed"] += 1
        self.failures.append(f"{self.at()} {kind}: {what}")

    async def call(self, client: Any, kind: str) -> None:
        if kind == "read":
            start = random.randint(1, 190)
            arguments = {"repo": REPO, "path": "big.txt", "start_line": start, "end_line": start + 9}
            expected = "".join(f"line {n}\n" for n in range(start, start + 10))
            tool = "read"
        elif kind == "read_guide":
            arguments, expected, tool = {"repo": REPO, "path": "docs/guide.md"}, "\n\n# Guide\n", "read"
        else:
            arguments, expected, tool = {"repo": REPO, "query": "cluster_needle"}, "src/lib.rs:1:", "search"
        result = await asyncio.wait_for(client.call_tool(tool, arguments), CALL_TIMEOUT_S)
        text = text_of(result)
        if result.is_error:
            self.fail(kind, text[:400])
            return
        commits = commits_in(text)
        self.commits.update(commits)
        if expected in text and "NotIndexed" not in text and commits == {self.head}:
            self.calls[kind] += 1
        else:
            self.calls["degraded"] += 1
            self.degraded.append(f"{self.at()} {kind}: {text[:400]}")

    async def client(self, number: int, stop: asyncio.Event) -> None:
        kinds = ["read", "search", "read_guide"]
        mode = MODES[number % len(MODES)]
        while not stop.is_set():
            try:
                async with mcp_client(self.url, self.token, mode) as client:
                    turn = number
                    while not stop.is_set():
                        kind = kinds[turn % len(kinds)]
                        turn += 1
                        try:
                            await self.call(client, kind)
                        except Exception as error:  # noqa: BLE001 - counted, then a new session
                            self.fail(kind, repr(error)[:400])
                            break
            except Exception as error:  # noqa: BLE001 - connecting (legacy initialize) failed
                self.fail(f"connect/{mode}", repr(error)[:400])
                await asyncio.sleep(0.1)

    async def run(self, until: Callable[[], Any]) -> None:
        """Runs the clients until the coroutine `until()` returns."""
        self.started = time.monotonic()
        stop = asyncio.Event()
        workers = [asyncio.create_task(self.client(n, stop)) for n in range(self.clients)]
        try:
            await until()
        finally:
            stop.set()
            # A call in flight finishes (each is bounded by CALL_TIMEOUT_S).
            await asyncio.wait_for(asyncio.gather(*workers, return_exceptions=True), CALL_TIMEOUT_S + 10)

    def total(self) -> int:
        return sum(self.calls.values())


@dataclass(frozen=True)
class Kill:
    load: Load
    victim: Replica
    head: str
    timeline: list[str]
    retries: dict[str, int]
    """HAProxy's retries and redispatches during the load."""


@pytest.fixture(scope="module")
def sigkill_under_load(cluster: Cluster, registered: Registered) -> Kill:
    """Six MCP clients through HAProxy for about 20 s; at 5 s an owner of the repository is
    SIGKILLed, at 12 s started again. Records, asserts nothing (the tests below do)."""
    with deadline_of(300, "the SIGKILL under load scenario"):
        cluster.healthy()
        head = converged(cluster)
        assert cluster.balancer is not None
        balancer = cluster.balancer
        # An owner: its calls, direct and forwarded, must go elsewhere.
        victim = cluster.owners(REPO)[0]
        before = balancer.retries()
        load = Load(url=balancer.mcp, token=cluster.tokens.reader, head=head)
        timeline: list[str] = []

        def note(event: str) -> None:
            timeline.append(f"{load.at()} {event}")

        async def scenario() -> None:
            await asyncio.sleep(5)
            await asyncio.to_thread(victim.kill)
            note(f"SIGKILL {victim.name} ({victim.url}); {load.total()} calls so far")
            await asyncio.sleep(7)
            victim.start()
            note(f"restarted {victim.name}")
            ready = await asyncio.to_thread(victim.wait_ready, 60)
            note(f"{victim.name} /readyz 200: {ready}")
            # Until HAProxy's health checks put it back (rise 2 × inter 2 s), then more load.
            await asyncio.to_thread(wait_until, "HAProxy puts the restarted replica back", 30, balancer.all_up)
            note(f"{victim.name} back in HAProxy's rotation")
            await asyncio.sleep(max(5.0, 20 - (time.monotonic() - load.started)))
            note("load stops")

        asyncio.run(load.run(scenario))
        after = balancer.retries()
    retries = {key: after[key] - before[key] for key in after}
    print(
        f"\nload through HAProxy: {load.total()} calls, {load.calls['failed']} failed,"
        f" {load.calls['degraded']} degraded ({dict(load.calls)}); commits answered: {dict(load.commits)};"
        f" HAProxy retries {retries['wretr']}, redispatches {retries['wredis']}"
    )
    print("\n".join(timeline))
    for failure in load.failures[:10]:
        print(f"  failed: {failure}")
    for degraded in load.degraded[:10]:
        print(f"  degraded: {degraded}")
    return Kill(load=load, victim=victim, head=head, timeline=timeline, retries=retries)


@deadline(30)
def test_sigkill_of_a_replica_under_load_through_haproxy_fails_no_call(
    cluster: Cluster, sigkill_under_load: Kill
) -> None:
    load = sigkill_under_load.load
    assert load.total() > 500, f"the load made only {load.total()} calls"
    assert load.calls["failed"] == 0, (
        f"{load.calls['failed']} of {load.total()} calls failed; first: {load.failures[:5]}\n"
        f"timeline: {sigkill_under_load.timeline}\n{cluster.logs(15)}"
    )


@deadline(30)
def test_sigkill_of_a_replica_under_load_through_haproxy_degrades_no_answer(sigkill_under_load: Kill) -> None:
    load = sigkill_under_load.load
    assert load.calls["degraded"] == 0, (
        f"{load.calls['degraded']} of {load.total()} answers were incomplete; first: {load.degraded[:5]}\n"
        f"timeline: {sigkill_under_load.timeline}"
    )


@deadline(60)
def test_a_replica_restarted_after_sigkill_rejoins_and_serves(cluster: Cluster, sigkill_under_load: Kill) -> None:
    victim = sigkill_under_load.victim
    ready = victim.readyz()
    assert ready.status == 200 and ready.json()["ready"] is True, ready
    members = {m["node_url"]: m for m in cluster.ownership()["members"]}
    assert members[victim.url]["live"] is True, members
    wait_until(f"{victim.name} owns {REPO} again", LEASE_S * 2, lambda: victim in cluster.owners(REPO))
    answer = wait_until(
        f"{victim.name} answers a read after its restart",
        30,
        lambda: api(victim, "read", cluster.tokens.reader, repo=REPO, path="docs/guide.md"),
        lambda a: a.status == 200,
    )
    assert answer.json()["commit"] == sigkill_under_load.head, answer.body
    assert commits_in(mcp_read(victim, cluster.tokens.reader)) == {sigkill_under_load.head}


# ---------------------------------------------------------------------------------------------
# 4. PostgreSQL stopped and started under reads


@dataclass
class Readers:
    """Reads and searches through HAProxy and through each replica (JSON API), and MCP reads
    and searches through HAProxy, in threads of their own until stopped. Each call counts under
    the phase it started in as ok, failed or degraded (see section 3)."""

    cluster: Cluster
    head: str
    phase: str = "before"
    calls: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.monotonic)

    def count(self, phase: str, outcome: str, where: str, what: str = "") -> None:
        self.calls[f"{phase} calls"] += 1
        if outcome != "ok":
            self.calls[f"{phase} {outcome}"] += 1
            self.notes.append(f"{time.monotonic() - self.started:6.2f}s [{phase} {outcome}] {where}: {what}")

    def seen(self, phase: str, outcome: str) -> list[str]:
        return [note for note in self.notes if f"[{phase} {outcome}]" in note]

    def json_loop(self) -> None:
        assert self.cluster.balancer is not None
        targets = [("haproxy", self.cluster.balancer.url)] + [(r.name, r.url) for r in self.cluster.replicas]
        token = self.cluster.tokens.reader
        while not self.stop.is_set():
            for name, url in targets:
                for tool in ("read", "search"):
                    phase = self.phase
                    try:
                        if tool == "read":
                            answer = api(url, "read", token, repo=REPO, path="docs/guide.md")
                        else:
                            answer = api(url, "search", token, repo=REPO, query="cluster_needle")
                    except OSError as error:
                        self.count(phase, "failed", f"{name} {tool}", repr(error))
                        continue
                    what = f"HTTP {answer.status} {str(answer.body)[:300]}"
                    if answer.status != 200 or not isinstance(answer.body, dict):
                        self.count(phase, "failed", f"{name} {tool}", what)
                    elif tool == "read":
                        whole = answer.body.get("commit") == self.head and "# Guide" in answer.body.get("content", "")
                        self.count(phase, "ok" if whole else "degraded", f"{name} {tool}", what)
                    else:
                        commits = [group["commit"] for group in answer.body.get("repos", [])]
                        whole = commits == [self.head] and not answer.body.get("not_indexed")
                        self.count(phase, "ok" if whole else "degraded", f"{name} {tool}", what)
            time.sleep(0.02)

    def mcp_loop(self) -> None:
        assert self.cluster.balancer is not None
        url = self.cluster.balancer.mcp

        async def run() -> None:
            turn = 0
            while not self.stop.is_set():
                phase = self.phase
                try:
                    async with mcp_client(url, self.cluster.tokens.reader) as client:
                        while not self.stop.is_set():
                            turn += 1
                            phase = self.phase
                            if turn % 2:
                                tool, arguments = "read", {"repo": REPO, "path": "docs/guide.md"}
                            else:
                                tool, arguments = "search", {"repo": REPO, "query": "cluster_needle"}
                            result = await asyncio.wait_for(client.call_tool(tool, arguments), CALL_TIMEOUT_S)
                            text = text_of(result)
                            if result.is_error:
                                outcome = "failed"
                            elif commits_in(text) == {self.head} and "NotIndexed" not in text:
                                outcome = "ok"
                            else:
                                outcome = "degraded"
                            self.count(phase, outcome, f"haproxy mcp {tool}", text[:300])
                            await asyncio.sleep(0.02)
                except Exception as error:  # noqa: BLE001 - counted, then a new session
                    self.count(phase, "failed", "haproxy mcp", repr(error)[:300])
                    await asyncio.sleep(0.1)

        asyncio.run(run())

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        threads = [threading.Thread(target=loop, daemon=True) for loop in (self.json_loop, self.mcp_loop)]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            self.stop.set()
            for thread in threads:
                thread.join(timeout=CALL_TIMEOUT_S + 5)


def registration_request(cluster: Cluster, url: str, name: str) -> Answer:
    return http(
        "POST",
        f"{url}/sourcegraph/api/repos",
        token=cluster.tokens.operator,
        body={"name": name, "source": cluster.source_url},
        timeout=60,
    )


@dataclass
class Outage:
    """What the cluster did while PostgreSQL was stopped under reads, and after it came back."""

    readers: Readers
    timeline: list[str]
    readyz_down: dict[str, Answer]
    """Each replica's first `/readyz` that said the database is unreachable (or was not 200)."""
    admin_refused: Any
    """`csg repo add` (through csg3's admin command) while the database was down."""
    admin_took_s: float
    api_refused: dict[str, Answer]
    """`POST /sourcegraph/api/repos` through HAProxy and through a replica that does not own
    the name (it forwards to an owner), while it was down."""
    readyz_back: dict[str, Answer]
    registered_after: Answer | None
    """`POST /sourcegraph/api/repos` through HAProxy once it was back."""
    pids_before: dict[str, int]


LATE_REPO = "acme/late"


@pytest.fixture(scope="module")
def outage(cluster: Cluster, registered: Registered) -> Outage:
    """Stops PostgreSQL under reads for longer than the heartbeat lease, tries registrations,
    starts it again and reads on for another lease; records everything, asserts nothing (each
    claim is a test of its own below)."""
    with deadline_of(300, "the PostgreSQL outage scenario"):
        cluster.healthy()
        # Every replica reads and searches the head first: a failure from here on is the outage's.
        head = converged(cluster)
        assert cluster.balancer is not None
        pids = {r.name: r.process.pid for r in cluster.replicas if r.process}
        readers = Readers(cluster=cluster, head=head)
        timeline: list[str] = []

        def note(event: str) -> None:
            timeline.append(f"{time.monotonic() - readers.started:6.2f}s {event}")

        readyz_down: dict[str, Answer] = {}
        api_refused: dict[str, Answer] = {}
        readyz_back: dict[str, Answer] = {}
        with readers.running():
            time.sleep(2)
            readers.phase = "down"
            cluster.postgres.stop()
            stopped_at = time.monotonic()
            note("PostgreSQL stopped")
            for replica in cluster.replicas:
                deadline_at = stopped_at + LEASE_S + 5
                while True:
                    answer = replica.readyz()
                    said = answer.status != 200 or answer.json().get("database") == "unreachable"
                    if said or time.monotonic() >= deadline_at:
                        readyz_down[replica.name] = answer
                        break
                    time.sleep(0.2)
            note(f"/readyz: { {name: (a.status, a.body) for name, a in readyz_down.items()} }")

            started = time.monotonic()
            admin_refused = cluster.admin(
                "repo", "add", LATE_REPO, cluster.source_url, replica=cluster.replicas[2], check=False
            )
            admin_took_s = time.monotonic() - started
            note(f"csg repo add: exit {admin_refused.returncode} in {admin_took_s:.2f} s")
            # Through the balancer, and through a replica that does not own the name (it
            # forwards the registration to an owner, whose refusal must reach the caller).
            urls = [r.url for r in cluster.replicas]
            stranger = next(r for r in cluster.replicas if r.url not in rendezvous_owners(LATE_REPO, urls))
            for where, url in [("haproxy", cluster.balancer.url), (stranger.name, stranger.url)]:
                api_refused[where] = registration_request(cluster, url, LATE_REPO)
                note(f"POST /sourcegraph/api/repos through {where}: HTTP {api_refused[where].status}")

            # Reads go on past the lease: no replica may count the others dead and drop or
            # take over their repositories.
            time.sleep(max(0.0, stopped_at + LEASE_S + 5 - time.monotonic()))
            readers.phase = "back"
            cluster.postgres.start()
            back_at = time.monotonic()
            note("PostgreSQL started again")
            for replica in cluster.replicas:
                deadline_at = back_at + 20
                while True:
                    answer = replica.readyz()
                    body = answer.body if isinstance(answer.body, dict) else {}
                    if (answer.status == 200 and body.get("writes") is True) or time.monotonic() >= deadline_at:
                        readyz_back[replica.name] = answer
                        break
                    time.sleep(0.2)
            note(f"/readyz: { {name: (a.status, a.body) for name, a in readyz_back.items()} }")
            # Reads go on for another lease: the membership settles as every heartbeat resumes.
            time.sleep(LEASE_S)
            readers.phase = "after"
            note("reads stop")

        registered_after = registration_request(cluster, cluster.balancer.url, LATE_REPO)
        note(f"POST /sourcegraph/api/repos through haproxy: HTTP {registered_after.status} {registered_after.body}")

    print(f"\nreads during the outage scenario: {dict(readers.calls)}")
    print("\n".join(timeline))
    for note in readers.notes[:20]:
        print(f"  {note}")
    return Outage(
        readers=readers,
        timeline=timeline,
        readyz_down=readyz_down,
        admin_refused=admin_refused,
        admin_took_s=admin_took_s,
        api_refused=api_refused,
        readyz_back=readyz_back,
        registered_after=registered_after,
        pids_before=pids,
    )


@deadline(30)
def test_while_postgresql_is_down_reads_and_searches_keep_answering(outage: Outage) -> None:
    calls = outage.readers.calls
    assert calls["down calls"] > 200, dict(calls)
    for outcome in ("failed", "degraded"):
        assert calls[f"down {outcome}"] == 0, (
            f"{calls[f'down {outcome}']} of {calls['down calls']} calls {outcome} while PostgreSQL was down;"
            f" first: {outage.readers.seen('down', outcome)[:5]}\ntimeline: {outage.timeline}"
        )


@deadline(30)
def test_while_postgresql_is_down_readyz_is_200_with_the_database_unreachable_and_no_writes(
    outage: Outage,
) -> None:
    for name, answer in outage.readyz_down.items():
        assert answer.status == 200, (name, answer)
        assert answer.json()["ready"] is True, (name, answer.body)
        assert answer.json()["database"] == "unreachable", (name, answer.body)
        assert answer.json()["writes"] is False, (name, answer.body)


@deadline(30)
def test_while_postgresql_is_down_a_registration_fails_at_once_with_a_clear_error(
    cluster: Cluster, outage: Outage
) -> None:
    refused = outage.admin_refused
    assert refused.returncode != 0, refused.stdout
    assert outage.admin_took_s < 5, f"csg repo add took {outage.admin_took_s:.1f} s to fail"
    assert "unreachable" in refused.stderr.lower(), refused.stderr
    password = urllib.parse.urlsplit(cluster.postgres.url).password
    assert password and password not in refused.stderr, "the database password is in the error"
    for where, answer in outage.api_refused.items():
        assert answer.status == 503, (where, answer)
        assert answer.elapsed_s < 5, (where, answer)
        message = str(answer.json().get("error", {}).get("message", "")).lower()
        assert "database" in message and "unreachable" in message, (where, answer.body)
        assert password not in str(answer.body), (where, answer.body)


@deadline(30)
def test_when_postgresql_is_back_no_call_fails(outage: Outage) -> None:
    calls = outage.readers.calls
    assert calls["back calls"] > 100, dict(calls)
    assert calls["back failed"] == 0, (
        f"{calls['back failed']} of {calls['back calls']} calls failed in the {LEASE_S:g} s after PostgreSQL"
        f" came back; first: {outage.readers.seen('back', 'failed')[:5]}\ntimeline: {outage.timeline}"
    )


@deadline(30)
def test_when_postgresql_is_back_no_answer_is_degraded(outage: Outage) -> None:
    calls = outage.readers.calls
    assert calls["back degraded"] == 0, (
        f"{calls['back degraded']} of {calls['back calls']} answers were incomplete in the {LEASE_S:g} s after"
        f" PostgreSQL came back; first: {outage.readers.seen('back', 'degraded')[:5]}\ntimeline: {outage.timeline}"
    )


@deadline(60)
def test_when_postgresql_is_back_a_registration_works_without_restarting_any_replica(
    cluster: Cluster, outage: Outage
) -> None:
    for name, answer in outage.readyz_back.items():
        assert answer.status == 200, (name, answer)
        assert answer.json()["database"] == "ok" and answer.json()["writes"] is True, (name, answer.body)
    answer = outage.registered_after
    assert answer is not None and answer.status == 201, answer
    assert answer.json()["head"] == cluster.head(), answer.body
    for replica in cluster.replicas:
        wait_until(
            f"{replica.name} lists {LATE_REPO}",
            REVOKE_BOUND_S,
            lambda r=replica: api(r, "discovery", cluster.tokens.reader),
            lambda a: a.status == 200 and LATE_REPO in [repo["name"] for repo in a.json()["repositories"]],
        )
    assert {r.name: r.process.pid for r in cluster.replicas if r.process} == outage.pids_before
    assert all(r.alive() for r in cluster.replicas), "a replica stopped"


# ---------------------------------------------------------------------------------------------
# 5. A search over every repository asks the owners of each (issue 31 behaviour 3)

FANOUT_REPOS = ["acme/fanout-1", "acme/fanout-2", "acme/fanout-3"]
"""More repositories from the same source, so that owner sets differ between repositories
(more are added while they do not)."""
BIG_LINES = 200
"""`big.txt` of the source holds `line 1` .. `line 200`."""


@pytest.fixture(scope="module")
def fanned(cluster: Cluster, registered: Registered) -> list[str]:
    """`FANOUT_REPOS` registered through replica 1 and searchable through every replica; with
    `REPO`, the repositories these tests search."""
    cluster.healthy()
    names = list(FANOUT_REPOS)
    for name in names:
        with deadline_of(120, f"registering {name}"):
            cluster.admin("repo", "add", name, str(cluster.source), replica=cluster.replicas[0])
    # The owner-down test needs two owner sets; rendezvous may give a few repositories the
    # same one (one chance in 27 for four).
    while len({frozenset(owners) for owners in owners_by_repo(cluster, [REPO, *names]).values()}) < 2:
        assert len(names) < 10, f"every repository has the same owners: {owners_by_repo(cluster, names)}"
        names.append(f"acme/fanout-{len(names) + 1}")
        with deadline_of(120, f"registering {names[-1]}"):
            cluster.admin("repo", "add", names[-1], str(cluster.source), replica=cluster.replicas[0])
    token = cluster.tokens.reader
    for name in names:
        for replica in cluster.replicas:
            wait_until(
                f"{replica.name} searches {name}",
                SERVED_BOUND_S,
                lambda r=replica, n=name: api(r, "search", token, repo=n, query="line 1", path="big.txt"),
                lambda a: a.status == 200 and a.json()["not_indexed"] == [] and len(a.json()["repos"]) == 1,
                interval_s=0.5,
            )
    repos = sorted([REPO, *names])
    wait_indexed_by_owners(cluster, repos)
    return repos


def wait_indexed_by_owners(cluster: Cluster, repos: list[str]) -> None:
    """Waits until every live owner of each of `repos` searches it from an index of its own
    (before that, its searches over every repository ask the other owner: a search above
    answered through that one proves nothing about this one)."""
    for replica in cluster.replicas:
        if not replica.alive():
            continue

        def unindexed(answer: Answer, me: str = replica.url) -> list[str]:
            assert answer.status == 200, answer
            return [
                entry["name"]
                for entry in answer.json()["repositories"]
                if entry["name"] in repos and me in entry["owners"] and not entry["indexed_here"]
            ]

        wait_until(
            f"{replica.name} holds an index of each of {repos} it owns",
            SERVED_BOUND_S,
            lambda r=replica: http("GET", f"{r.url}/sourcegraph/api/cluster", token=cluster.tokens.operator),
            lambda a, check=unindexed: check(a) == [],
            interval_s=0.5,
        )


def owners_by_repo(cluster: Cluster, repos: list[str]) -> dict[str, set[str]]:
    return {
        entry["name"]: set(entry["owners"]) for entry in cluster.ownership()["repositories"] if entry["name"] in repos
    }


@deadline(240)
def test_a_search_over_every_repository_pages_through_the_owners_of_each_exactly_once(
    cluster: Cluster, fanned: list[str]
) -> None:
    cluster.healthy()
    token = cluster.tokens.reader
    owners = owners_by_repo(cluster, fanned)
    print(f"\nowners: { {repo: sorted(urls) for repo, urls in owners.items()} }")
    expected = [(repo, "big.txt", n) for repo in fanned for n in range(1, BIG_LINES + 1)]
    for replica in cluster.replicas:
        elsewhere = [repo for repo in fanned if replica.url not in owners[repo]]
        hits, pages = page_through(cluster, fanned, [replica])
        print(f"{replica.name}: {pages} pages, {len(hits)} hits of {fanned}; held elsewhere: {elsewhere}")
        # Every line of every repository once, in rank order (repository, then line), whoever
        # holds it.
        assert hits == expected, replica.name


@deadline(120)
def test_a_search_over_every_repository_pages_on_whichever_replica_each_page_lands(
    cluster: Cluster, fanned: list[str]
) -> None:
    """A balancer spreads one client's calls: page k asked of replica k mod 3, each answering
    from its own indexes and other owners, continues the same ranked list."""
    cluster.healthy()
    # One owner of one repository rebuilds its index of the same commit: its generation
    # number moves on, the other owner's does not. Pages must go on across them.
    rebuilt = fanned[0]
    owner = next(r for r in cluster.replicas if r.url in owners_by_repo(cluster, fanned)[rebuilt])
    answer = http(
        "POST",
        f"{owner.url}/sourcegraph/api/prepare",
        token=cluster.tokens.operator,
        body={"repo": rebuilt, "action": "reindex"},
        timeout=60,
    )
    assert answer.status == 200, answer
    expected = [(repo, "big.txt", n) for repo in fanned for n in range(1, BIG_LINES + 1)]
    hits, pages = page_through(cluster, fanned, cluster.replicas)
    print(f"\n{pages} pages across {[r.name for r in cluster.replicas]}, {len(hits)} hits")
    assert hits == expected


def page_through(cluster: Cluster, fanned: list[str], replicas: list[Replica]) -> tuple[list[tuple[str, str, int]], int]:
    """Every page of a search over every repository for the lines of `big.txt`, page k asked
    of `replicas[k % len(replicas)]`: the hits in `fanned`, and the number of pages."""
    hits: list[tuple[str, str, int]] = []
    cursor = None
    pages = 0
    while True:
        replica = replicas[pages % len(replicas)]
        query: dict[str, Any] = {"query": "line", "path": "big.txt", "limit": 70}
        if cursor:
            query["cursor"] = cursor
        answer = api(replica, "search", cluster.tokens.reader, **query)
        assert answer.status == 200, (replica.name, pages, answer)
        body = answer.json()
        for repo in fanned:
            assert repo not in body["not_indexed"], (replica.name, body["not_indexed"])
            assert repo not in body.get("not_searched", []), (replica.name, body["not_searched"])
        for group in body["repos"]:
            if group["repo"] in fanned:
                hits.extend((group["repo"], hit["path"], hit["line"]) for hit in group["hits"])
        pages += 1
        cursor = body.get("next_cursor")
        if not cursor:
            return hits, pages


@deadline(240)
def test_a_search_over_every_repository_names_what_owners_that_are_down_hold_and_answers_the_rest(
    cluster: Cluster, fanned: list[str]
) -> None:
    cluster.healthy()
    # The premise: a replica searches what it owns itself, so only what the downed replicas
    # alone own goes unsearched.
    wait_indexed_by_owners(cluster, fanned)
    token = cluster.tokens.reader
    owners = owners_by_repo(cluster, fanned)
    # A replica that owns some of the repositories and not another: that one's owners go down.
    choice = None
    for asker in cluster.replicas:
        kept = [repo for repo in fanned if asker.url in owners[repo]]
        gone = [repo for repo in fanned if asker.url not in owners[repo]]
        if kept and gone:
            choice = (asker, kept, gone[0])
            break
    # Two owner sets (the fixture made sure) give one.
    assert choice is not None, owners
    asker, kept, gone = choice
    down = [r for r in cluster.replicas if r.url in owners[gone]]
    down_urls = {r.url for r in down}
    not_searched = sorted(repo for repo in fanned if owners[repo] == down_urls)
    print(f"\n{asker.name} asks; down: {[r.name for r in down]}; expected not searched: {not_searched}")
    failed_before = metric_of(asker, "csg_cluster_search_parts_failed_total")
    try:
        for replica in down:
            replica.kill()
        killed_at = time.monotonic()
        answer = api(asker, "search", token, query="line 7", path="big.txt")
        is_error, text = asyncio.run(mcp_call(asker.mcp, token, "search", {"query": "line 7", "path": "big.txt"}))
        # Within the lease the membership still names the dead owners: the premise of the test.
        assert time.monotonic() - killed_at < LEASE_S, "the owners' lease ran out before the searches"
        assert answer.status == 200, answer
        body = answer.json()
        named = [repo for repo in body.get("not_searched", []) if repo in fanned]
        assert named == not_searched, body
        answered = [group["repo"] for group in body["repos"]]
        for repo in kept:
            assert repo in answered, (repo, body)
        assert not is_error, text
        for repo in not_searched:
            assert (
                f"NotSearched: {repo} (the replicas that hold it did not answer; search again shortly)" in text
            ), text
        for repo in kept:
            assert f"Repo: {repo}\n" in text, text
        # Each search asked the downed owners for a part at least once, and counted it.
        assert metric_of(asker, "csg_cluster_search_parts_failed_total") >= failed_before + 2
    finally:
        cluster.healthy()


@deadline(180)
def test_definitions_and_references_over_every_repository_cover_each_repository_through_each_replica(
    cluster: Cluster, fanned: list[str]
) -> None:
    cluster.healthy()
    token = cluster.tokens.reader

    def definitions_in(answer: Answer) -> list[str]:
        return [d["repo"] for d in answer.json()["definitions"] if d["repo"] in fanned]

    def references_in(answer: Answer) -> list[str]:
        return [group["repo"] for group in answer.json()["repos"] if group["repo"] in fanned]

    for replica in cluster.replicas:
        # Symbols are extracted just after an index is published: wait for them.
        answer = wait_until(
            f"{replica.name} finds cluster_needle defined in {fanned}",
            SERVED_BOUND_S,
            lambda r=replica: api(r, "definitions", token, symbol="cluster_needle"),
            lambda a: a.status == 200 and definitions_in(a) == fanned,
            interval_s=0.5,
        )
        assert "not_searched" not in answer.json(), answer.json()
        answer = api(replica, "references", token, symbol="cluster_needle", limit=2)
        assert answer.status == 200, answer
        assert "not_searched" not in answer.json(), answer.json()
        seen = references_in(answer)
        cursor = answer.json().get("next_cursor")
        while cursor:
            answer = api(replica, "references", token, symbol="cluster_needle", limit=2, cursor=cursor)
            assert answer.status == 200, answer
            seen.extend(references_in(answer))
            cursor = answer.json().get("next_cursor")
        # One definition line per repository (`pub fn cluster_needle`), each once, in order.
        assert seen == fanned, (replica.name, seen)


# ---------------------------------------------------------------------------------------------
# Registration lands on the owners


@deadline(90)
def test_a_registration_through_a_replica_that_does_not_own_it_is_cloned_by_its_owners_only(
    cluster: Cluster,
) -> None:
    """`POST /sourcegraph/api/repos` through a replica that will not own the repository is
    answered by an owner: the owners clone it, the replica that took the call keeps no copy,
    and it reads the repository through the owners at once."""
    cluster.healthy()
    via = cluster.replicas[0]
    urls = [replica.url for replica in cluster.replicas]
    name = next(
        f"acme/placed-{n}" for n in range(100) if via.url not in rendezvous_owners(f"acme/placed-{n}", urls)
    )
    answer = registration_request(cluster, via.url, name)
    assert answer.status == 201, answer
    owners = cluster.owners(name)
    assert sorted(r.url for r in owners) == sorted(rendezvous_owners(name, urls)), cluster.ownership()
    mirror = Path("mirrors") / name.split("/")[0] / f"{name.split('/')[1]}.git"
    assert not (via.data_dir / mirror).exists(), f"{via.name} cloned {name}, which it does not own"
    read = api(via, "read", cluster.tokens.reader, repo=name, path="docs/guide.md")
    assert read.status == 200 and read.json()["commit"] == answer.json()["head"], read
    for owner in owners:
        wait_until(f"{owner.name} holds a copy of {name}", REGISTRATION_BOUND_S, lambda o=owner: (o.data_dir / mirror / "HEAD").is_file())
    assert not (via.data_dir / mirror).exists(), f"{via.name} cloned {name} after the registration"


@deadline(60)
def test_readyz_counts_the_repositories_each_replica_owns_and_holds(cluster: Cluster) -> None:
    """`/readyz`'s `repositories_served` (counted by each maintenance round, not per probe)
    matches the ownership `GET /sourcegraph/api/cluster` shows, once the owners hold their
    copies."""
    cluster.healthy()
    ownership = cluster.ownership()
    for replica in cluster.replicas:
        owned = sum(1 for entry in ownership["repositories"] if replica.url in entry["owners"])
        wait_until(
            f"{replica.name} reports {owned} repositories served",
            30,
            replica.readyz,
            lambda answer, n=owned: answer.status == 200 and answer.json()["repositories_served"] == n,
            interval_s=0.5,
        )


# ---------------------------------------------------------------------------------------------
# `csg --database … repo add` from an admin's machine clones nothing there


@deadline(150)
def test_repo_add_from_an_admin_data_directory_clones_nothing_there_and_prints_the_head_every_replica_answers(
    cluster: Cluster,
) -> None:
    """`csg --database … --data-dir <the admin's> repo add` checks the source, records the
    registration and waits until an owner replica fetched it: it prints the head that every
    replica then answers, and the admin's data directory holds no mirror. `--no-wait` returns
    at once with `NAME -`, and the owners fetch it all the same."""
    cluster.healthy()
    name = "acme/admin-added"
    started = time.monotonic()
    done = cluster.admin("repo", "add", name, str(cluster.source))
    took = time.monotonic() - started
    head = cluster.head()
    print(f"\ncsg repo add returned after {took:.2f} s:\n{done.stderr}")
    assert done.stdout.strip() == f"{name} {head}", (done.stdout, done.stderr)
    assert "waiting for an owner replica to fetch it" in done.stderr, done.stderr
    mirrors = cluster.admin_dir / "mirrors"
    assert not [str(p) for p in mirrors.rglob("*.git")], f"the admin's data directory got mirrors: {list(mirrors.rglob('*.git'))}"
    for replica in cluster.replicas:
        wait_until(
            f"{replica.name} resolves {name}@main to {head[:12]}",
            REGISTRATION_BOUND_S,
            lambda r=replica: resolve(r, cluster.tokens.reader, name),
            lambda a: served(a) and a.json()["commit"] == head,
        )

    later = "acme/admin-added-later"
    done = cluster.admin("repo", "add", later, cluster.source_url, "--no-wait")
    assert done.stdout.strip() == f"{later} -", (done.stdout, done.stderr)
    for replica in cluster.replicas:
        wait_until(
            f"{replica.name} resolves {later}@main to {head[:12]}",
            REGISTRATION_BOUND_S,
            lambda r=replica: resolve(r, cluster.tokens.reader, later),
            lambda a: served(a) and a.json()["commit"] == head,
        )
    assert not [str(p) for p in mirrors.rglob("*.git")], "the admin's data directory got mirrors"


@deadline(60)
def test_repo_add_of_a_source_that_cannot_be_fetched_fails_at_once_and_registers_nothing(cluster: Cluster) -> None:
    """A source nobody can fetch (no such repository on the Git server, a local path that is no
    repository, an unreachable URL with a password) fails within seconds saying what is wrong;
    the password is not shown, and `repo list` does not show the name."""
    cluster.healthy()
    not_git = cluster.base / "not-a-repository"
    not_git.mkdir(exist_ok=True)
    cases = {
        "acme/typo-url": (f"git://127.0.0.1:{cluster.git_port}/no-such.git", "cannot list the branches"),
        "acme/typo-path": (str(not_git), "not a Git repository"),
        "acme/typo-missing": (str(cluster.base / "no-such-dir"), "does not exist"),
        "acme/typo-password": ("http://bob:hunter2-e2e@127.0.0.1:1/acme/x.git", "bob:***@127.0.0.1:1"),
    }
    for name, (source, said) in cases.items():
        started = time.monotonic()
        refused = cluster.admin("repo", "add", name, source, check=False, timeout=60)
        took = time.monotonic() - started
        print(f"\n{name}: exit {refused.returncode} in {took:.2f} s: {refused.stderr.strip()}")
        assert refused.returncode != 0, (name, refused.stdout)
        assert took < 10, f"{name}: took {took:.1f} s to fail"
        assert said in refused.stderr, (name, refused.stderr)
        assert "hunter2" not in refused.stderr, refused.stderr
    listed = cluster.admin("repo", "list").stdout
    for name in cases:
        assert name not in listed, (name, listed)
