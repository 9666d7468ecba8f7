"""Server plugins end to end (P-10, P-22): a `TOOL_PRESETS` tool and a search rewritten by
`QUERY_ALIASES`, through `csg serve` with the official Python MCP SDK as the client.
"""

from __future__ import annotations

import asyncio
import json
import time

from mcp import Client

from conftest import Server


def texts(result) -> list[str]:
    assert all(block.type == "text" for block in result.content)
    return [block.text for block in result.content]


async def _call_when_indexed(client: Client, tool: str, arguments: dict):
    """`tool` once the repository is indexed: the server indexes in the background after
    start-up (S-3), so a search right after it may name the repository as not indexed yet.
    Waits for that, bounded."""
    deadline = time.monotonic() + 60
    while True:
        result = await client.call_tool(tool, arguments)
        if result.is_error or "NotIndexed:" not in texts(result)[0]:
            return result
        assert time.monotonic() < deadline, f"never indexed: {texts(result)}"
        await asyncio.sleep(0.2)


async def test_p22_a_preset_is_a_tool_with_fixed_arguments(server_plugins_server: Server) -> None:
    async with Client(server_plugins_server.url()) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        preset = tools["search_rust"]
        assert preset.description == "Search the Rust sources of the e2e repository."
        properties = preset.input_schema["properties"]
        assert "query" in properties and "repo" not in properties and "lang" not in properties
        result = await _call_when_indexed(client, "search_rust", {"query": "answer"})
    assert not result.is_error, texts(result)
    text = texts(result)[0]
    assert f"Commit: {server_plugins_server.commit}" in text
    assert "src/lib.rs:1: pub fn answer() -> u32 {" in text
    assert "docs/guide.md" not in text


async def test_p22_query_aliases_rewrite_a_search_and_disclose_it(server_plugins_server: Server) -> None:
    async with Client(server_plugins_server.url()) as client:
        result = await _call_when_indexed(
            client, "search", {"query": "answer_fn", "repo": server_plugins_server.repo}
        )
    assert not result.is_error, texts(result)
    blocks = texts(result)
    assert "src/lib.rs:1: pub fn answer() -> u32 {" in blocks[0], blocks
    disclosure = blocks[1].splitlines()
    assert disclosure[0] == "ArgumentsRewritten:"
    assert disclosure[1] == "Plugin: 10_tables.py (QUERY_ALIASES)"
    assert json.loads(disclosure[2].removeprefix("Original: "))["query"] == "answer_fn"
    assert json.loads(disclosure[3].removeprefix("Effective: "))["query"] == "answer"
