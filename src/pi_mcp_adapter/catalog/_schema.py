"""Tool input schemas rendered for a model to read: a parameter list and a one-line shape.

Schemas come from servers and caches, so they can be anything: both renderers accept any JSON
value and never raise. Local references (``#/$defs/...``, ``#/definitions/...`` or any local
JSON pointer) are followed, with protection against cycles; nesting beyond
:data:`MAX_DEPTH` levels is summarised rather than expanded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["MAX_DEPTH", "SHAPE_MAX_CHARS", "render_parameters", "render_shape"]

MAX_DEPTH = 6
"""Deeper structure is summarised: real tool schemas rarely nest more than three levels."""

SHAPE_MAX_CHARS = 200
"""A longer one-line shape is harder to read than the parameter list it replaces."""

NO_PARAMETERS = "No parameters."

_MAX_ENUM_VALUES = 20
_MAX_LITERAL_CHARS = 60
_MAX_DESCRIPTION_CHARS = 600
_WHITESPACE = re.compile(r"\s+")
_IDENTIFIER = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_CONSTRAINTS = (
    "format",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
)
# Keywords whose meaning a TypeScript-like one-liner cannot carry; the parameter list can.
_SHAPE_UNSUPPORTED = frozenset(
    {
        "allOf",
        "not",
        "if",
        "then",
        "else",
        "patternProperties",
        "dependentSchemas",
        "dependencies",
        "unevaluatedProperties",
        "unevaluatedItems",
        "prefixItems",
        "contains",
        "propertyNames",
    }
)


def _literal(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > _MAX_LITERAL_CHARS:
        text = text[: _MAX_LITERAL_CHARS - 1] + "…"
    return text


def _one_line(text: str) -> str:
    flat = _WHITESPACE.sub(" ", text).strip()
    if len(flat) > _MAX_DESCRIPTION_CHARS:
        flat = flat[: _MAX_DESCRIPTION_CHARS - 1] + "…"
    return flat


def _mapping(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _list(value: Any) -> Sequence[Any] | None:
    return value if isinstance(value, list | tuple) else None


def _required_names(schema: Mapping[str, Any]) -> set[str]:
    names = _list(schema.get("required")) or ()
    return {n for n in names if isinstance(n, str)}


class _Refs:
    """Resolves local ``$ref`` pointers against the root schema."""

    def __init__(self, root: Any) -> None:
        self.root = root

    def target(self, ref: str) -> Any:
        """The schema ``ref`` points at, or None when it is not a resolvable local pointer."""
        if ref == "#":
            return self.root
        if not ref.startswith("#/"):
            return None
        node: Any = self.root
        for raw in ref[2:].split("/"):
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    @staticmethod
    def name(ref: str) -> str:
        """A readable name for ``ref``: its last pointer segment (``Node`` for #/$defs/Node)."""
        return "schema" if ref == "#" else (ref.rsplit("/", 1)[-1] or ref)


# ---------------------------------------------------------------------------- parameter list


class _Resolved:
    """A schema after following its ``$ref`` chain."""

    __slots__ = ("cyclic", "refs", "schema")

    def __init__(self, schema: Any, refs: tuple[str, ...], cyclic: bool) -> None:
        self.schema = schema
        self.refs = refs
        self.cyclic = cyclic

    @property
    def mapping(self) -> Mapping[str, Any] | None:
        return None if self.cyclic else _mapping(self.schema)

    @property
    def name(self) -> str | None:
        return _Refs.name(self.refs[-1]) if self.refs else None


class _ParameterList:
    def __init__(self, root: Any) -> None:
        self.refs = _Refs(root)
        self.lines: list[str] = []

    def deref(self, schema: Any, stack: tuple[str, ...]) -> _Resolved:
        """Follow ``$ref``s; ``stack`` holds the refs being expanded above this point."""
        followed: list[str] = []
        while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str):
            ref: str = schema["$ref"]
            if ref in stack or ref in followed:
                return _Resolved(schema, (*followed, ref), cyclic=True)
            target = self.refs.target(ref)
            if target is None:
                break
            followed.append(ref)
            schema = target
        return _Resolved(schema, tuple(followed), cyclic=False)

    def describe_type(self, schema: Any, stack: tuple[str, ...], depth: int) -> str:
        """A short type description, without nested lines."""
        if depth > MAX_DEPTH:
            return "…"
        r = self.deref(schema, stack)
        if r.cyclic:
            return f"{r.name} (recursive)"
        stack = stack + r.refs
        s = r.mapping
        if s is None:
            return "never" if r.schema is False else "any"
        ref = s.get("$ref")
        if isinstance(ref, str):
            return f"see {ref}"
        enum = _list(s.get("enum"))
        if enum is not None:
            if not enum:
                return "never"
            shown = " | ".join(_literal(v) for v in enum[:_MAX_ENUM_VALUES])
            return shown + (" | …" if len(enum) > _MAX_ENUM_VALUES else "")
        if "const" in s:
            return f"const {_literal(s['const'])}"
        for keyword in ("anyOf", "oneOf"):
            variants = _list(s.get(keyword))
            if variants:
                if self.all_simple(variants, stack, depth):
                    return " | ".join(self.describe_type(v, stack, depth + 1) for v in variants)
                return "one of" if keyword == "oneOf" else "any of"
        kind = s.get("type")
        if isinstance(kind, list):
            kinds = [k for k in kind if isinstance(k, str)]
            if kinds:
                return " | ".join(self.simple_kind(k, s, stack, depth) for k in kinds)
        if isinstance(kind, str):
            return self.simple_kind(kind, s, stack, depth)
        if _mapping(s.get("properties")) is not None:
            return "object"
        if "items" in s:
            return self.simple_kind("array", s, stack, depth)
        return "any"

    def simple_kind(
        self, kind: str, s: Mapping[str, Any], stack: tuple[str, ...], depth: int
    ) -> str:
        if kind == "array":
            items = s.get("items")
            if items is None or items is True:
                return "array"
            inner = self.describe_type(items, stack, depth + 1)
            return f"array of ({inner})" if " | " in inner else f"array of {inner}"
        if kind == "object":
            extra = _mapping(s.get("additionalProperties"))
            if _mapping(s.get("properties")) is None and extra is not None:
                return f"object of {self.describe_type(extra, stack, depth + 1)} values"
        return kind

    def all_simple(self, variants: Sequence[Any], stack: tuple[str, ...], depth: int) -> bool:
        return all(self.is_simple(v, stack, depth + 1) for v in variants)

    def is_simple(self, schema: Any, stack: tuple[str, ...], depth: int) -> bool:
        """Whether ``schema`` reads fully as a one-word type (no fields, variants or notes)."""
        if depth > MAX_DEPTH:
            return True
        r = self.deref(schema, stack)
        s = r.mapping
        if s is None:
            return True
        if any(k in s for k in ("properties", "anyOf", "oneOf", "description")):
            return False
        items = s.get("items")
        return _mapping(items) is None or self.is_simple(items, stack + r.refs, depth + 1)

    def annotations(self, s: Mapping[str, Any]) -> str:
        parts: list[str] = []
        description = s.get("description")
        if isinstance(description, str) and description.strip():
            parts.append(f"- {_one_line(description)}")
        for keyword in _CONSTRAINTS:
            if keyword in s and s[keyword] is not None:
                value = s[keyword]
                parts.append(f"[{keyword}: {value if isinstance(value, str) else _literal(value)}]")
        if "default" in s:
            parts.append(f"[default: {_literal(s['default'])}]")
        return (" " + " ".join(parts)) if parts else ""

    def add_property(
        self,
        name: str,
        schema: Any,
        *,
        required: bool,
        indent: str,
        stack: tuple[str, ...],
        depth: int,
    ) -> None:
        type_text = self.describe_type(schema, stack, depth)
        r = self.deref(schema, stack)
        own = _mapping(schema) or {}
        target = r.mapping
        # Notes written next to a $ref describe this use of the type; they win over the target's.
        notes = {**(target or {}), **own}
        line = f"{indent}{name} ({type_text})" + (" *required*" if required else "")
        self.lines.append(line + self.annotations(notes))
        if target is not None:
            self.add_children(target, indent=indent + "  ", stack=stack + r.refs, depth=depth + 1)

    def add_children(
        self, s: Mapping[str, Any], *, indent: str, stack: tuple[str, ...], depth: int
    ) -> None:
        """Nested lines under a property: its object fields, item fields or variants."""
        if depth > MAX_DEPTH:
            if any(k in s for k in ("properties", "items", "anyOf", "oneOf")):
                self.lines.append(f"{indent}…")
            return
        for keyword in ("anyOf", "oneOf"):
            variants = _list(s.get(keyword))
            if variants and not self.all_simple(variants, stack, depth):
                for variant in variants:
                    self.add_variant(variant, indent=indent, stack=stack, depth=depth)
        properties = _mapping(s.get("properties"))
        if properties is not None:
            required = _required_names(s)
            for name, sub in properties.items():
                self.add_property(
                    str(name),
                    sub,
                    required=name in required,
                    indent=indent,
                    stack=stack,
                    depth=depth,
                )
            return
        items = s.get("items")
        if items is not None:
            r = self.deref(items, stack)
            target = r.mapping
            if target is not None:
                self.add_children(target, indent=indent, stack=stack + r.refs, depth=depth + 1)

    def add_variant(self, variant: Any, *, indent: str, stack: tuple[str, ...], depth: int) -> None:
        type_text = self.describe_type(variant, stack, depth)
        r = self.deref(variant, stack)
        target = r.mapping
        notes = self.annotations(target) if target is not None else ""
        self.lines.append(f"{indent}- {type_text}{notes}")
        if target is not None:
            self.add_children(target, indent=indent + "  ", stack=stack + r.refs, depth=depth + 1)


def render_parameters(schema: Any) -> str:
    """A readable parameter list: ``Parameters:`` then one line per parameter.

    Each line reads ``name (type) *required* - description [constraint: value] [default: v]``;
    object fields, array item fields and ``anyOf``/``oneOf`` variants follow indented. A schema
    without parameters renders as ``No parameters.``. Never raises.
    """
    try:
        return _render_parameters(schema)
    except RecursionError:
        return "Parameters: (schema too deeply nested to show)"


def _render_parameters(schema: Any) -> str:
    renderer = _ParameterList(schema)
    root = renderer.deref(schema, ())
    s, stack = root.mapping, root.refs
    if s is None:
        return NO_PARAMETERS
    properties = _mapping(s.get("properties"))
    if properties:
        renderer.lines.append("Parameters:")
        required = _required_names(s)
        for name, sub in properties.items():
            renderer.add_property(
                str(name), sub, required=name in required, indent="  ", stack=stack, depth=1
            )
        return "\n".join(renderer.lines)
    extra = _mapping(s.get("additionalProperties"))
    if extra is not None:
        value_type = renderer.describe_type(extra, stack, 1)
        return f"Parameters: any names, each {value_type}{renderer.annotations(extra)}"
    variants = _list(s.get("anyOf")) or _list(s.get("oneOf"))
    if variants:
        renderer.lines.append("Parameters, one of:")
        for variant in variants:
            renderer.add_variant(variant, indent="  ", stack=stack, depth=1)
        return "\n".join(renderer.lines)
    kind = s.get("type")
    if kind not in (None, "object") and not (isinstance(kind, list) and "object" in kind):
        return f"Parameters: a single {renderer.describe_type(s, stack, 1)} value"
    return NO_PARAMETERS


# ---------------------------------------------------------------------------------- shape


class _Unsupported(Exception):
    """The schema uses something a one-line shape cannot say."""


class _Shape:
    def __init__(self, root: Any) -> None:
        self.refs = _Refs(root)

    def render(self, schema: Any, stack: tuple[str, ...], depth: int) -> str:
        if depth > MAX_DEPTH:
            raise _Unsupported
        if schema is True or schema == {}:
            return "unknown"
        s = _mapping(schema)
        if s is None:
            raise _Unsupported
        if not _SHAPE_UNSUPPORTED.isdisjoint(s):
            raise _Unsupported
        ref = s.get("$ref")
        if ref is not None:
            if not isinstance(ref, str) or ref in stack:
                raise _Unsupported
            target = self.refs.target(ref)
            if target is None:
                raise _Unsupported
            return self.render(target, (*stack, ref), depth + 1)
        if "enum" in s:
            values = _list(s["enum"])
            if not values:
                raise _Unsupported
            return " | ".join(self.literal(v) for v in values)
        if "const" in s:
            return self.literal(s["const"])
        for keyword in ("anyOf", "oneOf"):
            if keyword in s:
                variants = _list(s[keyword])
                if not variants:
                    raise _Unsupported
                return self.union(self.render(v, stack, depth + 1) for v in variants)
        kind = s.get("type")
        if isinstance(kind, list):
            if not kind or not all(isinstance(k, str) for k in kind):
                raise _Unsupported
            return self.union(self.kind(k, s, stack, depth) for k in kind)
        if kind is None:
            if "properties" in s:
                kind = "object"
            elif "items" in s:
                kind = "array"
            else:
                return "unknown"
        if not isinstance(kind, str):
            raise _Unsupported
        return self.kind(kind, s, stack, depth)

    @staticmethod
    def union(members: Any) -> str:
        unique = list(dict.fromkeys(members))
        return " | ".join(unique)

    @staticmethod
    def literal(value: Any) -> str:
        if value is None or isinstance(value, bool | int | float | str):
            return json.dumps(value, ensure_ascii=False)
        raise _Unsupported

    def kind(self, kind: str, s: Mapping[str, Any], stack: tuple[str, ...], depth: int) -> str:
        if kind in ("string", "boolean", "null", "number"):
            return kind
        if kind == "integer":
            return "number"
        if kind == "array":
            if "items" not in s:
                return "unknown[]"
            inner = self.render(s["items"], stack, depth + 1)
            return f"({inner})[]" if " | " in inner else f"{inner}[]"
        if kind == "object":
            return self.object(s, stack, depth)
        raise _Unsupported

    def object(self, s: Mapping[str, Any], stack: tuple[str, ...], depth: int) -> str:
        properties = s.get("properties", {})
        if not isinstance(properties, Mapping):
            raise _Unsupported
        extra = s.get("additionalProperties", False)
        if isinstance(extra, Mapping):
            if properties:
                raise _Unsupported
            return f"Record<string, {self.render(extra, stack, depth + 1)}>"
        if not isinstance(extra, bool):
            raise _Unsupported
        if not properties:
            return "{}"
        required = _required_names(s)
        fields = []
        for name, sub in properties.items():
            text = str(name)
            key = text if _IDENTIFIER.match(text) else json.dumps(text, ensure_ascii=False)
            optional = "" if name in required else "?"
            fields.append(f"{key}{optional}: {self.render(sub, stack, depth + 1)}")
        return "{ " + "; ".join(fields) + " }"


def render_shape(schema: Any) -> str | None:
    """A compact TypeScript-like shape, e.g. ``{ query: string; limit?: number }``.

    Integers are ``number``, enums and consts are literal unions (``"a" | "b"``), arrays are
    ``T[]``, nested objects are inline and local references are inlined. Returns None when the
    shape would be longer than :data:`SHAPE_MAX_CHARS` characters, or the schema uses keywords a
    one-liner cannot carry (``allOf``, ``not``, conditionals, ``patternProperties``, recursive
    or external references, ...); the caller then shows :func:`render_parameters`. Never raises.
    """
    try:
        text = _Shape(schema).render(schema, (), 0)
    except (_Unsupported, RecursionError):
        return None
    if len(text) > SHAPE_MAX_CHARS:
        return None
    return text
