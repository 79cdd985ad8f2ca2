"""Bad JSON-RPC at the gateway: malformed, oversized, wrong types; other clients keep working.

``pi-mcp serve`` runs over Streamable HTTP with a real stdio server behind it. A well-behaved SDK
client keeps a session open the whole time; raw HTTP requests then throw everything a broken or
hostile client might send, without a session and inside a real session. After every bad request
the gateway process is alive and the well-behaved client's call through ``mcp`` still works.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client

from servers._support import MCP_FIXTURE

from ._gateway import Gateway, gateway_call, has_serve_command, result_text, start_gateway

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not has_serve_command(), reason="this build has no `pi-mcp serve`"),
]

ACCEPT = "application/json, text/event-stream"
PROTOCOL_VERSION = "2025-11-25"
REQUEST_DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    home = tmp_path_factory.mktemp("gateway-input")
    agent_dir = home / "agent"
    agent_dir.mkdir()
    config = {
        "mcpServers": {
            "echoer": {"command": sys.executable, "args": [str(MCP_FIXTURE), "--name", "echoer"]}
        }
    }
    (agent_dir / "mcp.json").write_text(json.dumps(config))
    gateway = start_gateway(agent_dir, home)
    yield gateway
    gateway.stop()


@pytest.fixture
async def healthy_client(gateway: Gateway) -> AsyncIterator[Client]:
    async with Client(gateway.url) as client:
        # The gateway listens before the first run has listed every server.
        await gateway_call(client, {"connect": "echoer"})
        await assert_still_serving(gateway, client)
        yield client


async def assert_still_serving(gateway: Gateway, client: Client) -> None:
    assert gateway.process.poll() is None, "the gateway exited"
    result = await gateway_call(client, {"tool": "echoer_echo", "args": {"message": "still"}})
    assert not result.is_error, result_text(result)
    assert "Echo: still" in result_text(result)


async def open_raw_session(http: httpx2.AsyncClient, url: str) -> dict[str, str]:
    """Initialize a session by hand; returns the headers its later requests carry."""
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    response = await http.post(url, json=initialize, headers=headers)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    headers |= {"mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION}
    notified = await http.post(
        url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert notified.status_code < 300
    return headers


def body_of(value: Any) -> bytes:
    return value if isinstance(value, bytes) else json.dumps(value).encode()


BAD_BODIES = [
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"', id="truncated-json"),
    pytest.param(b"\xff\xfe\x00 not json", id="not-utf8"),
    pytest.param(b"", id="empty"),
    pytest.param(b"[1, 2, 3]", id="array-of-numbers"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="nested-too-deep"),
    pytest.param(b'{"a": "' + b"x" * 6_000_000 + b'"}', id="oversized-6-MB"),
    pytest.param({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, id="wrong-version"),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": 42}, id="method-not-a-string"),
    pytest.param({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, id="id-an-object"),
    pytest.param(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": "x"}, id="params-a-string"
    ),
    pytest.param({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}, id="unknown-method"),
    pytest.param(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": 5}},
        id="tool-name-a-number",
    ),
    pytest.param(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "nope"}},
        id="unknown-tool",
    ),
    pytest.param(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "mcp", "arguments": "not an object"},
        },
        id="arguments-a-string",
    ),
    pytest.param(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "mcp", "arguments": {"tool": {"x": 1}, "args": [1]}},
        },
        id="mcp-parameters-wrong-types",
    ),
    pytest.param(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "mcp", "arguments": {"search": "(a|aa)+$", "regex": True}},
        },
        id="catastrophic-regex",
    ),
    pytest.param(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "mcp",
                "arguments": {"tool": "echoer_echo", "args": {"message": "m" * 3_000_000}},
            },
        },
        id="large-call-3-MB",
    ),
    pytest.param(
        [{"jsonrpc": "2.0", "id": i, "method": "tools/list"} for i in range(200)],
        id="batch-of-200",
    ),
]


@pytest.mark.parametrize("in_session", [False, True], ids=["no-session", "in-session"])
@pytest.mark.parametrize("body", BAD_BODIES)
async def test_a_bad_request_gets_an_answer_and_the_gateway_keeps_serving_others(
    gateway: Gateway, healthy_client: Client, body: Any, in_session: bool
) -> None:
    async with httpx2.AsyncClient(timeout=REQUEST_DEADLINE_S) as http:
        headers = {"accept": ACCEPT, "content-type": "application/json"}
        if in_session:
            headers = await open_raw_session(http, gateway.url)
        response = await http.post(gateway.url, content=body_of(body), headers=headers)

    # Refused as the client's fault or answered (a JSON-RPC error travels with 200), never a
    # server error; and nothing of Python's insides leaks out.
    assert response.status_code < 500, response.text[:500]
    assert "Traceback" not in response.text
    await assert_still_serving(gateway, healthy_client)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=15,
)
_requests = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "1.0", 2]), "id": _json},
    optional={
        "method": st.sampled_from(["tools/call", "tools/list", "ping", "resources/read"]) | _json,
        "params": _json
        | st.fixed_dictionaries(
            {"name": st.sampled_from(["mcp", "x"]) | _json}, optional={"arguments": _json}
        ),
    },
)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=_requests | _json)
async def test_any_json_rpc_message_in_a_session_gets_an_answer_and_never_breaks_the_gateway(
    gateway: Gateway, healthy_client: Client, request: Any
) -> None:
    async with httpx2.AsyncClient(timeout=REQUEST_DEADLINE_S) as http:
        headers = await open_raw_session(http, gateway.url)
        response = await http.post(gateway.url, content=body_of(request), headers=headers)
    assert response.status_code < 500, response.text[:500]
    assert "Traceback" not in response.text
    await assert_still_serving(gateway, healthy_client)


def test_the_gateway_log_shows_no_traceback_for_any_of_it(gateway: Gateway) -> None:
    """Bad input is answered, not crashed on: stderr has no traceback from a handler."""
    assert gateway.process.poll() is None
    gateway.stop()
    assert "Traceback" not in gateway.log, gateway.log[-3000:]
