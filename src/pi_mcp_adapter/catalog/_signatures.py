"""Tools as Python-style signatures a model can code against.

``render_call_line`` gives one line, ``name(required: T, optional?: T) -> result``;
``render_signature`` the parameters as a ``TypedDict`` with defaults and descriptions as
comments. The result is the shape of what a call returns as the ``mcp`` proxy shows it (JSON
text parsed): from the tool's ``outputSchema`` where the server gives one, else the shape seen
in earlier results (:func:`value_shape`, types and keys only, never values), marked
``(observed)``. Nothing here raises, whatever a server's schemas hold.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._metadata import ToolInfo

OBSERVED_MARK = " (observed)"
"""Follows a result shape seen in earlier results rather than declared by the server."""

_PY_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
    "object": "dict[str, Any]",
    "array": "list[Any]",
}
_MAX_TYPE_DEPTH = 4
_NOT_IDENTIFIER = re.compile(r"[^0-9A-Za-z]+")


def render_signature(tool: ToolInfo, observed: str | None = None) -> str:
    """``tool``'s parameters as a Python ``TypedDict`` and the call that uses it.

    Required keys are plain, optional ones ``NotRequired[...]``; defaults and descriptions
    follow as comments. Never raises, whatever the schema holds.
    """
    schema = tool.input_schema if isinstance(tool.input_schema, Mapping) else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    required_names = {r for r in required or () if isinstance(r, str)}
    class_name = "".join(w[:1].upper() + w[1:] for w in _NOT_IDENTIFIER.split(tool.name) if w)
    class_name = (class_name or "Tool") + "Args"
    lines = [f"class {class_name}(TypedDict):"]
    if tool.description:
        lines.append(f'    """{one_line(tool.description, 200)}"""')
    if not properties:
        lines.append("    pass")
    for key, prop in properties.items():
        prop_schema = prop if isinstance(prop, Mapping) else {}
        kind = _py_type(prop_schema, schema, 0)
        if key not in required_names:
            kind = f"NotRequired[{kind}]"
        notes = []
        if "default" in prop_schema:
            notes.append(f"default {json.dumps(prop_schema['default'], default=str)}")
        description = prop_schema.get("description")
        if isinstance(description, str) and description.strip():
            notes.append(one_line(description, 120))
        comment = f"  # {'; '.join(notes)}" if notes else ""
        lines.append(f"    {param_name(key)}: {kind}{comment}")
    lines.append(f"# await call({tool.name!r}, {{...}}) -> {render_result_type(tool, observed)}")
    return "\n".join(lines)


def param_name(key: object) -> str:
    """A parameter name as a signature shows it: as it is when it is an identifier, else
    quoted with its control characters escaped, so a server's name cannot end the line and
    write a signature of its own under another tool's or server's name."""
    name = str(key)
    return name if name.isidentifier() else json.dumps(name)


def render_call_line(tool: ToolInfo, observed: str | None = None) -> str:
    """One line a model can code against: ``name(required: T, optional?: T) -> result``.

    ``observed`` is the shape of earlier results (:func:`value_shape`), shown as the result
    when the tool declares no ``outputSchema``."""
    schema = tool.input_schema if isinstance(tool.input_schema, Mapping) else {}
    properties = schema.get("properties")
    properties = properties if isinstance(properties, Mapping) else {}
    required = schema.get("required")
    required_names = {r for r in required or () if isinstance(r, str)}
    params = []
    for key, prop in properties.items():
        kind = _py_type(prop if isinstance(prop, Mapping) else {}, schema, 0)
        params.append(f"{param_name(key)}{'' if key in required_names else '?'}: {kind}")
    return f"{tool.name}({', '.join(params)}) -> {render_result_type(tool, observed)}"


_MAX_SHAPE_KEYS = 12


def render_result_type(tool: ToolInfo, observed: str | None = None) -> str:
    """What ``await call(tool, ...)`` returns, from the tool's ``outputSchema``.

    Follows the rule of the script's ``call``: an object of one string property is the
    structured copy of the text, so the call returns ``str``. Without an output schema the
    text may be anything: ``str | dict | list`` (JSON text is parsed), unless earlier results
    were ``observed``: their shape, marked :data:`OBSERVED_MARK`."""
    schema = tool.output_schema
    if tool.is_resource:
        return "str"
    if observed and shape_is_observed(tool):
        return observed + OBSERVED_MARK
    if not isinstance(schema, Mapping):
        return "str | dict | list"
    if _wraps_one_string(schema):
        return "str"
    return _shape_type(schema, schema, 0)


def shape_is_observed(tool: ToolInfo) -> bool:
    """Whether ``tool``'s result shape is learnt from its results: it declares no
    ``outputSchema``, or only a one-string wrapper (whose text may still be JSON, which a
    call parses)."""
    if tool.is_resource:
        return False
    schema = tool.output_schema
    return not isinstance(schema, Mapping) or _wraps_one_string(schema)


def _wraps_one_string(schema: Mapping[str, Any]) -> bool:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping) or len(properties) != 1:
        return False
    (only,) = properties.values()
    return isinstance(only, Mapping) and only.get("type") == "string"


def _shape_type(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> str:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and depth <= _MAX_TYPE_DEPTH:
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        return _shape_type(target, root, depth + 1) if isinstance(target, Mapping) else "Any"
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and properties and depth <= _MAX_TYPE_DEPTH:
        shown = [
            f"{json.dumps(str(key))}: "
            f"{_shape_type(value if isinstance(value, Mapping) else {}, root, depth + 1)}"
            for key, value in list(properties.items())[:_MAX_SHAPE_KEYS]
        ]
        if len(properties) > _MAX_SHAPE_KEYS:
            shown.append("...")
        return "{" + ", ".join(shown) + "}"
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping):
        return f"list[{_shape_type(items, root, depth + 1)}]"
    return _py_type(schema, root, depth)


def _py_type(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> str:
    if depth > _MAX_TYPE_DEPTH:
        return "Any"
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part) if isinstance(target, Mapping) else None
        if isinstance(target, Mapping):
            return _py_type(target, root, depth + 1)
        return "Any"
    if "const" in schema:
        return f"Literal[{json.dumps(schema['const'], default=str)}]"
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return "Literal[" + ", ".join(json.dumps(v, default=str) for v in enum[:20]) + "]"
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options:
            kinds = [_py_type(o, root, depth + 1) for o in options if isinstance(o, Mapping)]
            return " | ".join(dict.fromkeys(kinds)) or "Any"
    kind = schema.get("type")
    if isinstance(kind, list):
        kinds = [_py_type({**schema, "type": k}, root, depth + 1) for k in kind]
        return " | ".join(dict.fromkeys(kinds)) or "Any"
    if kind == "array":
        items = schema.get("items")
        inner = _py_type(items, root, depth + 1) if isinstance(items, Mapping) else "Any"
        return f"list[{inner}]"
    if kind == "object" or (kind is None and isinstance(schema.get("properties"), Mapping)):
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and properties:
            return _object_fields(schema, properties, root, depth)
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            return f"dict[str, {_py_type(extra, root, depth + 1)}]"
        return "dict[str, Any]"
    if isinstance(kind, str):
        return _PY_TYPES.get(kind, "Any")
    return "Any"


def _object_fields(
    schema: Mapping[str, Any], properties: Mapping[str, Any], root: Mapping[str, Any], depth: int
) -> str:
    """A parameter object's keys as ``{name: str, note?: str}``, marked like the top level:
    without its keys (``memory``'s ``entities: list[{name, entityType, observations}]``) a
    model cannot build the argument right the first time."""
    required = schema.get("required")
    required_names = {r for r in required or () if isinstance(r, str)}
    shown = [
        f"{param_name(key)}{'' if key in required_names else '?'}: "
        f"{_py_type(value if isinstance(value, Mapping) else {}, root, depth + 1)}"
        for key, value in list(properties.items())[:_MAX_SHAPE_KEYS]
    ]
    if len(properties) > _MAX_SHAPE_KEYS:
        shown.append("...")
    return "{" + ", ".join(shown) + "}"


def one_line(text: str, limit: int) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def value_shape(value: Any, depth: int = 0) -> str:
    """``value``'s types and keys, never its contents: ``{"entities": list[{"name": str}]}``.

    An object whose keys are data rather than field names (any key that is not a short
    identifier: paths, e-mail addresses, dates, user names with spaces) is ``dict[str, T]``,
    so no key that came from the data is written down."""
    if isinstance(value, bool) or value is None:
        return "bool" if isinstance(value, bool) else "None"
    if isinstance(value, int | float | str):
        return type(value).__name__
    if depth >= _MAX_TYPE_DEPTH:
        return "dict" if isinstance(value, Mapping) else "list"
    if isinstance(value, Mapping):
        if not all(is_field_name(str(k)) for k in value):
            kinds = list(
                dict.fromkeys(value_shape(v, depth + 1) for v in list(value.values())[:20])
            )
            return f"dict[str, {' | '.join(kinds) or 'Any'}]"
        keys = list(value.items())[:_MAX_SHAPE_KEYS]
        shown = [f"{json.dumps(str(k))}: {value_shape(v, depth + 1)}" for k, v in keys]
        if len(value) > _MAX_SHAPE_KEYS:
            shown.append("...")
        return "{" + ", ".join(shown) + "}"
    if isinstance(value, list):
        kinds = list(dict.fromkeys(value_shape(v, depth + 1) for v in value[:20]))
        return f"list[{' | '.join(kinds) or 'Any'}]"
    return type(value).__name__


_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,39}")
"""A key that reads as a field name; any other key in an object makes it a map of data."""
_ID_LIKE = re.compile(r"\d{4}|\d\D+\d|^(?=.*\d)[0-9A-Fa-f-]{7,}$")
"""Identifier-shaped keys that are still data: a run of four digits (years, phone numbers,
``user12345``), digits in two places (generated ids and tokens: ``sk_live_4eC39Hq...``) or
hexadecimal with a digit (commit hashes, UUIDs: ``a1b2c3d``)."""


def is_field_name(key: str) -> bool:
    """Whether an object key reads as a field a server defines rather than a value from the
    data: a short identifier that is not a number, a date, a hash, a path or an address."""
    return _FIELD_NAME.fullmatch(key) is not None and _ID_LIKE.search(key) is None


def observed_result_shape(content: Sequence[Any], structured: Any) -> str | None:
    """The shape of a successful call result as a script's ``call`` returns it (the text
    parsed when it is JSON, several texts a list, structured content when it carries more
    than the text), or None when the result holds anything but text (images, resources: their
    rendering is not a data shape) or nothing.

    Recorded for tools without an ``outputSchema``; only types and keys, never a value."""
    texts = [getattr(part, "text", None) for part in content]
    if not texts or not all(isinstance(t, str) for t in texts):
        return None
    values = [_json_or_text(t) for t in texts if isinstance(t, str)]
    value: Any = values[0] if len(values) == 1 else values
    if isinstance(structured, Mapping) and structured and isinstance(value, str):
        inner = list(structured.values())
        wraps = len(inner) == 1 and isinstance(inner[0], str)
        if not wraps:
            value = structured
    return value_shape(value)


def _json_or_text(text: str) -> Any:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") or stripped in ("true", "false", "null"):
        try:
            return json.loads(stripped)
        except (ValueError, RecursionError):
            return text
    return text
