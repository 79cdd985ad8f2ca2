"""Shared pieces for the host-binding tests: real servers, an isolated agent dir, a canary."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

TESTS_DIR = Path(__file__).resolve().parents[1]
EVERYTHING_JS = (
    (TESTS_DIR / "npm" / "node_modules" / "@modelcontextprotocol" / "server-everything")
    / "dist"
    / "index.js"
)

needs_npm = pytest.mark.skipif(
    not EVERYTHING_JS.exists() or shutil.which("node") is None,
    reason="npm test servers are not installed (make npm)",
)

CANARY = "canary-7f3a9c-do-not-leak"
"""A secret placed in env values, headers, a bearer token and a URL password: it must never
reach a model (descriptions, results, errors) or a notice."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def time_entry(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_server_time"], **extra}


def everything_entry(**extra: Any) -> dict[str, Any]:
    return {"command": "node", "args": [str(EVERYTHING_JS), "stdio"], **extra}


def secret_servers() -> dict[str, Any]:
    """Servers that carry the canary: one that works, two that cannot be reached."""
    return {
        "time": time_entry(env={"TIME_API_KEY": CANARY}),
        "remote": {
            "url": f"http://user:{CANARY}@127.0.0.1:9/mcp",
            "headers": {"Authorization": f"Bearer {CANARY}", "X-Api-Key": CANARY},
        },
        "broken": {
            "command": sys.executable,
            "args": ["-c", "raise SystemExit(3)"],
            "env": {"BROKEN_TOKEN": CANARY},
        },
    }


@dataclass
class Workspace:
    """An agent dir and a project dir in a temporary directory, with one config file."""

    root: Path

    @property
    def agent_dir(self) -> Path:
        return self.root / "agent"

    @property
    def project_dir(self) -> Path:
        return self.root / "project"

    @property
    def config_file(self) -> Path:
        return self.agent_dir / "mcp.json"

    def write_config(
        self,
        servers: dict[str, Any],
        settings: dict[str, Any] | None = None,
        path: Path | None = None,
    ) -> Path:
        self.agent_dir.mkdir(parents=True, exist_ok=True)
        self.project_dir.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {"mcpServers": servers}
        if settings:
            body["settings"] = settings
        target = path or self.config_file
        target.write_text(json.dumps(body, indent=2))
        return target

    def adapter_kwargs(self) -> dict[str, Any]:
        return {
            "agent_dir": self.agent_dir,
            "project_dir": self.project_dir,
            "config_path": self.config_file,
        }


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    ws = Workspace(tmp_path)
    ws.write_config({})
    # Nothing from the real machine: the agent dir, the home, direct-tool overrides.
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(ws.agent_dir))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MCP_DIRECT_TOOLS", raising=False)
    monkeypatch.delenv("PI_MCP_CONFIG", raising=False)
    return ws


def _descendants() -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process().children(recursive=True) if p.is_running()]
    except psutil.Error:
        return []


@pytest.fixture
def no_leaked_processes() -> Iterator[None]:
    """Fail the test if a server process it started is still running at the end."""
    before = {p.pid for p in _descendants()}
    yield
    leaked = []
    for process in _descendants():
        if process.pid in before:
            continue
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                leaked.append((process.pid, process.cmdline()))
        except psutil.Error:
            continue
    assert not leaked, f"processes left behind: {leaked}"


def assert_no_canary(*things: object) -> None:
    """The canary appears in none of ``things`` (their ``repr``, which covers nested data)."""
    for thing in things:
        assert CANARY not in repr(thing), f"secret leaked into: {thing!r}"[:2000]
