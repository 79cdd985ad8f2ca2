from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pi_mcp_adapter.config import LoadedConfig, load_config

CANARY = "canary-7f3a9e1c-d0n0t-l3ak"
"""A secret planted in configs; no output, error or repr may ever contain it."""


@dataclass
class Machine:
    """A throwaway machine: its own HOME, agent dir, project dir and environment."""

    root: Path
    environ: dict[str, str] = field(default_factory=dict)
    platform: str = "linux"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def agent_dir(self) -> Path:
        return self.home / ".pi" / "agent"

    @property
    def project(self) -> Path:
        return self.root / "work" / "project"

    def layer_path(self, layer: str) -> Path:
        return {
            "shared": self.home / ".config" / "mcp" / "mcp.json",
            "agents": self.home / ".agents" / "mcp.json",
            "agents-dir": self.home / ".agents" / "mcp" / "mcp.json",
            "agent": self.agent_dir / "mcp.json",
            "project": self.project / ".mcp.json",
            "project-pi": self.project / ".pi" / "mcp.json",
        }[layer]

    def write(self, path: Path, content: str | Mapping[str, object]) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = content if isinstance(content, str) else json.dumps(content, indent=2)
        path.write_text(text, encoding="utf-8")
        return path

    def write_layer(self, layer: str, content: str | Mapping[str, object]) -> Path:
        return self.write(self.layer_path(layer), content)

    def load(self, *, config_path: Path | None = None) -> LoadedConfig:
        return load_config(
            agent_dir=self.agent_dir,
            project_dir=self.project,
            config_path=config_path,
            home=self.home,
            environ=self.environ,
            platform=self.platform,
        )


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    m = Machine(tmp_path)
    m.home.mkdir(parents=True)
    m.project.mkdir(parents=True)
    return m
