"""``McpAdapter`` takes its directories as ``str`` or any ``os.PathLike``, like ``open()``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pi_mcp_adapter import McpAdapter

pytestmark = pytest.mark.anyio


class _PathLike:
    def __init__(self, path: Path) -> None:
        self._path = path

    def __fspath__(self) -> str:
        return str(self._path)


@pytest.mark.parametrize(
    "kind", [pytest.param(str, id="str"), pytest.param(_PathLike, id="PathLike")]
)
async def test_directories_given_as_str_or_pathlike_work_like_paths(
    tmp_path: Path, kind: type
) -> None:
    agent, project, home = tmp_path / "agent", tmp_path / "project", tmp_path / "home"
    for directory in (agent, project, home):
        directory.mkdir()
    config = agent / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"off": {"command": "x", "disabled": True}}}))
    adapter = McpAdapter(
        agent_dir=kind(agent),
        project_dir=kind(project),
        home=kind(home),
        config_path=kind(config),
        connect_missing=False,
        connect_eager=False,
    )
    assert adapter.agent_dir == agent
    assert adapter.project_dir == project
    async with adapter:
        assert adapter.server_status("off").status == "disabled"
    assert os.fspath(adapter.agent_dir) == str(agent)
