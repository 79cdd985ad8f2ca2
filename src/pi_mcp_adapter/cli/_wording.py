"""Engine texts in command-line syntax.

The engine writes its hints for the model, in the proxy tool's syntax (``mcp({connect: "x"})``,
``offset: 12 for more``). On a terminal the same hints must name commands a person can type
(``pi-mcp connect x``, ``--offset 12``); this module rewrites them and nothing else.
"""

from __future__ import annotations

import re

__all__ = ["cli_wording", "to_camel_keys"]

_Q = r"""['"]?"""
_VALUE = r"""['"]?(?P<value>[^'"}]+)['"]?"""

_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"mcp\(\{\}\)"), "`pi-mcp status`"),
    (re.compile(r"mcp\(\{connect: " + _VALUE + r"\}\)"), r"`pi-mcp connect \g<value>`"),
    (re.compile(r"mcp\(\{describe: " + _VALUE + r"\}\)"), r"`pi-mcp describe \g<value>`"),
    (re.compile(r"mcp\(\{server: " + _VALUE + r"\}\)"), r"`pi-mcp tools \g<value>`"),
    (re.compile(r"mcp\(\{search: " + _VALUE + r"\}\)"), r"`pi-mcp search \g<value>`"),
    (re.compile(r"\boffset: (\d+) for more"), r"`--offset \1` for more"),
)


def cli_wording(text: str) -> str:
    """``text`` with the proxy tool's syntax replaced by the equivalent ``pi-mcp`` command."""
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return text


_SNAKE = re.compile(r"_([a-z0-9])")


def _camel(key: str) -> str:
    return _SNAKE.sub(lambda m: m.group(1).upper(), key)


def to_camel_keys(value: object) -> object:
    """JSON with every object key in camelCase, the one key style of ``--json`` output."""
    if isinstance(value, dict):
        return {_camel(str(k)): to_camel_keys(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_camel_keys(v) for v in value]
    return value
