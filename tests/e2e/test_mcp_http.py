"""End-to-end tests of the MCP Streamable HTTP endpoint of `csg serve`, driven by the official
Python MCP SDK (`mcp` 2.3.0) in both protocol eras: `legacy` (2025-11-25, initialize handshake)
and `2026-07-28` (no handshake, per-request metadata). Test names carry the SPEC ids they prove.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request

import pytest
from mcp import Client, MCPError

from conftest import GUIDE, TOOLS, Server

MODES = ["legacy", "2026-07-28"]
INVALID_PARAMS = -32602


def texts(result) -> list[str]:
    """The text of every content block; R-5 allows nothing but text blocks."""
    out = []
    for block in result.content:
        assert block.type == "text", f"non-text content block: {block!r}"
        out.append(block.text)
    return out


@pytest.mark.parametrize("mode", MODES)
async def test_m1_m3_m5_r5_list_tools(server: Server, mode: str) -> None:
    async with Client(server.endpoint, mode=mode) as client:
        listed = await client.list_tools()
    assert sorted(tool.name for tool in listed.tools) == TOOLS
    for tool in listed.tools:
        # M-5: read-only, but for the operator's server-plugin reload (P-12).
        read_only = tool.name != "reload_plugins"
        assert tool.annotations is not None and tool.annotations.read_only_hint is read_only, tool.name
        assert tool.output_schema is None, f"{tool.name} declares an outputSchema (R-5)"
        assert tool.input_schema.get("type") == "object", tool.name
        assert tool.input_schema.get("additionalProperties") is False, f"{tool.name} schema is not strict (M-3)"
        assert tool.description and ("read" in tool.description or "plugin" in tool.description), tool.name


async def test_m4_server_identity_and_instructions(server: Server) -> None:
    async with Client(server.endpoint, mode="legacy") as client:
        assert client.server_info is not None
        assert client.server_info.name == "context-sourcegraph"
        instructions = client.instructions or ""
    for phrase in ["NextStartLine", "read_many", "data, not instructions", "registered association"]:
        assert phrase in instructions, f"instructions lack {phrase!r}"


@pytest.mark.parametrize("mode", MODES)
async def test_r1_r5_read_block(server: Server, mode: str) -> None:
    async with Client(server.endpoint, mode=mode) as client:
        result = await client.call_tool("read", {"repo": server.repo, "path": "docs/guide.md"})
        ranged = await client.call_tool(
            "read",
            {"repo": server.repo, "revision": server.commit, "path": "big.txt", "start_line": 2, "end_line": 3},
        )
    assert result.is_error is False
    assert result.structured_content is None
    assert texts(result) == [
        f"Repo: {server.repo}\nCommit: {server.commit}\nPath: docs/guide.md\nStartLine: 1\nEndLine: 3\n"
        f"TotalLines: 3\nTruncated: false\nHasMore: false\nBodyBytes: {len(GUIDE.encode())}\n\n{GUIDE}"
    ]
    block = texts(ranged)[0]
    header, _, body = block.partition("\n\n")
    fields = dict(line.split(": ", 1) for line in header.splitlines())
    assert fields == {
        "Repo": server.repo,
        "Commit": server.commit,
        "Path": "big.txt",
        "StartLine": "2",
        "EndLine": "3",
        "TotalLines": "600",
        "Truncated": "false",
        "HasMore": "true",
        "NextStartLine": "4",
        "BodyBytes": str(len(body.encode())),
    }
    assert body == "line 2\nline 3\n"


async def test_r2_continue_with_next_start_line(server: Server) -> None:
    """Following NextStartLine from the default 500-line window reproduces the file."""
    collected = ""
    start = 1
    async with Client(server.endpoint, mode="2026-07-28") as client:
        for _ in range(5):
            result = await client.call_tool(
                "read", {"repo": server.repo, "revision": server.commit, "path": "big.txt", "start_line": start}
            )
            header, _, body = texts(result)[0].partition("\n\n")
            fields = dict(line.split(": ", 1) for line in header.splitlines())
            collected += body
            if fields["HasMore"] == "false":
                break
            start = int(fields["NextStartLine"])
    assert collected == "".join(f"line {n}\n" for n in range(1, 601))


@pytest.mark.parametrize("mode", MODES)
async def test_r4_read_many_failed_item_keeps_its_place(server: Server, mode: str) -> None:
    async with Client(server.endpoint, mode=mode) as client:
        result = await client.call_tool(
            "read_many",
            {
                "repo": server.repo,
                "files": [
                    {"path": "docs/guide.md", "start_line": 2, "end_line": 2},
                    {"path": "docs/missing.md"},
                    {"path": "empty.txt"},
                ],
            },
        )
    assert result.is_error is False
    blocks = texts(result)
    assert len(blocks) == 3
    assert blocks[0].endswith("NextStartLine: 3\nBodyBytes: 9\n\nline two\n"), blocks[0]
    failed = blocks[1].splitlines()
    assert failed[:3] == [f"Repo: {server.repo}", f"Commit: {server.commit}", "Path: docs/missing.md"]
    assert len(failed) == 4 and failed[3].startswith("Error: "), blocks[1]
    assert blocks[2].endswith("StartLine: 1\nEndLine: 0\nTotalLines: 0\nTruncated: false\nHasMore: false\nBodyBytes: 0\n\n")


async def test_r5_business_failure_is_tool_error(server: Server) -> None:
    async with Client(server.endpoint, mode="legacy") as client:
        result = await client.call_tool("read", {"repo": server.repo, "path": "docs/nothing-here.md"})
    assert result.is_error is True
    text = "\n".join(texts(result))
    assert text.startswith("Error: ") and "docs/nothing-here.md" in text


async def test_s6_resolve(server: Server) -> None:
    async with Client(server.endpoint, mode="legacy") as client:
        result = await client.call_tool("resolve", {"repo": server.repo, "revision": "main"})
    assert texts(result) == [f"Repo: {server.repo}\nRevision: main\nCommit: {server.commit}\n"]


async def test_s7_list(server: Server) -> None:
    async with Client(server.endpoint, mode="2026-07-28") as client:
        result = await client.call_tool("list", {"repo": server.repo})
    header, _, entries = texts(result)[0].partition("\n\n")
    assert header.splitlines()[:3] == [f"Repo: {server.repo}", f"Commit: {server.commit}", "Path: /"]
    lines = entries.splitlines()
    assert "docs/" in lines and "src/" in lines
    assert "empty.txt  [0 bytes]" in lines
    assert any(line.startswith("big.txt  [") for line in lines)


async def test_s5_discovery(server: Server) -> None:
    async with Client(server.endpoint, mode="legacy") as client:
        result = await client.call_tool("discovery", {})
    text = texts(result)[0]
    assert text.startswith("Repositories: 1\n\n"), text
    assert f"Repo: {server.repo}\n" in text and f"Head: {server.commit}\n" in text


@pytest.mark.parametrize("mode", MODES)
async def test_m3_unknown_argument_is_invalid_params(server: Server, mode: str) -> None:
    async with Client(server.endpoint, mode=mode) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("read", {"repo": server.repo, "path": "docs/guide.md", "bogus_arg": 1})
    assert raised.value.code == INVALID_PARAMS
    assert "bogus_arg" in raised.value.message


@pytest.mark.parametrize("query", ["?plugins=off", "?plugins=a,b", "?plugins=auto", ""])
async def test_m2_plugins_connection_parameter_accepted(server: Server, query: str) -> None:
    async with Client(server.url(query), mode="legacy") as client:
        result = await client.call_tool("read", {"repo": server.repo, "path": "docs/guide.md"})
    assert result.is_error is False
    assert texts(result)[0].endswith(f"\n\n{GUIDE}")


async def test_m2_invalid_plugins_parameter_is_refused(server: Server) -> None:
    with pytest.raises(Exception) as raised:
        async with Client(server.url("?plugins=bogus%20value"), mode="2026-07-28") as client:
            await client.call_tool("read", {"repo": server.repo, "path": "docs/guide.md"})
    error = raised.value
    # anyio may wrap the error in an exception group; find the MCP error inside.
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    assert isinstance(error, MCPError), repr(raised.value)
    assert error.code == INVALID_PARAMS
    assert "plugins=bogus value" in error.message


def _raw_post(url: str, headers: dict[str, str]) -> int:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        }
    ).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_m1_foreign_origin_is_refused_with_403(server: Server) -> None:
    assert _raw_post(server.endpoint, {"Origin": "http://evil.example"}) == 403
    # Non-browser clients send no Origin and pass.
    assert _raw_post(server.endpoint, {}) == 200


def test_m1_foreign_host_is_refused(server: Server) -> None:
    assert _raw_post(server.endpoint, {"Host": "evil.example"}) == 403


async def _search_when_indexed(client: Client, arguments: dict) -> str:
    """The server indexes in the background after start-up (S-3); wait for it, bounded."""
    deadline = time.monotonic() + 60
    while True:
        result = await client.call_tool("search", arguments)
        assert result.is_error is False, texts(result)
        text = texts(result)[0]
        if "NotIndexed:" not in text:
            return text
        assert time.monotonic() < deadline, f"never indexed: {text}"
        await asyncio.sleep(0.2)


@pytest.mark.parametrize("mode", MODES)
async def test_s1_s2_search_then_read_the_hit(server: Server, mode: str) -> None:
    """S-1: search names the full SHA; reading the hit at that SHA gives the matched line."""
    async with Client(server.endpoint, mode=mode) as client:
        text = await _search_when_indexed(client, {"query": "line three", "repo": server.repo})
        assert text == f"Repo: {server.repo}\nCommit: {server.commit}\ndocs/guide.md:3: line three\n"
        read = await client.call_tool(
            "read",
            {"repo": server.repo, "revision": server.commit, "path": "docs/guide.md", "start_line": 3, "end_line": 3},
        )
        assert texts(read)[0].endswith("\n\nline three\n")
        regex = await _search_when_indexed(client, {"query": r"^line 59\d$", "regex": True, "limit": 3})
        lines = regex.splitlines()
        assert lines[2:5] == ["big.txt:590: line 590", "big.txt:591: line 591", "big.txt:592: line 592"]
        assert lines[5].startswith("NextCursor: ")


@pytest.mark.parametrize("mode", MODES)
async def test_navigation_definitions_outline_then_read(server: Server, mode: str) -> None:
    """Issue 12: definitions names the full SHA and line range; outline agrees; read shows it."""
    async with Client(server.endpoint, mode=mode) as client:
        deadline = time.monotonic() + 60
        while True:
            result = await client.call_tool("definitions", {"symbol": "answer"})
            assert result.is_error is False, texts(result)
            found = texts(result)[0]
            if "NotIndexed:" not in found:
                break
            assert time.monotonic() < deadline, f"never indexed: {found}"
            await asyncio.sleep(0.2)
        assert found == (
            f"Symbol: answer\nDefinitions: 1\nShown: 1\n\nRepo: {server.repo}\nCommit: {server.commit}\n"
            "src/lib.rs:1-3: function answer  pub fn answer() -> u32 {\n"
        )
        outline = texts(await client.call_tool("outline", {"repo": server.repo, "path": "src/lib.rs"}))[0]
        assert outline.endswith("\n\n1-3 function answer  pub fn answer() -> u32 {\n"), outline
        read = await client.call_tool(
            "read",
            {"repo": server.repo, "revision": server.commit, "path": "src/lib.rs", "start_line": 1, "end_line": 3},
        )
        assert texts(read)[0].endswith("\n\npub fn answer() -> u32 {\n    42\n}\n")


async def test_s1_search_unknown_argument_is_invalid_params(server: Server) -> None:
    async with Client(server.endpoint, mode="legacy") as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("search", {"query": "x", "regexp": True})
    assert raised.value.code == INVALID_PARAMS
    assert "regexp" in raised.value.message


def test_s1_search_json_api(server: Server) -> None:
    """S-1: POST /sourcegraph/api/search answers JSON with query statistics."""
    request = urllib.request.Request(
        server.url().replace("/sourcegraph/mcp", "/sourcegraph/api/search"),
        data=json.dumps({"query": "pub fn", "repo": server.repo}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    deadline = time.monotonic() + 60
    while True:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.loads(response.read())
        if not body["not_indexed"]:
            break
        assert time.monotonic() < deadline, body
        time.sleep(0.2)
    assert body["repos"][0]["commit"] == server.commit
    assert body["repos"][0]["hits"][0]["path"] == "src/lib.rs"
    assert body["stats"]["files_verified"] >= 1
