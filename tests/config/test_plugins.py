"""Servers that Claude Code plugins, agent plugins and pi packages bring, laid out on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from conftest import ReferenceJs
from pi_mcp_adapter.cli import app
from pi_mcp_adapter.config._trust import TrustStore, file_digest

from .conftest import Machine

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_fixture.py"
PLUGIN_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"


def claude_plugin(root: Path, servers: dict[str, Any], *, name: str | None = "db-tools") -> Path:
    """A Claude Code plugin bundle as `claude plugin install` lays it out."""
    if name is not None:
        manifest = {"name": name, "version": "1.0.0", "author": {"name": "A"}}
        write(root / ".claude-plugin" / "plugin.json", manifest)
    write(root / ".mcp.json", {"mcpServers": servers})
    write(root / "skills" / "query" / "SKILL.md", "---\nname: query\n---\n")
    write(root / "commands" / "q.md", "Run a query")
    return root


def agent_plugin(root: Path, servers: dict[str, Any], *, name: str = "acme.search") -> Path:
    write(root / "plugin.json", {"$schema": PLUGIN_SCHEMA, "name": name, "version": "0.1.0"})
    write(root / "mcp.json", {"$schema": MCP_SCHEMA, "mcpServers": servers})
    return root


def write(path: Path, content: str | dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content if isinstance(content, str) else json.dumps(content, indent=2))
    return path


# --- Claude Code plugins ------------------------------------------------------------------------


def test_a_claude_plugin_adds_its_servers_with_the_plugin_root_filled_in(machine: Machine) -> None:
    root = claude_plugin(
        machine.home / "plugins" / "db-tools",
        {
            "db": {"command": "python", "args": ["${CLAUDE_PLUGIN_ROOT}/server.py", "${DB}"]},
            "remote": {"url": "https://db.example/mcp"},
            "both": {"command": "x", "url": "https://db.example/mcp"},
        },
    )
    machine.environ["DB"] = "main"
    machine.write_layer("agent", {"claudePlugins": [{"path": "~/plugins/db-tools", "mcp": True}]})
    loaded = machine.load()
    assert not loaded.errors
    db = loaded.servers["db"]
    assert db.args == (f"{root}/server.py", "main")
    assert db.env == {"CLAUDE_PLUGIN_ROOT": str(root)}
    assert db.untrusted is None
    assert "CLAUDE_PLUGIN_ROOT" not in loaded.servers["remote"].env
    assert "both" not in loaded.servers
    assert any("'both' is skipped" in w for w in loaded.warnings)
    origin = loaded.provenance["db"].origin
    assert (origin.source, origin.path) == ("claude-plugin:db-tools", root / ".mcp.json")
    source = next(s for s in loaded.sources if s.kind == "plugin")
    assert (source.name, source.status, source.servers) == (
        "claude-plugin:db-tools",
        "loaded",
        ("db", "remote"),
    )


def test_a_plugin_servers_transport_type_is_understood_not_warned_about(machine: Machine) -> None:
    claude_plugin(
        machine.home / "p",
        {
            "local": {"type": "stdio", "command": "python"},
            "remote": {"type": "http", "url": "https://db.example/mcp"},
        },
    )
    machine.write_layer(
        "agent", {"claudePlugins": [{"path": str(machine.home / "p"), "mcp": True}]}
    )
    loaded = machine.load()
    assert set(loaded.servers) == {"local", "remote"}
    assert [w for w in loaded.warnings if "'type'" in w] == []


def test_config_files_override_a_plugin_server_field_by_field(machine: Machine) -> None:
    claude_plugin(machine.home / "p", {"db": {"command": "python", "lifecycle": "lazy"}})
    machine.write_layer(
        "agent",
        {
            "claudePlugins": [{"path": str(machine.home / "p"), "mcp": True}],
            "mcpServers": {"db": {"lifecycle": "keep-alive"}},
        },
    )
    loaded = machine.load()
    assert loaded.servers["db"].command == "python"
    assert loaded.servers["db"].lifecycle == "keep-alive"
    assert [c.source for c in loaded.provenance["db"].layers] == ["claude-plugin:db-tools", "agent"]


def test_a_plugin_server_whose_name_only_normalises_to_a_configured_one_is_left_out(
    machine: Machine,
) -> None:
    claude_plugin(machine.home / "p", {"my-db": {"command": "plugin-db"}})
    machine.write_layer(
        "agent",
        {
            "claudePlugins": [{"path": str(machine.home / "p"), "mcp": True}],
            "mcpServers": {"my_db": {"command": "mine"}},
        },
    )
    loaded = machine.load()
    assert set(loaded.servers) == {"my_db"}
    assert any("'my-db' is shadowed by 'my_db'" in w for w in loaded.warnings)


@pytest.mark.parametrize(
    ("listing", "mcp"),
    [
        pytest.param({"path": "~/missing", "mcp": True}, True, id="missing directory"),
        pytest.param({"path": "~/p", "skills": True}, False, id="skills only"),
        pytest.param({"path": "~/p"}, False, id="nothing enabled"),
        pytest.param({"path": "~/p", "mcp": "yes"}, False, id="mcp not a boolean"),
    ],
)
def test_plugins_that_bring_no_servers_cost_nothing_else(
    machine: Machine, listing: dict[str, Any], mcp: bool
) -> None:
    claude_plugin(machine.home / "p", {"db": {"command": "x"}})
    machine.write_layer(
        "agent", {"claudePlugins": [listing], "mcpServers": {"mine": {"command": "y"}}}
    )
    loaded = machine.load()
    assert set(loaded.servers) == {"mine"}
    assert not loaded.errors


def test_a_plugin_config_that_resolves_outside_the_plugin_is_refused(machine: Machine) -> None:
    root = machine.home / "p"
    claude_plugin(root, {})
    outside = write(machine.home / "elsewhere.json", {"mcpServers": {"stolen": {"command": "x"}}})
    (root / ".mcp.json").unlink()
    (root / ".mcp.json").symlink_to(outside)
    machine.write_layer("agent", {"claudePlugins": [{"path": str(root), "mcp": True}]})
    loaded = machine.load()
    assert "stolen" not in loaded.servers
    assert any("has no .mcp.json inside" in w for w in loaded.warnings)


def test_a_broken_plugin_manifest_skips_the_plugin(machine: Machine) -> None:
    root = claude_plugin(machine.home / "p", {"db": {"command": "x"}}, name="Not Kebab")
    machine.write_layer("agent", {"claudePlugins": [{"path": str(root), "mcp": True}]})
    loaded = machine.load()
    assert "db" not in loaded.servers
    assert any("invalid name" in w for w in loaded.warnings)


def test_plugins_listed_by_a_project_file_run_nothing_until_that_file_is_trusted(
    machine: Machine,
) -> None:
    claude_plugin(machine.home / "p", {"db": {"command": "x"}})
    project = machine.write_layer(
        "project", {"claudePlugins": [{"path": str(machine.home / "p"), "mcp": True}]}
    )
    untrusted = machine.load().servers["db"].untrusted
    assert untrusted is not None
    assert untrusted.files == (project,)
    TrustStore.in_agent_dir(machine.agent_dir).trust([(project, file_digest(project))])
    assert machine.load().servers["db"].untrusted is None


def test_a_plugin_inside_the_project_is_project_level_even_when_the_user_lists_it(
    machine: Machine,
) -> None:
    root = claude_plugin(machine.project / "tools" / "db", {"db": {"command": "x"}})
    machine.write_layer("agent", {"claudePlugins": [{"path": "tools/db", "mcp": True}]})
    loaded = machine.load()
    untrusted = loaded.servers["db"].untrusted
    assert untrusted is not None
    assert untrusted.files == (root / ".mcp.json",)
    assert [f.path for f in loaded.project_trust.files] == [root / ".mcp.json"]


# --- agent plugins ------------------------------------------------------------------------------


def test_an_agent_plugin_adds_prefixed_servers_with_literal_values(machine: Machine) -> None:
    root = agent_plugin(
        machine.home / "agent-plugins" / "search",
        {
            "local": {
                "type": "stdio",
                "command": "./bin/serve",
                "args": ["--data", "${PLUGIN_DATA}/db", "${HOME}"],
                "env": {"MODE": "${PLUGIN_ROOT}/conf", "TOKEN": "!not-a-command"},
            },
            "remote": {
                "type": "streamable-http",
                "url": "https://search.example/mcp",
                "headers": {"X-Key": "${SECRET}"},
            },
            "loop": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
            "plain-http": {"type": "sse", "url": "http://search.example/sse"},
            "escape": {"type": "stdio", "command": "../../bin/sh"},
            "extra": {"type": "stdio", "command": "x", "timeout": 3},
        },
    )
    write(root / "bin" / "serve", "#!/bin/sh\n")
    machine.environ.update({"HOME": "/should/not/appear", "SECRET": "s3cr3t-value"})
    machine.write_layer("agent", {"settings": {"agentPluginPaths": ["~/agent-plugins/search"]}})
    loaded = machine.load()
    data_dir = machine.agent_dir / "agent-plugin-data" / "acme.search"
    local = loaded.servers["acme_search__local"]
    assert local.command == str(root / "bin" / "serve")
    assert local.args == ("--data", f"{data_dir}/db", "${HOME}")
    assert local.cwd == str(root)
    assert local.env["MODE"] == f"{root}/conf"
    assert local.env["TOKEN"] == "!!not-a-command"  # a literal value, never run
    assert local.env["PLUGIN_DATA"] == str(data_dir)
    remote = loaded.servers["acme_search__remote"]
    assert remote.headers == {"X-Key": "${SECRET}"}
    assert remote.http_transport == "streamable-http"
    assert loaded.servers["acme_search__loop"].http_transport == "sse"
    for refused in ("plain-http", "escape", "extra"):
        assert f"acme_search__{refused.replace('-', '_')}" not in loaded.servers
        assert any(f"server {refused!r} is skipped" in w for w in loaded.warnings)
    assert loaded.provenance["acme_search__local"].origin.source == "agent-plugin:acme.search"


def test_a_config_file_that_replaces_an_agent_plugin_env_gets_variables_again(
    machine: Machine,
) -> None:
    agent_plugin(machine.home / "ap", {"s": {"type": "stdio", "command": "x"}})
    machine.environ["TOKEN"] = "from-env-123"
    machine.write_layer(
        "agent",
        {
            "settings": {"agentPluginPaths": [str(machine.home / "ap")]},
            "mcpServers": {"acme_search__s": {"env": {"T": "${TOKEN}"}}},
        },
    )
    assert machine.load().servers["acme_search__s"].env == {"T": "from-env-123"}


@pytest.mark.parametrize(
    ("manifest", "warning"),
    [
        pytest.param({"name": "x"}, "$schema", id="no schema"),
        pytest.param({"$schema": PLUGIN_SCHEMA, "name": "Bad Name"}, "name is invalid", id="name"),
        pytest.param(
            {"$schema": PLUGIN_SCHEMA, "name": "x", "version": 1}, "are strings", id="version"
        ),
    ],
)
def test_an_invalid_agent_plugin_manifest_brings_no_servers(
    machine: Machine, manifest: dict[str, Any], warning: str
) -> None:
    root = agent_plugin(machine.home / "ap", {"s": {"type": "stdio", "command": "x"}})
    write(root / "plugin.json", manifest)
    machine.write_layer("agent", {"settings": {"agentPluginPaths": [str(root)]}})
    loaded = machine.load()
    assert loaded.servers == {}
    assert any(warning in w for w in loaded.warnings)


# --- pi packages --------------------------------------------------------------------------------


def npm_package(agent_dir: Path, name: str, servers: dict[str, Any]) -> Path:
    root = agent_dir / "npm" / "node_modules" / name
    write(root / "package.json", {"name": name, "version": "1.0.0", "pi": {"mcp": "mcp.json"}})
    write(root / "mcp.json", {"mcpServers": servers})
    return root


def test_packages_in_pi_settings_add_their_servers(machine: Machine) -> None:
    root = npm_package(machine.agent_dir, "@acme/tools", {"search": {"command": "acme-search"}})
    write(machine.agent_dir / "settings.json", {"packages": ["npm:@acme/tools@1.0.0"]})
    local = machine.project / "vendor" / "local-pkg"
    write(local / "package.json", {"name": "local-pkg", "pi": {"mcp": ["a.json", "../x.json"]}})
    write(local / "a.json", {"mcpServers": {"a": {"command": "a"}}})
    write(
        machine.project / ".pi" / "settings.json", {"packages": [{"source": "../vendor/local-pkg"}]}
    )
    loaded = machine.load()
    search = loaded.servers["acme_tools__search"]
    assert search.command == "acme-search"
    assert search.untrusted is None
    assert loaded.provenance["acme_tools__search"].origin.path == root / "mcp.json"
    assert loaded.provenance["acme_tools__search"].origin.source == "package:@acme/tools"
    theirs = loaded.servers["local-pkg__a"]
    assert theirs.untrusted is not None
    assert machine.project / ".pi" / "settings.json" in theirs.untrusted.files
    assert any("'../x.json' must be a file inside" in w for w in loaded.warnings)
    assert {s.name for s in loaded.sources if s.kind == "plugin"} >= {
        "pi-settings:project",
        "pi-settings:user",
        "package:@acme/tools",
        "package:local-pkg",
    }


def test_an_agent_plugin_replaces_a_package_server_of_the_same_name_whole(
    machine: Machine,
) -> None:
    npm_package(machine.agent_dir, "acme.search", {"s": {"command": "pkg", "args": ["a"]}})
    write(machine.agent_dir / "settings.json", {"packages": ["npm:acme.search"]})
    agent_plugin(machine.home / "ap", {"s": {"type": "stdio", "command": "plugin"}})
    machine.write_layer("agent", {"settings": {"agentPluginPaths": [str(machine.home / "ap")]}})
    loaded = machine.load()
    assert loaded.servers["acme_search__s"].command == "plugin"
    assert loaded.servers["acme_search__s"].args == ()


def test_exclusive_mode_reads_claude_plugins_of_its_file_and_no_packages(
    machine: Machine,
) -> None:
    npm_package(machine.agent_dir, "pkg", {"s": {"command": "pkg"}})
    write(machine.agent_dir / "settings.json", {"packages": ["npm:pkg"]})
    claude_plugin(machine.home / "p", {"db": {"command": "x"}})
    machine.write_layer(
        "agent", {"claudePlugins": [{"path": str(machine.home / "p"), "mcp": True}]}
    )
    machine.environ["PI_MCP_CONFIG_MODE"] = "exclusive"
    assert set(machine.load().servers) == {"db"}


# --- as people see and use them -----------------------------------------------------------------


def test_pi_mcp_config_shows_where_plugin_servers_come_from(machine: Machine) -> None:
    root = claude_plugin(machine.home / "p", {"db": {"command": "x"}})
    machine.write_layer("agent", {"claudePlugins": [{"path": str(root), "mcp": True}]})
    argv = ["--agent-dir", str(machine.agent_dir), "--project", str(machine.project), "config"]
    env = {"HOME": str(machine.home)}
    as_json = CliRunner().invoke(app, [*argv, "--json"], env=env)
    assert as_json.exit_code == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["servers"]["db"]["source"]["name"] == "claude-plugin:db-tools"
    assert report["servers"]["db"]["source"]["path"] == str(root / ".mcp.json")
    assert {"name": "claude-plugin:db-tools", "kind": "plugin"}.items() <= report["sources"][
        -1
    ].items()
    text = CliRunner().invoke(app, argv, env=env)
    assert f"from claude-plugin:db-tools {root / '.mcp.json'}" in text.stdout


@pytest.mark.slow
def test_a_claude_plugin_server_runs_from_its_plugin_directory(tmp_path: Path) -> None:
    home = tmp_path
    root = home / "plugins" / "fx"
    write(
        root / "server.py",
        f"import runpy, sys\nsys.argv = [{str(FIXTURE)!r}]\n"
        f"sys.path.insert(0, {str(FIXTURE.parent)!r})\n"
        f"runpy.run_path({str(FIXTURE)!r}, run_name='__main__')\n",
    )
    claude_plugin(
        root,
        {"fx": {"command": sys.executable, "args": ["${CLAUDE_PLUGIN_ROOT}/server.py"]}},
        name="fx",
    )
    write(home / "agent" / "mcp.json", {"claudePlugins": [{"path": "~/plugins/fx", "mcp": True}]})
    (home / "project").mkdir()
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    called = subprocess.run(
        [
            *(sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project")),
            *("call", "fx_env", '{"name": "CLAUDE_PLUGIN_ROOT"}'),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert called.returncode == 0, called.stderr
    assert str(root) in called.stdout


def test_plugins_and_packages_give_the_servers_the_reference_gives(
    machine: Machine, reference_js: ReferenceJs
) -> None:
    plugin = claude_plugin(
        machine.home / "p",
        {
            "db": {"command": "python", "args": ["${CLAUDE_PLUGIN_ROOT}/s.py"]},
            "my-x": {"command": "plugin-x"},
            "both": {"command": "x", "url": "https://db.example/"},
            "remote": {"url": "https://db.example/mcp"},
        },
    )
    ap = agent_plugin(
        machine.home / "ap",
        {
            "local": {
                "type": "stdio",
                "command": "./bin/serve",
                "args": ["${PLUGIN_DATA}/db", "${HOME}"],
                "env": {"K": "${PLUGIN_ROOT}/k"},
                "cwd": "./bin",
            },
            "remote": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
            "web": {
                "type": "streamable-http",
                "url": "https://s.example/mcp",
                "headers": {"A": "b"},
            },
            "bad": {"type": "sse", "url": "http://s.example/"},
            "outside": {"type": "stdio", "command": "/bin/sh"},
        },
    )
    write(ap / "bin" / "serve", "")
    npm_package(machine.agent_dir, "@acme/tools", {"search": {"command": "acme-search"}})
    npm_package(machine.agent_dir, "acme.search", {"local": {"command": "loses-to-the-plugin"}})
    write(
        machine.agent_dir / "settings.json",
        {"packages": ["npm:@acme/tools@1.0.0", {"source": "npm:acme.search"}]},
    )
    machine.write_layer(
        "agent",
        {
            "claudePlugins": [{"path": str(plugin), "mcp": True}],
            "settings": {"agentPluginPaths": [str(ap)]},
            "mcpServers": {"my_x": {"command": "mine"}, "remote": {"lifecycle": "eager"}},
        },
    )
    env = {"HOME": str(machine.home), "PI_CODING_AGENT_DIR": str(machine.agent_dir)}
    machine.environ.update(env)
    [result] = reference_js.call("config", "loadMcpConfig", [[None, str(machine.project)]], env=env)
    theirs = result["value"]["mcpServers"]
    loaded = machine.load()
    assert set(loaded.servers) == set(theirs)
    keys = {"command", "args", "env", "cwd", "url", "headers", "httpTransport"}
    for name, entry in loaded.servers.items():
        ours = {k: v for k, v in entry.model_dump(by_alias=True).items() if k in keys}
        ours = {k: list(v) if isinstance(v, tuple) else v for k, v in ours.items() if v}
        assert ours == {k: v for k, v in theirs[name].items() if k in keys and v}, name


def test_agent_plugins_listed_by_a_project_file_wait_for_trust(machine: Machine) -> None:
    agent_plugin(machine.project / "ap", {"s": {"type": "stdio", "command": "x"}})
    project = machine.write_layer("project-pi", {"settings": {"agentPluginPaths": ["ap"]}})
    # Untrusted, the file names no plugin path at all: the plugin is not even read.
    loaded = machine.load()
    assert "acme_search__s" not in loaded.servers
    assert any(str(project) in w and "settings.agentPluginPaths" in w for w in loaded.warnings)
    digest = file_digest(project)
    assert digest is not None
    TrustStore.in_agent_dir(machine.agent_dir).trust([(project, digest)])
    # Trusted, the plugin is read; its own file, cloned with the project, still waits.
    untrusted = machine.load().servers["acme_search__s"].untrusted
    assert untrusted is not None
    assert machine.project / "ap" / "mcp.json" in untrusted.files
