"""Field-by-field validation of raw server entries and settings, before they are merged.

Each layer is checked on its own so that an error can name the file, the line and the field, and
so that one bad entry costs only that entry in that layer. Messages describe the expected and the
actual JSON type, never the value: a value may be a secret.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError

from pi_mcp_adapter._errors import ConfigError

from ._jsonc import JsonPath
from ._models import ServerEntry, Settings

__all__ = [
    "RawEntry",
    "ValidEntry",
    "format_json_path",
    "json_type",
    "validate_server_entry",
    "validate_settings",
]

LineLookup = Callable[[JsonPath], int | None]


def _no_lines(_path: JsonPath) -> int | None:
    return None


@dataclass(frozen=True, slots=True)
class RawEntry:
    """One server entry as read from a file, already in this project's JSON shape."""

    name: str
    value: object
    path: Path
    json_path: JsonPath
    """Where the entry sits in its file, e.g. ``("mcpServers", "github")``."""
    line_of: LineLookup = _no_lines
    key_paths: Mapping[str, JsonPath] = field(default_factory=dict)
    """For entries translated from another host's format: our key -> the host's key path."""

    def path_of(self, key: str) -> JsonPath:
        return self.key_paths.get(key, (*self.json_path, key))

    @property
    def line(self) -> int | None:
        return self.line_of(self.json_path)


@dataclass(frozen=True, slots=True)
class ValidEntry:
    """A server entry whose every known field has the right type (values not yet interpolated)."""

    fields: Mapping[str, object]
    """Python field name -> value, only for the keys the file set."""
    extras: Mapping[str, object]
    """Unknown keys, kept as written."""
    line: int | None


def _field_tables(model: type[BaseModel]) -> tuple[dict[str, str], dict[str, TypeAdapter[Any]]]:
    by_key: dict[str, str] = {}
    adapters: dict[str, TypeAdapter[Any]] = {}
    for name, info in model.model_fields.items():
        by_key[info.alias or name] = name
        by_key[name] = name
        assert info.annotation is not None
        adapters[name] = TypeAdapter(info.annotation)
    return by_key, adapters


_SERVER_KEYS, _SERVER_ADAPTERS = _field_tables(ServerEntry)
_SETTINGS_KEYS, _SETTINGS_ADAPTERS = _field_tables(Settings)


def json_name(model: type[BaseModel], name: str) -> str:
    """The camelCase key a field is written with in JSON."""
    return model.model_fields[name].alias or name


def json_type(value: object) -> str:
    """The JSON type of a parsed value, as a user would call it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def format_json_path(path: JsonPath) -> str:
    parts: list[str] = []
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(f".{part}" if parts else part)
    return "".join(parts)


def _describe(annotation: object) -> str:
    """Say in words what a field annotation accepts, e.g. ``a list of strings``."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        return " or ".join(_describe(a) for a in options)
    if origin is Literal:
        return "one of " + ", ".join(_literal(v) for v in get_args(annotation))
    if origin is tuple or origin is list:
        return f"a list of {_plural(get_args(annotation)[0])}"
    if origin is dict:
        return f"an object whose values are {_plural(get_args(annotation)[1])}"
    simple = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    if isinstance(annotation, type):
        if annotation in simple:
            return simple[annotation]
        if issubclass(annotation, BaseModel):
            return "an object"
    return "a value of another type"


_PLURALS: dict[object, str] = {
    str: "strings",
    int: "whole numbers",
    float: "numbers",
    bool: "booleans",
}


def _plural(annotation: object) -> str:
    return _PLURALS.get(annotation, "values")


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"'


def _type_error(
    what: str,
    annotation: object,
    value: object,
    *,
    path: Path,
    line: int | None,
    field: str,
    consequence: str,
) -> ConfigError:
    return ConfigError(
        f"{what} must be {_describe(annotation)}, not {json_type(value)}; {consequence}",
        path=str(path),
        line=line,
        field=field,
    )


def validate_server_entry(raw: RawEntry) -> tuple[ValidEntry | None, list[ConfigError], list[str]]:
    """Check every known field of one entry; unknown keys are kept and warned about.

    Returns the entry (``None`` when any field is wrong: the whole entry is then ignored in
    this file, and the same server's entries in other files still apply), the errors (one per
    wrong field, each saying the entry is ignored), and the warnings.
    """
    where = format_json_path(raw.json_path)
    if not isinstance(raw.value, dict):
        error = ConfigError(
            f"server {raw.name!r} must be an object, not {json_type(raw.value)}; it is ignored",
            path=str(raw.path),
            line=raw.line,
            field=where,
        )
        return None, [error], []
    fields: dict[str, object] = {}
    extras: dict[str, object] = {}
    errors: list[ConfigError] = []
    warnings: list[str] = []
    for key, value in raw.value.items():
        key_path = raw.path_of(key)
        name = _SERVER_KEYS.get(key)
        if name is None:
            extras[key] = value
            line = raw.line_of(key_path)
            location = f"{raw.path}:{line}" if line is not None else str(raw.path)
            warnings.append(
                f"{location}: server {raw.name!r}: unknown key {key!r} is kept but not used"
            )
            continue
        if name in ("disabled", "enabled") and not isinstance(value, bool):
            # The TypeScript adapter disables a server only for the boolean true; "true" as a
            # string leaves it running there, so it does here too, with a warning.
            line = raw.line_of(key_path)
            location = f"{raw.path}:{line}" if line is not None else str(raw.path)
            warnings.append(
                f"{location}: server {raw.name!r}: {key!r} is {json_type(value)} "
                f"{json.dumps(value)}, not a boolean; it is ignored (write {key}: true "
                "without quotes)"
            )
            continue
        try:
            fields[name] = _SERVER_ADAPTERS[name].validate_python(value)
        except ValidationError:
            annotation = ServerEntry.model_fields[name].annotation
            errors.append(
                _type_error(
                    f"server {raw.name!r}: {key!r}",
                    annotation,
                    value,
                    path=raw.path,
                    line=raw.line_of(key_path),
                    field=format_json_path(key_path),
                    consequence="this entry is ignored in this file; "
                    "the server's entries in other files still apply",
                )
            )
    if errors:
        return None, errors, warnings
    return ValidEntry(fields=fields, extras=extras, line=raw.line), [], warnings


def validate_settings(
    value: object, *, path: Path, line_of: LineLookup, json_path: JsonPath = ("settings",)
) -> tuple[dict[str, object], list[ConfigError], list[str]]:
    """Check the ``settings`` object key by key; a wrong key is dropped, the others are kept.

    The returned mapping uses Python field names for known keys and the written key otherwise.
    """
    where = format_json_path(json_path)
    if not isinstance(value, dict):
        error = ConfigError(
            f"'settings' must be an object, not {json_type(value)}; "
            "this file's settings are ignored",
            path=str(path),
            line=line_of(json_path),
            field=where,
        )
        return {}, [error], []
    result: dict[str, object] = {}
    errors: list[ConfigError] = []
    warnings: list[str] = []
    for key, item in value.items():
        key_path = (*json_path, key)
        name = _SETTINGS_KEYS.get(key)
        if name is None:
            result[key] = item
            line = line_of(key_path)
            location = f"{path}:{line}" if line is not None else str(path)
            warnings.append(f"{location}: unknown setting {key!r} is kept but not used")
            continue
        try:
            result[name] = _SETTINGS_ADAPTERS[name].validate_python(item)
        except ValidationError:
            errors.append(
                _type_error(
                    f"setting {key!r}",
                    Settings.model_fields[name].annotation,
                    item,
                    path=path,
                    line=line_of(key_path),
                    field=format_json_path(key_path),
                    consequence="this setting is ignored in this file",
                )
            )
    return result, errors, warnings
