"""The identity provider of the OAuth end-to-end tests: `tests/oidc/provider.mjs` (panva's
oidc-provider) started by `scripts/oidc.sh` on a loopback port, and the means to get tokens from
it or to forge them.

The provider logs in and consents by itself (as the account `set_account` names, granting the
csg scopes `limit_scopes` allows), so an authorization URL is completed by following its
redirects (`authorize`) until one points at the client's redirect URI. `issue_token` does the
whole authorization-code flow with PKCE, as a client would, without the MCP SDK. `sign` makes
tokens the provider never issued, with its real private key or with keys csg must refuse.

Every wait here is bounded; `stop` ends the provider whatever state `start` left it in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from cluster import free_port, tail
from conftest import REPO_ROOT

OIDC_SH = REPO_ROOT / "scripts" / "oidc.sh"
START_TIMEOUT_S = 300.0
"""`scripts/oidc.sh start` may first run `npm ci` (a few seconds online); the provider itself
listens within a second."""
HTTP_TIMEOUT_S = 10.0
MAX_REDIRECTS = 10
"""An authorization takes five hops here (auth, login, resume, consent, resume); more is a loop."""
ACCOUNTS = {"alice": ["eng"], "bob": ["ops"], "carol": []}
"""The provider's accounts and their `groups` (tests/oidc/provider.mjs)."""

Key = Literal["rs256", "es256", "unknown", "none", "hs256"]


@dataclass(frozen=True)
class Authorization:
    """The parameters of the redirect to the client's redirect URI: `code`, `state` and `iss`
    on success, `error` (and `error_description`) otherwise."""

    params: dict[str, str]

    @property
    def code(self) -> str:
        assert "code" in self.params, f"the authorization failed: {self.params}"
        return self.params["code"]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def pkce_pair() -> tuple[str, str]:
    """A PKCE code verifier and its S256 challenge (RFC 7636)."""
    verifier = _b64url(secrets.token_bytes(48))
    return verifier, _b64url(hashlib.sha256(verifier.encode()).digest())


def _same_endpoint(url: str, target: str) -> bool:
    """Whether `url` is `target` up to the query (where the code and state come back)."""
    a, b = urllib.parse.urlsplit(url), urllib.parse.urlsplit(target)
    return (a.scheme, a.netloc, a.path) == (b.scheme, b.netloc, b.path)


class IdentityProvider:
    """The provider of `scripts/oidc.sh` in `directory`, on one loopback port for its whole life
    (csg's `--oauth-issuer` names it). A fixture calls `start`, and `stop` in its `finally`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.issuer = ""

    def start(self) -> None:
        """Starts the provider on a free port; tries other ports when the chosen one was taken
        between choosing and binding it."""
        attempts = 3
        for attempt in range(attempts):
            port = free_port()
            done = subprocess.run(
                [str(OIDC_SH), "start", str(self.directory), str(port)],
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT_S,
                check=False,
            )
            if done.returncode == 0:
                self.issuer = done.stdout.strip().splitlines()[-1]
                assert self.issuer == f"http://127.0.0.1:{port}", done.stdout
                return
            if "EADDRINUSE" not in done.stderr or attempt == attempts - 1:
                raise RuntimeError(f"scripts/oidc.sh start failed: {done.stderr}")

    def stop(self) -> None:
        done = subprocess.run(
            [str(OIDC_SH), "stop", str(self.directory)], capture_output=True, text=True, timeout=30, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"scripts/oidc.sh stop failed: {done.stderr}")

    def log_tail(self, lines: int = 40) -> str:
        """The end of the provider's log, for a failure's message."""
        return tail(self.directory / "log", lines)

    # -----------------------------------------------------------------------------------------
    # Test controls

    def _control(self, path: str, body: dict[str, str]) -> dict[str, Any]:
        request = urllib.request.Request(
            self.issuer + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return json.loads(response.read())

    def set_account(self, name: str) -> None:
        """Who logs in at the next login prompt (a new session: `authorize` starts one each time)."""
        assert name in ACCOUNTS, name
        self._control("/test/account", {"account": name})

    def limit_scopes(self, scopes: str | None) -> None:
        """Consent grants only these of the requested csg scopes (space-separated) and rejects
        the others; None grants every requested scope again."""
        self._control("/test/scope-limit", {"scopes": scopes or ""})

    # -----------------------------------------------------------------------------------------
    # Tokens the provider issues

    def metadata(self) -> dict[str, Any]:
        """The provider's discovery document."""
        with urllib.request.urlopen(
            self.issuer + "/.well-known/openid-configuration", timeout=HTTP_TIMEOUT_S
        ) as response:
            return json.loads(response.read())

    def register_web_client(self, redirect_uri: str) -> tuple[str, str]:
        """A confidential client for a website (client id and secret), registered dynamically
        with `redirect_uri`: what an administrator would set up at the provider for csg's own
        sign-in."""
        registration = {
            "client_name": "csg website",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_basic",
        }
        with httpx2.Client(timeout=HTTP_TIMEOUT_S, trust_env=False) as http:
            registered = http.post(self.metadata()["registration_endpoint"], json=registration)
            assert registered.status_code == 201, registered.text
            answer = registered.json()
            return answer["client_id"], answer["client_secret"]

    async def authorize(self, authorization_url: str, redirect_uri: str) -> Authorization:
        """Follows `authorization_url` through the provider's automatic login and consent, as a
        browser would (one cookie jar, a fresh session), up to the redirect to `redirect_uri`,
        which is not fetched: its parameters are the answer."""
        url = authorization_url
        async with httpx2.AsyncClient(follow_redirects=False, timeout=HTTP_TIMEOUT_S, trust_env=False) as browser:
            for _ in range(MAX_REDIRECTS):
                response = await browser.get(url)
                location = response.headers.get("location")
                if response.status_code not in (302, 303) or not location:
                    raise AssertionError(
                        f"the provider answered {url} with HTTP {response.status_code}, not a redirect:"
                        f" {response.text[:500]}\nprovider log:\n{self.log_tail()}"
                    )
                url = urllib.parse.urljoin(url, location)
                if _same_endpoint(url, redirect_uri):
                    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
                    return Authorization({name: values[0] for name, values in query.items()})
        raise AssertionError(f"no redirect to {redirect_uri} within {MAX_REDIRECTS} hops; last: {url}")

    async def issue_token(
        self,
        resource: str,
        *,
        scope: str = "csg:read",
        account: str = "alice",
        registered_scope: str | None = None,
    ) -> dict[str, Any]:
        """An access token for `resource` the way a client gets one: dynamic registration of a
        public client (with `registered_scope` if given), authorization code with PKCE (S256) as
        `account`, token request. Returns the token response; its `access_token` is a JWT.
        Leaves `account` the current account."""
        self.set_account(account)
        metadata = self.metadata()
        redirect_uri = f"http://127.0.0.1:{free_port()}/callback"
        registration: dict[str, Any] = {
            "client_name": "csg e2e",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
        if registered_scope is not None:
            registration["scope"] = registered_scope
        async with httpx2.AsyncClient(timeout=HTTP_TIMEOUT_S, trust_env=False) as http:
            registered = await http.post(metadata["registration_endpoint"], json=registration)
            assert registered.status_code == 201, registered.text
            client_id = registered.json()["client_id"]
            verifier, challenge = pkce_pair()
            state = secrets.token_urlsafe(16)
            query = urllib.parse.urlencode(
                {
                    "response_type": "code",
                    "client_id": client_id,
                    "redirect_uri": redirect_uri,
                    "scope": scope,
                    "resource": resource,
                    "state": state,
                    "code_challenge": challenge,
                    "code_challenge_method": "S256",
                }
            )
            authorization = await self.authorize(f"{metadata['authorization_endpoint']}?{query}", redirect_uri)
            assert authorization.params.get("state") == state, authorization.params
            assert authorization.params.get("iss") == self.issuer, authorization.params
            answer = await http.post(
                metadata["token_endpoint"],
                data={
                    "grant_type": "authorization_code",
                    "code": authorization.code,
                    "redirect_uri": redirect_uri,
                    "client_id": client_id,
                    "code_verifier": verifier,
                    "resource": resource,
                },
            )
            assert answer.status_code == 200, f"{answer.text}\nprovider log:\n{self.log_tail()}"
            return answer.json()

    # -----------------------------------------------------------------------------------------
    # Tokens the provider never issued

    def private_jwks(self) -> dict[str, Any]:
        """The provider's signing keys, private halves included (written at its start)."""
        return json.loads((self.directory / "private-jwks.json").read_text())

    def _private_jwk(self, alg: str) -> dict[str, Any]:
        return next(key for key in self.private_jwks()["keys"] if key["alg"] == alg)

    def claims(
        self,
        audience: str,
        *,
        sub: str = "alice",
        scope: str = "csg:read",
        lifetime_s: int = 600,
        **extra: Any,
    ) -> dict[str, Any]:
        """The claims of an access token as the provider issues them (its `iss`, `sub`, `scope`,
        `groups` of the account, `client_id`, a `jti`), for `audience`; `extra` overrides."""
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": sub,
            "aud": audience,
            "scope": scope,
            "groups": ACCOUNTS.get(sub, []),
            "client_id": "forged-by-the-tests",
            "jti": secrets.token_urlsafe(16),
            "iat": now,
            "exp": now + lifetime_s,
        }
        claims.update(extra)
        return claims

    def sign(self, claims: dict[str, Any], *, key: Key = "rs256", headers: dict[str, Any] | None = None) -> str:
        """A JWT of `claims` with `typ: at+jwt`, signed by:

        - `rs256`, `es256`: the provider's own key of that algorithm, with its `kid` (a token csg
          must accept unless its claims say otherwise);
        - `unknown`: a fresh RSA key whose `kid` the provider does not publish;
        - `none`: no signature at all (`alg: none`), the real RS256 key's `kid` in the header;
        - `hs256`: HMAC-SHA256 keyed with the real RS256 key's public PEM, its `kid` in the
          header (the algorithm-confusion attack: a verifier that lets the token pick the
          algorithm would check it with the public key as the secret).

        `headers` adds to or overrides the JOSE header."""
        header: dict[str, Any] = {"typ": "at+jwt"}
        rs256 = self._private_jwk("RS256")
        if key in ("rs256", "es256"):
            jwk = rs256 if key == "rs256" else self._private_jwk("ES256")
            header |= {"kid": jwk["kid"], **(headers or {})}
            signing_key = jwt.PyJWK.from_dict(jwk).key
            return jwt.encode(claims, signing_key, algorithm=jwk["alg"], headers=header)
        if key == "unknown":
            stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            header |= {"kid": f"unknown-{secrets.token_hex(8)}", **(headers or {})}
            return jwt.encode(claims, stranger, algorithm="RS256", headers=header)
        header |= {"kid": rs256["kid"], **(headers or {})}
        # PyJWT refuses both of these by design; they are put together by hand.
        if key == "none":
            header["alg"] = "none"
            signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
            return signing_input + "."
        if key == "hs256":
            header["alg"] = "HS256"
            public_pem = (
                jwt.PyJWK.from_dict(rs256)
                .key.public_key()
                .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            )
            signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
            mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
            return f"{signing_input}.{_b64url(mac)}"
        raise ValueError(f"unknown key {key!r}")


# ---------------------------------------------------------------------------------------------
# The official MCP SDK's OAuth client, driven by this provider


class MemoryStorage(TokenStorage):
    """The SDK's token storage, in memory: one client's registration and tokens."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


@dataclass
class OAuthFlow:
    """What one SDK client did: the authorization URLs it opened, what came back, its storage."""

    storage: MemoryStorage = field(default_factory=MemoryStorage)
    urls: list[str] = field(default_factory=list)
    answers: list[Any] = field(default_factory=list)

    def requested(self, index: int) -> dict[str, str]:
        """The query parameters of the `index`th authorization URL."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.urls[index]).query)
        return {name: values[0] for name, values in query.items()}

    @property
    def access_token(self) -> str:
        assert self.storage.tokens is not None, "the SDK got no token"
        return self.storage.tokens.access_token


@asynccontextmanager
async def sdk_client(resource: str, idp: IdentityProvider) -> AsyncIterator[tuple[Client, OAuthFlow]]:
    """The official SDK's client of the MCP endpoint `resource` with its `OAuthClientProvider`
    and nothing else: no token, no registration, no knowledge of the provider. Its browser is
    `IdentityProvider.authorize`."""
    redirect_uri = f"http://127.0.0.1:{free_port()}/callback"
    flow = OAuthFlow()

    async def open_in_browser(url: str) -> None:
        flow.urls.append(url)
        flow.answers.append(await idp.authorize(url, redirect_uri))

    async def receive_callback() -> AuthorizationCodeResult:
        answer = flow.answers[-1]
        return AuthorizationCodeResult(code=answer.code, state=answer.params.get("state"), iss=answer.params.get("iss"))

    auth = OAuthClientProvider(
        server_url=resource,
        client_metadata=OAuthClientMetadata(
            client_name="csg e2e",
            redirect_uris=[redirect_uri],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=flow.storage,
        redirect_handler=open_in_browser,
        callback_handler=receive_callback,
    )
    async with create_mcp_http_client(auth=auth) as http:
        async with Client(streamable_http_client(resource, http_client=http)) as client:
            yield client, flow
