"""``!command`` values: run without a shell unless shell syntax is used, bounded, never echoed."""

from __future__ import annotations

import shlex
import sys

import pytest

from pi_mcp_adapter._errors import ConfigError
from pi_mcp_adapter.config import _command_values
from pi_mcp_adapter.config._command_values import command_value, resolve_command_value

PY = shlex.quote(sys.executable)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("plain", "plain", id="plain-value"),
        pytest.param("!!not a command", "!not a command", id="double-bang-is-literal"),
        pytest.param("!echo  hello  ", "hello", id="output-trimmed"),
        pytest.param("!printf '%s' 'a b'", "a b", id="quoted-arguments-without-a-shell"),
        pytest.param("!echo one | tr o 0", "0ne", id="pipe-runs-through-a-shell"),
    ],
)
def test_values_resolve_as_written(value: str, expected: str) -> None:
    assert resolve_command_value(value, what="header 'X'") == expected


@pytest.mark.parametrize(
    ("value", "uses_shell"),
    [("!op read x", False), ("!a && b", True), ("!echo $HOME", True), ("!x > f", True)],
)
def test_shell_syntax_decides_the_shell(value: str, uses_shell: bool) -> None:
    command = command_value(value)
    assert command is not None
    assert command.uses_shell is uses_shell


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param(f"!{PY} -c \"print('secret'); exit(2)\"", "exited with code 2", id="fails"),
        pytest.param("!true", "printed nothing", id="empty"),
        pytest.param("!no-such-program-here", "failed to start", id="missing"),
        pytest.param(
            f"!{PY} -c \"print('x' * (2 * 1024 * 1024))\"", "exceeded 1 MiB", id="too-much"
        ),
    ],
)
def test_failures_name_the_field_never_the_output(value: str, reason: str) -> None:
    with pytest.raises(ConfigError) as caught:
        resolve_command_value(value, what="server 's': header 'Authorization'")
    assert str(caught.value).startswith("server 's': header 'Authorization': ")
    assert reason in str(caught.value)
    assert "secret" not in str(caught.value)


def test_a_command_that_hangs_is_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_command_values, "COMMAND_TIMEOUT_S", 0.3)
    with pytest.raises(ConfigError, match="timed out"):
        resolve_command_value("!sleep 30", what="env 'K'")
