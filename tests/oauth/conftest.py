"""Fixtures of the OAuth tests: the OAuth fixture server, a throwaway machine, the CLI."""

from __future__ import annotations

import json
import os
import selectors
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest

HERE = Path(__file__).resolve().parent
OAUTH_SERVER = HERE.parent / "fixtures" / "oauth_server.py"
BROWSER = HERE / "browser.py"
SERVER = "remote"


@dataclass
class OAuthServer:
    """A running ``tests/fixtures/oauth_server.py``."""

    process: subprocess.Popen[str]
    port: int

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def stats(self) -> dict[str, Any]:
        response = httpx2.get(f"{self.base}/test/stats", timeout=10)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def count(self, name: str) -> int:
        value: int = self.stats()["counts"].get(name, 0)
        return value

    def post(self, path: str) -> None:
        httpx2.post(f"{self.base}{path}", timeout=10).raise_for_status()


@pytest.fixture
def oauth_servers() -> Iterator[list[OAuthServer]]:
    started: list[OAuthServer] = []
    yield started
    for server in started:
        server.process.kill()
        server.process.wait(timeout=10)


@pytest.fixture
def start_oauth_server(oauth_servers: list[OAuthServer]) -> Any:
    def start(*args: str) -> OAuthServer:
        process = subprocess.Popen(
            [sys.executable, str(OAUTH_SERVER), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=30):
                process.kill()
                raise RuntimeError("the OAuth fixture server did not report its port")
        line = process.stdout.readline()
        server = OAuthServer(process, int(line.split()[1]))
        oauth_servers.append(server)
        return server

    return start


@pytest.fixture
def oauth_server(start_oauth_server: Any) -> OAuthServer:
    server: OAuthServer = start_oauth_server()
    return server


@dataclass
class Machine:
    """A throwaway HOME, agent dir and project, and the ``pi-mcp`` command line run in it."""

    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def agent_dir(self) -> Path:
        return self.root / "home" / ".pi" / "agent"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def tokens_path(self) -> Path:
        return self.agent_dir / "mcp-oauth" / SERVER / "tokens.json"

    def configure(self, servers: Mapping[str, Any], **settings: Any) -> Path:
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        self.project.mkdir(parents=True, exist_ok=True)
        path = self.agent_dir / "mcp.json"
        path.write_text(json.dumps({"mcpServers": servers, "settings": settings}, indent=2))
        return path

    def browser(self) -> str:
        """A ``BROWSER`` command that follows the authorization server's redirects."""
        script = self.root / "browser"
        script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{BROWSER}" "$@"\n')
        script.chmod(0o755)
        return str(script)

    def base_env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("BROWSER", "DISPLAY", "WAYLAND_DISPLAY", "MCP_OAUTH_CALLBACK_PORT")
        }
        env["HOME"] = str(self.root / "home")
        env.pop("PI_CODING_AGENT_DIR", None)
        env.update(self.env)
        env.update(extra or {})
        return env

    def command(self, *args: str) -> list[str]:
        return [
            sys.executable,
            "-m",
            "pi_mcp_adapter",
            "--agent-dir",
            str(self.agent_dir),
            "--project",
            str(self.project),
            *args,
        ]

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        input: str = "",
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            env=self.base_env(env),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def popen(self, *args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.command(*args),
            env=self.base_env(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    # Each test its own callback port: 19876 may be in use by anything else on the machine.
    return Machine(tmp_path, env={"MCP_OAUTH_CALLBACK_PORT": str(free_port())})
