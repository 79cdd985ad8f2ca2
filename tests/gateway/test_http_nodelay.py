"""A Streamable HTTP response leaves the gateway at once: no Nagle wait on a kept-alive
connection.

uvicorn writes a response's headers and its body as two small TCP segments. With Nagle's
algorithm on, the body waits until the client acknowledges the headers, and a client on a
kept-alive connection delays that acknowledgement (40 ms on Linux): every request a 2026-07-28
client makes, all on one connection, stalled that long. The gateway therefore serves with
TCP_NODELAY on every connection it accepts. Asserting the socket option on the connection a
real client used, rather than a latency, keeps the test independent of the machine's load.
"""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path

import anyio
import psutil
import pytest
from mcp import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.hosts import GatewayOptions, serve_gateway

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _adapter(tmp_path: Path) -> McpAdapter:
    agent, project = tmp_path / "agent", tmp_path / "project"
    agent.mkdir()
    project.mkdir()
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    config = load_config(agent_dir=agent, project_dir=project, home=tmp_path, environ={})
    return McpAdapter(
        config=config, agent_dir=agent, project_dir=project, relay_server_requests=True
    )


def _accepted_sockets(port: int) -> list[int]:
    """This process's descriptors for connections accepted on ``port`` (the server ends)."""
    return [
        c.fd
        for c in psutil.Process().net_connections(kind="tcp")
        if c.laddr and c.laddr.port == port and c.raddr and c.status == psutil.CONN_ESTABLISHED
    ]


def _nodelay(fd: int) -> bool:
    # A duplicate descriptor: reading an option of the gateway's socket without owning it.
    with socket.socket(fileno=os.dup(fd)) as sock:
        return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


@pytest.mark.parametrize("mode", ["auto", "legacy"], ids=["2026-07-28", "2025-11-25"])
async def test_every_accepted_http_connection_sends_without_nagle_delay(
    tmp_path: Path, mode: str
) -> None:
    urls: list[str] = []
    announced = anyio.Event()
    stopped = anyio.Event()

    def announce(url: str) -> None:
        urls.append(url)
        announced.set()

    options = GatewayOptions(transport="http", port=0)
    adapter = _adapter(tmp_path)

    async def serve() -> None:
        try:
            assert await serve_gateway(adapter, options, announce=announce) == signal.SIGTERM
        finally:
            stopped.set()

    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            await announced.wait()
            try:
                async with Client(urls[0], mode=mode, cache=None) as client:
                    if mode == "auto":
                        assert client.protocol_version in MODERN_PROTOCOL_VERSIONS
                    names = [t.name for t in (await client.list_tools()).tools]
                    assert "mcp" in names
                    port = int(urls[0].rsplit(":", 1)[1].split("/", 1)[0])
                    # The client keeps its connection alive between requests (2026-07-28
                    # always does), so the server end is still there to inspect.
                    accepted = _accepted_sockets(port)
                    assert accepted, "no open connection to the gateway"
                    nagled = [fd for fd in accepted if not _nodelay(fd)]
                    assert not nagled, (
                        f"{len(nagled)} of {len(accepted)} connections without TCP_NODELAY: "
                        "their responses wait for the client's delayed ACK"
                    )
            finally:
                # The gateway stops as in production, on SIGTERM: its handler is installed
                # before the address is announced and removed once serving ends, so the signal
                # is only sent while the gateway is there to receive it.
                if not stopped.is_set():
                    os.kill(os.getpid(), signal.SIGTERM)
