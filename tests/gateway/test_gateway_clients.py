"""Per-client bearer tokens and policies on a real HTTP gateway (``settings.gatewayClients``)."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import MCPError

from .conftest import GatewayWorkspace, fixture_entry, run_http_gateway, text_of

pytestmark = pytest.mark.anyio

CI_TOKEN = "ci-token-5e1f0c2a9b"
ADMIN_TOKEN = "admin-token-77d3e4"
EXPLORER_TOKEN = "explorer-token-a90b11"
READER_TOKEN = "reader-token-3c81f0"


def clients_setting() -> list[dict[str, object]]:
    return [
        {
            "name": "ci",
            "tokenSha256": hashlib.sha256(CI_TOKEN.encode()).hexdigest(),
            "allow": ["fixture_e*", "fixture/pid"],
            "deny": ["fixture_env"],
        },
        {"name": "admin", "tokenSha256": hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()},
        {
            "name": "explorer",
            "tokenSha256": hashlib.sha256(EXPLORER_TOKEN.encode()).hexdigest(),
            "surface": "toolsearch",
            "deny": ["fixture/crash"],
        },
        {
            "name": "reader",
            "tokenSha256": hashlib.sha256(READER_TOKEN.encode()).hexdigest(),
            "allow": ["fixture/greet", "fixture/fixture://*"],
        },
    ]


async def test_each_client_sees_and_calls_only_what_its_policy_allows(
    gw_workspace: GatewayWorkspace,
) -> None:
    trace = gw_workspace.root / "trace.jsonl"
    gw_workspace.write_config(
        {"fixture": fixture_entry(directTools=True, lifecycle="eager")},
        {"gatewayClients": clients_setting(), "trace": {"enabled": True, "file": str(trace)}},
    )
    with run_http_gateway(gw_workspace, "--stateless") as gateway:
        missing = await _initialize(gateway.url, None)
        wrong = await _initialize(gateway.url, "no")
        assert missing.status_code == 401
        assert wrong.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")

        async with gateway.client(token=CI_TOKEN) as ci:
            listed = {t.name for t in (await ci.list_tools()).tools}
            assert {"fixture_echo", "fixture_pid"} <= listed
            assert not listed & {"fixture_env", "fixture_crash", "fixture_slow"}
            echoed = await ci.call_tool("fixture_echo", {"message": "hi"})
            assert text_of(echoed) == "Echo: hi"
            denied = await ci.call_tool("fixture_env", {"name": "HOME"})
            assert denied.is_error
            assert "Unknown tool 'fixture_env'" in text_of(denied)
            # Through the proxy too: search hides the tool, a call answers as for no tool.
            found = await ci.call_tool("mcp", {"search": "env variable"})
            assert "fixture_env" not in text_of(found)
            proxied = await ci.call_tool("mcp", {"tool": "fixture_crash", "args": {}})
            assert proxied.is_error
            assert 'Tool "fixture_crash" not found' in text_of(proxied)

        async with gateway.client(token=ADMIN_TOKEN) as admin:
            listed = {t.name for t in (await admin.list_tools()).tools}
            assert {"fixture_env", "fixture_crash", "fixture_echo"} <= listed
            value = await admin.call_tool("fixture_env", {"name": "PI_MCP_NOT_SET"})
            assert not value.is_error

        # A client with a surface of its own.
        async with gateway.client(token=EXPLORER_TOKEN) as explorer:
            listed = {t.name for t in (await explorer.list_tools()).tools}
            assert {"ToolSearch", "fixture_echo"} <= listed
            assert "mcp" not in listed
            assert "fixture_crash" not in listed
        async with gateway.client(token=ADMIN_TOKEN) as admin:
            listed = {t.name for t in (await admin.list_tools()).tools}
            assert "ToolSearch" not in listed

        log = trace.read_text()
        assert CI_TOKEN not in log
        assert READER_TOKEN not in gateway.stderr()
        assert ADMIN_TOKEN not in log
        assert CI_TOKEN not in gateway.stderr()
    lines = [json.loads(line) for line in log.splitlines()]
    by_tool = {(line["client"], line["tool"]): line for line in lines}
    assert by_tool[("ci", "echo")]["outcome"] == "ok"
    assert by_tool[("ci", "env")]["error"] == "policy_denied"
    assert by_tool[("admin", "env")]["outcome"] == "ok"


async def test_prompts_and_resources_follow_each_clients_policy(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config(
        {"fixture": fixture_entry(lifecycle="eager")}, {"gatewayClients": clients_setting()}
    )
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client(token=CI_TOKEN) as ci:
            assert (await ci.list_prompts()).prompts == []
            assert (await ci.list_resources()).resources == []
            with pytest.raises(MCPError, match="Unknown resource") as refused:
                await ci.read_resource("fixture://greeting")
            assert refused.value.error.code == types.INVALID_PARAMS
            with pytest.raises(MCPError, match="Unknown prompt"):
                await ci.get_prompt("fixture_greet", {"name": "x"})

        async with gateway.client(token=READER_TOKEN) as reader:
            assert [p.name for p in (await reader.list_prompts()).prompts] == ["fixture_greet"]
            listed = (await reader.list_resources()).resources
            assert [str(r.uri) for r in listed] == ["fixture://greeting"]
            read = await reader.read_resource("fixture://greeting")
            assert "hello from fixture" in str(read.contents[0])
            # Tools are not covered by the reader's globs.
            tools = {t.name for t in (await reader.list_tools()).tools}
            assert not any(name.startswith("fixture_") for name in tools)

        async with gateway.client(token=ADMIN_TOKEN) as admin:
            assert "fixture_greet" in {p.name for p in (await admin.list_prompts()).prompts}
            read = await admin.read_resource("fixture://greeting")
            assert "hello from fixture" in str(read.contents[0])


async def test_an_edited_client_list_takes_effect_without_a_restart(
    gw_workspace: GatewayWorkspace,
) -> None:
    ci_only = [c for c in clients_setting() if c["name"] == "ci"]
    gw_workspace.write_config(
        {"fixture": fixture_entry(directTools=True, lifecycle="eager")},
        {"gatewayClients": ci_only},
    )
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client(token=CI_TOKEN) as ci:
            assert "fixture_env" not in {t.name for t in (await ci.list_tools()).tools}
        assert await _status_with(gateway.url, ADMIN_TOKEN) == 401

        # ci may now use every tool, admin is added.
        widened = [{**ci_only[0], "allow": ["fixture_*"], "deny": []}, clients_setting()[1]]
        gw_workspace.write_config(
            {"fixture": fixture_entry(directTools=True, lifecycle="eager")},
            {"gatewayClients": widened},
        )
        await _until(lambda: _status_with(gateway.url, ADMIN_TOKEN), 200)
        async with gateway.client(token=CI_TOKEN) as ci:
            assert "fixture_env" in {t.name for t in (await ci.list_tools()).tools}

        # ci is removed: its token is refused from the next request.
        gw_workspace.write_config(
            {"fixture": fixture_entry(directTools=True, lifecycle="eager")},
            {"gatewayClients": [clients_setting()[1]]},
        )
        await _until(lambda: _status_with(gateway.url, CI_TOKEN), 401)
        assert await _status_with(gateway.url, ADMIN_TOKEN) == 200


async def _status_with(url: str, token: str) -> int:
    """The HTTP status of an initialize request carrying ``token``."""
    return (await _initialize(url, token)).status_code


async def _initialize(url: str, token: str | None) -> httpx2.Response:
    """An initialize request as a client sends it, with ``token`` as its bearer token."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=10) as http:
        return await http.post(url, json=initialize, headers=headers)


async def _until(probe: Callable[[], Awaitable[int]], expected: int, timeout_s: float = 15) -> None:
    """Wait for the gateway to follow an edit (it polls its files every second)."""
    deadline = time.monotonic() + timeout_s
    while (got := await probe()) != expected:
        assert time.monotonic() < deadline, f"still {got}, expected {expected}"
        await anyio.sleep(0.2)


@contextmanager
def jwks_server(public_jwk: dict[str, object]) -> Iterator[str]:
    """The issuer's JWKS document on a loopback port."""
    body = json.dumps({"keys": [public_jwk]}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    finally:
        server.shutdown()
        server.server_close()


async def test_jwts_from_the_issuer_name_a_configured_client(
    gw_workspace: GatewayWorkspace,
) -> None:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_jwk = {**jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)}
    public_jwk.update(kid="k1", use="sig", alg="RS256")
    issuer, audience = "https://idp.example", "https://gateway.example/mcp"

    def token(client: str, **changes: object) -> str:
        now = int(time.time())
        claims = {"iss": issuer, "aud": audience, "exp": now + 300, "client_id": client}
        claims.update(changes)
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "k1"})

    with jwks_server(public_jwk) as jwks_url:
        gw_workspace.write_config(
            {"fixture": fixture_entry(directTools=True, lifecycle="eager")},
            {
                "gatewayClients": [{"name": "ci", "allow": ["fixture_echo"]}],
                "gatewayJwt": {"issuer": issuer, "audience": audience, "jwksUrl": jwks_url},
            },
        )
        with run_http_gateway(gw_workspace, "--stateless") as gateway:
            async with gateway.client(token=token("ci")) as ci:
                listed = {t.name for t in (await ci.list_tools()).tools}
                assert "fixture_echo" in listed
                assert "fixture_env" not in listed
                echoed = await ci.call_tool("fixture_echo", {"message": "jwt"})
                assert text_of(echoed) == "Echo: jwt"
            refused = {
                "wrong audience": token("ci", aud="https://other.example"),
                "expired": token("ci", exp=int(time.time()) - 60),
                "unknown client": token("someone-else"),
                "wrong issuer": token("ci", iss="https://evil.example"),
            }
            headers = {"Accept": "application/json, text/event-stream"}
            initialize = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
            async with httpx2.AsyncClient(timeout=10) as http:
                for why, bad in refused.items():
                    answer = await http.post(
                        gateway.url,
                        json=initialize,
                        headers={**headers, "Authorization": f"Bearer {bad}"},
                    )
                    assert answer.status_code == 401, why
                    # Each refusal says why in a fixed sentence, never quoting the token.
                    reason = answer.json()["error_description"]
                    assert reason != "Authentication required", why
                    assert bad not in reason
            for bad in refused.values():
                assert bad not in gateway.stderr()
