"""How one server's entries from several files combine into one.

Later layers win field by field, so a project file can change ``lifecycle`` alone. ``env`` and
``headers`` are replaced whole, never deep-merged: a project that sets one header should not
silently inherit another header it cannot see. When an override points the server somewhere
else (a different ``url``, or a switch between ``command`` and ``url``), the credentials written
for the old destination are dropped, so a token meant for one server is never sent to another.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._models import ServerEntry
from ._validate import ValidEntry, json_name

__all__ = ["DroppedFields", "LayerContribution", "MergedEntry", "merge_entries"]

_CREDENTIAL_FIELDS = ("headers", "bearer_token", "bearer_token_env", "auth", "oauth")
# Credential-carrying keys other hosts and older versions write; kept as extras, dropped alike.
_CREDENTIAL_EXTRAS = ("bearerTokenStore", "requestHeadersCommand", "caFile")
_STDIO_FIELDS = ("command", "args", "env", "cwd")
_HTTP_FIELDS = ("url",)


@dataclass(frozen=True, slots=True)
class LayerContribution:
    """The keys one layer set on a server."""

    source: str
    """The layer's name: ``shared``, ``agent``, ``project-pi``, ``import:cursor``..."""
    path: Path
    line: int | None
    fields: tuple[str, ...]
    """JSON keys (camelCase), in the order the file wrote them."""


@dataclass(frozen=True, slots=True)
class DroppedFields:
    """Inherited keys a layer removed because it pointed the server somewhere else."""

    source: str
    fields: tuple[str, ...]
    reason: str


@dataclass(slots=True)
class MergedEntry:
    fields: dict[str, object] = field(default_factory=dict)
    extras: dict[str, object] = field(default_factory=dict)
    contributions: list[LayerContribution] = field(default_factory=list)
    dropped: list[DroppedFields] = field(default_factory=list)
    field_sources: dict[str, str] = field(default_factory=dict)
    """JSON key -> the layer that set its final value."""


def _key(name: str) -> str:
    return json_name(ServerEntry, name)


def merge_entries(layers: Sequence[tuple[str, Path, ValidEntry]]) -> MergedEntry:
    """Combine one server's entries, lowest precedence first."""
    merged = MergedEntry()
    for source, path, entry in layers:
        dropped, reason = _fields_to_drop(merged.fields, entry.fields)
        extras_dropped = [k for k in _CREDENTIAL_EXTRAS if dropped and k in merged.extras]
        removed: list[str] = []
        for name in dropped:
            if name in merged.fields and name not in entry.fields:
                del merged.fields[name]
                removed.append(_key(name))
        for key in extras_dropped:
            if key not in entry.extras:
                del merged.extras[key]
                removed.append(key)
        for key in removed:
            merged.field_sources.pop(key, None)
        if removed:
            merged.dropped.append(DroppedFields(source, tuple(removed), reason))
        merged.fields.update(entry.fields)
        merged.extras.update(entry.extras)
        written = tuple([_key(n) for n in entry.fields] + list(entry.extras))
        for key in written:
            merged.field_sources[key] = source
        merged.contributions.append(LayerContribution(source, path, entry.line, written))
    return merged


def _fields_to_drop(
    current: Mapping[str, object], override: Mapping[str, object]
) -> tuple[tuple[str, ...], str]:
    old_url, old_command = current.get("url"), current.get("command")
    new_url, new_command = override.get("url"), override.get("command")
    if new_url is not None and old_command is not None and new_command is None:
        return (*_STDIO_FIELDS, *_CREDENTIAL_FIELDS), "switched from command to url"
    if new_command is not None and old_url is not None and new_url is None:
        return (*_HTTP_FIELDS, *_CREDENTIAL_FIELDS), "switched from url to command"
    if new_url is not None and old_url is not None and new_url != old_url:
        return _CREDENTIAL_FIELDS, "url changed"
    return (), ""
