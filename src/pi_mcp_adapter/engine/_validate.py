"""Check a tool call's arguments against the tool's input schema before sending it.

A model that gets ``limit: 'x' is not of type 'integer'`` back at once fixes its call; the
same mistake sent to the server often comes back as an opaque stack trace, after a server
start. Validation only ever helps: a schema that cannot be used (invalid, unresolvable
``$ref``, not JSON) lets the call through, and the server stays the authority.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]

__all__ = ["MAX_PROBLEMS", "validate_arguments"]

logger = logging.getLogger(__name__)

MAX_PROBLEMS = 20
"""Problems listed per call; a model needs the first few, not a wall of text."""

_MAX_MESSAGE_CHARS = 300
_MAX_VALUE_REPR_CHARS = 60
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


@functools.cache
def _jsonschema() -> tuple[Any, dict[str, Any], Any]:
    """The default draft, the drafts by meta-schema URI, and a registry without remote refs.

    Imported on first use: jsonschema costs tens of milliseconds, which commands that never
    validate arguments (search, describe, status) should not pay.
    """
    import referencing
    from jsonschema import (  # type: ignore[import-untyped]
        Draft4Validator,
        Draft6Validator,
        Draft7Validator,
        Draft201909Validator,
        Draft202012Validator,
    )

    drafts: dict[str, Any] = {}
    for draft in (
        Draft4Validator,
        Draft6Validator,
        Draft7Validator,
        Draft201909Validator,
        Draft202012Validator,
    ):
        meta = draft.META_SCHEMA
        drafts[str(meta.get("$id", meta.get("id", ""))).rstrip("#").split("://", 1)[-1]] = draft
    # An empty registry: jsonschema would otherwise fetch remote ``$ref``s over the network.
    no_remote_refs: referencing.Registry[Any] = referencing.Registry()
    return Draft202012Validator, drafts, no_remote_refs


def validate_arguments(schema: Mapping[str, Any], args: Mapping[str, Any]) -> list[str]:
    """Problems with ``args`` under ``schema``, as messages with a JSON path; empty if valid.

    The draft comes from ``$schema`` (draft-04 to 2020-12; anything else is read as 2020-12).
    ``format`` is not checked. Messages look like ``limit: 'x' is not of type 'integer'`` and
    ``missing required property 'query'``; at most :data:`MAX_PROBLEMS` are listed, then a
    line saying how many more there are.

    Never raises: a schema that is not valid JSON Schema, or that cannot be evaluated, gives
    an empty list so the call goes ahead.
    """
    validator = _validator_for(schema)
    if validator is None:
        return []
    instance: Any = args
    if isinstance(instance, Mapping) and not isinstance(instance, dict):
        instance = dict(instance)  # jsonschema's "object" type means dict
    found: set[tuple[str, str]] = set()
    try:
        for error in validator.iter_errors(instance):
            found.update(_describe(error))
    except Exception as exc:  # an unresolvable $ref, a recursive schema, a broken pattern
        logger.debug("argument validation skipped: the schema cannot be evaluated (%s)", exc)
        return []
    # Sorted by path, so problems with one property sit together and the order is stable.
    problems = [_join(where, message) for where, message in sorted(found)]
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        problems = [*problems[:MAX_PROBLEMS], f"... and {more} more problem(s)"]
    return problems


def _validator_for(schema: object) -> Any:
    if isinstance(schema, bool):
        return _compile(json.dumps(schema))
    if not isinstance(schema, Mapping):
        return None
    try:
        key = json.dumps(schema, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None  # not a JSON document, so not a schema we can use
    return _compile(key)


@functools.lru_cache(maxsize=512)
def _compile(schema_json: str) -> Any:
    """A validator for one schema (given as canonical JSON so it can be a cache key), or None."""
    try:
        default_draft, drafts, no_remote_refs = _jsonschema()
        schema = json.loads(schema_json)
        draft = default_draft
        if isinstance(schema, dict) and isinstance(schema.get("$schema"), str):
            uri = schema["$schema"].rstrip("#").split("://", 1)[-1]
            draft = drafts.get(uri, default_draft)
        draft.check_schema(schema)
        return draft(schema, registry=no_remote_refs)
    except Exception as exc:
        logger.debug("argument validation skipped: invalid input schema (%s)", exc)
        return None


def _describe(error: ValidationError) -> Iterable[tuple[str, str]]:
    where = _render_path(error.absolute_path)
    return [(where, message) for message in _messages(error)]


def _join(where: str, message: str) -> str:
    text = f"{where}: {message}" if where else message
    if len(text) > _MAX_MESSAGE_CHARS:
        text = text[: _MAX_MESSAGE_CHARS - 3] + "..."
    return text


def _messages(error: ValidationError) -> list[str]:
    instance = error.instance
    kind = error.validator
    if kind == "required" and isinstance(instance, dict):
        required = error.validator_value if isinstance(error.validator_value, list) else []
        missing = [name for name in required if isinstance(name, str) and name not in instance]
        if missing:
            return [f"missing required property {name!r}" for name in missing]
    if kind == "additionalProperties" and isinstance(instance, dict):
        extras = _unexpected_properties(instance, error.schema)
        if extras:
            return [f"unexpected property {name!r}" for name in extras]
    if kind == "type":
        expected = error.validator_value
        types = expected if isinstance(expected, list) else [expected]
        return [f"{_short_repr(instance)} is not of type {', '.join(repr(t) for t in types)}"]
    message = str(error.message)
    full_repr = repr(instance)
    if len(full_repr) > _MAX_VALUE_REPR_CHARS and message.startswith(full_repr):
        message = _short_repr(instance) + message[len(full_repr) :]
    return [message]


def _unexpected_properties(instance: Mapping[str, Any], schema: Any) -> list[str]:
    if not isinstance(schema, Mapping):
        return []
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    if not isinstance(properties, Mapping) or not isinstance(patterns, Mapping):
        return []
    return [
        name
        for name in instance
        if name not in properties and not any(re.search(p, name) for p in patterns)
    ]


def _render_path(path: Iterable[object]) -> str:
    """``items[0].name``; keys that are not identifiers are quoted: ``headers["x.y"]``."""
    rendered = ""
    for step in path:
        if isinstance(step, int):
            rendered += f"[{step}]"
        elif isinstance(step, str) and _IDENTIFIER.fullmatch(step):
            rendered += f".{step}" if rendered else step
        else:
            rendered += f"[{json.dumps(str(step), ensure_ascii=False)}]"
    return rendered


def _short_repr(value: object) -> str:
    text = repr(value)
    if len(text) <= _MAX_VALUE_REPR_CHARS:
        return text
    return text[: _MAX_VALUE_REPR_CHARS - 3] + "..."
