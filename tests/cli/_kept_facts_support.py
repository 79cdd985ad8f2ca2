"""A throwaway configuration, agent directory and project, and the real ``pi-mcp`` run in a
fresh process under a probe that counts the loads of the configuration: what the commands
that keep facts between processes (``status``, ``search``) are tested with."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import LoadedConfig, load_config

STATUS_FACTS = "mcp-status-facts.json"

PROBE = """
import atexit, sys
from pi_mcp_adapter.config import _loader
loads = [0]
code = _loader._load_config.__code__
def profile(frame, event, arg):
    if event == "call" and frame.f_code is code:
        loads[0] += 1
atexit.register(lambda: sys.stderr.write(f"LOADS {loads[0]}\\n"))
sys.setprofile(profile)
from pi_mcp_adapter.cli import main
main(sys.argv[1:])
"""


@dataclass
class Workspace:
    root: Path
    env: dict[str, str]

    @classmethod
    def made(cls, root: Path, variables: dict[str, str], servers: dict[str, Any]) -> Workspace:
        """A workspace at ``root`` configured with ``servers``, ``variables`` set in its
        environment, and a broken user layer (an error every command shows)."""
        space = cls(
            root,
            {**os.environ, "HOME": str(root / "home"), "PI_MCP_WARM": "0", **variables},
        )
        space.home.mkdir()
        space.project.mkdir()
        write_json(space.config, {"mcpServers": servers})
        (space.home / ".agents").mkdir()
        (space.home / ".agents" / "mcp.json").write_text("{ not json", encoding="utf-8")
        return space

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def agent(self) -> Path:
        return self.root / "agent"

    @property
    def config(self) -> Path:
        return self.root / "mcp.json"

    def cli(self, *args: str, env: dict[str, str] | None = None) -> tuple[str, str, int]:
        """``pi-mcp *args`` in a fresh process: stdout, stderr without the probe's line, and
        how many times the configuration was loaded."""
        command = [sys.executable, "-c", PROBE, "--config", str(self.config)]
        command += ["--agent-dir", str(self.agent), "--project", str(self.project), *args]
        done = subprocess.run(
            command,
            env=env if env is not None else self.env,
            cwd=self.project,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        lines = done.stderr.splitlines(keepends=True)
        loads = next(x for x in lines if x.startswith("LOADS "))
        rest = "".join(x for x in lines if x is not loads)
        return timeless(done.stdout), timeless(rest), int(loads.split()[1])

    def status(self, *args: str, env: dict[str, str] | None = None) -> tuple[str, str, int]:
        return self.cli("status", *args, env=env)

    def fresh_status(self, *args: str, env: dict[str, str] | None = None) -> tuple[str, str]:
        """What a status with nothing kept shows (the kept facts set aside for it)."""
        facts = self.agent / STATUS_FACTS
        aside = self.root / "facts.aside"
        if facts.exists():
            facts.rename(aside)
        try:
            out, err, loads = self.status(*args, env=env)
        finally:
            if aside.exists():
                aside.replace(facts)
        assert loads == 1
        return out, err

    def loaded(self) -> LoadedConfig:
        """The configuration as the CLI loads it here."""
        return load_config(
            agent_dir=self.agent,
            project_dir=self.project,
            config_path=self.config,
            home=self.home,
            environ=self.env,
        )

    def cache_servers(
        self,
        names: list[str],
        tools_of: Callable[[str], tuple[dict[str, Any], ...]] | None = None,
    ) -> None:
        """Store a listing of each of ``names`` as a listing under this configuration and
        environment would have: ``tools_of(name)``, by default one tool ``<name>_tool``."""
        loaded = self.loaded()
        cache = MetadataCache(self.agent / "mcp-cache.json", environ=self.env)
        for name in names:
            tools = (tools_of or _one_tool)(name)
            cache.store(name, loaded.servers[name], ServerMetadata(tools=tools))
        cache.flush()


def _one_tool(name: str) -> tuple[dict[str, Any], ...]:
    return ({"name": f"{name}_tool", "inputSchema": {"type": "object"}},)


def timeless(text: str) -> str:
    """``text`` without how long ago a failure was (a second passes between two statuses)."""
    text = re.sub(r"failed \d+s ago", "failed Ns ago", text)
    return re.sub(r'"failedAgoS": [0-9.e+-]+', '"failedAgoS": 0', text)


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
