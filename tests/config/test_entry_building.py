"""A loaded server entry is built from the values its layers' checks returned, without a second
validation of the merged entry, and is exactly the entry that validation would give.

The configuration here is varied on purpose: five layers, host imports, a package and an agent
plugin, variables in every spelling, ``~``, ``!command`` values, disabled servers, tool lists,
OAuth, a ``requestHeadersCommand``, unknown keys, an ``alwaysLoad``, a transport switch and
a relative command in a project file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.config import LoadedConfig, ServerEntry

from .conftest import Machine


def write(path: Path, content: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content, indent=2), encoding="utf-8")


def varied_configuration(machine: Machine) -> None:
    machine.environ.update(
        {"TOKEN": "tok-abcdef-123", "HOST": "api.example", "PASS": "hunter2-pass"}
    )
    machine.environ.update({"HOME": str(machine.home), "PI_MCP_PROJECT_TRUST": "always"})
    machine.write_layer(
        "shared",
        {
            "mcpServers": {
                "layered": {"command": "base", "args": ["1"], "includeTools": ["a*"]},
                "switch": {
                    "url": "https://${HOST}/mcp",
                    "headers": {"Authorization": "Bearer ${TOKEN}"},
                    "bearerToken": "bt-literal-99",
                },
            }
        },
    )
    machine.write_layer(
        "agents",
        {
            "mcpServers": {
                "layered": {"args": ["2", "$env:HOST"], "excludeTools": ["b"], "note": 1},
                "switch": {"command": "local-${TOKEN}", "cwd": "~/work"},
                "off": {"command": "x", "disabled": True, "lifecycle": "eager"},
                "unset": {"command": "c", "args": ["${NOT_SET}"]},
            },
            "imports": ["cursor"],
        },
    )
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "remote": {
                    "url": "https://${HOST}/mcp",
                    "auth": "oauth",
                    "oauth": {"clientId": "cid-${TOKEN}", "authorizationParams": {"p": "c"}},
                },
                "headers-command": {
                    "url": "https://h.example/mcp",
                    "requestHeadersCommand": {"command": "get", "args": ["${TOKEN}"]},
                },
                "socket": {"socket": "~/run/${HOST}.sock", "exposeResources": False},
                "bearer": {"url": "https://b.example/", "auth": "bearer", "bearerTokenEnv": "X"},
                "commands": {"command": "x", "env": {"A": "!get-secret", "B": "!!lit", "C": "v"}},
                "direct": {"command": "x", "directTools": ["t1"], "alwaysLoad": ["t2"]},
                "tools": {
                    "command": "x",
                    "idleTimeout": 5,
                    "toolOverrides": {"t": {"name": "n", "hidden": True}},
                    "searchKeywords": {"t*": ["word"]},
                    "approveTools": True,
                    "directTools": "search",
                },
                "layered": {"env": {"E": "${PASS}"}, "lifecycle": "keep-alive"},
            },
            "settings": {"agentPluginPaths": ["~/plugin"]},
        },
    )
    machine.write_layer(
        "project", {"mcpServers": {"project": {"command": "./run.sh", "cwd": "sub"}}}
    )
    machine.write_layer("project-pi", {"mcpServers": {"layered": {"trace": True}}})
    write(
        machine.home / ".cursor" / "mcp.json",
        {"mcpServers": {"cursor": {"command": "cur", "args": ["${env:TOKEN}"]}}},
    )
    plugin = machine.home / "plugin"
    write(
        plugin / "plugin.json",
        {
            "$schema": "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json",
            "name": "acme.search",
            "version": "0.1.0",
        },
    )
    write(
        plugin / "mcp.json",
        {
            "$schema": "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json",
            "mcpServers": {
                "local": {"type": "stdio", "command": "plugin", "env": {"M": "${PLUGIN_ROOT}"}}
            },
        },
    )
    write(machine.agent_dir / "settings.json", {"packages": ["npm:tools"]})
    package = machine.agent_dir / "npm" / "node_modules" / "tools"
    write(package / "package.json", {"name": "tools", "pi": {"mcp": "mcp.json"}})
    write(package / "mcp.json", {"mcpServers": {"search": {"command": "s", "env": {"Q": "v"}}}})


@pytest.fixture
def loaded(machine: Machine) -> LoadedConfig:
    varied_configuration(machine)
    return machine.load()


def shape(value: object) -> object:
    """``value`` with the type of everything in it: equal values of other types differ."""
    if isinstance(value, dict):
        return ("dict", [(key, shape(item)) for key, item in value.items()])
    if isinstance(value, list | tuple):
        return (type(value).__name__, [shape(item) for item in value])
    return (type(value).__name__, value)


def validated_again(entry: ServerEntry) -> ServerEntry:
    """What validating the entry's own fields and unknown keys as one object gives."""
    values = {
        name: entry.__dict__[name] for name in entry.model_fields_set if name in entry.__dict__
    }
    return ServerEntry.model_validate({**values, **(entry.model_extra or {})})


def test_the_varied_configuration_loads_every_server_it_should(loaded: LoadedConfig) -> None:
    assert set(loaded.servers) == {
        "layered", "switch", "off", "unset", "remote", "headers-command", "socket", "bearer",
        "commands", "direct", "tools", "project", "cursor", "acme_search__local", "tools__search",
    }  # fmt: skip
    assert loaded.errors == ()


def test_every_loaded_entry_is_the_entry_validating_its_fields_gives(
    loaded: LoadedConfig,
) -> None:
    for name, entry in loaded.servers.items():
        again = validated_again(entry)
        assert list(entry.__dict__) == list(again.__dict__), name  # the order of a dump
        assert shape(entry.__dict__) == shape(again.__dict__), name
        assert entry.model_fields_set == again.model_fields_set, name
        assert entry.model_extra == again.model_extra, name
        assert set(entry.__pydantic_private__ or {}) == set(again.__pydantic_private__ or {})


def test_loaded_entries_keep_the_fields_they_were_given_and_their_written_form(
    loaded: LoadedConfig, machine: Machine
) -> None:
    layered = loaded.servers["layered"]
    assert layered.model_fields_set == {
        "command", "args", "include_tools", "exclude_tools", "env", "lifecycle", "trace", "note",
    }  # fmt: skip
    assert layered.args == ("2", "api.example")
    assert layered.model_extra == {"note": 1}
    assert layered.written == {
        "command": "base",
        "args": ["2", "$env:HOST"],
        "env": {"E": "${PASS}"},
    }
    assert layered.env_templates == {"args[1]": "$env:HOST", "env.E": "${PASS}"}
    switch = loaded.servers["switch"]
    assert (switch.command, switch.url, switch.headers) == ("local-tok-abcdef-123", None, {})
    assert switch.cwd == str(machine.home / "work")
    assert switch.written == {"command": "local-${TOKEN}", "cwd": "~/work"}
    assert loaded.servers["off"].is_enabled is False
    assert loaded.servers["direct"].direct_tools == ("t1", "t2")  # alwaysLoad folded in
    commands = loaded.servers["commands"]
    assert commands.env == {"A": "!get-secret", "B": "!!lit", "C": "v"}
    project = loaded.servers["project"]
    assert project.command == str(machine.project / "sub" / "run.sh")
    assert project.written == {"command": "./run.sh", "cwd": "sub"}


def test_no_two_loaded_entries_share_a_mutable_value(loaded: LoadedConfig) -> None:
    def mutable_values(entry: ServerEntry) -> Iterator[object]:
        for value in (*entry.__dict__.values(), *(entry.__pydantic_private__ or {}).values()):
            if isinstance(value, dict | list):
                yield value

    owner: dict[int, str] = {}
    for name, entry in loaded.servers.items():
        for value in mutable_values(entry):
            assert owner.setdefault(id(value), name) == name, (name, owner[id(value)])


def test_every_validator_of_a_server_entry_is_one_the_loading_shortcut_applies() -> None:
    # ServerEntry.from_checked builds a merged entry from values each checked on its own and
    # runs no model validator but the alwaysLoad one (through model_validate). A validator
    # added to ServerEntry would be skipped by it for most entries: teach from_checked first.
    decorators = ServerEntry.__pydantic_decorators__
    assert list(decorators.model_validators) == ["_always_load_is_direct"]
    assert not decorators.field_validators
    assert not decorators.validators
    assert not decorators.root_validators
