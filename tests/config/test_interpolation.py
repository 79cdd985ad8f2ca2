from __future__ import annotations

import pytest

from pi_mcp_adapter.config._interpolate import expand_home, interpolate

from .conftest import Machine

ENV = {"HOST": "api.example", "TOKEN": "t0k", "EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "value", "missing"),
    [
        pytest.param("https://${HOST}/mcp", "https://api.example/mcp", (), id="shell"),
        pytest.param("Bearer ${env:TOKEN}", "Bearer t0k", (), id="vscode"),
        pytest.param("$env:TOKEN!", "t0k!", (), id="powershell"),
        pytest.param("{env:TOKEN}", "t0k", (), id="opencode"),
        pytest.param("${HOST}:${TOKEN}", "api.example:t0k", (), id="several"),
        pytest.param("a${EMPTY}b", "ab", (), id="set-but-empty"),
        pytest.param("x${NOPE}y${NOPE}", "xy", ("NOPE",), id="missing-once"),
        pytest.param("$HOST ${A-B} ${input:x}", "$HOST ${A-B} ${input:x}", (), id="not-refs"),
        # The reference reads any run of word characters as a name, digits first included.
        pytest.param("${1BAD}", "", ("1BAD",), id="digit-first-name"),
    ],
)
def test_variable_references_in_every_spelling(
    text: str, value: str, missing: tuple[str, ...]
) -> None:
    result = interpolate(text, ENV)
    assert (result.value, result.missing) == (value, missing)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("~", "/h", id="alone"),
        pytest.param("~/x", "/h/x", id="path"),
        pytest.param("~other/x", "~other/x", id="other-user"),
        pytest.param("a~/x", "a~/x", id="not-leading"),
    ],
)
def test_home_expansion_only_at_the_start(text: str, expected: str) -> None:
    from pathlib import Path

    assert expand_home(text, Path("/h")) == expected


def test_every_interpolated_field_gets_its_value(machine: Machine) -> None:
    machine.environ.update({"D": "dir", "V": "val", "T": "tok"})
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "stdio": {
                    "command": "~/bin/${D}-server",
                    "args": ["--root", "~/${D}", "$env:V"],
                    "env": {"A": "{env:V}", "P": "~/cache"},
                    "cwd": "~/${D}",
                },
                "http": {
                    "url": "https://${D}.example/mcp",
                    "headers": {"X": "${env:V}"},
                    "bearerToken": "${T}",
                    "bearerTokenEnv": "T",
                },
            }
        },
    )
    config = machine.load()
    home = str(machine.home)
    stdio, http = config.servers["stdio"], config.servers["http"]
    assert stdio.command == f"{home}/bin/dir-server"
    assert stdio.args == ("--root", f"{home}/dir", "val")
    assert stdio.env == {"A": "val", "P": f"{home}/cache"}
    assert stdio.cwd == f"{home}/dir"
    assert http.url == "https://dir.example/mcp"
    assert http.headers == {"X": "val"}
    assert http.bearer_token == "tok"
    assert http.bearer_token_env == "T"
    assert not config.warnings


def test_a_missing_variable_becomes_empty_with_a_warning(machine: Machine) -> None:
    machine.write_layer(
        "agent",
        {"mcpServers": {"s": {"command": "x", "env": {"K": "${UNSET_ONE}"}}}},
    )
    config = machine.load()
    assert config.servers["s"].env == {"K": ""}
    assert config.warnings == (
        "server 's': UNSET_ONE is not set; 'env.K' uses an empty string in its place",
    )


def test_a_missing_variable_in_the_url_makes_only_that_server_unusable(machine: Machine) -> None:
    path = machine.write_layer(
        "agent",
        '{\n  "mcpServers": {\n    "ok": {"command": "x"},\n'
        '    "remote": {"url": "https://${REMOTE_HOST}/mcp"}\n  }\n}\n',
    )
    config = machine.load()
    assert list(config.servers) == ["ok"]
    error = config.invalid_servers["remote"]
    assert (error.path, error.line, error.field) == (str(path), 4, "url")
    assert error.message == (
        "server 'remote' cannot be used: its 'url' refers to REMOTE_HOST, which is not set in "
        "the environment"
    )
    assert not config.errors
