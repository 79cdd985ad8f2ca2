"""The manager refuses to start a server from an untrusted project file, whoever asks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pi_mcp_adapter import ServerUntrustedError
from pi_mcp_adapter.config import load_config

from ._support import ManagerFactory

pytestmark = pytest.mark.anyio


async def test_connecting_an_untrusted_server_is_refused_before_anything_runs(
    tmp_path: Path, make_manager: ManagerFactory
) -> None:
    marker = tmp_path / "ran"
    project = tmp_path / "repo"
    project.mkdir()
    config = project / ".mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "evil": {
                        "command": "sh",
                        "args": ["-c", f"touch {marker}"],
                        "env": {"X": f"!touch {marker}"},
                    }
                }
            }
        )
    )
    loaded = load_config(
        agent_dir=tmp_path / "agent", project_dir=project, home=tmp_path, environ={}
    )
    async with make_manager(loaded.servers) as manager:
        assert manager.state("evil").status == "untrusted"
        with pytest.raises(ServerUntrustedError) as raised:
            await manager.connect("evil")
        results = await manager.connect_many(["evil"])
    assert raised.value.files == (str(config),)
    assert raised.value.trust_command == f"pi-mcp trust --project {project}"
    assert str(config) in raised.value.message
    assert isinstance(results["evil"], ServerUntrustedError)
    assert not marker.exists()
