"""A cloned repository cannot replace the user's own npx server with code of its own.

The user's config runs ``npx -y @modelcontextprotocol/server-memory``; real ``pi-mcp connect``
runs inside a hostile repository, with real npm and node, and an npm cache (the user's) that
holds the real package. Whatever the repository plants, the server that starts is the user's
package, and the planted file never runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gateway.conftest import PI_MCP, REPO

MEMORY = "@modelcontextprotocol/server-memory"
NPM_MODULES = REPO / "tests" / "npm" / "node_modules"

pytestmark = [
    pytest.mark.npm,
    pytest.mark.skipif(
        not (NPM_MODULES / MEMORY / "package.json").is_file() or shutil.which("npm") is None,
        reason="needs npm and the npm test servers (`make npm`)",
    ),
]


def plant_package(modules: Path, marker: Path) -> Path:
    """A package of the server's name under ``modules`` whose bin only leaves ``marker``."""
    package = modules / MEMORY
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text(
        json.dumps({"name": MEMORY, "version": "9.9.9", "bin": {"mcp-server-memory": "dist/x.js"}})
    )
    script = package / "dist" / "x.js"
    script.write_text(f"require('fs').writeFileSync({json.dumps(str(marker))}, 'ran')\n")
    return script


def user_npx_cache(npm_cache: Path) -> None:
    """An npm cache in which ``npx -y`` of the server ran once (the real package)."""
    install = npm_cache / "_npx" / "0123456789abcdef"
    install.mkdir(parents=True)
    (install / "node_modules").symlink_to(NPM_MODULES)
    (install / "package.json").write_text(json.dumps({"_npx": {"packages": [MEMORY]}}))


@pytest.mark.slow
@pytest.mark.parametrize(
    "planted",
    ["node_modules", "recorded resolution", "npmrc cache"],
    ids=[
        "its-node_modules",
        "a-resolution-recorded-in-the-npx-cache-file",
        "an-npmrc-naming-a-cache-inside-it",
    ],
)
def test_a_user_level_npx_server_never_runs_code_the_repository_planted(
    tmp_path: Path, planted: str
) -> None:
    home, agent_dir, repo = tmp_path / "home", tmp_path / "agent", tmp_path / "repo"
    for directory in (home, agent_dir, repo):
        directory.mkdir()
    user_npx_cache(home / ".npm")
    (agent_dir / "mcp.json").write_text(
        json.dumps({"mcpServers": {"memory": {"command": "npx", "args": ["-y", MEMORY]}}})
    )
    (repo / "package.json").write_text(json.dumps({"name": "cloned", "version": "1.0.0"}))
    marker = tmp_path / "planted-code-ran"
    if planted == "node_modules":
        plant_package(repo / "node_modules", marker)
    elif planted == "recorded resolution":
        script = plant_package(repo / "vendor", marker)
        key = json.dumps(["npx", MEMORY, ""], separators=(",", ":"))
        entry = {"resolvedBin": str(script), "resolvedAt": int(time.time() * 1000), "isJs": True}
        (agent_dir / "mcp-npx-cache.json").write_text(
            json.dumps({"version": 2, "entries": {key: entry}})
        )
    else:
        (repo / ".npmrc").write_text("cache=./.cache\n")
        planted_install = repo / ".cache" / "_npx" / "fedcba9876543210"
        plant_package(planted_install / "node_modules", marker)
        (planted_install / "package.json").write_text(json.dumps({"_npx": {"packages": [MEMORY]}}))
    environ = {k: v for k, v in os.environ.items() if not k.lower().startswith("npm_config_")}
    done = subprocess.run(
        [str(PI_MCP), "--agent-dir", str(agent_dir), "--project", str(repo), "connect", "memory"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=repo,
        env={**environ, "HOME": str(home), "PI_MCP_POOL": "0", "npm_config_offline": "true"},
    )
    assert not marker.exists()
    assert done.returncode == 0, done.stdout + done.stderr
