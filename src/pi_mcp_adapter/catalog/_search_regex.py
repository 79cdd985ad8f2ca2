"""Regular-expression search over tool texts, with a bound on the time one query may take.

A model or a user writes the pattern, so it must never hang the agent or the gateway. Python's
``re`` backtracks without a time limit: ``(a|aa)+$`` or ``((a+))+$`` take exponential time on a
long tool name, and no pattern check catches every such case. Patterns are therefore matched
with the ``regex`` module (compatible with ``re``), which accepts a timeout; the whole scan of
one query shares :data:`REGEX_TIME_BUDGET_S`. Obviously dangerous patterns (a repeated group
that itself repeats) are still refused up front, with advice, before any time is spent.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from pi_mcp_adapter._errors import UsageError

from ._metadata import ToolInfo

MAX_REGEX_LENGTH = 256
"""Longest accepted regular expression, in characters (the reference uses the same bound)."""

REGEX_TIME_BUDGET_S = 1.0
"""Time one regex query may spend over the whole catalog; scanning 25,000 tools with a sane
pattern takes a few tens of milliseconds, so only a pathological pattern reaches it."""


@cache
def _nested_quantifier() -> Any:
    # A quantified group that itself contains a quantifier ("(a+)+", "(\w*\s?)*") can take
    # exponential time on a non-matching string. Such patterns are rejected up front; the check
    # is deliberately coarse (it may refuse a few safe ones), and the time budget catches the
    # rest. Compiled on first use: only a regex search needs the regex module.
    import regex

    return regex.compile(r"\((?:[^()\\]|\\.)*(?:[+*]|\{\d*,\d*\})(?:[^()\\]|\\.)*\)[+*{]")


def compile_regex(pattern: str) -> Any:
    """Compile a case-insensitive search pattern.

    Raises:
        UsageError: the pattern is too long, repeats a repeating group, or is invalid.
    """
    if len(pattern) > MAX_REGEX_LENGTH:
        raise UsageError(
            f"The regular expression is {len(pattern)} characters long; the limit is "
            f"{MAX_REGEX_LENGTH}. Use a shorter pattern or keywords."
        )
    if _nested_quantifier().search(pattern):
        raise UsageError(
            f"The regular expression {pattern!r} repeats a group that itself repeats, which "
            "can take exponential time. Simplify it (e.g. (ab)+ instead of (a+b?)+)."
        )
    import regex

    try:
        return regex.compile(pattern, regex.IGNORECASE)
    except (regex.error, OverflowError, RecursionError) as exc:
        raise UsageError(f"Invalid regular expression {pattern!r}: {exc}.") from exc


def regex_matches(
    pattern: Any, tools: Sequence[ToolInfo], positions: Iterable[int]
) -> list[tuple[int, float]]:
    """Positions of the tools whose name, original name, description or one of whose search
    keywords ``pattern`` finds.

    Raises:
        UsageError: the scan took longer than :data:`REGEX_TIME_BUDGET_S`.
    """
    deadline = time.monotonic() + REGEX_TIME_BUDGET_S
    matched: list[tuple[int, float]] = []
    try:
        for position in positions:
            tool = tools[position]
            for text in (tool.name, tool.original_name, tool.description, *tool.keywords):
                remaining = max(deadline - time.monotonic(), 0.001)
                if pattern.search(text, timeout=remaining):
                    matched.append((position, 0.0))
                    break
    except TimeoutError:
        raise UsageError(
            f"The regular expression {pattern.pattern!r} took longer than "
            f"{REGEX_TIME_BUDGET_S:g} s over the tool catalog (it backtracks too much). "
            "Simplify it, anchor it, or search with keywords."
        ) from None
    return matched
