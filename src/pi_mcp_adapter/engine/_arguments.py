"""Arguments that must never be sent: the checks every tool call passes before the wire.

JSON that cannot be encoded (a lone surrogate in a string) would break the connection and the
error would blame the server; nesting deep enough to exhaust the stack would crash the
encoder (and jsonschema, which recurses per level). Both are the caller's mistake and are
reported as invalid arguments, naming where.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_ARGUMENT_DEPTH", "argument_problems"]

MAX_ARGUMENT_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in tool arguments. Real tool schemas nest a
handful of levels; Python's JSON encoder and jsonschema recurse once per level."""

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def argument_problems(arguments: Mapping[str, Any]) -> list[str]:
    """Why ``arguments`` cannot be sent as JSON-RPC, as messages naming where; empty if fine.

    Walks the value without recursion, so any depth is checked safely.
    """
    problems: list[str] = []
    stack: list[tuple[object, str, int]] = [(arguments, "", 1)]
    while stack and len(problems) < 5:
        value, where, depth = stack.pop()
        if isinstance(value, Mapping | list | tuple) and depth > MAX_ARGUMENT_DEPTH:
            problems.append(
                f"{where or 'arguments'}: nested more than {MAX_ARGUMENT_DEPTH} levels deep"
            )
            continue
        if isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                problems.append(
                    f"{where or 'arguments'}: text contains a lone surrogate "
                    "(not valid Unicode, cannot be sent as JSON)"
                )
        elif isinstance(value, Mapping):
            for key, item in value.items():
                name = str(key)
                path = f"{where}.{name}" if where else name
                if _LONE_SURROGATE.search(name):
                    problems.append(f"{where or 'arguments'}: a key contains a lone surrogate")
                    continue
                stack.append((item, path, depth + 1))
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                stack.append((item, f"{where}[{index}]", depth + 1))
    return problems
