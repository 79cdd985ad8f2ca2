from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.surface import McpAdapter, register_surfaces

HERE = Path(__file__).parent
WORKBENCH = HERE / "workbench_server.py"
FIXTURE = HERE.parent / "fixtures" / "mcp_fixture.py"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def workbench_entry(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(WORKBENCH)], **extra}


def fixture_entry(*options: str, **extra: Any) -> dict[str, Any]:
    """The configurable fixture server of ``tests/fixtures/mcp_fixture.py``."""
    return {"command": sys.executable, "args": [str(FIXTURE), *options], **extra}


def time_entry(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_server_time"], **extra}


@dataclass
class Workspace:
    """A temporary HOME, agent dir and project dir with one config file."""

    root: Path

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def agent_dir(self) -> Path:
        return self.root / "agent"

    @property
    def project_dir(self) -> Path:
        return self.root / "project"

    @property
    def config_file(self) -> Path:
        return self.agent_dir / "mcp.json"

    def write_config(self, servers: dict[str, Any], settings: dict[str, Any] | None = None) -> None:
        for d in (self.home, self.agent_dir, self.project_dir):
            d.mkdir(parents=True, exist_ok=True)
        body: dict[str, Any] = {"mcpServers": servers}
        if settings:
            body["settings"] = settings
        self.config_file.write_text(json.dumps(body, indent=2))

    def adapter(self, host: ExportHost | None = None, **kwargs: Any) -> McpAdapter:
        config = load_config(
            agent_dir=self.agent_dir, project_dir=self.project_dir, home=self.home, environ={}
        )
        assert not config.errors, config.errors
        # The adapter loads the files itself (as reload does again); this load only checks them.
        return McpAdapter(
            agent_dir=self.agent_dir,
            project_dir=self.project_dir,
            home=self.home,
            host=host,
            **kwargs,
        )

    @asynccontextmanager
    async def attached(self, host: ExportHost, **kwargs: Any) -> AsyncIterator[McpAdapter]:
        """An adapter started with ``host``, its surfaces registered as a binding would."""
        async with self.adapter(host=host, **kwargs) as adapter:
            register_surfaces(adapter, host)
            yield adapter


def make_workspace(root: Path) -> Workspace:
    ws = Workspace(root)
    ws.write_config({})
    return ws


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return make_workspace(tmp_path)


@pytest.fixture(scope="module")
def shared_workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    ws = make_workspace(tmp_path_factory.mktemp("shared"))
    ws.write_config(
        {"workbench": workbench_entry(), "time": time_entry()},
        settings={"toonEncode": ["workbench"], "captureStats": True},
    )
    return ws


@pytest.fixture
async def shared_adapter(shared_workspace: Workspace) -> AsyncIterator[McpAdapter]:
    """One adapter over the workbench and time servers, shared by a module's tests."""
    async with shared_workspace.attached(ExportHost(builtin_tools=["read", "bash"])) as adapter:
        yield adapter
