from __future__ import annotations

from typing import Any

import pytest

from .conftest import Machine

LAYERS = ["shared", "agents", "agents-dir", "agent", "project", "project-pi"]


@pytest.mark.parametrize(
    "present",
    [pytest.param(LAYERS[: i + 1], id=f"up-to-{layer}") for i, layer in enumerate(LAYERS)]
    + [
        pytest.param(["shared", "project"], id="shared-and-project"),
        pytest.param(["agents", "agent"], id="agents-and-agent"),
        pytest.param(["agents-dir", "project-pi"], id="agents-dir-and-project-pi"),
    ],
)
def test_the_highest_layer_present_wins(machine: Machine, present: list[str]) -> None:
    for layer in present:
        machine.write_layer(layer, {"mcpServers": {"s": {"command": f"from-{layer}"}}})
    config = machine.load()
    assert config.servers["s"].command == f"from-{present[-1]}"
    assert [c.source for c in config.provenance["s"].layers] == present
    assert not config.errors


def test_the_config_option_replaces_only_the_agent_dir_layer(machine: Machine) -> None:
    machine.write_layer("shared", {"mcpServers": {"shared": {"command": "a"}}})
    machine.write_layer("agent", {"mcpServers": {"agent": {"command": "b"}}})
    machine.write_layer("project", {"mcpServers": {"project": {"command": "c"}}})
    explicit = machine.write(
        machine.root / "elsewhere.json", {"mcpServers": {"x": {"command": "d"}}}
    )
    config = machine.load(config_path=explicit)
    assert sorted(config.servers) == ["project", "shared", "x"]
    assert [s.name for s in config.sources][:6] == [
        "shared",
        "agents",
        "agents-dir",
        "config",
        "project",
        "project-pi",
    ]


def test_a_missing_config_option_file_is_an_error_and_the_rest_still_loads(
    machine: Machine,
) -> None:
    machine.write_layer("project", {"mcpServers": {"p": {"command": "c"}}})
    config = machine.load(config_path=machine.root / "nope.json")
    assert list(config.servers) == ["p"]
    assert len(config.errors) == 1
    assert config.errors[0].path == str(machine.root / "nope.json")
    assert "not found" in config.errors[0].message


BASE_STDIO: dict[str, Any] = {
    "command": "node",
    "args": ["server.js"],
    "env": {"A": "1", "B": "2"},
    "cwd": "/srv",
    "lifecycle": "keep-alive",
}
BASE_HTTP: dict[str, Any] = {
    "url": "https://one.example/mcp",
    "headers": {"Authorization": "Bearer t", "X-Trace": "on"},
    "auth": "bearer",
    "bearerToken": "t",
    "bearerTokenEnv": "ONE_TOKEN",
    "lifecycle": "keep-alive",
}


@pytest.mark.parametrize(
    ("base", "override", "expected", "dropped"),
    [
        pytest.param(
            BASE_STDIO,
            {"lifecycle": "eager"},
            {**BASE_STDIO, "lifecycle": "eager"},
            (),
            id="one-field-override-keeps-the-rest",
        ),
        pytest.param(
            BASE_STDIO,
            {"env": {"C": "3"}},
            {**BASE_STDIO, "env": {"C": "3"}},
            (),
            id="env-is-replaced-not-merged",
        ),
        pytest.param(
            BASE_HTTP,
            {"headers": {"X-Other": "1"}},
            {**BASE_HTTP, "headers": {"X-Other": "1"}},
            (),
            id="headers-are-replaced-not-merged",
        ),
        pytest.param(
            BASE_HTTP,
            {"url": "https://one.example/mcp", "idleTimeout": 3},
            {**BASE_HTTP, "idleTimeout": 3},
            (),
            id="same-url-keeps-credentials",
        ),
        pytest.param(
            BASE_HTTP,
            {"url": "https://two.example/mcp"},
            {"url": "https://two.example/mcp", "lifecycle": "keep-alive", "auth": "bearer"},
            ("headers", "bearerToken", "bearerTokenEnv"),
            id="new-url-drops-inherited-credentials-keeps-auth-kind",
        ),
        pytest.param(
            BASE_HTTP,
            {"url": "https://two.example/mcp", "headers": {"Authorization": "Bearer two"}},
            {
                "url": "https://two.example/mcp",
                "headers": {"Authorization": "Bearer two"},
                "lifecycle": "keep-alive",
                "auth": "bearer",
            },
            ("bearerToken", "bearerTokenEnv"),
            id="new-url-keeps-credentials-set-alongside-it",
        ),
        pytest.param(
            BASE_STDIO,
            {"url": "https://two.example/mcp"},
            {"url": "https://two.example/mcp", "lifecycle": "keep-alive"},
            ("command", "args", "env", "cwd"),
            id="switch-to-url-drops-stdio-fields",
        ),
        pytest.param(
            BASE_HTTP,
            {"command": "local-server"},
            {"command": "local-server", "lifecycle": "keep-alive"},
            ("url", "headers", "bearerToken", "bearerTokenEnv", "auth"),
            id="switch-to-command-drops-url-and-credentials",
        ),
    ],
)
def test_project_overrides_merge_field_by_field(
    machine: Machine,
    base: dict[str, Any],
    override: dict[str, Any],
    expected: dict[str, Any],
    dropped: tuple[str, ...],
) -> None:
    machine.write_layer("agent", {"mcpServers": {"s": base}})
    machine.write_layer("project-pi", {"mcpServers": {"s": override}})
    config = machine.load()
    entry = config.servers["s"]
    assert entry.model_dump(mode="json", by_alias=True, exclude_unset=True) == expected
    provenance = config.provenance["s"]
    assert sorted(f for d in provenance.dropped for f in d.fields) == sorted(dropped)
    assert all(d.source == "project-pi" for d in provenance.dropped)
    for key in override:
        assert provenance.field_sources[key] == "project-pi"
    for key in expected.keys() - override.keys():
        assert provenance.field_sources[key] == "agent"


def test_oauth_settings_and_unknown_credentials_are_dropped_with_the_url(
    machine: Machine,
) -> None:
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "s": {
                    "url": "https://one.example",
                    "oauth": {"clientId": "x"},
                    "bearerTokenStore": "keychain",
                }
            }
        },
    )
    machine.write_layer("project", {"mcpServers": {"s": {"url": "https://two.example"}}})
    entry = machine.load().servers["s"]
    assert entry.oauth is None
    assert "bearerTokenStore" not in (entry.model_extra or {})


def test_settings_merge_shallowly_with_later_layers_winning(machine: Machine) -> None:
    machine.write_layer("shared", {"settings": {"idleTimeout": 5, "toolPrefix": "short"}})
    machine.write_layer(
        "agent", {"settings": {"toolPrefix": "none", "captureStats": {"path": "/a"}}}
    )
    machine.write_layer("project-pi", {"settings": {"captureStats": {"flushDelayMs": 9}}})
    machine.environ["PI_MCP_PROJECT_TRUST"] = "always"  # untrusted, it could not set stats
    settings = machine.load().settings
    assert settings.idle_timeout == 5
    assert settings.tool_prefix == "none"
    # Objects inside settings are replaced whole, not merged.
    assert settings.model_dump(by_alias=True)["captureStats"] == {"path": None, "flushDelayMs": 9}


def test_imports_are_the_union_of_every_layer(machine: Machine) -> None:
    machine.write_layer("shared", {"imports": ["cursor", "codex"]})
    machine.write_layer("agent", {"imports": ["vscode", "cursor"]})
    machine.write_layer("project", {"imports": ["opencode"]})
    assert machine.load().imports == ("cursor", "codex", "vscode", "opencode")


def test_imports_sit_just_below_the_layer_that_lists_them(machine: Machine) -> None:
    machine.write(
        machine.home / ".cursor" / "mcp.json",
        {"mcpServers": {"a": {"command": "cursor-a"}, "b": {"command": "cursor-b"}}},
    )
    machine.write(
        machine.home / ".claude" / "mcp.json",
        {"mcpServers": {"b": {"command": "claude-b"}, "c": {"command": "claude-c"}}},
    )
    machine.write_layer("agent", {"imports": ["cursor"], "mcpServers": {"a": {"command": "mine"}}})
    machine.write_layer("project", {"imports": ["claude-code"]})
    config = machine.load()
    # The project layer's import of claude-code is above the agent layer, as in the reference.
    assert {n: s.command for n, s in config.servers.items()} == {
        "a": "mine",
        "b": "claude-b",
        "c": "claude-c",
    }
    assert config.provenance["a"].imported_from == "cursor"
    assert config.provenance["a"].field_sources["command"] == "agent"
    assert config.provenance["b"].imported_from == "cursor"
    assert config.provenance["b"].field_sources["command"] == "import:claude-code"
    assert config.provenance["c"].imported_from == "claude-code"


def test_the_kebab_case_server_key_is_accepted(machine: Machine) -> None:
    machine.write_layer("agent", {"mcp-servers": {"k": {"command": "x"}}})
    assert machine.load().servers["k"].command == "x"


def test_unknown_keys_are_kept_and_warned_about_never_fatal(machine: Machine) -> None:
    machine.write_layer(
        "agent",
        '{\n  "mcpServers": {\n    "s": {\n      "command": "x",\n      "colour": "/tmp/s"\n'
        '    }\n  },\n  "plugins": [],\n  "settings": {"fancy": true}\n}\n',
    )
    config = machine.load()
    assert not config.errors
    assert (config.servers["s"].model_extra or {})["colour"] == "/tmp/s"
    path = machine.layer_path("agent")
    assert config.warnings == (
        f"{path}:8: unknown top-level key 'plugins' is ignored",
        f"{path}:5: server 's': unknown key 'colour' is kept but not used",
        f"{path}:9: unknown setting 'fancy' is kept but not used",
    )


def test_disabled_servers_are_loaded_and_marked(machine: Machine) -> None:
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "off": {"command": "x", "disabled": True},
                "off2": {"command": "y", "enabled": False},
            }
        },
    )
    config = machine.load()
    assert not config.servers["off"].is_enabled
    assert not config.servers["off2"].is_enabled


def test_the_same_file_reached_twice_is_read_once(machine: Machine) -> None:
    machine.write_layer("agent", {"mcpServers": {"s": {"command": "x"}}})
    machine.layer_path("project").symlink_to(machine.layer_path("agent"))
    config = machine.load()
    statuses = {s.name: s.status for s in config.sources}
    assert statuses["agent"] == "loaded"
    assert statuses["project"] == "duplicate"
    assert [c.source for c in config.provenance["s"].layers] == ["agent"]


def test_every_layer_is_listed_as_a_source_with_its_status(machine: Machine) -> None:
    machine.write_layer("shared", "")
    machine.write_layer("agent", {"mcpServers": {"s": {"command": "x"}}})
    machine.write_layer("project", "{ not json")
    statuses = [(s.name, s.status, s.servers) for s in machine.load().sources]
    assert statuses == [
        ("shared", "empty", ()),
        ("agents", "missing", ()),
        ("agents-dir", "missing", ()),
        ("agent", "loaded", ("s",)),
        ("project", "invalid", ()),
        ("project-pi", "missing", ()),
    ]


def test_exclusive_mode_reads_the_agent_file_alone_and_its_imports(machine: Machine) -> None:
    machine.write_layer("shared", {"mcpServers": {"shared": {"command": "s"}}})
    machine.write_layer("project-pi", {"mcpServers": {"mine": {"command": "p"}}})
    machine.write(machine.home / ".cursor" / "mcp.json", {"mcpServers": {"c": {"command": "c"}}})
    machine.write_layer("agent", {"imports": ["cursor"], "mcpServers": {"a": {"command": "a"}}})
    machine.environ["PI_MCP_CONFIG_MODE"] = " Exclusive "
    config = machine.load()
    assert sorted(config.servers) == ["a", "c"]
    assert [s.name for s in config.sources if s.kind == "file"] == ["agent"]


def test_exclusive_mode_with_a_config_path_reads_that_file_alone(machine: Machine) -> None:
    machine.write_layer("agent", {"mcpServers": {"a": {"command": "a"}}})
    machine.write_layer("project", {"mcpServers": {"p": {"command": "p"}}})
    other = machine.write(machine.root / "only.json", {"mcpServers": {"o": {"command": "o"}}})
    assert sorted(machine.load(config_path=other).servers) == ["o", "p"]  # --config alone
    machine.environ["PI_MCP_CONFIG_MODE"] = "exclusive"
    assert sorted(machine.load(config_path=other).servers) == ["o"]
