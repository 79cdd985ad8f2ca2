"""``identity_assertion`` (SEP-990): the token exchange at the identity provider, against a
real loopback endpoint. The whole flow (identity provider, authorization server, MCP server)
is the conformance suite's ``auth/cross-app-access-complete-flow`` scenario
(``test_conformance.py``)."""

from __future__ import annotations

import base64
import json
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from mcp.client.auth import OAuthFlowError

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.config import ServerEntry
from pi_mcp_adapter.servers._oauth import _IdentityAssertionProvider
from pi_mcp_adapter.servers._token_store import FileTokenStore, ServerTokenStorage

pytestmark = pytest.mark.anyio


class _IdentityProvider:
    """A token endpoint that answers each exchange with ``reply`` and keeps what it got."""

    def __init__(self, status: int, reply: dict[str, Any]) -> None:
        self.requests: list[tuple[dict[str, str], str | None]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                provider.requests.append((form, self.headers.get("Authorization")))
                body = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"


@pytest.fixture
def idp(request: pytest.FixtureRequest) -> Iterator[_IdentityProvider]:
    status, reply = request.param
    provider = _IdentityProvider(status, reply)
    thread = threading.Thread(target=provider.server.serve_forever, daemon=True)
    thread.start()
    yield provider
    provider.server.shutdown()
    provider.server.server_close()


def _provider(tmp_path: Path, token_endpoint: str) -> _IdentityAssertionProvider:
    entry = ServerEntry.model_validate(
        {
            "url": "https://mcp.example/mcp",
            "oauth": {
                "grantType": "identity_assertion",
                "clientId": "agent",
                "clientSecret": "as-secret-value",
                "authServerMetadataUrl": "https://as.example",
                "idp": {
                    "tokenEndpoint": token_endpoint,
                    "idToken": "id-token-of-the-person",
                    "clientId": "agent-at-idp",
                    "clientSecret": "idp-secret-value",
                },
            },
        }
    )
    storage = ServerTokenStorage("s", entry.url or "", FileTokenStore(tmp_path))
    return _IdentityAssertionProvider("s", entry, storage)


@pytest.mark.parametrize(
    "idp",
    [(200, {"access_token": "id-jag-grant-value", "issued_token_type": "id-jag"})],
    indirect=True,
)
async def test_the_id_token_is_exchanged_for_an_assertion_grant(
    tmp_path: Path, idp: _IdentityProvider
) -> None:
    provider = _provider(tmp_path, idp.url)
    grant = await provider._exchange_id_token("https://as.example", "https://mcp.example/mcp")
    assert grant == "id-jag-grant-value"
    assert provider.authorization_count == 1
    [(form, authorization)] = idp.requests
    assert form == {
        "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
        "subject_token": "id-token-of-the-person",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
        "audience": "https://as.example",
        "resource": "https://mcp.example/mcp",
    }
    expected = base64.b64encode(b"agent-at-idp:idp-secret-value").decode()
    assert authorization == f"Basic {expected}"
    assert "id-jag-grant-value" not in redact("the grant is id-jag-grant-value")


@pytest.mark.parametrize("idp", [(400, {"error": "invalid_grant"})], indirect=True)
async def test_a_refused_exchange_says_where_and_why(
    tmp_path: Path, idp: _IdentityProvider
) -> None:
    provider = _provider(tmp_path, idp.url)
    with pytest.raises(OAuthFlowError) as caught:
        await provider._exchange_id_token("https://as.example", "https://mcp.example/mcp")
    message = str(caught.value)
    assert idp.url in message
    assert "HTTP 400, invalid_grant" in message
    assert "oauth.idp.idToken" in message
    assert provider.authorization_count == 0
