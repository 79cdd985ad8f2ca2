"""A repository's config file that never ends, or never opens, costs a warning, not the session.

Git stores symbolic links, so a cloned repository can link ``.mcp.json`` to ``/dev/zero`` (an
endless read that fills memory) or ``/dev/stdin``; a named pipe with no writer blocks whoever
opens it. Every configuration file is read through one bounded, non-blocking reader: such a
file is reported by name and the other files load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from pi_mcp_adapter.config import load_config

RUN_TIMEOUT_S = 60.0


def _link_to_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _huge(path: Path) -> None:
    with path.open("wb") as file:
        file.write(b'{"mcpServers": {}, "pad": "')
        file.truncate(64 * 1024 * 1024)  # sparse: costs no disk


SOURCES = [
    pytest.param(_link_to_zero, id="link-to-dev-zero"),
    pytest.param(_fifo, id="named-pipe-without-writer"),
    pytest.param(_huge, id="64-MiB-file"),
]


def _machine(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    agent, project = tmp_path / "agent", tmp_path / "project"
    agent.mkdir()
    (project / ".vscode").mkdir(parents=True)
    mine = {"command": sys.executable, "args": ["-c", "pass"]}
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"mine": mine}}))
    env = {**os.environ, "HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent)}
    return agent, project, env


@pytest.mark.parametrize("make", SOURCES)
@pytest.mark.parametrize("name", [".mcp.json", ".pi/mcp.json"])
def test_an_endless_project_file_is_reported_and_the_users_servers_load(
    tmp_path: Path, make: Callable[[Path], None], name: str
) -> None:
    _agent, project, env = _machine(tmp_path)
    target = project / name
    target.parent.mkdir(parents=True, exist_ok=True)
    make(target)
    done = subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "--project", str(project), "config", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 1, done.stderr  # a broken file is an error of the command
    shown = json.loads(done.stdout)
    assert "mine" in shown["servers"]
    (error,) = shown["errors"]
    assert error["path"] == str(target)
    assert "not a config file" in error["message"]


@pytest.mark.parametrize("make", SOURCES)
def test_an_endless_imported_host_file_is_reported_through_the_python_api(
    tmp_path: Path, make: Callable[[Path], None]
) -> None:
    agent, project, _env = _machine(tmp_path)
    (agent / "mcp.json").write_text(
        json.dumps({"imports": ["vscode"], "mcpServers": {"mine": {"command": "true"}}})
    )
    make(project / ".vscode" / "mcp.json")
    loaded = load_config(
        agent_dir=agent, project_dir=project, home=tmp_path, environ={"HOME": str(tmp_path)}
    )
    assert "mine" in loaded.servers
    assert any("not a config file" in str(error) for error in loaded.errors), loaded.errors
