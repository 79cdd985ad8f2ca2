from __future__ import annotations

import pytest

from .conftest import Machine

GOOD = '"good": {"command": "fine"}'


@pytest.mark.parametrize(
    ("text", "line", "field", "message"),
    [
        pytest.param(
            '{\n  "mcpServers": {\n    "a": {"command": "x"}\n    "b": {}\n  }\n}\n',
            4,
            None,
            "invalid JSON: Expecting ',' delimiter (column 5); this file is ignored",
            id="missing-comma",
        ),
        pytest.param(
            '{\n  "mcpServers": {\n    /* unclosed\n  }\n}\n',
            3,
            None,
            "invalid JSON: unterminated /* comment (column 5); this file is ignored",
            id="unterminated-comment",
        ),
        pytest.param(
            "[1, 2]\n",
            1,
            None,
            "the top level must be an object, not array; this file is ignored",
            id="top-level-array",
        ),
        pytest.param(
            '{\n  // servers\n  "mcpServers": ["a"]\n}\n',
            3,
            "mcpServers",
            "'mcpServers' must be an object of servers, not array; this file is ignored",
            id="servers-not-object",
        ),
        pytest.param(
            '{\n  "mcpServers": {},\n  "settings": true\n}\n',
            3,
            "settings",
            "'settings' must be an object, not boolean; this file is ignored",
            id="settings-not-object",
        ),
        pytest.param(
            '{\n  "imports": "cursor"\n}\n',
            2,
            "imports",
            "'imports' must be a list of host names, not string; this file is ignored",
            id="imports-not-list",
        ),
    ],
)
def test_a_broken_file_is_one_clear_error_and_other_files_still_load(
    machine: Machine, text: str, line: int, field: str | None, message: str
) -> None:
    broken = machine.write_layer("project", text)
    machine.write_layer("agent", "{" + f'"mcpServers": {{{GOOD}}}' + "}")
    config = machine.load()
    assert list(config.servers) == ["good"]
    (error,) = config.errors
    assert (error.path, error.line, error.field, error.message) == (
        str(broken),
        line,
        field,
        message,
    )
    assert str(error).startswith(f"{broken}:{line}: ")


ENTRY_IGNORED = (
    "this entry is ignored in this file; the server's entries in other files still apply"
)


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        pytest.param(
            '"command": "x",\n      "args": "--flag"',
            "mcpServers.s.args",
            f"server 's': 'args' must be a list of strings, not string; {ENTRY_IGNORED}",
            id="args-string",
        ),
        pytest.param(
            '"command": "x",\n      "env": {"A": 1}',
            "mcpServers.s.env.A",
            "server 's': 'env.A' must be a string, not number; " + ENTRY_IGNORED,
            id="env-number-value",
        ),
        pytest.param(
            '"command": "x",\n      "lifecycle": "sometimes"',
            "mcpServers.s.lifecycle",
            'server \'s\': \'lifecycle\' must be one of "lazy", "eager", "keep-alive", '
            f"\"lazy-keep-alive\", got 'sometimes'; {ENTRY_IGNORED}",
            id="lifecycle-unknown",
        ),
        pytest.param(
            '"command": "x",\n      "directTools": "all"',
            "mcpServers.s.directTools",
            "server 's': 'directTools' must be true or false or a list of strings or one of "
            "\"search\", got 'all'; " + ENTRY_IGNORED,
            id="direct-tools",
        ),
        pytest.param(
            '"command": "x",\n      "idleTimeout": "soon"',
            "mcpServers.s.idleTimeout",
            f"server 's': 'idleTimeout' must be a number, not string; {ENTRY_IGNORED}",
            id="idle-timeout",
        ),
        pytest.param(
            '"url": "https://x",\n      "headers": ["Authorization: x"]',
            "mcpServers.s.headers",
            "server 's': 'headers' must be an object whose values are strings, not array; "
            + ENTRY_IGNORED,
            id="headers-array",
        ),
    ],
)
def test_a_wrong_typed_field_invalidates_only_that_entry_in_that_file(
    machine: Machine, entry: str, field: str, message: str
) -> None:
    machine.write_layer("agent", {"mcpServers": {"s": {"command": "base", "lifecycle": "eager"}}})
    project = machine.write_layer(
        "project-pi",
        '{\n  "mcpServers": {\n    "s": {\n      ' + entry + f"\n    }},\n    {GOOD}\n  }}\n}}\n",
    )
    config = machine.load()
    (error,) = config.errors
    assert (error.path, error.line, error.field, error.message) == (
        str(project),
        5,
        field,
        message,
    )
    # The agent file's entry for the same server still applies; the other entry loads.
    assert config.servers["s"].command == "base"
    assert config.servers["s"].lifecycle == "eager"
    assert config.servers["good"].command == "fine"


def test_a_server_whose_only_entry_is_broken_is_listed_as_unusable(machine: Machine) -> None:
    machine.write_layer("agent", {"mcpServers": {"s": {"command": 7}, "t": "not an object"}})
    config = machine.load()
    assert config.servers == {}
    assert set(config.invalid_servers) == {"s", "t"}
    assert (
        config.invalid_servers["t"].message
        == "server 't' must be an object, not string; it is ignored"
    )


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        pytest.param(
            '{"lifecycle": "eager"}',
            "command",
            "server 's' has neither 'command' nor 'url'; set 'command' to run a local server, "
            "'url' for a remote one or 'socket' for a unix socket",
            id="neither",
        ),
        pytest.param(
            '{"command": "x", "url": "https://x"}',
            "url",
            "server 's' sets both 'command' (from agent) and 'url' (from agent); keep exactly one",
            id="both",
        ),
    ],
)
def test_a_server_needs_exactly_one_of_command_and_url(
    machine: Machine, entry: str, field: str, message: str
) -> None:
    path = machine.write_layer(
        "agent", '{\n  "mcpServers": {\n    ' + GOOD + ',\n    "s": ' + entry + "\n  }\n}\n"
    )
    config = machine.load()
    assert list(config.servers) == ["good"]
    error = config.invalid_servers["s"]
    assert (error.path, error.line, error.field, error.message) == (str(path), 4, field, message)


def test_both_transports_from_different_files_names_each_file(machine: Machine) -> None:
    machine.write_layer("agent", {"mcpServers": {"s": {"url": "https://x", "command": None}}})
    machine.write_layer("project", {"mcpServers": {"s": {"command": "y", "url": "https://z"}}})
    error = machine.load().invalid_servers["s"]
    assert "'command' (from project) and 'url' (from project)" in error.message


def test_a_wrong_setting_is_dropped_and_the_others_kept(machine: Machine) -> None:
    path = machine.write_layer(
        "agent",
        '{\n  "settings": {\n    "idleTimeout": 3,\n    "toolPrefix": "weird"\n  }\n}\n',
    )
    config = machine.load()
    (error,) = config.errors
    assert (error.path, error.line, error.field) == (str(path), 4, "settings.toolPrefix")
    assert error.message == (
        'setting \'toolPrefix\' must be one of "server", "short", "none", "mcp", got \'weird\'; '
        "this setting is ignored in this file"
    )
    assert config.settings.idle_timeout == 3
    assert config.settings.tool_prefix == "server"


def test_namespace_proxy_tools_is_a_boolean_setting(machine: Machine) -> None:
    machine.write_layer("agent", '{"settings": {"namespaceProxyTools": true}}')
    assert machine.load().settings.namespace_proxy_tools is True
    written = '{\n  "settings": {"namespaceProxyTools": "sometimes"}\n}\n'
    path = machine.write_layer("agent", written)
    config = machine.load()
    (error,) = config.errors
    assert (error.path, error.line, error.field) == (
        str(path),
        2,
        "settings.namespaceProxyTools",
    )
    assert "namespaceProxyTools" in error.message
    assert config.settings.namespace_proxy_tools is False


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param('"cursorr"', "unknown import 'cursorr'; this import is ignored", id="typo"),
        pytest.param("3", "unknown import a number; this import is ignored", id="number"),
    ],
)
def test_an_unknown_import_is_an_error_for_that_item_only(
    machine: Machine, value: str, message: str
) -> None:
    machine.write(machine.home / ".cursor" / "mcp.json", {"mcpServers": {"c": {"command": "c"}}})
    path = machine.write_layer(
        "agent", '{\n  "imports": [\n    "cursor",\n    ' + value + "\n  ]\n}"
    )
    config = machine.load()
    (error,) = config.errors
    assert (error.path, error.line, error.field) == (str(path), 4, "imports[1]")
    assert error.message.startswith(message)
    assert list(config.servers) == ["c"]


def test_an_unreadable_path_is_reported_and_loading_goes_on(machine: Machine) -> None:
    machine.layer_path("agent").mkdir(parents=True)
    machine.write_layer("project", {"mcpServers": {"p": {"command": "c"}}})
    config = machine.load()
    (error,) = config.errors
    assert error.path == str(machine.layer_path("agent"))
    assert "directory" in error.message
    assert list(config.servers) == ["p"]
