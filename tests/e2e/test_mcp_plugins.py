"""Repository plugins end to end (W-8..W-10, W-17, R-5, M-2): the committed `related-content`
example plugin read through `csg serve` by the official Python MCP SDK, with the connection
parameter `plugins=auto`, `off`, a named list, and the call argument `plugins: []`.
"""

from __future__ import annotations

from mcp import Client

from conftest import Server

RELATED = "related:\n- refs/glossary.md — Glossary\n- refs/policy.md — Policy"


def texts(result) -> list[str]:
    assert all(block.type == "text" for block in result.content)
    return [block.text for block in result.content]


def base_block(server: Server, path: str, body: str) -> str:
    lines = body.count("\n")
    return (
        f"Repo: {server.repo}\nCommit: {server.commit}\nPath: {path}\nStartLine: 1\nEndLine: {lines}\n"
        f"TotalLines: {lines}\nTruncated: false\nHasMore: false\nBodyBytes: {len(body.encode())}\n\n{body}"
    )


async def read(server: Server, query: str, arguments: dict) -> list[str]:
    async with Client(server.url(query)) as client:
        result = await client.call_tool("read", {"repo": server.repo, **arguments})
    assert not result.is_error, texts(result)
    return texts(result)


async def test_w8_w17_auto_appends_after_a_blank_line(plugin_server: Server) -> None:
    blocks = await read(plugin_server, "?plugins=auto", {"path": "kb/guide.md"})
    assert blocks == [base_block(plugin_server, "kb/guide.md", "# Guide\nbody\n") + "\n" + RELATED]


async def test_w8_plugin_applies_to_its_directory_only(plugin_server: Server) -> None:
    blocks = await read(plugin_server, "?plugins=auto", {"path": "notes.md"})
    assert blocks == [base_block(plugin_server, "notes.md", "notes\n")]


async def test_m2_connection_off_wins_over_the_call(plugin_server: Server) -> None:
    plain = [base_block(plugin_server, "kb/guide.md", "# Guide\nbody\n")]
    assert await read(plugin_server, "?plugins=off", {"path": "kb/guide.md"}) == plain
    named = await read(plugin_server, "?plugins=off", {"path": "kb/guide.md", "plugins": [{"name": "related-content"}]})
    assert named[0] == plain[0]
    assert named[1].startswith("PluginDiagnostics:\n- code=PLUGIN_DISABLED plugin=related-content"), named


async def test_w9_connection_list_and_w10_empty_call(plugin_server: Server) -> None:
    with_plugin = await read(plugin_server, "?plugins=related-content", {"path": "kb/guide.md"})
    assert with_plugin[0].endswith("\n\n" + RELATED)
    other = await read(plugin_server, "?plugins=evidence-chain", {"path": "kb/guide.md"})
    assert other[0] == base_block(plugin_server, "kb/guide.md", "# Guide\nbody\n")
    assert other[1].startswith("PluginDiagnostics:\n- code=PLUGIN_NOT_FOUND plugin=evidence-chain"), other
    none = await read(plugin_server, "?plugins=auto", {"path": "kb/guide.md", "plugins": []})
    assert none == [base_block(plugin_server, "kb/guide.md", "# Guide\nbody\n")]
