"""``pi-mcp status --json``: each server's object, written without the generic encoder's
cost per value.

At 19,641 servers the output is 5.5 MB, one object per server. ``dataclasses.asdict`` and a
recursive camelCase pass built each object (a third of a second), and ``json.dumps`` with
``indent`` runs the pure-Python encoder, a generator per nesting level yielding 860,000
pieces (a fifth). Here a server whose values are all flat (strings, numbers, booleans, null,
empty lists: nearly every one) is written into a template made once from the fields of
:class:`ServerStatus`; any other (changed tools, definition changes) is written by
``json.dumps`` itself. The text is the same, byte for byte, as ``json.dumps(document,
indent=2, ensure_ascii=False, default=str)`` of the objects :func:`server_json` builds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from json.encoder import py_encode_basestring
from typing import TYPE_CHECKING, Any

from ._wording import to_camel_keys

if TYPE_CHECKING:
    from pi_mcp_adapter.engine import ServerStatus

__all__ = ["server_json", "status_json_text"]

_INDENT = "  "

try:  # the C function json.dumps uses with ensure_ascii=False
    from _json import encode_basestring as _encode_string
except ImportError:  # pragma: no cover - CPython always has it
    _encode_string = py_encode_basestring


def _server_keys() -> tuple[tuple[str, str], ...]:
    from pi_mcp_adapter.engine import ServerStatus

    names = [field.name for field in dataclasses.fields(ServerStatus)]
    camel = to_camel_keys(dict.fromkeys(names))  # the one key style of --json output
    assert isinstance(camel, dict)
    return tuple(zip(names, camel, strict=True))


_keys: tuple[tuple[str, str], ...] | None = None


def server_json(row: ServerStatus) -> dict[str, object]:
    """``to_camel_keys(dataclasses.asdict(row))``, without copying every value through both."""
    global _keys
    if _keys is None:
        _keys = _server_keys()
    built: dict[str, object] = {}
    for name, key in _keys:
        value = getattr(row, name)
        if type(value) is tuple:  # changed tools (names), definition changes (dataclasses)
            value = [
                to_camel_keys(dataclasses.asdict(item))
                if dataclasses.is_dataclass(item) and not isinstance(item, type)
                else item
                for item in value
            ]
        built[key] = value
    return built


def _float_text(value: float) -> str | None:
    return float.__repr__(value) if math.isfinite(value) else None  # NaN: json.dumps's own word


def _list_text(value: Sequence[object]) -> str | None:
    return "[]" if not value else None


_FLAT_TEXT: dict[type, Callable[[Any], str | None]] = {
    str: _encode_string,
    int: int.__repr__,
    bool: {True: "true", False: "false"}.__getitem__,
    type(None): {None: "null"}.__getitem__,
    float: _float_text,
    list: _list_text,
    tuple: _list_text,  # a dataclass's tuple is a JSON list
}
"""How ``json.dumps`` writes a flat value of each exact type (``None``: a value it should
write itself, such as a non-empty list). One lookup and, mostly, one C call per value."""


def _flat_text(value: object) -> str | None:
    write = _FLAT_TEXT.get(type(value))
    return write(value) if write is not None else None


class _RowWriter:
    """Writes a :class:`ServerStatus` as its object in the servers list, from a template
    made once from the dataclass's fields (a field added later is written too).

    Most rows leave every optional field (default None or empty) as it is: for them a second
    template holds those fields' text already, and only the others are written."""

    def __init__(self, indent: str) -> None:
        from pi_mcp_adapter.engine import ServerStatus

        keys = _server_keys()
        names = [name for name, _key in keys]
        defaults = {
            f.name: f.default
            for f in dataclasses.fields(ServerStatus)
            if f.default is None or f.default == ()
        }
        inner = indent + _INDENT
        members = [f"{inner}{_encode_string(key)}: {{}}" for _name, key in keys]
        self._values = operator.attrgetter(*names)
        # Braces doubled: the object's own are text, each "{}" takes one value.
        self._template = indent + "{{\n" + ",\n".join(members) + "\n" + indent + "}}"
        self._indent = indent
        optional = [name for name in names if name in defaults]
        varying = [name for name in names if name not in defaults]
        self._optional = operator.attrgetter(*optional)
        self._defaults = tuple(defaults[name] for name in optional)
        self._varying = operator.attrgetter(*varying)
        baked = [
            member.replace("{}", _generic_text(defaults[name], "")) if name in defaults else member
            for name, member in zip(names, members, strict=True)
        ]
        self._common = indent + "{{\n" + ",\n".join(baked) + "\n" + indent + "}}"

    def __call__(self, row: ServerStatus) -> str:
        if self._optional(row) == self._defaults:
            texts = [_flat_text(value) for value in self._varying(row)]
            if None not in texts:
                return self._common.format(*texts)
        texts = [_flat_text(value) for value in self._values(row)]
        if None in texts:  # changed tools, a definition's changes: the generic encoder
            return self._indent + _generic_text(server_json(row), self._indent)
        return self._template.format(*texts)


def _generic_text(value: object, indent: str) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    # A JSON string never holds a raw line break, so every one is between values.
    return text.replace("\n", "\n" + indent) if indent else text


def status_json_text(rows: Sequence[ServerStatus], rest: Mapping[str, Any]) -> str:
    """The document ``{"servers": [server_json(row) ...], **rest}`` as indented JSON (see the
    module)."""
    if rows:
        write_row = _RowWriter(_INDENT * 2)
        listed = ",\n".join([write_row(row) for row in rows])
        servers_text = "[\n" + listed + "\n" + _INDENT + "]"
    else:
        servers_text = "[]"
    head = f"{{\n{_INDENT}{_encode_string('servers')}: {servers_text}"
    if not rest:
        return head + "\n}"
    tail = _generic_text(dict(rest), "")
    # tail is "{\n  ...\n}": its members follow the servers.
    return head + ",\n" + tail[2:]
