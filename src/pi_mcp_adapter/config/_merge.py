"""How one server's entries from several files combine into one.

Later layers win field by field, so a project file can change ``lifecycle`` alone. ``env`` and
``headers`` are replaced whole, never deep-merged: a project that sets one header should not
silently inherit another header it cannot see. When an override points the server somewhere
else (a different ``url``, or a switch between ``command`` and ``url``), the credentials written
for the old destination are dropped, so a token meant for one server is never sent to another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._jsonc import JsonPath
from ._models import ServerEntry
from ._validate import LineLookup, ValidEntry, json_name, no_lines

__all__ = ["DroppedFields", "LayerContribution", "MergedEntry", "merge_entries"]

# JSON keys. The sets follow the TypeScript adapter's merge, so that one file means the same
# in both: an override that names a transport drops the other transports' fields, and a
# changed url drops what authenticated to the old one. `auth` and `oauth: false` carry no
# secret and are kept.
_STDIO_KEYS = ("command", "args", "env", "cwd", "pluginDataDir", "literalEnv", "inheritEnv")
_URL_BOUND_KEYS = (
    "headers",
    "bearerToken",
    "bearerTokenEnv",
    "bearerTokenStore",
    "requestHeadersCommand",
    "caFile",
)
_HTTP_KEYS = ("url", *_URL_BOUND_KEYS, "auth", "oauth", "httpTransport")


@dataclass(frozen=True, slots=True)
class LayerContribution:
    """The keys one layer set on a server."""

    source: str
    """The layer's name: ``shared``, ``agent``, ``project-pi``, ``import:cursor``..."""
    path: Path
    fields: tuple[str, ...]
    """JSON keys (camelCase), in the order the file wrote them."""
    json_path: JsonPath = ()
    """Where the server's entry sits in :attr:`path`, e.g. ``("mcpServers", "github")``."""
    line_of: LineLookup = field(default=no_lines, repr=False, compare=False)

    @property
    def line(self) -> int | None:
        """The line of the server's entry in :attr:`path`, looked up when asked: only an error,
        a warning or ``pi-mcp config`` names it."""
        return self.line_of(self.json_path)


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


_JSON_KEYS = {name: json_name(ServerEntry, name) for name in ServerEntry.model_fields}


def _key(name: str) -> str:
    return _JSON_KEYS.get(name, name)


def merge_entries(layers: Sequence[tuple[str, Path, ValidEntry]]) -> MergedEntry:
    """Combine one server's entries, lowest precedence first."""
    merged = MergedEntry()
    for source, path, entry in layers:
        written = (*map(_key, entry.fields), *entry.extras)
        if merged.contributions:  # the lowest layer has nothing below it to drop
            _drop_replaced(merged, entry, source, written)
        merged.fields.update(entry.fields)
        merged.extras.update(entry.extras)
        merged.field_sources.update(dict.fromkeys(written, source))
        merged.contributions.append(
            LayerContribution(source, path, written, entry.json_path, entry.line_of)
        )
    return merged


def _drop_replaced(
    merged: MergedEntry, entry: ValidEntry, source: str, written: tuple[str, ...]
) -> None:
    """Remove the inherited keys that ``entry`` makes meaningless (see the module docstring)."""
    drop, reason = _keys_to_drop(merged, entry)
    removed: list[str] = []
    for key in drop:
        if key in written:
            continue
        if _remove(merged, key):
            removed.append(key)
    for key in removed:
        merged.field_sources.pop(key, None)
    if removed:
        merged.dropped.append(DroppedFields(source, tuple(removed), reason))


def _remove(merged: MergedEntry, key: str) -> bool:
    for name in list(merged.fields):
        if _key(name) == key:
            del merged.fields[name]
            return True
    if key in merged.extras:
        del merged.extras[key]
        return True
    return False


def _get(merged: MergedEntry, key: str) -> object:
    for name, value in merged.fields.items():
        if _key(name) == key:
            return value
    return merged.extras.get(key)


def _written(entry: ValidEntry, key: str) -> object:
    for name, value in entry.fields.items():
        if _key(name) == key:
            return value
    return entry.extras.get(key)


def _keys_to_drop(merged: MergedEntry, entry: ValidEntry) -> tuple[tuple[str, ...], str]:
    if not merged.contributions:
        return (), ""
    drop: list[str] = []
    reasons: list[str] = []
    new_url = _written(entry, "url")
    if isinstance(_written(entry, "command"), str):
        drop += [*_HTTP_KEYS, "socket"]
        if _get(merged, "url") is not None or _get(merged, "socket") is not None:
            reasons.append("switched to command")
    elif isinstance(new_url, str):
        drop += [*_STDIO_KEYS, "socket"]
        if _get(merged, "command") is not None or _get(merged, "socket") is not None:
            reasons.append("switched to url")
    elif isinstance(_written(entry, "socket"), str):
        drop += [*_STDIO_KEYS, *_HTTP_KEYS]
        if _get(merged, "command") is not None or _get(merged, "url") is not None:
            reasons.append("switched to socket")
    if isinstance(new_url, str) and new_url != _get(merged, "url"):
        drop += _URL_BOUND_KEYS
        if _get(merged, "oauth") is not False:
            drop.append("oauth")
        reasons.append("url changed")
    return tuple(dict.fromkeys(drop)), "; ".join(reasons) or "transport fields replaced"
