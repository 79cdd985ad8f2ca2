"""Where configuration files live: our own layers, and each host's files per operating system.

Every path is computed from an explicit home directory, project directory, platform and
environment, never from the process's own, so callers (and tests) decide what "this machine" is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "IMPORT_KINDS",
    "FileLayer",
    "HostFile",
    "ImportKind",
    "Where",
    "file_layers",
    "host_files",
]

ImportKind = Literal[
    "cursor", "claude-code", "claude-desktop", "codex", "windsurf", "vscode", "opencode"
]
IMPORT_KINDS: tuple[ImportKind, ...] = (
    "cursor",
    "claude-code",
    "claude-desktop",
    "codex",
    "windsurf",
    "vscode",
    "opencode",
)

HostFormat = Literal["mcp-json", "claude-json", "codex-toml", "windsurf", "vscode", "opencode"]


@dataclass(frozen=True, slots=True)
class Where:
    """The machine a configuration is loaded on."""

    home: Path
    project_dir: Path
    platform: str
    """``sys.platform`` spelling: ``linux``, ``darwin`` or ``win32``."""
    environ: Mapping[str, str]

    @property
    def config_home(self) -> Path:
        """XDG config directory on Linux (``$XDG_CONFIG_HOME`` or ``~/.config``)."""
        xdg = self.environ.get("XDG_CONFIG_HOME")
        return Path(xdg) if xdg and Path(xdg).is_absolute() else self.home / ".config"

    @property
    def app_data(self) -> Path:
        """Where desktop applications keep their settings on this platform."""
        if self.platform == "darwin":
            return self.home / "Library" / "Application Support"
        if self.platform == "win32":
            appdata = self.environ.get("APPDATA")
            return Path(appdata) if appdata else self.home / "AppData" / "Roaming"
        return self.config_home


@dataclass(frozen=True, slots=True)
class FileLayer:
    """One of our own config files, in precedence order (later wins)."""

    name: str
    path: Path


@dataclass(frozen=True, slots=True)
class HostFile:
    """One file another host keeps its MCP servers in, and how to read it."""

    kind: ImportKind
    path: Path
    format: HostFormat


def default_agent_dir() -> Path:
    """``$PI_CODING_AGENT_DIR``, else ``~/.pi/agent``."""
    env = os.environ.get("PI_CODING_AGENT_DIR")
    return Path(env).expanduser() if env else Path.home() / ".pi" / "agent"


def is_exclusive_mode(environ: Mapping[str, str]) -> bool:
    """``PI_MCP_CONFIG_MODE=exclusive``: read the agent-dir (or ``--config``) file alone."""
    return environ.get("PI_MCP_CONFIG_MODE", "").strip().lower() == "exclusive"


def file_layers(
    where: Where, *, agent_dir: Path, config_path: Path | None, exclusive: bool = False
) -> list[FileLayer]:
    """Our config files from lowest to highest precedence.

    ``config_path`` (the ``--config`` option) takes the place of the agent-dir file. With
    ``exclusive`` that one file is the whole configuration (its imports still apply).
    """
    home, project = where.home, where.project_dir
    if exclusive:
        if config_path is not None:
            return [FileLayer("config", config_path)]
        return [FileLayer("agent", agent_dir / "mcp.json")]
    return [
        FileLayer("shared", home / ".config" / "mcp" / "mcp.json"),
        FileLayer("agents", home / ".agents" / "mcp.json"),
        FileLayer("agents-dir", home / ".agents" / "mcp" / "mcp.json"),
        FileLayer("config", config_path)
        if config_path is not None
        else FileLayer("agent", agent_dir / "mcp.json"),
        FileLayer("project", project / ".mcp.json"),
        FileLayer("project-pi", project / ".pi" / "mcp.json"),
    ]


def host_files(kind: ImportKind, where: Where) -> list[HostFile]:
    """The files a host keeps MCP servers in, from lowest to highest precedence.

    When the same server name appears in several of them, the later file's entry is used whole.
    """
    home, project = where.home, where.project_dir
    if kind == "cursor":
        return [
            HostFile(kind, home / ".cursor" / "mcp.json", "mcp-json"),
            HostFile(kind, project / ".cursor" / "mcp.json", "mcp-json"),
        ]
    if kind == "claude-code":
        # Claude Code scopes, lowest first: the legacy user file, then user scope (top level of
        # ~/.claude.json), then local scope (this project's entry in ~/.claude.json).
        return [
            HostFile(kind, home / ".claude" / "mcp.json", "mcp-json"),
            HostFile(kind, home / ".claude.json", "claude-json"),
        ]
    if kind == "claude-desktop":
        return [
            HostFile(
                kind,
                where.app_data / "Claude" / "claude_desktop_config.json",
                "mcp-json",
            )
        ]
    if kind == "codex":
        codex_home = where.environ.get("CODEX_HOME")
        base = Path(codex_home) if codex_home else home / ".codex"
        return [HostFile(kind, base / "config.toml", "codex-toml")]
    if kind == "windsurf":
        return [
            HostFile(kind, home / ".windsurf" / "mcp.json", "windsurf"),
            HostFile(kind, home / ".codeium" / "windsurf" / "mcp_config.json", "windsurf"),
        ]
    if kind == "vscode":
        return [
            HostFile(kind, where.app_data / "Code" / "User" / "mcp.json", "vscode"),
            HostFile(kind, project / ".vscode" / "mcp.json", "vscode"),
        ]
    # opencode keeps its global file under the XDG config directory on every OS (it uses
    # ~/.config even on macOS and Windows); .jsonc after .json in each place.
    global_dir = where.config_home / "opencode"
    return [
        HostFile(kind, global_dir / "opencode.json", "opencode"),
        HostFile(kind, global_dir / "opencode.jsonc", "opencode"),
        HostFile(kind, project / "opencode.json", "opencode"),
        HostFile(kind, project / "opencode.jsonc", "opencode"),
    ]
