"""Access end to end (A-1, A-3): the official Python MCP SDK against `csg serve --public-read
false`, with the bearer token in the client's HTTP headers, as an agent configures it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import TokenServer


@contextlib.asynccontextmanager
async def client_with(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        async with Client(streamable_http_client(url, http_client=http)) as client:
            yield client


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


async def test_a1_a_token_in_the_header_reads(token_server: TokenServer) -> None:
    server = token_server.server
    async with client_with(server.url(), token_server.reader) as client:
        result = await client.call_tool("read", {"repo": server.repo, "path": "docs/guide.md"})
    assert not result.is_error, text(result)
    assert f"Commit: {server.commit}" in text(result)
    assert "line two" in text(result)


async def test_a1_without_a_token_the_endpoint_answers_401(token_server: TokenServer) -> None:
    server = token_server.server
    async with httpx2.AsyncClient() as http:
        response = await http.post(
            server.url(),
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Accept": "application/json, text/event-stream"},
        )
    assert response.status_code == 401
    assert response.headers["www-authenticate"].lower().startswith("bearer")
    with pytest.raises(Exception):
        async with client_with(server.url(), "csg_" + "0" * 64) as client:
            await client.list_tools()


async def test_a3_reload_plugins_needs_the_prepare_capability(token_server: TokenServer) -> None:
    server = token_server.server
    async with client_with(server.url(), token_server.reader) as client:
        refused = await client.call_tool("reload_plugins", {})
    assert refused.is_error
    assert "prepare capability" in text(refused)
    async with client_with(server.url(), token_server.operator) as client:
        allowed = await client.call_tool("reload_plugins", {})
    # Server plugins are off here: the capability is accepted and the subsystem says so.
    assert "disabled" in text(allowed), text(allowed)
