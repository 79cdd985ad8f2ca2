from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.config import ImportKind

from .conftest import Machine


def _servers(machine: Machine, kind: ImportKind) -> dict[str, dict[str, Any]]:
    machine.write_layer("agent", {"imports": [kind]})
    config = machine.load()
    assert not config.errors, [str(e) for e in config.errors]
    return {
        name: entry.model_dump(mode="json", by_alias=True, exclude_unset=True)
        for name, entry in config.servers.items()
    }


def test_cursor_reads_the_user_and_the_project_file(machine: Machine) -> None:
    machine.write(
        machine.home / ".cursor" / "mcp.json",
        """{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${env:GH}"}
    },
    "shared": {"url": "https://user.example/mcp"}
  }
}""",
    )
    machine.write(
        machine.project / ".cursor" / "mcp.json",
        '{"mcpServers": {"shared": {"type": "http", "url": "https://project.example/mcp"},'
        ' "docs": {"command": "docs-server", "args": ["${workspaceFolder}/docs"]}}}',
    )
    machine.environ["GH"] = "gh-value"
    assert _servers(machine, "cursor") == {
        "github": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-github"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "gh-value"},
        },
        "shared": {"url": "https://project.example/mcp"},
        "docs": {"command": "docs-server", "args": [f"{machine.project}/docs"]},
    }


def test_vscode_workspace_basename_and_path_separator_resolve_to_the_project(
    machine: Machine,
) -> None:
    machine.write(
        machine.project / ".vscode" / "mcp.json",
        '{"servers": {"named": {"type": "stdio", "command": "srv",'
        ' "args": ["--name", "${workspaceFolderBasename}", "${workspaceFolder}${/}data"]}}}',
    )
    assert _servers(machine, "vscode") == {
        "named": {
            "command": "srv",
            "args": ["--name", machine.project.name, f"{machine.project}{os.sep}data"],
        }
    }


def test_claude_code_reads_user_scope_and_this_projects_local_scope(machine: Machine) -> None:
    other_project = machine.root / "other"
    machine.write(
        machine.home / ".claude.json",
        {
            "numStartups": 12,
            "mcpServers": {
                "user-http": {
                    "type": "http",
                    "url": "https://mcp.example.com/mcp",
                    "headers": {"X-Team": "core"},
                },
                "both": {"type": "stdio", "command": "user-version", "args": [], "env": {}},
            },
            "projects": {
                str(machine.project): {
                    "allowedTools": [],
                    "mcpServers": {
                        "both": {"type": "stdio", "command": "local-version", "args": []},
                        "local-sse": {"type": "sse", "url": "https://sse.example/sse"},
                    },
                },
                str(other_project): {"mcpServers": {"elsewhere": {"command": "no"}}},
            },
        },
    )
    machine.write(
        machine.home / ".claude" / "mcp.json",
        {"mcpServers": {"legacy": {"command": "legacy-server"}, "both": {"command": "legacy"}}},
    )
    assert _servers(machine, "claude-code") == {
        "legacy": {"command": "legacy-server"},
        "both": {"command": "local-version", "args": []},
        "user-http": {"url": "https://mcp.example.com/mcp", "headers": {"X-Team": "core"}},
        "local-sse": {"url": "https://sse.example/sse"},
    }


DESKTOP_CONFIG = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        }
    },
    "globalShortcut": "",
}


@pytest.mark.parametrize(
    ("platform", "relative", "environ"),
    [
        pytest.param(
            "darwin",
            "Library/Application Support/Claude/claude_desktop_config.json",
            {},
            id="macos",
        ),
        pytest.param("linux", ".config/Claude/claude_desktop_config.json", {}, id="linux"),
        pytest.param(
            "linux",
            "xdg/Claude/claude_desktop_config.json",
            {"XDG_CONFIG_HOME": "{home}/xdg"},
            id="linux-xdg",
        ),
        pytest.param(
            "win32",
            "AppData/Roaming/Claude/claude_desktop_config.json",
            {"APPDATA": "{home}/AppData/Roaming"},
            id="windows",
        ),
    ],
)
def test_claude_desktop_is_read_from_its_place_on_each_os(
    machine: Machine, platform: str, relative: str, environ: dict[str, str]
) -> None:
    machine.platform = platform
    machine.environ.update({k: v.format(home=machine.home) for k, v in environ.items()})
    machine.write(machine.home / relative, DESKTOP_CONFIG)
    servers = _servers(machine, "claude-desktop")
    assert servers == {"filesystem": DESKTOP_CONFIG["mcpServers"]["filesystem"]}


def test_claude_desktop_on_another_os_is_not_read(machine: Machine) -> None:
    machine.platform = "linux"
    machine.write(
        machine.home / "Library/Application Support/Claude/claude_desktop_config.json",
        DESKTOP_CONFIG,
    )
    assert _servers(machine, "claude-desktop") == {}


CODEX_TOML = """\
model = "o4-mini"

[mcp_servers.docs]
command = "docs-server"
args = ["--port", "0"]
env = { "LOG" = "debug" }
cwd = "/srv/docs"
startup_timeout_sec = 20
tool_timeout_sec = 2.5
enabled_tools = ["search"]

[mcp_servers.remote]
url = "https://mcp.example.com/mcp"
bearer_token_env_var = "REMOTE_TOKEN"
http_headers = { "X-Client" = "codex" }
env_http_headers = { "X-Api-Key" = "REMOTE_KEY" }
disabled_tools = ["drop_table"]

[mcp_servers.off]
command = "off-server"
enabled = false
"""


def test_codex_maps_its_toml_keys_onto_ours(machine: Machine) -> None:
    machine.write(machine.home / ".codex" / "config.toml", CODEX_TOML)
    machine.environ["REMOTE_KEY"] = "key-value"
    assert _servers(machine, "codex") == {
        "docs": {
            "command": "docs-server",
            "args": ["--port", "0"],
            "env": {"LOG": "debug"},
            "cwd": "/srv/docs",
            "startupTimeoutMs": 20000,
            "requestTimeoutMs": 2500,
            "includeTools": ["search"],
        },
        "remote": {
            "url": "https://mcp.example.com/mcp",
            "auth": "bearer",
            "bearerTokenEnv": "REMOTE_TOKEN",
            "headers": {"X-Client": "codex", "X-Api-Key": "key-value"},
            "excludeTools": ["drop_table"],
        },
        "off": {"command": "off-server", "enabled": False},
    }


def test_codex_home_moves_the_codex_config(machine: Machine) -> None:
    machine.environ["CODEX_HOME"] = str(machine.root / "codex-home")
    machine.write(machine.root / "codex-home" / "config.toml", CODEX_TOML)
    assert set(_servers(machine, "codex")) == {"docs", "remote", "off"}


def test_windsurf_reads_the_current_file_over_the_legacy_one(machine: Machine) -> None:
    machine.write(
        machine.home / ".windsurf" / "mcp.json",
        {"mcpServers": {"old": {"command": "old"}, "both": {"command": "legacy"}}},
    )
    machine.write(
        machine.home / ".codeium" / "windsurf" / "mcp_config.json",
        {
            "mcpServers": {
                "both": {"command": "current", "disabledTools": ["rm"]},
                "remote": {"serverUrl": "https://w.example/mcp", "headers": {"A": "b"}},
            }
        },
    )
    assert _servers(machine, "windsurf") == {
        "old": {"command": "old"},
        "both": {"command": "current", "excludeTools": ["rm"]},
        "remote": {"url": "https://w.example/mcp", "headers": {"A": "b"}},
    }


@pytest.mark.parametrize(
    ("platform", "user_dir", "environ"),
    [
        pytest.param("linux", ".config/Code/User", {}, id="linux"),
        pytest.param("darwin", "Library/Application Support/Code/User", {}, id="macos"),
        pytest.param("win32", "Roaming/Code/User", {"APPDATA": "{home}/Roaming"}, id="windows"),
    ],
)
def test_vscode_reads_the_user_file_and_the_project_file_under_both_keys(
    machine: Machine, platform: str, user_dir: str, environ: dict[str, str]
) -> None:
    machine.platform = platform
    machine.environ.update({k: v.format(home=machine.home) for k, v in environ.items()})
    machine.write(
        machine.home / user_dir / "mcp.json",
        """{
  // VS Code user settings
  "servers": {
    "playwright": {"type": "stdio", "command": "npx", "args": ["@playwright/mcp@latest"]},
    "both": {"type": "http", "url": "https://user.example/mcp"},
  },
}""",
    )
    machine.write(
        machine.project / ".vscode" / "mcp.json",
        """{
  "inputs": [{"type": "promptString", "id": "key", "password": true}],
  "servers": {
    "both": {"type": "http", "url": "https://project.example/mcp"},
    "fs": {"type": "stdio", "command": "fs-server", "args": ["${workspaceFolder}"]},
  },
  "mcpServers": {"legacy-key": {"command": "legacy"}},
}""",
    )
    assert _servers(machine, "vscode") == {
        "playwright": {"command": "npx", "args": ["@playwright/mcp@latest"]},
        "both": {"url": "https://project.example/mcp"},
        "legacy-key": {"command": "legacy"},
        "fs": {"command": "fs-server", "args": [str(machine.project)]},
    }


def test_vscode_input_prompts_are_left_as_written_with_a_warning(machine: Machine) -> None:
    machine.write(
        machine.project / ".vscode" / "mcp.json",
        '{"servers": {"k": {"url": "https://k.example", "headers": {"K": "${input:key}"}}}}',
    )
    machine.write_layer("agent", {"imports": ["vscode"]})
    config = machine.load()
    assert config.servers["k"].headers == {"K": "${input:key}"}
    assert any("${input:...}" in w for w in config.warnings)


def test_opencode_maps_local_and_remote_servers(machine: Machine) -> None:
    machine.write(
        machine.home / ".config" / "opencode" / "opencode.json",
        """{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "local-one": {
      "type": "local",
      "command": ["bun", "x", "my-mcp-command"],
      "environment": {"MY_ENV_VAR": "{env:OPENCODE_VALUE}"},
      "enabled": true
    },
    "both": {"type": "remote", "url": "https://global.example/mcp"}
  }
}""",
    )
    machine.write(
        machine.project / "opencode.jsonc",
        """{
  // project file
  "mcp": {
    "both": {"type": "remote", "url": "https://project.example/mcp",
             "headers": {"Authorization": "Bearer {env:OC_TOKEN}"}, "enabled": false},
  },
}""",
    )
    machine.environ.update({"OPENCODE_VALUE": "v", "OC_TOKEN": "t"})
    assert _servers(machine, "opencode") == {
        "local-one": {
            "command": "bun",
            "args": ["x", "my-mcp-command"],
            "env": {"MY_ENV_VAR": "v"},
            "enabled": True,
        },
        "both": {
            "url": "https://project.example/mcp",
            "headers": {"Authorization": "Bearer t"},
            "enabled": False,
        },
    }


def test_a_broken_host_file_is_reported_and_other_imports_still_load(machine: Machine) -> None:
    cursor = machine.write(
        machine.home / ".cursor" / "mcp.json", '{\n  "mcpServers": {\n    "a": \n}'
    )
    machine.write(machine.home / ".codex" / "config.toml", "[mcp_servers.b]\ncommand = 'b'\n")
    machine.write_layer("agent", {"imports": ["cursor", "codex"]})
    config = machine.load()
    assert list(config.servers) == ["b"]
    assert len(config.errors) == 1
    assert config.errors[0].path == str(cursor)
    assert config.errors[0].line == 4


def test_invalid_toml_is_reported_with_its_line(machine: Machine) -> None:
    path = machine.write(machine.home / ".codex" / "config.toml", "[mcp_servers.a]\ncommand = \n")
    machine.write_layer("agent", {"imports": ["codex"]})
    (error,) = machine.load().errors
    assert error.path == str(path)
    assert error.line == 2
    assert "TOML" in error.message


def _digest(root: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_reading_host_files_never_changes_them(machine: Machine) -> None:
    machine.write(machine.home / ".cursor" / "mcp.json", {"mcpServers": {"a": {"command": "a"}}})
    machine.write(machine.home / ".claude.json", {"mcpServers": {"b": {"command": "b"}}})
    machine.write(machine.home / ".codex" / "config.toml", CODEX_TOML)
    machine.write(machine.project / ".vscode" / "mcp.json", {"servers": {"c": {"command": "c"}}})
    before = _digest(machine.root)
    machine.write_layer("agent", {"imports": ["cursor", "claude-code", "codex", "vscode"]})
    agent_file = str(machine.layer_path("agent"))
    before[agent_file] = _digest(machine.root)[agent_file]
    machine.load()
    assert _digest(machine.root) == before
