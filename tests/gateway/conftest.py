"""Running ``pi-mcp serve`` as a real process and talking to it with real clients."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
MCP_FIXTURE = FIXTURES / "mcp_fixture.py"
CONFORMANCE_FIXTURE = FIXTURES / "conformance_everything.py"
NPM_BIN = REPO / "tests" / "npm" / "node_modules" / ".bin"
NODE22 = NPM_BIN / "node"
PI_MCP = Path(sys.executable).parent / "pi-mcp"
CANARY = "canary-secret-7f3a9c"
"""A secret put in upstream env, headers and tokens; no client may ever see it."""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def fixture_entry(*args: str, **extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(MCP_FIXTURE), *args], **extra}


def conformance_entry(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(CONFORMANCE_FIXTURE)], **extra}


@dataclass
class GatewayWorkspace:
    """A temporary agent dir with one config file, and the ``pi-mcp serve`` command for it."""

    root: Path

    @property
    def agent_dir(self) -> Path:
        return self.root / "agent"

    @property
    def config_file(self) -> Path:
        return self.root / "mcp.json"

    def write_config(self, servers: dict[str, Any], settings: dict[str, Any] | None = None) -> None:
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {"mcpServers": servers}
        if settings:
            body["settings"] = settings
        self.config_file.write_text(json.dumps(body, indent=2))

    def serve_args(self, *extra: str) -> list[str]:
        return [
            "--config",
            str(self.config_file),
            "--agent-dir",
            str(self.agent_dir),
            "--project",
            str(self.root),
            "serve",
            *extra,
        ]

    def stdio_params(
        self, *extra: str, env: Mapping[str, str] | None = None
    ) -> StdioServerParameters:
        return StdioServerParameters(
            command=str(PI_MCP), args=self.serve_args(*extra), env=dict(env or {}), cwd=self.root
        )


@pytest.fixture
def gw_workspace(tmp_path: Path) -> GatewayWorkspace:
    return GatewayWorkspace(tmp_path)


@dataclass
class HttpGateway:
    """A ``pi-mcp serve --transport http`` process and the URL it announced."""

    process: subprocess.Popen[bytes]
    url: str
    stderr_path: Path
    token: str | None = None
    _children: list[int] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def server_processes(self) -> list[psutil.Process]:
        """Descendants without the supervisors each stdio server runs under (on Linux)."""
        return [p for p in self.descendants() if not is_supervisor(p)]

    def client(self, mode: str = "legacy", token: str | None = None, **kwargs: Any) -> Client:
        bearer = token if token is not None else self.token
        headers = {"Authorization": f"Bearer {bearer}"} if bearer else None
        http = create_mcp_http_client(headers=headers)
        return Client(streamable_http_client(self.url, http_client=http), mode=mode, **kwargs)  # type: ignore[arg-type]

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")


@contextmanager
def run_http_gateway(
    workspace: GatewayWorkspace,
    *extra: str,
    env: Mapping[str, str] | None = None,
    token: str | None = None,
) -> Iterator[HttpGateway]:
    """Start the gateway on a free loopback port; stop it with SIGTERM and check that it and
    every process it started are gone."""
    stderr_path = workspace.root / "gateway.stderr"
    environment = {**os.environ, **(env or {})}
    process = subprocess.Popen(
        [str(PI_MCP), *workspace.serve_args("--transport", "http", "--port", "0", *extra)],
        stdout=subprocess.PIPE,
        stderr=stderr_path.open("wb"),
        env=environment,
        cwd=workspace.root,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    if "listening on " not in line:
        process.kill()
        process.wait()
        raise AssertionError(f"gateway did not start: {line!r}\n{stderr_path.read_text()}")
    gateway = HttpGateway(process, line.split("listening on ", 1)[1].strip(), stderr_path, token)
    try:
        yield gateway
    finally:
        children = gateway.descendants()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                raise AssertionError("gateway did not exit within 15 s of SIGTERM") from None
        _, alive = psutil.wait_procs(children, timeout=5)
        for child in alive:
            child.kill()
        assert not alive, f"processes left behind: {[c.pid for c in alive]}"


@asynccontextmanager
async def stdio_gateway(
    workspace: GatewayWorkspace, *extra: str, mode: str = "legacy", **kwargs: Any
) -> AsyncIterator[Client]:
    """A client connected to ``pi-mcp serve`` over stdio (the client starts the process)."""
    async with Client(workspace.stdio_params(*extra), mode=mode, **kwargs) as client:  # type: ignore[arg-type]
        yield client


def make_mark(directory: Path, name: str) -> Path:
    """A named pipe the fixture's ``slow(mark=...)`` opens when the call reaches it."""
    path = directory / name
    os.mkfifo(path)
    return path


async def wait_for_mark(path: Path, *, timeout_s: float = 20) -> None:
    """Return once the upstream server has started the call that carries ``path``.

    Opening a named pipe for reading blocks until the writer opens it: no polling.
    """
    with anyio.fail_after(timeout_s):
        await anyio.to_thread.run_sync(path.read_text, abandon_on_cancel=True)


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


def is_supervisor(process: psutil.Process) -> bool:
    try:
        return any(part.endswith("_reaper.py") for part in process.cmdline())
    except psutil.NoSuchProcess:
        return False


def gateway_descendants_of_self() -> list[psutil.Process]:
    return psutil.Process().children(recursive=True)


def process_names(processes: list[psutil.Process]) -> list[str]:
    names = []
    for p in processes:
        try:
            names.append(" ".join(p.cmdline()))
        except psutil.NoSuchProcess:
            continue
    return names
