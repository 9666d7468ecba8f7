"""OAuth 2.1 end to end: `csg serve` as a resource server of a real OpenID Provider (panva's
oidc-provider, `tests/oidc`, started by `scripts/oidc.sh`), with the official Python MCP SDK's
`OAuthClientProvider` as the client that discovers, registers and authorizes from nothing but
csg's 401.

- Discovery: the protected resource metadata at both well-known URLs, and the 401 challenge.
- The SDK's whole flow (PRM, AS metadata, dynamic registration, authorization code with PKCE,
  resource indicator), then `list_tools` and `read`.
- Tokens csg must refuse (foreign audience, expired, unknown key, `alg: none`, HS256 keyed with
  the public key, wrong issuer, garbage): 401 `invalid_token`; one without `csg:read`: 403.
- Step-up: a `csg:read` token calling `reload_plugins` gets 403 `insufficient_scope`; the SDK
  authorizes again for `csg:prepare` and the call goes through. Members of a prepare group
  need no csg:prepare scope.
- Users from tokens: `sub` is the user name (listed by `csg user list` after the first call),
  `groups` grant private repositories (`--oauth-group-grant`), and a user without the grant
  cannot tell a private repository from a missing one (A-4).
- Static tokens keep working beside OAuth.

`test_the_provider_*` need no csg: they prove the identity provider on its own. One provider
and one `csg serve` are started per module; every test has its own deadline (SIGALRM). Run with
`.venv/bin/python -m pytest -q tests/e2e/test_oauth.py` (`-k provider` for the provider alone).
"""

from __future__ import annotations

import re
import secrets
import subprocess
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from cluster import deadline, deadline_of, free_port, text_of, with_deadlines
from conftest import GitRepo, _git, csg_bin, serving
from oidc import IdentityProvider, sdk_client

PUBLIC_REPO = "test/e2e"
PRIVATE_REPO = "acme/private"
MISSING_REPO = "acme/missing"
SECRET = "# Private\nthe eng group reads this\n"
READ_GUIDE = {"repo": PUBLIC_REPO, "path": "docs/guide.md"}
RESOURCE_PATH = "/sourcegraph/mcp"
PRM_PATH = "/.well-known/oauth-protected-resource"
SCOPES = ["csg:read", "csg:prepare"]
HTTP_TIMEOUT_S = 15.0
MCP_ACCEPT = "application/json, text/event-stream"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "0"}},
}


_deadline = with_deadlines(60)


# ---------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def idp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IdentityProvider]:
    """The identity provider, for the whole module (stopped also when its start fails half-way)."""
    provider = IdentityProvider(tmp_path_factory.mktemp("oidc"))
    try:
        with deadline_of(360, "starting the identity provider (npm ci on first use)"):
            provider.start()
        yield provider
    finally:
        provider.stop()


@pytest.fixture(autouse=True)
def _fresh_provider_state(request: pytest.FixtureRequest) -> None:
    """Each test starts as `alice` without a scope limit, whatever the one before it left."""
    if "idp" in request.fixturenames:
        provider: IdentityProvider = request.getfixturevalue("idp")
        provider.set_account("alice")
        provider.limit_scopes(None)


# ---------------------------------------------------------------------------------------------
# Helpers


def challenge(header: str) -> tuple[str, dict[str, str]]:
    """A `WWW-Authenticate` challenge's scheme and its parameters (quoted or not)."""
    scheme, _, rest = header.strip().partition(" ")
    params = {
        match.group(1).lower(): match.group(2) if match.group(2) is not None else match.group(3)
        for match in re.finditer(r'([A-Za-z_][\w-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))', rest)
    }
    return scheme, params


def unverified_claims(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


def unverified_header(token: str) -> dict[str, Any]:
    return jwt.get_unverified_header(token)


# ---------------------------------------------------------------------------------------------
# The identity provider on its own (no csg)


@deadline(60)
async def test_the_provider_issues_a_jwt_for_the_resource(idp: IdentityProvider) -> None:
    """Dynamic registration, authorization code with PKCE and a resource indicator, against the
    provider alone: the access token is a JWT of its published key for exactly that resource,
    with the requested csg scopes and the account's groups."""
    resource = f"http://127.0.0.1:{free_port()}{RESOURCE_PATH}"
    answer = await idp.issue_token(resource, scope="csg:read csg:prepare", account="bob")
    token = answer["access_token"]
    assert answer["token_type"].lower() == "bearer", answer
    assert answer["scope"] == "csg:read csg:prepare", answer

    header = unverified_header(token)
    assert header["alg"] == "RS256" and header["typ"] == "at+jwt", header
    metadata = idp.metadata()
    with httpx2.Client(timeout=HTTP_TIMEOUT_S, trust_env=False) as http:
        published = http.get(metadata["jwks_uri"]).json()
    assert all("d" not in key for key in published["keys"]), "the provider published a private key"
    assert header["kid"] in {key["kid"] for key in published["keys"]}
    assert header["kid"] in {key["kid"] for key in idp.private_jwks()["keys"]}
    signing_key = jwt.PyJWKSet.from_dict(published)[header["kid"]]
    claims = jwt.decode(token, signing_key, algorithms=["RS256"], audience=resource, issuer=idp.issuer)
    assert claims["aud"] == resource
    assert claims["sub"] == "bob"
    assert claims["scope"] == "csg:read csg:prepare"
    assert claims["groups"] == ["ops"]
    assert claims["exp"] - claims["iat"] == 600
    assert claims["client_id"]


@deadline(60)
async def test_the_provider_grants_within_the_scope_limit(idp: IdentityProvider) -> None:
    """Under a scope limit consent grants only those csg scopes; lifted, the next authorization
    (a fresh one, not the earlier grant) grants everything asked for (what step-up relies on)."""
    resource = f"http://127.0.0.1:{free_port()}{RESOURCE_PATH}"
    idp.limit_scopes("csg:read")
    limited = await idp.issue_token(resource, scope="csg:read csg:prepare", account="carol")
    assert unverified_claims(limited["access_token"])["scope"] == "csg:read"
    assert unverified_claims(limited["access_token"])["groups"] == []
    idp.limit_scopes(None)
    full = await idp.issue_token(resource, scope="csg:read csg:prepare", account="carol")
    assert unverified_claims(full["access_token"])["scope"] == "csg:read csg:prepare"


@deadline(60)
async def test_the_provider_lets_a_client_ask_beyond_its_registered_scope(idp: IdentityProvider) -> None:
    """The MCP SDK registers with the scope of its first challenge and never again; its step-up
    needs the provider to grant a scope the registration did not name."""
    resource = f"http://127.0.0.1:{free_port()}{RESOURCE_PATH}"
    answer = await idp.issue_token(resource, scope="csg:read csg:prepare", registered_scope="csg:read")
    assert unverified_claims(answer["access_token"])["scope"] == "csg:read csg:prepare"


@deadline(30)
def test_the_provider_signs_forgeries_as_asked(idp: IdentityProvider) -> None:
    """The forged tokens are what their names say: the real key verifies `rs256` and `es256`
    only, `unknown` has a kid the provider does not publish, `none` and `hs256` their algs."""
    audience = "http://127.0.0.1:1/sourcegraph/mcp"
    keys = {key["kid"]: key for key in idp.private_jwks()["keys"]}
    for kind in ("rs256", "es256"):
        token = idp.sign(idp.claims(audience), key=kind)
        jwk = keys[unverified_header(token)["kid"]]
        jwt.decode(token, jwt.PyJWK.from_dict(jwk).key.public_key(), algorithms=[jwk["alg"]], audience=audience)
    assert unverified_header(idp.sign(idp.claims(audience), key="unknown"))["kid"] not in keys
    assert unverified_header(idp.sign(idp.claims(audience), key="none"))["alg"] == "none"
    assert unverified_header(idp.sign(idp.claims(audience), key="hs256"))["alg"] == "HS256"


# ---------------------------------------------------------------------------------------------
# csg serve as the resource server


@dataclass(frozen=True)
class OAuthServer:
    """`csg serve --oauth-issuer` on `base` (its `--public-url`), over `data_dir`."""

    base: str
    data_dir: Path
    public_commit: str
    static_token: str
    """A `csg token create` token of the user `static`."""

    @property
    def resource(self) -> str:
        """The MCP endpoint, which is also the audience csg accepts."""
        return self.base + RESOURCE_PATH

    @property
    def metadata_url(self) -> str:
        return self.base + PRM_PATH + RESOURCE_PATH

    def csg(self, *args: str) -> str:
        return run_csg(self.data_dir, *args)


def run_csg(data_dir: Path, *args: str) -> str:
    done = subprocess.run(
        [str(csg_bin()), "--data-dir", str(data_dir), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"csg {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture(scope="module")
def private_repo(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """`docs/secret.md`, for `acme/private`."""
    work = tmp_path_factory.mktemp("private-repo")
    (work / "docs").mkdir()
    (work / "docs" / "secret.md").write_text(SECRET)
    _git(work, "init", "-q", "-b", "main")
    _git(work, "add", ".")
    _git(work, "commit", "-q", "-m", "secret")
    return GitRepo(path=work, commit=_git(work, "rev-parse", "HEAD").strip())


@pytest.fixture(scope="module")
def server(
    idp: IdentityProvider, git_repo: GitRepo, private_repo: GitRepo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OAuthServer]:
    """One `csg serve` for the module: `test/e2e` public, `acme/private` private and granted to
    the group `eng`, the group `ops` with the prepare capability, no anonymous reads, and a
    static token of the user `static`."""
    data_dir = tmp_path_factory.mktemp("oauth-data")
    with deadline_of(240, "registering the repositories and starting csg serve"):
        run_csg(data_dir, "repo", "add", PUBLIC_REPO, str(git_repo.path))
        run_csg(data_dir, "repo", "add", PRIVATE_REPO, str(private_repo.path), "--private")
        run_csg(data_dir, "user", "add", "static")
        static_token = run_csg(data_dir, "token", "create", "static")
        # --public-url must be the URL served: the audience and the metadata's URLs derive from it.
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        # The website's own client at the provider.
        client_id, client_secret = idp.register_web_client(base + CALLBACK_PATH)
        log_path = tmp_path_factory.mktemp("oauth-log") / "csg.stderr"
        args = [
            "--listen",
            f"127.0.0.1:{port}",
            "--public-url",
            base,
            "--public-read",
            "false",
            "--oauth-issuer",
            idp.issuer,
            "--oauth-group-grant",
            f"eng={PRIVATE_REPO}",
            "--oauth-prepare-group",
            "ops",
            # `=`: a generated client id may start with `-`.
            f"--oauth-client-id={client_id}",
        ]
    with serving(data_dir, args, log_path, {"CSG_OAUTH_CLIENT_SECRET": client_secret}) as endpoint:
        assert endpoint.startswith(base + RESOURCE_PATH), endpoint
        yield OAuthServer(base=base, data_dir=data_dir, public_commit=git_repo.commit, static_token=static_token)


@asynccontextmanager
async def bearer_client(server: OAuthServer, token: str) -> AsyncIterator[Client]:
    """The SDK's client with a fixed bearer token (as an agent configured by hand)."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        async with Client(streamable_http_client(server.resource, http_client=http)) as client:
            yield client


def client(source: str | None) -> httpx2.Client:
    """An HTTP client, calling from the loopback address `source` if given: the server limits
    wrong tokens per client address, so a test that presents many uses an address of its own."""
    transport = httpx2.HTTPTransport(local_address=source) if source else None
    return httpx2.Client(timeout=HTTP_TIMEOUT_S, trust_env=False, transport=transport)


def post_mcp(server: OAuthServer, body: dict[str, Any], token: str | None, source: str | None = None) -> httpx2.Response:
    """One raw MCP POST (for status codes and headers, which the SDK hides)."""
    headers = {"Accept": MCP_ACCEPT, "MCP-Protocol-Version": "2025-11-25"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    with client(source) as http:
        return http.post(server.resource, json=body, headers=headers)


def call_api(
    server: OAuthServer, method: str, path: str, token: str | None, source: str | None = None, **kwargs: Any
) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    with client(source) as http:
        return http.request(method, server.base + path, headers=headers, **kwargs)


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def assert_challenge(response: httpx2.Response, server: OAuthServer, status: int, **expected: str) -> None:
    """`response` has `status` and a Bearer challenge with exactly `expected` and the
    `resource_metadata` of `server` as parameters."""
    assert response.status_code == status, f"HTTP {response.status_code}: {response.text[:300]}"
    scheme, params = challenge(response.headers.get("www-authenticate", ""))
    assert scheme.lower() == "bearer", response.headers.get("www-authenticate")
    assert params == {"resource_metadata": server.metadata_url, **expected}, response.headers["www-authenticate"]


# ---------------------------------------------------------------------------------------------
# Discovery


@deadline(30)
def test_the_protected_resource_metadata_names_the_issuer(server: OAuthServer, idp: IdentityProvider) -> None:
    """RFC 9728 metadata at the resource's own well-known URL and at the root one."""
    expected = {
        "resource": server.resource,
        "authorization_servers": [idp.issuer],
        "scopes_supported": SCOPES,
        "bearer_methods_supported": ["header"],
        "resource_name": "Context Source Graph",
    }
    for url in (server.metadata_url, server.base + PRM_PATH):
        with httpx2.Client(timeout=HTTP_TIMEOUT_S, trust_env=False) as http:
            response = http.get(url)
        assert response.status_code == 200, f"{url}: HTTP {response.status_code}"
        assert response.headers["content-type"].startswith("application/json"), response.headers
        assert response.json() == expected, url


@deadline(30)
def test_a_call_without_a_token_is_challenged_to_the_metadata(server: OAuthServer) -> None:
    """MCP and the JSON API alike: 401 naming the metadata and the scope to ask for (RFC 6750:
    no `error` when no credentials came)."""
    assert_challenge(post_mcp(server, INITIALIZE, None), server, 401, scope="csg:read")
    api = call_api(server, "GET", "/sourcegraph/api/read", None, params=READ_GUIDE)
    assert_challenge(api, server, 401, scope="csg:read")


# ---------------------------------------------------------------------------------------------
# The SDK's flow


@deadline(90)
async def test_the_sdk_authorizes_from_nothing_but_the_401_and_reads(
    server: OAuthServer, idp: IdentityProvider
) -> None:
    """Discovery, dynamic registration, authorization code with PKCE for the resource, then
    tools and a read as alice; afterwards csg knows the user alice."""
    async with sdk_client(server.resource, idp) as (client, flow):
        tools = await client.list_tools()
        result = await client.call_tool("read", READ_GUIDE)
    assert "read" in {tool.name for tool in tools.tools}
    assert not result.is_error, text_of(result)
    assert f"Commit: {server.public_commit}" in text_of(result)

    assert len(flow.urls) == 1, flow.urls
    requested = flow.requested(0)
    assert flow.urls[0].startswith(idp.metadata()["authorization_endpoint"] + "?")
    assert requested["resource"] == server.resource
    assert "csg:read" in requested["scope"].split()
    assert requested["code_challenge_method"] == "S256"
    claims = unverified_claims(flow.access_token)
    assert claims["aud"] == server.resource and claims["sub"] == "alice", claims
    assert re.search(r"^\s*alice\b", server.csg("user", "list"), re.MULTILINE), server.csg("user", "list")


@deadline(90)
async def test_step_up_a_read_token_gets_csg_prepare_for_reload_plugins(
    server: OAuthServer, idp: IdentityProvider
) -> None:
    """A token with csg:read only (the provider grants no more) reads; `reload_plugins` then
    answers 403 insufficient_scope, and the SDK authorizes again, now for csg:prepare too (the
    limit lifted), and the call goes through."""
    idp.limit_scopes("csg:read")
    async with sdk_client(server.resource, idp) as (client, flow):
        await client.list_tools()
        assert unverified_claims(flow.access_token)["scope"] == "csg:read"
        idp.limit_scopes(None)
        result = await client.call_tool("reload_plugins", {})
    # Server plugins are off here: the capability is accepted and the subsystem says so.
    assert "disabled" in text_of(result), text_of(result)
    assert len(flow.urls) == 2, flow.urls
    assert {"csg:read", "csg:prepare"} <= set(flow.requested(1)["scope"].split()), flow.urls[1]
    assert set(unverified_claims(flow.access_token)["scope"].split()) >= {"csg:read", "csg:prepare"}


# ---------------------------------------------------------------------------------------------
# Tokens csg refuses


def forged(idp: IdentityProvider, server: OAuthServer, kind: str) -> str:
    """A token that is right in every respect but the one `kind` names."""
    now = int(time.time())
    claims = idp.claims(server.resource)
    match kind:
        case "foreign_audience":
            return idp.sign({**claims, "aud": "http://127.0.0.1:1/sourcegraph/mcp"})
        case "expired_past_the_leeway":
            return idp.sign({**claims, "iat": now - 700, "exp": now - 120})
        case "not_yet_valid":
            return idp.sign({**claims, "nbf": now + 3600})
        case "unknown_key":
            return idp.sign(claims, key="unknown")
        case "alg_none":
            return idp.sign(claims, key="none")
        case "hs256_keyed_with_the_public_key":
            return idp.sign(claims, key="hs256")
        case "wrong_issuer":
            return idp.sign({**claims, "iss": "http://127.0.0.1:1"})
        case "garbage":
            return "not.a.jwt"
    raise ValueError(kind)


REFUSED = [
    "foreign_audience",
    "expired_past_the_leeway",
    "not_yet_valid",
    "unknown_key",
    "alg_none",
    "hs256_keyed_with_the_public_key",
    "wrong_issuer",
    "garbage",
]


@deadline(30)
@pytest.mark.parametrize("kind", REFUSED)
def test_a_refused_token_answers_401_invalid_token(server: OAuthServer, idp: IdentityProvider, kind: str) -> None:
    token = forged(idp, server, kind)
    # Each kind from an address of its own: wrong tokens are limited per address (10 at once).
    source = f"127.0.0.{20 + REFUSED.index(kind)}"
    for response in (
        post_mcp(server, INITIALIZE, token, source),
        call_api(server, "GET", "/sourcegraph/api/read", token, source, params=READ_GUIDE),
    ):
        assert response.status_code == 401, f"{kind}: HTTP {response.status_code}: {response.text[:300]}"
        _, params = challenge(response.headers.get("www-authenticate", ""))
        assert params.get("error") == "invalid_token", response.headers.get("www-authenticate")
        assert params.get("resource_metadata") == server.metadata_url, response.headers.get("www-authenticate")


@deadline(30)
@pytest.mark.parametrize("kind", ["rs256", "es256", "expired_within_the_leeway"])
def test_a_rightly_signed_token_is_accepted(server: OAuthServer, idp: IdentityProvider, kind: str) -> None:
    """The controls of the refusals above: the same claims, rightly signed (either of the
    provider's algorithms, or expired less than the 60 s leeway ago), are accepted."""
    now = int(time.time())
    claims = idp.claims(server.resource)
    if kind == "expired_within_the_leeway":
        token = idp.sign({**claims, "iat": now - 620, "exp": now - 20})
    else:
        token = idp.sign(claims, key=kind)  # type: ignore[arg-type]
    response = post_mcp(server, INITIALIZE, token)
    assert response.status_code == 200, f"{kind}: HTTP {response.status_code}: {response.text[:300]}"


@deadline(30)
def test_a_token_without_csg_read_answers_403(server: OAuthServer, idp: IdentityProvider) -> None:
    token = idp.sign(idp.claims(server.resource, scope="openid profile"))
    assert_challenge(post_mcp(server, INITIALIZE, token), server, 403, error="insufficient_scope", scope="csg:read")


# ---------------------------------------------------------------------------------------------
# Prepare: the scope, or a prepare group


@deadline(60)
async def test_prepare_needs_csg_prepare_or_a_prepare_group(server: OAuthServer, idp: IdentityProvider) -> None:
    """alice with csg:read only is challenged for csg:prepare (MCP and JSON API); with that
    scope she prepares; bob, in the prepare group `ops`, prepares with csg:read alone."""
    sync = {"repo": PUBLIC_REPO, "action": "sync"}
    reader = (await idp.issue_token(server.resource, scope="csg:read", account="alice"))["access_token"]
    for response in (
        post_mcp(server, tool_call("reload_plugins", {}), reader),
        call_api(server, "POST", "/sourcegraph/api/prepare", reader, json=sync),
    ):
        assert_challenge(response, server, 403, error="insufficient_scope", scope="csg:read csg:prepare")

    preparer = (await idp.issue_token(server.resource, scope="csg:read csg:prepare", account="alice"))[
        "access_token"
    ]
    operator = (await idp.issue_token(server.resource, scope="csg:read", account="bob"))["access_token"]
    for token in (preparer, operator):
        response = call_api(server, "POST", "/sourcegraph/api/prepare", token, json=sync)
        assert response.status_code == 200, f"HTTP {response.status_code}: {response.text[:300]}"
        async with bearer_client(server, token) as client:
            result = await client.call_tool("reload_plugins", {})
        assert "disabled" in text_of(result), text_of(result)


# ---------------------------------------------------------------------------------------------
# Users and groups from tokens


@deadline(60)
async def test_the_eng_group_reads_the_granted_private_repository(server: OAuthServer, idp: IdentityProvider) -> None:
    token = (await idp.issue_token(server.resource, account="alice"))["access_token"]
    async with bearer_client(server, token) as client:
        result = await client.call_tool("read", {"repo": PRIVATE_REPO, "path": "docs/secret.md"})
    assert not result.is_error, text_of(result)
    assert "the eng group reads this" in text_of(result)


@deadline(60)
async def test_without_the_group_a_private_repository_looks_missing(server: OAuthServer, idp: IdentityProvider) -> None:
    """carol (no groups) gets for `acme/private` exactly the answer of a repository that does
    not exist (A-4), over MCP and the JSON API."""
    token = (await idp.issue_token(server.resource, account="carol"))["access_token"]
    answers: dict[str, tuple[str, int, str]] = {}
    async with bearer_client(server, token) as client:
        for repo in (PRIVATE_REPO, MISSING_REPO):
            result = await client.call_tool("read", {"repo": repo, "path": "docs/secret.md"})
            assert result.is_error, text_of(result)
            api = call_api(server, "GET", "/sourcegraph/api/read", token, params={"repo": repo, "path": "docs/secret.md"})
            answers[repo] = (text_of(result).replace(repo, "NAME"), api.status_code, api.text.replace(repo, "NAME"))
    assert "the eng group reads this" not in answers[PRIVATE_REPO][0]
    assert answers[PRIVATE_REPO] == answers[MISSING_REPO]


@deadline(30)
def test_a_token_subject_becomes_a_user_at_its_first_call(server: OAuthServer, idp: IdentityProvider) -> None:
    """The user name is `sub`; csg records the user on its first call."""
    name = f"erin{secrets.token_hex(4)}"
    assert name not in server.csg("user", "list")
    token = idp.sign(idp.claims(server.resource, sub=name))
    response = call_api(server, "GET", "/sourcegraph/api/read", token, params=READ_GUIDE)
    assert response.status_code == 200, f"HTTP {response.status_code}: {response.text[:300]}"
    assert re.search(rf"^\s*{name}\b", server.csg("user", "list"), re.MULTILINE), server.csg("user", "list")


@deadline(60)
async def test_static_tokens_work_beside_oauth(server: OAuthServer) -> None:
    async with bearer_client(server, server.static_token) as client:
        result = await client.call_tool("read", READ_GUIDE)
    assert not result.is_error, text_of(result)
    assert f"Commit: {server.public_commit}" in text_of(result)
    response = call_api(server, "GET", "/sourcegraph/api/read", server.static_token, params=READ_GUIDE)
    assert response.status_code == 200, f"HTTP {response.status_code}: {response.text[:300]}"


# ---------------------------------------------------------------------------------------------
# The website's sign-in through the provider

CALLBACK_PATH = "/sourcegraph/oauth/callback"


async def sign_in_through_the_provider(server: OAuthServer, browser: httpx2.AsyncClient) -> httpx2.Response:
    """What a browser does from the sign-in link: to the provider (which signs the current
    account in by itself) and back to the callback, one cookie jar throughout. Answers the
    callback's response."""
    page = await browser.get(server.base + "/sourcegraph/sign-in")
    assert page.status_code == 200 and "Sign in with your company account" in page.text, page.text
    url = server.base + "/sourcegraph/sign-in/provider"
    for _ in range(20):
        response = await browser.get(url)
        if url.startswith(server.base + CALLBACK_PATH):
            return response
        location = response.headers.get("location")
        assert response.status_code in (302, 303) and location, f"{url}: HTTP {response.status_code} {response.text[:300]}"
        url = urllib.parse.urljoin(url, location)
    raise AssertionError(f"never back at the callback; last: {url}")


def csrf_of_page(text: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]{64})"', text)
    assert found, text[:500]
    return found.group(1)


@deadline(90)
async def test_the_website_signs_in_through_the_provider_with_pkce_state_and_nonce(
    server: OAuthServer, idp: IdentityProvider
) -> None:
    idp.set_account("alice")
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S, trust_env=False) as browser:
        start = await browser.get(server.base + "/sourcegraph/sign-in/provider")
        assert start.status_code in (302, 303), start.text
        target = urllib.parse.urlsplit(start.headers["location"])
        query = urllib.parse.parse_qs(target.query)
        assert target.geturl().startswith(idp.issuer), target.geturl()
        # PKCE S256, a state and a nonce, the resource this server is, the scopes it needs.
        assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43, query
        assert len(query["state"][0]) == 43 and len(query["nonce"][0]) == 43, query
        assert query["resource"] == [server.resource], query
        assert query["redirect_uri"] == [server.base + CALLBACK_PATH], query
        assert set(query["scope"][0].split()) == {"openid", "profile", "csg:read"}, query
        pending = start.headers["set-cookie"]
        assert "csg_signin=" in pending and "HttpOnly" in pending and "SameSite=Lax" in pending, pending

    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S, trust_env=False) as browser:
        callback = await sign_in_through_the_provider(server, browser)
        assert callback.status_code == 200, callback.text
        assert "Signed in" in callback.text and 'http-equiv="refresh"' in callback.text, callback.text
        assert browser.cookies.get("csg_session"), callback.headers
        home = await browser.get(server.base + "/sourcegraph/")
        assert home.status_code == 200 and "alice" in home.text, home.text
        # Her group reads the private repository on the website too.
        assert PRIVATE_REPO in home.text, home.text
        private = await browser.get(f"{server.base}/sourcegraph/repos/{PRIVATE_REPO}")
        assert private.status_code == 200, private.text
        # Signing out ends the session.
        signed_out = await browser.post(
            server.base + "/sourcegraph/sign-out", data={"csrf": csrf_of_page(home.text)}
        )
        assert signed_out.status_code in (302, 303), signed_out.text
        home = await browser.get(server.base + "/sourcegraph/")
        assert "alice" not in home.text and PRIVATE_REPO not in home.text, home.text
    listed = server.csg("token", "list")
    assert "website sign-in (identity provider)" in listed, listed


@deadline(90)
async def test_a_website_sign_in_of_another_user_sees_only_what_their_groups_grant(
    server: OAuthServer, idp: IdentityProvider
) -> None:
    idp.set_account("carol")
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S, trust_env=False) as browser:
        callback = await sign_in_through_the_provider(server, browser)
        assert callback.status_code == 200, callback.text
        home = await browser.get(server.base + "/sourcegraph/")
        assert "carol" in home.text and PRIVATE_REPO not in home.text, home.text
        private = await browser.get(f"{server.base}/sourcegraph/repos/{PRIVATE_REPO}")
        missing = await browser.get(f"{server.base}/sourcegraph/repos/acme/missing")
        assert private.status_code == missing.status_code == 404, (private.status_code, missing.status_code)


@deadline(60)
async def test_a_callback_that_is_not_this_browsers_sign_in_is_refused(
    server: OAuthServer, idp: IdentityProvider
) -> None:
    idp.set_account("alice")
    async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S, trust_env=False) as browser:
        # No sign-in started in this browser: no pending cookie.
        forged = await browser.get(server.base + CALLBACK_PATH, params={"code": "x", "state": "y" * 43})
        assert forged.status_code == 400 and "does not belong" in forged.text, forged.text
        # A sign-in started here, answered with another state (a login CSRF).
        start = await browser.get(server.base + "/sourcegraph/sign-in/provider")
        assert start.status_code in (302, 303)
        wrong = await browser.get(server.base + CALLBACK_PATH, params={"code": "x", "state": "z" * 43})
        assert wrong.status_code == 400 and "does not belong" in wrong.text, wrong.text
        assert not browser.cookies.get("csg_session")
        # The provider's refusal is shown, not a session.
        # The provider's error code is told in the server's words; its description (which
        # anyone can put in a link) is never shown.
        refused = await browser.get(
            server.base + CALLBACK_PATH,
            params={"error": "access_denied", "error_description": "call 555-0100 to unlock your account"},
        )
        assert refused.status_code == 401 and "declined" in refused.text, refused.text
        assert "555-0100" not in refused.text, refused.text


@deadline(90)
async def test_csg_grant_group_gives_its_members_a_private_repository(
    server: OAuthServer, idp: IdentityProvider
) -> None:
    """`csg grant --group ops acme/private`: bob (group ops) reads it, then not once the grant
    is taken back; the store tells every server on its next call."""
    bob = (await idp.issue_token(server.resource, account="bob"))["access_token"]

    def read() -> httpx2.Response:
        return call_api(server, "GET", "/sourcegraph/api/read", bob, params={"repo": PRIVATE_REPO, "path": "docs/secret.md"})

    assert read().status_code == 404, "no grant yet: as unknown"
    granted = server.csg("grant", "--group", "ops", PRIVATE_REPO)
    assert 'the group "ops" may read' in granted, granted
    assert "group:ops\tgroup\tacme/private" in server.csg("user", "list")
    answer = read()
    assert answer.status_code == 200, answer.text
    server.csg("grant", "--group", "ops", PRIVATE_REPO, "--remove")
    assert read().status_code == 404
