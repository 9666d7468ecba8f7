"""Server plugins in cluster mode end to end (issue 31 behaviour 5): `reload_plugins` through
any replica reloads the server plugins of every replica.

A cluster of its own (PostgreSQL, three replicas, HAProxy; about 10 s to start) whose replicas
run server plugins from one directory, as an operator ships the same files to every host. The
directory starts empty; a preset tool written into it appears on a replica only when that
replica reloads, so a replica the call did not reach lists it only if the reload was
broadcast. Run alone with `.venv/bin/python -m pytest -q -s -rA tests/e2e/test_cluster_plugins.py`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from cluster import Cluster, Replica, deadline_of, mcp_client, text_of, wait_until

PRESET = "search_everywhere"
PLUGIN = f"""\
TOOL_PRESETS = {{
    "{PRESET}": {{
        "tool": "search",
        "description": "Search every repository (a preset of the cluster end-to-end test).",
        "arguments": {{"lang": "rust"}},
    }},
}}
"""
BROADCAST_BOUND_S = 10.0
"""A reload through one replica reaches every other replica within this (one NOTIFY, then each
replica's own reload of one small file)."""
CALL_TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def plugins_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(tmp_path_factory.mktemp("cluster-server-plugins"))


@pytest.fixture(scope="module")
def cluster(plugins_dir: Path) -> Iterator[Cluster]:
    running = Cluster(
        replica_env={
            "SOURCEGRAPH_SERVER_PLUGINS_ENABLED": "true",
            "SOURCEGRAPH_SERVER_PLUGINS_DIRECTORY": str(plugins_dir),
        }
    )
    try:
        with deadline_of(600, "starting the cluster (PostgreSQL, 3 replicas, HAProxy)"):
            running.start()
        yield running
    finally:
        with deadline_of(120, "stopping the cluster"):
            running.close()


async def _tool_names(replica: Replica, token: str) -> set[str]:
    async with mcp_client(replica.mcp, token) as client:
        listed = await asyncio.wait_for(client.list_tools(), CALL_TIMEOUT_S)
    return {tool.name for tool in listed.tools}


def tool_names(replica: Replica, token: str) -> set[str]:
    return asyncio.run(_tool_names(replica, token))


async def _reload(replica: Replica, token: str) -> tuple[bool, str]:
    async with mcp_client(replica.mcp, token) as client:
        result = await asyncio.wait_for(client.call_tool("reload_plugins", {}), CALL_TIMEOUT_S)
    return bool(result.is_error), text_of(result)


def test_reload_plugins_through_one_replica_reloads_every_replica(cluster: Cluster, plugins_dir: Path) -> None:
    with deadline_of(120, "the reload broadcast test"):
        token = cluster.tokens.operator
        for replica in cluster.replicas:
            assert PRESET not in tool_names(replica, token), f"{replica.name} lists {PRESET} before any reload"

        (plugins_dir / "10_presets.py").write_text(PLUGIN)
        first, *others = cluster.replicas
        is_error, text = asyncio.run(_reload(first, token))
        assert not is_error, f"reload_plugins through {first.name}: {text}"
        assert PRESET in tool_names(first, token), f"{first.name} reloaded but lacks {PRESET}: {text}"

        for replica in others:
            wait_until(
                f"{replica.name} lists {PRESET} after the reload through {first.name}",
                BROADCAST_BOUND_S,
                lambda r=replica: tool_names(r, token),
                lambda names: PRESET in names,
                interval_s=0.5,
            )

        # And back: the file removed and reloaded through another replica; every one drops it.
        (plugins_dir / "10_presets.py").unlink()
        is_error, text = asyncio.run(_reload(others[-1], token))
        assert not is_error, f"reload_plugins through {others[-1].name}: {text}"
        for replica in cluster.replicas:
            wait_until(
                f"{replica.name} no longer lists {PRESET}",
                BROADCAST_BOUND_S,
                lambda r=replica: tool_names(r, token),
                lambda names: PRESET not in names,
                interval_s=0.5,
            )


ROUTED_REPO = "acme/routed"
ROUTING_PLUGIN = f"""\
TOOL_PRESETS = {{
    "read_routed_guide": {{
        "tool": "read",
        "description": "The guide of {ROUTED_REPO} (a preset that fixes the repository).",
        "arguments": {{"repo": "{ROUTED_REPO}"}},
    }},
}}


def on_tool_call(call):
    arguments = dict(call["arguments"])
    if arguments.get("repo") == "acme/nickname":
        arguments["repo"] = "{ROUTED_REPO}"
    return {{"arguments": arguments}}
"""


async def _call(replica: Replica, token: str, tool: str, arguments: dict[str, str]) -> tuple[bool, str]:
    async with mcp_client(replica.mcp, token) as client:
        result = await asyncio.wait_for(client.call_tool(tool, arguments), CALL_TIMEOUT_S)
    return bool(result.is_error), text_of(result)


def test_a7_presets_and_rewrites_are_routed_by_the_repository_they_name(cluster: Cluster, plugins_dir: Path) -> None:
    """Issue 43 finding 5: a preset that fixes `repo`, and an `on_tool_call` rewrite that changes
    it, are routed by the repository the tool will run on, not by the caller's arguments: the
    replica that owns neither answers with the owners' file, as the owners do."""
    with deadline_of(180, "preset and rewrite routing"):
        token = cluster.tokens.operator
        cluster.admin("repo", "add", ROUTED_REPO, str(cluster.source))
        (plugins_dir / "20_routing.py").write_text(ROUTING_PLUGIN)
        try:
            is_error, text = asyncio.run(_reload(cluster.replicas[0], token))
            assert not is_error, text
            owners = cluster.owners(ROUTED_REPO)
            (outsider,) = [r for r in cluster.replicas if r not in owners]
            wait_until(
                f"{outsider.name} lists the routing preset",
                BROADCAST_BOUND_S,
                lambda: tool_names(outsider, token),
                lambda names: "read_routed_guide" in names,
                interval_s=0.5,
            )
            for replica in [outsider, *owners]:
                for tool, arguments in [
                    ("read_routed_guide", {"path": "docs/guide.md"}),
                    ("read", {"repo": "acme/nickname", "path": "docs/guide.md"}),
                ]:
                    is_error, text = asyncio.run(_call(replica, token, tool, arguments))
                    assert not is_error and "version one" in text, (replica.name, tool, text)
        finally:
            (plugins_dir / "20_routing.py").unlink()
            asyncio.run(_reload(cluster.replicas[-1], token))
