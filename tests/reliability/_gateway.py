"""Running ``pi-mcp serve`` over Streamable HTTP as a real process, for the reliability tests.

:func:`start_gateway` starts the gateway in its own session on a free loopback port and waits
until it accepts connections; :func:`gateway_call` calls the gateway's ``mcp`` tool with an SDK
client, the way any MCP client would.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client

STARTUP_DEADLINE_S = 60.0


def has_serve_command() -> bool:
    """Whether this build has ``pi-mcp serve`` (the gateway)."""
    from pi_mcp_adapter.cli import app

    names = {command.name or command.callback.__name__ for command in app.registered_commands}
    return "serve" in names


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Gateway:
    process: subprocess.Popen[str]
    url: str
    port: int
    log_path: Path
    """Where the gateway's stdout and stderr go (a file: a pipe nobody reads would fill up)."""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def start_gateway(agent_dir: Path, project_dir: Path, *extra: str) -> Gateway:
    """``pi-mcp serve --transport http`` on a free port; returns once it accepts connections."""
    port = free_port()
    log_path = project_dir / f"gateway-{port}.log"
    with open(log_path, "w") as log:
        process = _spawn(agent_dir, project_dir, port, log, extra)
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"pi-mcp serve exited at start: {log_path.read_text()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return Gateway(process, f"http://127.0.0.1:{port}/mcp", port, log_path)
        except OSError:
            time.sleep(0.1)  # polling a port that is not open yet
    process.kill()
    process.wait()
    raise RuntimeError(f"pi-mcp serve did not listen on {port}: {log_path.read_text()}")


def _spawn(
    agent_dir: Path, project_dir: Path, port: int, log: Any, extra: tuple[str, ...]
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pi_mcp_adapter",
            "--agent-dir",
            str(agent_dir),
            "--project",
            str(project_dir),
            "serve",
            "--transport",
            "http",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--path",
            "/mcp",
            *extra,
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "HOME": str(project_dir)},
        # Its own session, as a service would run: signals reach the gateway alone.
        start_new_session=True,
    )


def result_text(result: types.CallToolResult) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def gateway_call(client: Client, params: dict[str, Any]) -> types.CallToolResult:
    """Call the gateway's ``mcp`` tool (the proxy surface) with ``params``."""
    return await client.call_tool("mcp", params)


def mcp_params(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"tool": tool, "args": json.loads(json.dumps(arguments))}
