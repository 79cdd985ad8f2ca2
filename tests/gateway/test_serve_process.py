"""``pi-mcp serve`` as a process: an address it cannot listen on, the stop signals and their
exit codes, calls in flight at shutdown, and input the SDK cannot parse."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import psutil
import pytest
from mcp import MCPError

from .conftest import (
    PI_MCP,
    GatewayWorkspace,
    fixture_entry,
    make_mark,
    run_http_gateway,
    wait_for_mark,
)

pytestmark = [pytest.mark.slow]

ASGI_ERROR = "ASGI callable returned without completing response"


def _serve(workspace: GatewayWorkspace, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PI_MCP), *workspace.serve_args("--transport", "http", *extra)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=workspace.root,
    )


def test_a_busy_port_is_one_line_and_exit_2(gw_workspace: GatewayWorkspace) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager")})
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        completed = _serve(gw_workspace, "--port", str(port))
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.splitlines() == [
        f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    ]
    assert completed.stdout == ""


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param(["--port", "99999"], "--port must be between 0 and 65535", id="port-range"),
        pytest.param(["--port", "-1"], "--port must be between 0 and 65535", id="negative-port"),
        pytest.param(
            ["--host", "no.such.host.invalid", "--auth-token", "t0ken-for-the-test"],
            "cannot listen on --host 'no.such.host.invalid'",
            id="unknown-host",
        ),
    ],
)
def test_an_address_that_cannot_be_listened_on_is_one_line_and_exit_2(
    gw_workspace: GatewayWorkspace, options: list[str], message: str
) -> None:
    gw_workspace.write_config({})
    completed = _serve(gw_workspace, *options)
    assert completed.returncode == 2, completed.stderr
    [line] = completed.stderr.splitlines()
    assert line.startswith("error: ")
    assert message in line


@pytest.mark.anyio
async def test_sigterm_answers_a_call_in_flight_with_an_error_and_exits_143(
    gw_workspace: GatewayWorkspace, tmp_path: Path
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager", directTools=True)})
    mark = make_mark(tmp_path, "started")
    errors: list[MCPError] = []
    call_ended = anyio.Event()
    with run_http_gateway(gw_workspace) as gateway:
        everything = gateway.descendants()
        assert everything
        async with gateway.client() as client, anyio.create_task_group() as tg:

            async def call() -> None:
                try:
                    await client.call_tool("fixture_slow", {"seconds": 60, "mark": str(mark)})
                except MCPError as exc:
                    errors.append(exc)
                finally:
                    call_ended.set()

            tg.start_soon(call)
            await wait_for_mark(mark)
            gateway.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(20):
                code = await anyio.to_thread.run_sync(gateway.process.wait)
                # The call ends with the error the gateway sent, not with a hang.
                await call_ended.wait()
            tg.cancel_scope.cancel()
        assert code == 143
        assert "shutting down" in errors[0].message
        assert ASGI_ERROR not in gateway.stderr()
        assert "ERROR" not in gateway.stderr()
        assert "Traceback" not in gateway.stderr()
        _, alive = psutil.wait_procs(everything, timeout=5)
        assert not alive


@pytest.mark.parametrize(
    ("signum", "code"),
    [
        pytest.param(signal.SIGHUP, 129, id="SIGHUP"),
        pytest.param(signal.SIGINT, 130, id="SIGINT"),
        pytest.param(signal.SIGTERM, 143, id="SIGTERM"),
    ],
)
def test_each_stop_signal_closes_every_server_and_exits_with_its_code(
    gw_workspace: GatewayWorkspace, signum: signal.Signals, code: int
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry("--spawn-child", lifecycle="eager")})
    with run_http_gateway(gw_workspace) as gateway:
        everything = gateway.descendants()
        assert everything
        gateway.process.send_signal(signum)
        assert gateway.process.wait(timeout=20) == code
        _, alive = psutil.wait_procs(everything, timeout=5)
        assert not alive
        assert "Traceback" not in gateway.stderr()


class _StdioWire:
    """Raw JSON-RPC lines to and from a ``pi-mcp serve`` process."""

    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self._stdin = process.stdin
        self._stdout = process.stdout
        self._buffer = b""

    async def send_line(self, line: str) -> None:
        await self._stdin.send(line.encode() + b"\n")

    async def send(self, message: dict[str, Any]) -> None:
        await self.send_line(json.dumps(message))

    async def receive(self) -> dict[str, Any]:
        """The next message, within 10 s (a dropped request would wait forever)."""
        with anyio.fail_after(10):
            while b"\n" not in self._buffer:
                self._buffer += await self._stdout.receive()
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("line", "reply_id", "code"),
    [
        pytest.param(
            '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", '
            '"params": {"name": "mcp", "arguments": {"search": "\\ud800"}}}',
            7,
            -32700,
            id="lone-surrogate",
        ),
        pytest.param(
            '{"jsonrpc": "2.0", "id": "q-1", "method": "ping", "params": {"x": "\\udfff\\u0041"}}',
            "q-1",
            -32700,
            id="lone-low-surrogate",
        ),
        pytest.param('{"jsonrpc": "2.0", "id": 8, "method": ', None, -32700, id="not-json"),
        pytest.param('{"id": 9, "hello": true}', 9, -32600, id="not-json-rpc"),
    ],
)
async def test_the_stdio_gateway_answers_a_line_it_cannot_parse_and_carries_on(
    gw_workspace: GatewayWorkspace, line: str, reply_id: object, code: int
) -> None:
    gw_workspace.write_config({})
    process = await anyio.open_process(
        [str(PI_MCP), *gw_workspace.serve_args()], cwd=gw_workspace.root
    )
    async with process:
        wire = _StdioWire(process)
        await wire.send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert (await wire.receive())["id"] == 1
        await wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        await wire.send_line("")  # a blank line is no message: no answer
        await wire.send_line(line)
        reply = await wire.receive()
        assert reply["id"] == reply_id
        assert reply["error"]["code"] == code
        # The session goes on: the next request is answered as usual.
        await wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = await wire.receive()
        assert listed["id"] == 2
        assert [tool["name"] for tool in listed["result"]["tools"]] == ["mcp", "mcp_script"]
        await process.stdin.aclose()  # type: ignore[union-attr]
        with anyio.fail_after(20):
            assert await process.wait() == 0


async def test_the_exclusive_flag_serves_the_config_file_alone(
    gw_workspace: GatewayWorkspace,
) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    gw_workspace.write_config({"only": fixture_entry()})
    (gw_workspace.root / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"from_project": fixture_entry()}})
    )
    args = gw_workspace.serve_args()
    params = StdioServerParameters(
        command=str(PI_MCP), args=["--exclusive", *args], env={}, cwd=gw_workspace.root
    )
    async with Client(params, mode="legacy") as client:  # type: ignore[arg-type]
        with anyio.fail_after(30):
            status = await client.call_tool("mcp", {})
    text = "\n".join(getattr(c, "text", "") for c in status.content)
    assert "only" in text, text
    assert "from_project" not in text, text
