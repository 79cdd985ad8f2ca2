"""Tool arguments as a person types them: one JSON object, or ``key=value`` words.

``pi-mcp call`` and ``pi-mcp app`` in a shell, and ``/mcp app`` in a host session, accept both.
A ``key=value`` word's value is typed by the tool's input schema, which is known only once the
tool is found: text where the parameter may be a string (``zip=02134`` stays ``"02134"``),
JSON where it must be a number, boolean, array or object (``count=3``, ``tags=["a"]``).
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pi_mcp_adapter._errors import McpAdapterError, UsageError
from pi_mcp_adapter.engine import McpAdapter

from ._proxy import parse_args

__all__ = ["ArgumentPairs", "arguments_for", "read_argument_text", "read_argument_words"]

_ARGUMENT_PAIR = re.compile(r"([A-Za-z_][\w.\-]*)=(.*)", re.DOTALL)
# How JSON text starts; an empty argument is the empty object.
_JSON_STARTS = ("{", "[", '"', "")


@dataclass(frozen=True, slots=True)
class ArgumentPairs:
    """``key=value`` words, in the order given, waiting for the tool's schema."""

    pairs: tuple[tuple[str, str], ...]

    def typed(self, schema: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments, each value read as JSON when its parameter cannot be a string.

        A value that does not parse as JSON stays text, so the tool's argument check names
        the parameter and the type it wants. A parameter with no declared type, or one the
        schema does not list, gets the text as written.
        """
        properties = schema.get("properties")
        known = properties if isinstance(properties, Mapping) else {}
        arguments: dict[str, Any] = {}
        for key, text in self.pairs:
            arguments[key] = text
            wanted = _declared_types(known.get(key))
            if wanted and "string" not in wanted:
                with contextlib.suppress(ValueError, RecursionError):
                    arguments[key] = json.loads(text)
        return arguments


def _declared_types(parameter: object) -> set[str]:
    if not isinstance(parameter, Mapping):
        return set()
    declared = parameter.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def read_argument_words(words: Sequence[str]) -> dict[str, Any] | ArgumentPairs:
    """One JSON object (a single word that starts as JSON does) or ``key=value`` words.

    Raises:
        UsageError: the JSON is not an object or cannot be read, a word is not ``key=value``,
            a key is given twice.
    """
    if not words:
        return {}
    if len(words) == 1 and words[0].lstrip()[:1] in _JSON_STARTS:
        return parse_args(words[0])
    keys: set[str] = set()
    pairs: list[tuple[str, str]] = []
    for word in words:
        pair = _ARGUMENT_PAIR.fullmatch(word)
        if pair is None:
            raise UsageError(
                f"cannot read argument {word!r}: pass key=value words or one JSON object"
            )
        if pair[1] in keys:
            raise UsageError(f"argument {pair[1]!r} is given twice")
        keys.add(pair[1])
        pairs.append((pair[1], pair[2]))
    return ArgumentPairs(tuple(pairs))


def read_argument_text(text: str) -> dict[str, Any] | ArgumentPairs:
    """The arguments of a host command typed as one line: a JSON object, whatever its spaces,
    or ``key=value`` words split as a shell would, so a quoted value keeps its spaces.

    Raises:
        UsageError: as :func:`read_argument_words`, or an unclosed quote.
    """
    if text.lstrip()[:1] in _JSON_STARTS:
        return parse_args(text)
    try:
        words = shlex.split(text)
    except ValueError as exc:  # an unclosed quote
        raise UsageError(f"cannot read the arguments: {exc}") from None
    return read_argument_words(words)


def arguments_for(
    adapter: McpAdapter, name: str, given: Mapping[str, Any] | ArgumentPairs
) -> dict[str, Any]:
    """``given`` as the arguments of tool ``name``: ``key=value`` words typed by its schema
    (as text when the tool is unknown; calling it then says it is not found)."""
    if not isinstance(given, ArgumentPairs):
        return dict(given)
    try:
        schema = adapter.lookup(name).input_schema
    except McpAdapterError:
        schema = {}
    return given.typed(schema)
