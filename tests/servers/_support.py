"""Shared helpers for the server-layer tests: fixture servers, managers, leak checks."""

from __future__ import annotations

import os
import selectors
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

from pi_mcp_adapter.config._models import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerManager

TESTS_DIR = Path(__file__).resolve().parents[1]
FIXTURES_DIR = TESTS_DIR / "fixtures"
MCP_FIXTURE = FIXTURES_DIR / "mcp_fixture.py"
HTTP_FAULTS = FIXTURES_DIR / "http_faults.py"
NPM_BIN = TESTS_DIR / "npm" / "node_modules" / ".bin"
NPM_MODULES = TESTS_DIR / "npm" / "node_modules" / "@modelcontextprotocol"
EVERYTHING_JS = NPM_MODULES / "server-everything" / "dist" / "index.js"

needs_npm = pytest.mark.skipif(
    not EVERYTHING_JS.exists() or shutil.which("node") is None,
    reason="npm test servers are not installed (make npm)",
)


def fixture_entry(*args: str, **fields: Any) -> ServerEntry:
    """A stdio entry that runs the MCP fixture server with ``args``."""
    return ServerEntry(command=sys.executable, args=(str(MCP_FIXTURE), *args), **fields)


def text_of(result: Any) -> str:
    """The text of the first content block of a tool result."""
    return str(result.content[0].text)


class HttpFixtures:
    """Starts HTTP fixture servers as subprocesses and stops them at the end of the test."""

    def __init__(self) -> None:
        self.processes: list[subprocess.Popen[str]] = []

    def start(self, script: Path, *args: str, env: Mapping[str, str] | None = None) -> int:
        process = subprocess.Popen(
            [sys.executable, str(script), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.processes.append(process)
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            if not selector.select(timeout=20):
                raise RuntimeError(f"{script.name} did not report its port")
        line = process.stdout.readline()
        if not line.startswith("LISTENING "):
            raise RuntimeError(f"{script.name} printed {line!r} instead of its port")
        return int(line.split()[1])

    def mcp(self, transport: str, *args: str, env: Mapping[str, str] | None = None) -> str:
        """Start the MCP fixture over HTTP; return the URL of its endpoint."""
        port = self.start(MCP_FIXTURE, "--transport", transport, *args, env=env)
        path = "/mcp" if transport == "streamable-http" else "/sse"
        return f"http://127.0.0.1:{port}{path}"

    def faults(self, *args: str) -> str:
        port = self.start(HTTP_FAULTS, *args)
        return f"http://127.0.0.1:{port}/mcp"

    def pids(self) -> set[int]:
        return {p.pid for p in self.processes}

    def stop_all(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def http_fixtures() -> Iterator[HttpFixtures]:
    fixtures = HttpFixtures()
    try:
        yield fixtures
    finally:
        fixtures.stop_all()


def live_descendants(exclude: set[int] = frozenset()) -> list[psutil.Process]:  # type: ignore[assignment]
    """Descendants of this test process that are still running (zombies count as gone)."""
    alive = []
    for child in psutil.Process().children(recursive=True):
        if child.pid in exclude:
            continue
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                alive.append(child)
        except psutil.NoSuchProcess:
            continue
    return alive


def pid_is_running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def no_leaked_processes(http_fixtures: HttpFixtures) -> Iterator[None]:
    """Fail the test if it leaves a child process of ours running (HTTP fixtures excepted)."""
    before = {p.pid for p in live_descendants()}
    yield
    leaked = [p for p in live_descendants(http_fixtures.pids()) if p.pid not in before]
    assert not leaked, f"processes left behind: {[(p.pid, p.cmdline()) for p in leaked]}"


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


ManagerFactory = Callable[..., ServerManager]


@pytest.fixture
def make_manager(tmp_path: Path) -> ManagerFactory:
    """Build a manager with a temporary log directory, npx resolution off, no health loop."""

    def build(
        servers: Mapping[str, ServerEntry],
        settings: Settings | None = None,
        **options: Any,
    ) -> ServerManager:
        options.setdefault("log_dir", tmp_path / "logs")
        options.setdefault("resolve_npx", False)
        return ServerManager(servers, settings or Settings(health_check_interval_ms=0), **options)

    return build


@pytest.fixture
async def healthy_manager(
    make_manager: ManagerFactory,
) -> AsyncIterator[ServerManager]:
    async with make_manager({"healthy": fixture_entry()}) as manager:
        yield manager
