"""End-to-end tests of `csg mcp` (MCP over stdio, M-1) with the official Python MCP SDK."""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from mcp import Client, MCPError, StdioServerParameters

from conftest import GUIDE, REPO_NAME, TOOLS, GitRepo, csg_bin


def _params(git_repo: GitRepo, data_dir: str, plugins: str = "auto") -> StdioServerParameters:
    return StdioServerParameters(
        command=str(csg_bin()),
        args=["--data-dir", data_dir, "mcp", "--plugins", plugins, "--repo", f"{REPO_NAME}={git_repo.path}"],
        env={**os.environ, "CSG_LOG": "warn"},
    )


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_m1_stdio_read_and_strict_arguments(git_repo: GitRepo, tmp_path, mode: str) -> None:
    async with Client(_params(git_repo, str(tmp_path)), mode=mode) as client:
        listed = await client.list_tools()
        assert sorted(tool.name for tool in listed.tools) == TOOLS
        result = await client.call_tool("read", {"repo": REPO_NAME, "path": "docs/guide.md"})
        assert result.is_error is False
        block = result.content[0].text
        assert block.startswith(f"Repo: {REPO_NAME}\nCommit: {git_repo.commit}\nPath: docs/guide.md\n")
        assert block.endswith(f"\n\n{GUIDE}")
        with pytest.raises(MCPError) as raised:
            await client.call_tool("read", {"repo": REPO_NAME, "path": "docs/guide.md", "bogus_arg": 1})
        assert raised.value.code == -32602 and "bogus_arg" in raised.value.message


async def test_m2_stdio_plugins_off_is_accepted(git_repo: GitRepo, tmp_path) -> None:
    async with Client(_params(git_repo, str(tmp_path), plugins="off"), mode="legacy") as client:
        result = await client.call_tool("read", {"repo": REPO_NAME, "path": "docs/guide.md"})
    assert result.is_error is False


async def test_s1_stdio_search_after_background_indexing(git_repo: GitRepo, tmp_path) -> None:
    """`csg mcp` indexes in the background like `serve` (S-3), so search works over stdio."""
    async with Client(_params(git_repo, str(tmp_path)), mode="legacy") as client:
        deadline = time.monotonic() + 60
        while True:
            result = await client.call_tool("search", {"query": "line two"})
            text = result.content[0].text
            if "NotIndexed:" not in text:
                break
            assert time.monotonic() < deadline, text
            await asyncio.sleep(0.2)
    assert text == f"Repo: {REPO_NAME}\nCommit: {git_repo.commit}\ndocs/guide.md:2: line two\n"
