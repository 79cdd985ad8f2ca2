"""The on-disk metadata cache: what each server offered when it was last connected.

Two files in the agent dir: the store ``mcp-cache.db`` (SQLite, see ``_store``: one row per
server, the one this cache reads and writes) and its export ``mcp-cache.json``, format version
1, shared with the TypeScript reference::

    {"version": 1,
     "servers": {"<name>": {"configHash": "<sha256 hex>", "cachedAt": <ms since epoch>,
                            "tools": [...], "resources": [...], "prompts": [...],
                            "instructions": "...", "definitionChanges": {...},
                            "clientCapabilities": ["elicitation", "sampling"],
                            "observedResults": {"<tool>": "<result shape>"}}}}

A store row holds exactly the entry text the export writes for that server.

Client capabilities: a server may offer some tools only to clients that can sample or elicit
(server-everything's ``trigger-sampling-request``), so an entry records the capabilities it was
listed under (``clientCapabilities``, written by this implementation only). A process that
lacks one of them does not use the entry (it would show tools the process cannot use) and
lists the server itself; a listing under other capabilities is never compared with the
previous one, so a difference in capabilities is not reported as a definition change. An
entry without the field (the reference's) is used by everyone, as before.

An entry is used only while it is *valid*: its ``configHash`` matches the server's current
configuration, ``cachedAt`` is present, and it is at most ``max_age_s`` old (and within the
``ttlMs`` the reference may have written). ``configHash`` covers every field that changes what
a server exposes, secrets included, but only as one SHA-256 digest: no token, header value or
environment value is ever written to either file.

Reading: :meth:`MetadataCache.load` reads each server's name and summary (hash, timestamps,
capabilities, tool count); an entry is parsed when it is first asked for (:meth:`get`), so
``status`` counts and one server's lookup do not parse the catalog.

Writing: a store, acknowledgement or removal changes this process's view at once and is
written as a transaction on that server's row only, replayed onto the row as the store holds
it then (so another process's newer record of definition changes is the base). Several
processes share the store safely: SQLite's WAL journal lets readers read while one writer
commits, writers wait for each other (``busy_timeout``), a commit is on disk when it returns,
and a process killed mid-write leaves the last commit intact. Writes are coalesced: a store
after a quiet spell is committed at once (by a background thread when the caller runs an event
loop, so a loop is never held up by the disk); stores that follow within
:data:`MIN_WRITE_INTERVAL_S` (or four times the last write's duration) are committed together
a moment later. Each write then catches up with what other processes committed since (the
rows of newer generations, not the catalog).

The export: after a write, ``mcp-cache.json`` is rewritten from the store under the lock
``mcp-cache.json.lock`` (temporary file, ``os.replace``: readers see the old file or the new
one), streaming the stored texts a server at a time without serialising anything. Up to
:data:`SYNC_EXPORT_BYTES` it is written right after the write; above, by a background thread,
coalesced (at most every :data:`MIN_EXPORT_INTERVAL_S`); above :data:`JSON_EXPORT_LIMIT_BYTES`
it is no longer written (one warning; the file is left as it was). The store records which
file it last wrote or read (inode, size, modification time): a file some other program wrote
since (the TypeScript adapter, a first run after it) is imported before the store is read or
exported, an entry replacing the store's when the store has none or the file's was listed
later (``cachedAt``).

:meth:`MetadataCache.flush` commits what is pending and writes the export now; the adapter
calls it when it stops, and every cache with pending stores is flushed when the interpreter
exits. A process killed before its pending stores are committed loses only those (its servers
are listed again next time), never a file.

A ``mcp-cache.json`` that cannot be parsed, or has another format version, is set aside as
``mcp-cache.json.corrupt-<UTC timestamp>`` with a warning and rebuilt from the store. A store
that is not an SQLite database is set aside the same way (``mcp-cache.db.corrupt-<stamp>``)
and rebuilt from ``mcp-cache.json``; one that cannot be used at all (a link, a pipe, no
permission, held locked) leaves this process with a private in-memory store and the JSON
file. None of this stops the adapter: the cache only saves connections.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import math
import operator
import os
import re
import stat
import sys
import threading
import time
import weakref
from array import array
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._files import write_atomically_in_chunks

if TYPE_CHECKING:
    import filelock

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.config import ServerEntry

from . import _store
from ._metadata import (
    SCHEMA_DIGEST_KEY,
    CachedListing,
    DeferredSchemas,
    JsonObject,
    JsonSchema,
    ServerMetadata,
    schema_digest,
)
from ._store import (
    CatalogStore,
    StoreLockedError,
    StoreUnreadableError,
    SummaryRow,
    summary_of,
)

__all__ = [
    "CACHE_FILE_NAME",
    "CACHE_VERSION",
    "DEFAULT_MAX_AGE_S",
    "DefinitionChanges",
    "EntryState",
    "LoadResult",
    "MetadataCache",
    "ToolChange",
    "config_hash",
    "entry_is_fresh",
]

CACHE_FILE_NAME = "mcp-cache.json"
CACHE_VERSION = 1
DEFAULT_MAX_AGE_S = 7 * 86400.0
LOCK_TIMEOUT_S = 10.0
"""A writer of ``mcp-cache.json`` holds its lock for one export or import (well under a
second at the size limit); ten seconds means stuck."""
LOCK_POLL_INTERVAL_S = 0.01
"""Waiting writers retry this often; filelock's 50 ms default idles the lock between writers."""
MIN_WRITE_INTERVAL_S = 0.1
"""Stores closer together than this are written together: a listing pass over hundreds of
servers becomes a handful of commits, and a lone store is still on disk at once."""
WRITE_COST_FACTOR = 4.0
"""The interval is at least this many times the last write's duration (its export included),
so that writing takes at most a fifth of the time while servers keep arriving."""
_SHARED_TABLE = "cache"

MIN_EXPORT_INTERVAL_S = 1.0
"""A large ``mcp-cache.json`` is exported at most this often (and at most every four export
durations): relistings in a row become one export."""
SYNC_EXPORT_BYTES = 8 * 1024 * 1024
"""A file up to this size is exported right after the write that changed the store (tens of
milliseconds); a larger one is exported by a background thread, coalesced."""
JSON_EXPORT_LIMIT_BYTES = 32 * 1024 * 1024
"""Above this, ``mcp-cache.json`` is no longer written (the store has everything): about
48,000 tools like the development catalog's. The TypeScript adapter parses the whole file at
every start, and a file this size already costs it seconds; it lists servers itself for what
it lacks."""

_COMPARED_TOOL_FIELDS = ("title", "description", "inputSchema", "outputSchema", "annotations")

EntryState = Literal["valid", "missing", "stale", "config-changed", "capabilities-lacking"]
LoadResult = Literal["loaded", "no-cache", "set-aside"]


class _Unset:
    """A field the configuration does not set (JavaScript's ``undefined``)."""

    def __repr__(self) -> str:
        return "undefined"


_UNSET = _Unset()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _js_string(value: str) -> str:
    # JSON.stringify escapes a lone surrogate as \udXXX; every other character is kept.
    # What json.dumps(value, ensure_ascii=False) returns, without building an encoder per call.
    return _js_escaped(encode_basestring(value))


def _js_escaped(text: str) -> str:
    """``text``, JSON written by ``encode_basestring``, with its lone surrogates escaped."""
    if text.isascii():
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _utf16_order(key: object) -> bytes:
    # JavaScript sorts object keys by UTF-16 code units; beyond the BMP that differs from
    # code-point order (U+1F600 sorts before U+FF01 there).
    return str(key).encode("utf-16-be", "surrogatepass")


_item_key = operator.itemgetter(0)


def _stable_text(value: Any) -> str:
    """Canonical text of a JSON-like value: object keys sorted, no spaces, unset as undefined.

    This is the serialisation the TypeScript reference hashes, so that both implementations
    compute the same ``configHash`` and can share one cache file without invalidating each
    other's entries.
    """
    # Strings first and the Mapping ABC last: ``isinstance`` against an ABC is slow, and a
    # status hashes every configured server (tens of thousands).
    if isinstance(value, str):
        return _js_string(value)
    if value is _UNSET:
        return "undefined"
    if isinstance(value, list | tuple):
        return "[" + ",".join([_stable_text(v) for v in value]) + "]"
    if isinstance(value, dict | Mapping):
        return _object_text([(str(k), v) for k, v in value.items()])
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # JavaScript writes 5.0 as 5
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return json.dumps(str(value), ensure_ascii=False)


def _object_text(members: list[tuple[str, Any]]) -> str:
    """:func:`_stable_text` of an object, given as its members (distinct names); sorts them."""
    if "".join(map(_item_key, members)).isascii():
        # ASCII keys (field names, nearly always) sort the same by code point as by
        # UTF-16 unit: no encoding per key (hashing 19,641 servers sorted 300,000 keys).
        members.sort(key=_item_key)
    else:
        members.sort(key=lambda member: _utf16_order(member[0]))
    return (
        "{"
        + ",".join(
            [
                _js_string(k) + ":" + (_js_string(v) if type(v) is str else _stable_text(v))
                for k, v in members
            ]
        )
        + "}"
    )


# The reference's reading of variables, applied in this order: ``${VAR}``, then ``$env:VAR``,
# then ``{env:VAR}`` (so ``${env:VAR}`` reads as ``$`` plus the value there). It only shapes the
# hash: the values the adapter uses come from the config layer's own interpolation.
_HASH_PATTERNS = (
    re.compile(r"\$\{(\w+)\}", re.ASCII),
    re.compile(r"\$env:(\w+)", re.ASCII),
    re.compile(r"\{env:(\w+)\}", re.ASCII),
)


def _hash_interpolate(value: str, env: Mapping[str, str]) -> str:
    if "$" not in value and "{" not in value:
        return value  # each pattern starts with one of them: nothing to read
    for pattern in _HASH_PATTERNS:
        value = pattern.sub(lambda m: env.get(m.group(1), ""), value)
    return value


def _hash_secret(value: str, env: Mapping[str, str]) -> str:
    # A !command is hashed as written (never run for a hash); !! keeps one "!".
    if value.startswith("!!"):
        return _hash_interpolate(value[1:], env)
    return value if value.startswith("!") else _hash_interpolate(value, env)


def _hash_path(value: str, env: Mapping[str, str]) -> str:
    resolved = _hash_interpolate(value, env)
    if not resolved.startswith("~"):
        return resolved
    home = env.get("HOME") or str(Path.home())
    if resolved == "~":
        return home
    if resolved.startswith(("~/", "~\\")):
        return _node_join(home, resolved[2:])
    return resolved


def _node_join(base: str, rest: str) -> str:
    """``path.join(base, rest)`` as Node computes it: normalised like ``normpath``, but a
    trailing separator is kept (``~/a/../b/`` is ``<home>/b/``) and ``//`` is not special."""
    if not rest:
        return os.path.normpath(base)
    joined = os.path.normpath(os.path.join(base, rest))
    if joined.startswith("//") and not joined.startswith("///"):
        joined = joined[1:]  # POSIX keeps a leading "//"; Node collapses it
    trailing = rest.endswith(("/", os.sep))
    return joined + os.sep if trailing and not joined.endswith(os.sep) else joined


def _hash_record(value: object, env: Mapping[str, str]) -> Any:
    if not isinstance(value, Mapping):
        return _UNSET
    return {str(k): _hash_secret(v, env) if isinstance(v, str) else v for k, v in value.items()}


def config_hash(entry: ServerEntry, *, environ: Mapping[str, str] | None = None) -> str:
    """SHA-256 hex digest identifying what ``entry`` connects to and what it exposes.

    The digest equals the TypeScript reference's ``computeServerHash`` for the same written
    configuration and environment, so both can share one cache file. It covers command and
    args as written, socket, env, cwd, url, headers and requestHeadersCommand after the
    reference's own variable reading, auth, protocolVersion, the bearer token (``bearerToken``,
    else the value of the variable ``bearerTokenEnv`` names in ``environ``, default
    ``os.environ``), bearerTokenEnv, exposeResources, includeTools and excludeTools. Fields the
    configuration leaves out hash as unset, not as their defaults. Lifecycle, timeouts,
    prefixes and the like only change how a server is used, so they are left out.
    """
    env = os.environ if environ is None else environ
    written = entry.written
    # The reference hashes the canonical JSON text of a record (sorted keys, unset members as
    # undefined). That text is written here into a copy of the text of a record with every
    # member unset, member by member, only for the members the entry sets: most members of
    # most servers are unset, and every start and status hashes each configured server.
    text = _ALL_UNSET_TEXT.copy()
    for key, value in written.items():
        member = _WRITTEN_MEMBERS.get(key)
        if member is not None:
            index, value_text = member
            text[index] = value_text(value, env)
    for name in _FIELD_NAMES & entry.model_fields_set:
        text[_FIELD_MEMBERS[name]] = _stable_text(entry.__dict__[name])
    token = written.get("bearerToken")
    if isinstance(token, str):
        text[_BEARER_TOKEN_MEMBER] = _stable_text(_hash_secret(token, env))
    elif entry.bearer_token_env:
        text[_BEARER_TOKEN_MEMBER] = _stable_text(env.get(entry.bearer_token_env, _UNSET))
    return hashlib.sha256("".join(text).encode()).hexdigest()


def _as_written(value: object, _env: Mapping[str, str]) -> str:
    if type(value) is str:
        text: str = encode_basestring(value)
        return text if text.isascii() else _js_escaped(text)
    return _stable_text(value)


def _list_as_written(values: object, _env: Mapping[str, str]) -> str:
    """:func:`_stable_text` of a written list, whose items are strings (arguments): escaped by
    one C call each, their lone surrogates in one pass over the whole; a list with anything
    else takes the general way."""
    if type(values) is list:
        try:
            text = f"[{','.join(map(encode_basestring, values))}]"
            return text if text.isascii() else _js_escaped(text)
        except TypeError:  # not a string among them
            pass
    return _stable_text(values)


def _path_text(value: object, env: Mapping[str, str]) -> str:
    return _stable_text(_hash_path(value, env)) if isinstance(value, str) else _UNDEFINED


def _url_text(value: object, env: Mapping[str, str]) -> str:
    return _stable_text(_hash_interpolate(value, env)) if isinstance(value, str) else _UNDEFINED


def _record_text(value: object, env: Mapping[str, str]) -> str:
    """``env`` or ``headers``: their values read as the reference reads secrets."""
    record = _hash_record(value, env)
    return _UNDEFINED if record is _UNSET else _object_text(list(record.items()))


def _headers_command_text(command: object, env: Mapping[str, str]) -> str:
    if not isinstance(command, Mapping):
        return _UNDEFINED
    args = command.get("args")
    return _stable_text(
        {
            "command": _hash_interpolate(str(command.get("command", "")), env),
            "args": [_hash_interpolate(str(a), env) for a in args]
            if isinstance(args, list | tuple)
            else _UNSET,
            "env": _hash_record(command.get("env"), env),
            "timeoutMs": command.get("timeoutMs", _UNSET),
        }
    )


_UNDEFINED = "undefined"
"""How the canonical text writes an unset member (JavaScript's ``undefined``)."""

_MEMBER_KEYS = sorted(
    (
        "command",
        "args",
        "socket",
        "env",
        "cwd",
        "url",
        "headers",
        "requestHeadersCommand",
        "auth",
        "protocolVersion",
        "bearerToken",
        "bearerTokenEnv",
        "exposeResources",
        "includeTools",
        "excludeTools",
    )
)
"""The members :func:`config_hash` hashes, in the order :func:`_stable_text` writes them (ASCII
names: code-point order is UTF-16 order; nothing in them needs escaping)."""

_ALL_UNSET_TEXT = [
    *(
        piece
        for position, key in enumerate(_MEMBER_KEYS)
        for piece in (("," if position else "{") + f'"{key}":', _UNDEFINED)
    ),
    "}",
]
"""The canonical text of a record with every member unset, in pieces: the name of the n-th
member at ``2 * n``, its value at ``2 * n + 1``."""

_MEMBER_INDEX = {key: 2 * position + 1 for position, key in enumerate(_MEMBER_KEYS)}

_WRITTEN_MEMBERS: dict[str, tuple[int, Callable[[Any, Mapping[str, str]], str]]] = {
    "command": (_MEMBER_INDEX["command"], _as_written),
    "args": (_MEMBER_INDEX["args"], _list_as_written),
    "socket": (_MEMBER_INDEX["socket"], _path_text),
    "cwd": (_MEMBER_INDEX["cwd"], _path_text),
    "env": (_MEMBER_INDEX["env"], _record_text),
    "headers": (_MEMBER_INDEX["headers"], _record_text),
    "url": (_MEMBER_INDEX["url"], _url_text),
    "requestHeadersCommand": (_MEMBER_INDEX["requestHeadersCommand"], _headers_command_text),
}
"""Members read from the written form (:attr:`ServerEntry.written`), each with how: command
and args as written, paths and the url after the reference's variable reading, env and
headers values as secrets. ``bearerToken`` is read apart: when it is not written, the value of
the variable ``bearerTokenEnv`` names takes its place."""

_FIELD_MEMBERS = {
    name: _MEMBER_INDEX[key]
    for name, key in (
        ("auth", "auth"),
        ("protocol_version", "protocolVersion"),
        ("bearer_token_env", "bearerTokenEnv"),
        ("expose_resources", "exposeResources"),
        ("include_tools", "includeTools"),
        ("exclude_tools", "excludeTools"),
    )
}
"""Members read from the entry's fields when the configuration sets them (never defaults)."""
_FIELD_NAMES = frozenset(_FIELD_MEMBERS)

_BEARER_TOKEN_MEMBER = _MEMBER_INDEX["bearerToken"]


@dataclass(frozen=True, slots=True)
class ToolChange:
    """A tool that exists before and after, with the definition fields that differ."""

    name: str
    fields: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DefinitionChanges:
    """How a server's tool list differs from what was cached (tools by their own names).

    A changed description is how a compromised server would slip new instructions to a model,
    so these are kept in the cache until acknowledged and shown by ``status``. False when empty.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[ToolChange, ...] = ()
    detected_at_ms: int | None = None
    baseline: Mapping[str, JsonObject | None] = field(default_factory=dict)
    """Each affected tool's definition as it was before its first unacknowledged change
    (``None`` for an added tool): what the user last trusted, to show how it changed."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)

    def names(self) -> tuple[str, ...]:
        """Every affected tool: changed first, then added, then removed."""
        return (*(c.name for c in self.changed), *self.added, *self.removed)

    def describe(self) -> str:
        """One line for people, e.g. ``changed: search (description); added: fetch``."""
        parts: list[str] = []
        if self.changed:
            listed = ", ".join(f"{c.name} ({', '.join(c.fields)})" for c in self.changed)
            parts.append(f"changed: {listed}")
        if self.added:
            parts.append(f"added: {', '.join(self.added)}")
        if self.removed:
            parts.append(f"removed: {', '.join(self.removed)}")
        return "; ".join(parts) if parts else "no changes"

    def merged_with(self, newer: DefinitionChanges) -> DefinitionChanges:
        """Changes since the older baseline: ``self`` then ``newer`` (net effect per tool)."""
        added = dict.fromkeys(self.added)
        removed = dict.fromkeys(self.removed)
        changed = {c.name: c.fields for c in self.changed}
        for name in newer.removed:
            if name in added:  # appeared and vanished again: nothing to report
                del added[name]
                changed.pop(name, None)
            else:
                changed.pop(name, None)
                removed[name] = None
        for name in newer.added:
            if name in removed:  # came back, and may not be what it was
                del removed[name]
                changed[name] = ("redefined",)
            else:
                added[name] = None
        for change in newer.changed:
            if change.name not in added:
                earlier = changed.get(change.name, ())
                changed[change.name] = tuple(dict.fromkeys((*earlier, *change.fields)))
        affected = {*added, *removed, *changed}
        # The older baseline wins: it is what the user last saw and trusted.
        baseline = {
            name: definition
            for name, definition in {**newer.baseline, **self.baseline}.items()
            if name in affected
        }
        return DefinitionChanges(
            added=tuple(added),
            removed=tuple(removed),
            changed=tuple(ToolChange(n, f) for n, f in changed.items()),
            detected_at_ms=newer.detected_at_ms or self.detected_at_ms,
            baseline=baseline,
        )

    def without(self, tools: Collection[str]) -> DefinitionChanges:
        """This record minus the changes to ``tools`` (acknowledged one by one)."""
        drop = set(tools)
        return DefinitionChanges(
            added=tuple(n for n in self.added if n not in drop),
            removed=tuple(n for n in self.removed if n not in drop),
            changed=tuple(c for c in self.changed if c.name not in drop),
            detected_at_ms=self.detected_at_ms,
            baseline={n: d for n, d in self.baseline.items() if n not in drop},
        )

    def to_json(self) -> JsonObject:
        return {
            "detectedAt": self.detected_at_ms,
            "added": list(self.added),
            "removed": list(self.removed),
            "changed": [{"name": c.name, "fields": list(c.fields)} for c in self.changed],
            "baseline": dict(self.baseline),
        }

    @classmethod
    def from_json(cls, data: Any) -> DefinitionChanges:
        """Read a stored record; anything malformed reads as no changes."""
        if not isinstance(data, Mapping):
            return cls()

        def names(value: Any) -> tuple[str, ...]:
            items = value if isinstance(value, list) else []
            return tuple(n for n in items if isinstance(n, str))

        changed = []
        raw_changed = data.get("changed")
        for item in raw_changed if isinstance(raw_changed, list) else []:
            if isinstance(item, Mapping) and isinstance(item.get("name"), str):
                changed.append(ToolChange(item["name"], names(item.get("fields"))))
        detected = _as_number(data.get("detectedAt"))
        raw_baseline = data.get("baseline")
        baseline: dict[str, JsonObject | None] = {}
        if isinstance(raw_baseline, Mapping):
            for name, definition in raw_baseline.items():
                if isinstance(name, str) and (definition is None or isinstance(definition, dict)):
                    baseline[name] = definition
        return cls(
            added=names(data.get("added")),
            removed=names(data.get("removed")),
            changed=tuple(changed),
            detected_at_ms=int(detected) if detected is not None else None,
            baseline=baseline,
        )


_MAX_SAFE_INTEGER = 2**53 - 1


def entry_is_fresh(cached_at: object, ttl_ms: object, *, now_ms: float, max_age_ms: float) -> bool:
    """Whether an entry written at ``cachedAt`` with ``ttlMs`` may still be used.

    The rules are the TypeScript reference's, so that both accept the same entries: a
    ``cachedAt`` that is not a non-zero number is never fresh; a ``ttlMs`` that is a safe
    non-negative integer limits the age (``0`` = never reuse, otherwise ``age < ttlMs``, within
    ``max_age_ms``); any other ``ttlMs`` (negative, fractional, not a number) is ignored and
    the age may reach ``max_age_ms``. An entry dated in the future is fresh.
    """
    when = _as_number(cached_at)
    if when is None or when == 0:
        return False
    age_ms = now_ms - when
    ttl = _as_number(ttl_ms)
    if ttl is not None and ttl.is_integer() and 0 <= ttl <= _MAX_SAFE_INTEGER:
        if ttl == 0:
            return False
        limit = min(max_age_ms, ttl) if max_age_ms > 0 else ttl
        return age_ms < limit
    return not (max_age_ms > 0 and age_ms > max_age_ms)


def entry_fresh_until_ms(cached_at: object, ttl_ms: object, *, max_age_ms: float) -> float:
    """The moment an entry written at ``cachedAt`` with ``ttlMs`` stops being fresh, in ms
    since the epoch: :func:`entry_is_fresh` holds for every ``now_ms`` before it (never, at
    ``-inf``; always, at ``inf``)."""
    when = _as_number(cached_at)
    if when is None or when == 0:
        return -math.inf
    ttl = _as_number(ttl_ms)
    if ttl is not None and ttl.is_integer() and 0 <= ttl <= _MAX_SAFE_INTEGER:
        if ttl == 0:
            return -math.inf
        return when + (min(max_age_ms, ttl) if max_age_ms > 0 else ttl)
    return when + max_age_ms if max_age_ms > 0 else math.inf


def _as_number(value: Any) -> float | None:
    """``value`` if it is a finite JSON number (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _tools_by_name(tools: Any) -> dict[str, Mapping[str, Any]]:
    by_name: dict[str, Mapping[str, Any]] = {}
    for tool in tools if isinstance(tools, list) else []:
        if isinstance(tool, Mapping) and isinstance(tool.get("name"), str):
            by_name.setdefault(tool["name"], tool)
    return by_name


def _diff_tools(old_tools: Any, new_tools: Any, *, now_ms: int) -> DefinitionChanges:
    old = _tools_by_name(old_tools)
    new = _tools_by_name(new_tools)
    changed = []
    for name, tool in new.items():
        if name in old:
            fields = tuple(f for f in _COMPARED_TOOL_FIELDS if old[name].get(f) != tool.get(f))
            if fields:
                changed.append(ToolChange(name, fields))
    added = tuple(n for n in new if n not in old)
    removed = tuple(n for n in old if n not in new)
    baseline: dict[str, JsonObject | None] = dict.fromkeys(added)
    for name in (*removed, *(c.name for c in changed)):
        baseline[name] = {
            k: v for k, v in old[name].items() if k == "name" or k in _COMPARED_TOOL_FIELDS
        }
    return DefinitionChanges(
        added=added,
        removed=removed,
        changed=tuple(changed),
        detected_at_ms=now_ms,
        baseline=baseline,
    )


def _objects(value: Any, *required: str) -> tuple[JsonObject, ...]:
    items = value if isinstance(value, list) else []
    if len(required) == 1:
        # Tools and prompts: one key to check, without a generator per item (opening a
        # catalog of 95,000 tools checks every one).
        (key,) = required
        return tuple([i for i in items if isinstance(i, dict) and isinstance(i.get(key), str)])
    return tuple(
        item
        for item in items
        if isinstance(item, dict) and all(isinstance(item.get(k), str) for k in required)
    )


_TEXTS_PER_PARSE = 1000
"""Texts :func:`_parsed_texts` joins into one array: the parser's work per call, spent once
for them, is most of the time a summary's 250 bytes take (not so for a listing's 1.4 KB,
which are parsed one by one). The joined copy stays under a megabyte."""


class _LoadedRows:
    """What :attr:`MetadataCache.loaded_state` digests of a load's summary rows, beside the
    summaries the view keeps (by name, in the rows' order): each row's tool count and
    generation, two numbers a row, not the rows (a long-lived process never asks)."""

    __slots__ = ("gens", "json_identity", "removals", "tools")

    def __init__(self, json_identity: str | None, removals: int, rows: Sequence[SummaryRow]):
        self.json_identity = json_identity
        self.removals = removals
        self.tools = array("q", [r.tools for r in rows])
        self.gens = array("q", [r.gen for r in rows])

    def digest(self, summaries: Mapping[str, str]) -> str:
        """The digest of the rows, whose names and summaries are ``summaries``."""
        digest = hashlib.sha256(f"{self.json_identity}\0{self.removals}\0".encode())
        digest.update(
            "".join(
                f"{name}\0{summary}\0{tools}\0{gen}\0"
                for (name, summary), tools, gen in zip(
                    summaries.items(), self.tools, self.gens, strict=True
                )
            ).encode("utf-8", "surrogatepass")
        )
        return digest.hexdigest()


def _parsed_texts(texts: list[str | None]) -> list[Any]:
    """Each of ``texts`` parsed as :func:`_parse` does (None stays None; ``_ABSENT`` for a
    text that is no JSON value), as one array per ``_TEXTS_PER_PARSE`` of them when each
    holds one value. A text of several values (``1, 2``) or of none makes another count or
    no array, and then each text of that array is parsed alone."""
    present = [text for text in texts if text is not None]
    values: list[Any] = []
    for start in range(0, len(present), _TEXTS_PER_PARSE):
        part = present[start : start + _TEXTS_PER_PARSE]
        try:
            parsed = json.loads("[" + ",".join(part) + "]")
        except ValueError:
            parsed = None
        if parsed is None or len(parsed) != len(part):
            parsed = [_parse(text) for text in part]
        values += parsed
    found = iter(values)
    return [None if text is None else next(found) for text in texts]


def _capabilities_of(raw: Mapping[str, Any]) -> tuple[str, ...] | None:
    """The client capabilities an entry was listed under; None when it does not say."""
    value = raw.get("clientCapabilities")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return tuple(sorted(set(value)))


OBSERVED_RESULTS_FIELD = "observedResults"
"""Entry field (this implementation's only; the reference ignores it): tool name -> the shape of
its last result, for tools without an ``outputSchema``."""
_MAX_OBSERVED_CHARS = 2000


def _observed_of(raw: Mapping[str, Any]) -> dict[str, str]:
    value = raw.get(OBSERVED_RESULTS_FIELD)
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _metadata_from_entry(
    raw: Mapping[str, Any], schemas: DeferredSchemas | None = None
) -> ServerMetadata:
    """The metadata an entry holds; with ``schemas``, the :class:`CachedListing` a listing
    holds (made at once, not copied from a ServerMetadata: one object a server fewer)."""
    instructions = raw.get("instructions")
    tools = _objects(raw.get("tools"), "name")
    resources = _objects(raw.get("resources"), "uri", "name")
    prompts = _objects(raw.get("prompts"), "name")
    text = instructions if isinstance(instructions, str) else None
    if schemas is None:
        return ServerMetadata(tools=tools, resources=resources, prompts=prompts, instructions=text)
    return CachedListing(
        tools=tools, resources=resources, prompts=prompts, instructions=text, schemas=schemas
    )


_T = TypeVar("_T")


class _Absent:
    """No entry for a server (distinct from an entry whose JSON is ``null``)."""

    def __repr__(self) -> str:
        return "<absent>"


_ABSENT = _Absent()
_Update = Callable[[Any], tuple[Any, _T]]
"""A change to one server's entry: given the entry (or ``_ABSENT``), the new entry (``_ABSENT``
drops it; the same object leaves it alone) and the caller's answer. Applied to this process's
view at once and replayed onto the store's row when written, so another process's newer row is
the base."""

_CACHES_WITH_PENDING_WRITES: weakref.WeakSet[MetadataCache] = weakref.WeakSet()
_ALL_CACHES: weakref.WeakSet[MetadataCache] = weakref.WeakSet()


@atexit.register
def _flush_at_exit() -> None:
    # A short-lived process (one CLI command) exits right after its last store.
    for cache in list(_CACHES_WITH_PENDING_WRITES):
        cache.flush()


def _reset_after_fork() -> None:
    # A forked child has no write thread, yet may have copied a lock that one held (and
    # filelock refuses a lock object made by another process), and must not use its parent's
    # database connections: it starts with fresh ones, and writes what is pending when it
    # next writes or exits.
    for cache in list(_ALL_CACHES):
        cache._file_lock = None
        cache._state_lock = threading.RLock()
        cache._write_lock = threading.Lock()
        cache._write_timer = None
        cache._export_timer = None
        if cache._store is not None:
            cache._store.reset_after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _on_event_loop() -> bool:
    """Whether the calling thread runs an asyncio event loop (every host's backend)."""
    # A process that never imported asyncio runs no loop; importing it here would cost a
    # cache-only command (search, describe from the cache) asyncio and ssl for nothing.
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class _Unreadable(Exception):
    """The cache file exists but is not a version-1 cache."""


def _entry_digest(summary: str) -> str | None:
    """The ``entryDigest`` of a summary column's text (see ``summary_of``); None when it has
    none (written by a version that kept none) or is not JSON."""
    try:
        parsed = json.loads(summary)
    except ValueError:
        return None
    digest = parsed.get("entryDigest") if isinstance(parsed, dict) else None
    return digest if isinstance(digest, str) else None


def _entry_text(raw: Any) -> str:
    # A tool description or error may quote a secret value; the store and the file are read
    # by anyone who debugs with them, so they hold references instead (hashes are not values).
    return redact(json.dumps(raw, ensure_ascii=False, separators=(",", ":")))


_ToolSchemas = tuple[JsonSchema | None, JsonSchema | None]
_SCHEMA_KEYS = ("inputSchema", "outputSchema")
_LISTING_KEYS = (
    "configHash",
    "cachedAt",
    "ttlMs",
    "clientCapabilities",
    "resources",
    "prompts",
    "instructions",
)
RECENT_SCHEMA_ENTRIES = 64
"""Cached entries whose tools' schemas are kept parsed (a call, a describe and a listing of
direct tools read the same few servers again and again)."""


def _listing_of(raw: Any, text_of: Callable[[Any], str] = _entry_text) -> tuple[str, str] | None:
    """The store's ``(listing, digest)`` of an entry (see ``CatalogStore.listings``): what
    judging it and building the catalog read, without the tools' schemas. ``text_of`` writes
    a value as text (by default redacted: see ``_entry_text``)."""
    if not isinstance(raw, dict):
        return None
    listing = {k: raw[k] for k in _LISTING_KEYS if k in raw}
    tools = raw.get("tools")
    if isinstance(tools, list):
        listing["tools"] = [_listed_tool(t) if isinstance(t, dict) else t for t in tools]
    digest = hashlib.blake2b(text_of(tools).encode(), digest_size=20).hexdigest()
    return text_of(listing), digest


def _compact_text(raw: Any) -> str:
    """``_entry_text`` of a value parsed from a redacted text."""
    return json.dumps(raw, ensure_ascii=False, separators=(",", ":"))


def _listed_tool(tool: dict[str, Any]) -> dict[str, Any]:
    listed = {k: v for k, v in tool.items() if k not in _SCHEMA_KEYS}
    digest = schema_digest(tool.get("inputSchema"))
    if digest is not None:
        listed[SCHEMA_DIGEST_KEY] = digest
    return listed


def _schemas_by_tool(raw: Any) -> dict[str, _ToolSchemas]:
    tools = raw.get("tools") if isinstance(raw, Mapping) else None
    found: dict[str, _ToolSchemas] = {}
    for tool in tools if isinstance(tools, list) else ():
        if isinstance(tool, dict) and isinstance(name := tool.get("name"), str):
            found.setdefault(
                name,
                (
                    _mapping_or_none(tool.get("inputSchema")),
                    _mapping_or_none(tool.get("outputSchema")),
                ),
            )
    return found


def _mapping_or_none(value: Any) -> JsonSchema | None:
    return value if isinstance(value, Mapping) else None


def _is_newer(incoming: Any, kept: Any) -> bool:
    """Whether an entry found in ``mcp-cache.json`` should replace the store's: it is an
    object and the store's is not, or it was listed later (``cachedAt``)."""
    if not isinstance(kept, Mapping):
        return isinstance(incoming, Mapping)
    if not isinstance(incoming, Mapping):
        return False
    incoming_at, kept_at = _as_number(incoming.get("cachedAt")), _as_number(kept.get("cachedAt"))
    if kept_at is None:
        return incoming_at is not None
    return incoming_at is not None and incoming_at > kept_at


def store_path_for(path: Path) -> Path:
    """The database beside the JSON file: ``mcp-cache.json`` -> ``mcp-cache.db``."""
    return path.with_suffix(".db") if path.suffix == ".json" else path.with_name(path.name + ".db")


class MetadataCache:
    """The metadata cache: the store ``mcp-cache.db`` and its export ``mcp-cache.json``,
    shared safely between processes.

    Reads work on a view taken by :meth:`load` (called implicitly on first use): each server's
    name and summary, with entries parsed when first asked for; every write catches up with
    what other processes stored since. ``clock`` returns seconds since the epoch; ``environ``
    resolves ``bearerTokenEnv`` for :func:`config_hash` (default ``os.environ``).
    """

    def __init__(
        self,
        path: Path,
        *,
        clock: Callable[[], float] = time.time,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        environ: Mapping[str, str] | None = None,
        client_capabilities: Collection[str] | None = None,
    ) -> None:
        self.path = Path(path)
        self.store_path = store_path_for(self.path)
        self._environ = environ
        self._capabilities = (
            None if client_capabilities is None else tuple(sorted(set(client_capabilities)))
        )
        """What this process's client offers servers (``sampling``, ``elicitation``); None
        when unknown: entries are then used and written without the field."""
        self._clock = clock
        self._max_age_ms = max_age_s * 1000
        self._file_lock: filelock.FileLock | None = None
        self._state_lock = threading.RLock()
        """Guards the view and the pending stores; never held while waiting for the store."""
        self._write_lock = threading.Lock()
        """One write at a time from this process (taken before the file lock)."""
        self._store: CatalogStore | None = None
        self._summaries: dict[str, str] = {}
        """Every server in the view, in the order first stored, with its summary's JSON text."""
        self._entries: dict[str, Any] = {}
        """Entries parsed so far (or stored by this process): the rest stay in the store."""
        self._recent_schemas: OrderedDict[tuple[str, str], dict[str, _ToolSchemas]] = OrderedDict()
        """The schemas of the cached entries read last for a :class:`CachedListing`'s tools
        (by server and digest), the most recent last."""
        self._schemas_lock = threading.Lock()
        self._unsettled: set[str] = set()
        """Servers this process added to the view that the store did not place yet."""
        self._seen_gen = -1
        self._seen_removals = 0
        self._loaded = False
        self._loaded_state: str | _LoadedRows | None = None
        """:attr:`loaded_state`, or what it is worked out from with the view's summaries,
        unchanged while it is set: only a search that keeps its facts asks, and hashing
        19,641 summaries is a tenth of a load's time."""
        self._warnings: list[str] = []
        self._pending: list[tuple[str, _Update[Any]]] = []
        """Changes made to the view and not yet written, oldest first."""
        self._write_timer: threading.Timer | None = None
        self._export_timer: threading.Timer | None = None
        self._export_due = False
        self._last_export_bytes = 0
        self._last_export_s = 0.0
        self._export_over_limit_warned = False
        self._last_write_end = -math.inf
        self._write_interval_s = MIN_WRITE_INTERVAL_S
        _ALL_CACHES.add(self)

    # ------------------------------------------------------------------------ reading

    @property
    def warnings(self) -> tuple[str, ...]:
        """Problems met so far (a file set aside, a failed write), oldest first."""
        return tuple(self._warnings)

    @property
    def servers(self) -> tuple[str, ...]:
        """Servers with an entry in the view, valid or not."""
        self._ensure_loaded()
        return tuple(self._summaries)

    def tool_counts(self) -> dict[str, int]:
        """Each stored server's number of tools, read from the store's summary column without
        parsing any entry (what ``status`` needs of servers it does not show in detail)."""
        self._ensure_loaded()
        counts: dict[str, int] = {}
        if self._store is not None:
            with contextlib.suppress(StoreLockedError, StoreUnreadableError, OSError):
                counts = self._store.tool_counts()
        for name, raw in self._entries.items():
            tools = raw.get("tools") if isinstance(raw, Mapping) else None
            counts[name] = len(tools) if isinstance(tools, list) else 0
        return {name: counts.get(name, 0) for name in self._summaries}

    def load(self) -> LoadResult:
        """(Re)read the view from the store (after writing the stores still pending), first
        importing ``mcp-cache.json`` when another program wrote it since (the TypeScript
        adapter, or a first run after it). With a team's shared state, the entries of its
        table that differ from the store's are then stored too (see :meth:`_take_shared`).

        Returns ``"no-cache"`` when there is neither store nor file nor shared entry (the
        first run: connect every server once), ``"set-aside"`` when an unreadable file was
        moved away, else ``"loaded"``.
        """
        # What this process stored must not vanish from the view.
        self._write_pending(export=False)
        with self._write_lock:
            result: LoadResult = "loaded"
            rows: list[SummaryRow]
            if self._store is None and not self.store_path.exists() and not self._json_exists():
                result = "no-cache"
                gen, removals, rows = -1, 0, []
            else:
                store = self._open_store()
                if self._import_if_newer(store) == "set-aside":
                    result = "set-aside"
                gen, removals, rows = self._summary_rows(store)
                if not rows and not self._json_exists() and result == "loaded":
                    result = "no-cache"
            entries: dict[str, Any] = {}
            shared = shared_state.active()
            if shared is not None:
                # What any replica listed: a replica that joins starts warm.
                shared.publish_digested_from(_SHARED_TABLE, self._shared_records)
                if self._take_shared(shared, rows, entries):
                    if result == "no-cache":
                        result = "loaded"
                    # Those stored are read as any other row; the rest are in ``entries``.
                    gen, removals, rows = self._summary_rows(self._open_store())
            summaries = {row.name: row.summary for row in rows}
            summaries.update((name, summary_of(raw)[0]) for name, raw in entries.items())
            state: _LoadedRows | None = None
            if (
                gen >= 0
                and shared is None
                and self._store is not None
                and not self._store.in_memory
            ):
                state = _LoadedRows(self._json_identity(), removals, rows)
            with self._state_lock:
                self._summaries, self._entries = summaries, entries
                self._unsettled = set()
                self._seen_gen, self._seen_removals = gen, removals
                self._loaded_state = state
                for server, update in self._pending:  # stored by another thread meanwhile
                    self._set_view(server, update(self._view_entry(server))[0])
                self._loaded = True
            return result

    def _summary_rows(self, store: CatalogStore) -> tuple[int, int, list[SummaryRow]]:
        try:
            return store.summaries()
        except (StoreLockedError, StoreUnreadableError, OSError) as exc:
            self._warn(f"cannot read {self.store_path.name}: {exc}; using no cache")
            return -1, 0, []

    def _take_shared(
        self, shared: shared_state.SharedState, rows: list[SummaryRow], entries: dict[str, Any]
    ) -> bool:
        """Store the entries of the team's shared table that differ from the store's rows (by
        their texts' digests: the entries themselves are read only when they differ), a batch
        per transaction, as a relisting by this process would; True when there were any. A
        store that cannot take them leaves them in ``entries``, for this process's view only
        (with the ones it took before: the view reads those from the store).

        The shared copy wins, as it did when every entry was read from it at each load: every
        replica sends its stores there first."""
        known: dict[str, str] = {}
        for row in rows:
            digest = _entry_digest(row.summary)
            if digest is not None:
                known[row.name] = digest
        taken = False
        for texts in shared.changed_digested(_SHARED_TABLE, known):
            records: dict[str, tuple[str, Any]] = {}
            for name, text in texts.items():
                # As any text this process writes to a file, whoever wrote it to Redis. The
                # listing below is made of the redacted entry: it needs no second pass (two
                # passes more per entry were a third of a joining replica's load).
                text = redact(text)
                try:
                    records[name] = (text, json.loads(text))
                except ValueError:
                    continue  # not JSON: the store stays the judge of this server
            taken = taken or bool(records)
            if entries:  # the store could not take an earlier batch
                entries.update((name, raw) for name, (_text, raw) in records.items())
                continue
            if not records:
                continue
            try:
                # Opened (created) only now: a load that finds nothing to take writes nothing.
                with self._open_store().transaction() as txn:
                    for name, (text, raw) in records.items():
                        summary, tools = summary_of(raw, text)
                        key = redact(json.dumps(name, ensure_ascii=False))
                        txn.put(name, key, text, summary, tools, _listing_of(raw, _compact_text))
            except (StoreLockedError, StoreUnreadableError, OSError, ValueError) as exc:
                self._warn(
                    f"cannot write {self.store_path}: {exc}; the team's entries are kept in memory"
                )
                entries.update((name, raw) for name, (_text, raw) in records.items())
        return taken

    def _shared_records(self) -> list[tuple[str, str]]:
        """Every stored ``(server, entry text)``: what this replica publishes again when the
        team's Redis lost them (see :meth:`SharedState.publish_digested_from`), read from the
        store as it is written there (the view holds most entries unread)."""
        store = self._store
        if store is None:
            return []
        try:
            return store.entries()
        except (StoreLockedError, StoreUnreadableError, OSError):
            return []

    def entry_state(self, server: str, entry: ServerEntry) -> EntryState:
        """Whether ``server``'s entry can be used for ``entry`` as configured now."""
        return self._state_and_entry(server, entry, parse=False)[0]

    @property
    def environ(self) -> Mapping[str, str] | None:
        """The environment :func:`config_hash` reads for this cache (None: this process's)."""
        return self._environ

    def summary(self, server: str, entry: ServerEntry) -> tuple[EntryState, Mapping[str, Any]]:
        """The entry's state for ``entry`` and its summary (``configHash``, ``named`` tool and
        resource counts, ``changes``: see ``summary_of``), without parsing the entry: what
        ``status`` reads of each server. Empty for an absent entry; a summary written before
        a key existed lacks it."""
        return self.summaries({server: entry})[server]

    def summaries(
        self, entries: Mapping[str, ServerEntry]
    ) -> dict[str, tuple[EntryState, Mapping[str, Any]]]:
        """:meth:`summary` of each of ``entries``, their texts parsed a thousand at a time
        (see :func:`_parsed_texts`): what a status of every server reads."""
        return self.summaries_by_hash(
            {server: config_hash(entry, environ=self._environ) for server, entry in entries.items()}
        )

    def _summary_texts(self, servers: Iterable[str]) -> list[str | None]:
        """Each of ``servers``' summary text, of its entry in the view when this process
        holds it parsed (a store of its own, a shared record), else as the store has it."""
        self._ensure_loaded()
        with self._state_lock:
            return [
                summary_of(raw)[0]
                if (raw := self._entries.get(server, _ABSENT)) is not _ABSENT
                else self._summaries.get(server)
                for server in servers
            ]

    def summaries_by_hash(
        self, digests: Mapping[str, str]
    ) -> dict[str, tuple[EntryState, Mapping[str, Any]]]:
        """:meth:`summaries` of the servers whose entries have the config hashes ``digests``
        (as :func:`config_hash` gives them with this cache's environment)."""
        parsed = _parsed_texts(self._summary_texts(digests))
        judged: dict[str, tuple[EntryState, Mapping[str, Any]]] = {}
        now_ms = self._now_ms()
        for (server, digest), summary in zip(digests.items(), parsed, strict=True):
            if summary is _ABSENT:
                with self._state_lock:
                    summary = self._summary_from_entry(server)
            state = self._state_of(summary, digest, now_ms)
            judged[server] = state, summary if isinstance(summary, Mapping) else {}
        return judged

    def get(self, server: str, entry: ServerEntry) -> ServerMetadata | None:
        """``server``'s cached metadata, only if its entry is valid for ``entry``."""
        state, raw = self._state_and_entry(server, entry, parse=True)
        return _metadata_from_entry(raw) if state == "valid" else None

    def get_many(self, entries: Mapping[str, ServerEntry]) -> dict[str, ServerMetadata]:
        """What :meth:`get` answers for each of ``entries``, for those with a valid entry, in
        the order of ``entries``: the entries the summaries call valid are read from the
        store in a few queries, not one per server (what opening a catalog of tens of
        thousands of servers spends most on, after parsing them)."""
        self._ensure_loaded()
        digests = {
            server: config_hash(entry, environ=self._environ) for server, entry in entries.items()
        }
        unread: list[str] = []
        with self._state_lock:
            for server, digest in digests.items():
                text = self._summaries.get(server)
                if (
                    server not in self._entries
                    and text is not None
                    and self._state_of(self._parsed_summary(server, text), digest) == "valid"
                ):
                    unread.append(server)
            store = self._store
        texts: dict[str, str] = {}
        if unread and store is not None:
            try:
                texts = store.entry_texts(unread)
            except (StoreLockedError, StoreUnreadableError, OSError) as exc:
                self._warn(f"cannot read cached entries from {self.store_path.name}: {exc}")
        raws: dict[str, Any] = {}
        with self._state_lock:
            for server in unread:
                text = texts.get(server)
                if server in self._entries or text is None:
                    continue  # stored by this process meanwhile, or removed by another
                try:
                    self._entries[server] = json.loads(text)
                except ValueError as exc:
                    self._warn(f"cannot read {server!r} from {self.store_path.name}: {exc}")
            for server, digest in digests.items():
                raw = self._entries.get(server, _ABSENT)
                if raw is not _ABSENT and self._state_of(raw, digest) == "valid":
                    raws[server] = raw
        return {server: _metadata_from_entry(raw) for server, raw in raws.items()}

    def get_listings(self, entries: Mapping[str, ServerEntry]) -> dict[str, ServerMetadata]:
        """What :meth:`get_many` answers, with a :class:`CachedListing` for each server the
        store keeps a listing of: the tools without their schemas, which are read from the
        entry when a tool's are first asked for (see :meth:`tool_schemas`). Opening a
        catalog of 95,000 tools parses a third of what the entries hold, and keeps less."""
        self._ensure_loaded()
        unread: list[str] = []
        with self._state_lock:
            for server in entries:
                if server not in self._entries and server in self._summaries:
                    unread.append(server)
            store = self._store
        listings: dict[str, tuple[str, str]] = {}
        if unread and store is not None:
            try:
                listings = store.listings(unread)
            except (StoreLockedError, StoreUnreadableError, OSError) as exc:
                self._warn(f"cannot read cached listings from {self.store_path.name}: {exc}")
        found: dict[str, ServerMetadata] = {}
        for server, (text, digest) in listings.items():
            try:
                raw = json.loads(text)
            except ValueError:
                continue  # read from its entry below
            if self._state_of(raw, config_hash(entries[server], environ=self._environ)) != "valid":
                continue
            found[server] = _metadata_from_entry(raw, DeferredSchemas(self, server, digest))
        # Every server without a usable listing is judged and read from its entry (one whose
        # listing is unreadable too, not only one that has none).
        rest = self.get_many({s: e for s, e in entries.items() if s not in found})
        return {s: m for s in entries if (m := found.get(s) or rest.get(s)) is not None}

    def tool_schemas(
        self, server: str, digest: str, tool: str
    ) -> tuple[JsonSchema | None, JsonSchema | None]:
        """``tool``'s ``(inputSchema, outputSchema)`` in ``server``'s entry (``None`` where it
        has none, or the entry cannot be read), for a :class:`CachedListing` of digest
        ``digest``. The entries read last are kept parsed; none is kept in the view."""
        key = (server, digest)
        with self._schemas_lock:
            schemas = self._recent_schemas.get(key)
            if schemas is not None:
                self._recent_schemas.move_to_end(key)
                return schemas.get(tool, (None, None))
        with self._state_lock:
            raw = self._entries.get(server, _ABSENT)
            store = self._store
        if raw is _ABSENT and store is not None:
            try:
                text = store.entry_text(server)
                raw = _ABSENT if text is None else json.loads(text)
            except (StoreLockedError, StoreUnreadableError, OSError, ValueError) as exc:
                self._warn(f"cannot read {server!r} from {self.store_path.name}: {exc}")
                return None, None
        schemas = _schemas_by_tool(raw)
        with self._schemas_lock:
            self._recent_schemas[key] = schemas
            while len(self._recent_schemas) > RECENT_SCHEMA_ENTRIES:
                self._recent_schemas.popitem(last=False)
        return schemas.get(tool, (None, None))

    def forget_recent_schemas(self) -> None:
        """Drop the entries kept parsed for :meth:`tool_schemas` (read again when asked)."""
        with self._schemas_lock:
            self._recent_schemas.clear()

    def _state_and_entry(
        self, server: str, entry: ServerEntry, *, parse: bool
    ) -> tuple[EntryState, Any]:
        """The entry's state, judged from its summary unless it is parsed already; with
        ``parse``, a valid entry is parsed and judged again (the store may hold a newer one
        than the summary read at load)."""
        self._ensure_loaded()
        digest = config_hash(entry, environ=self._environ)
        with self._state_lock:
            if server in self._entries:
                raw = self._entries[server]
                return self._state_of(raw, digest), raw
            text = self._summaries.get(server)
            summary = None if text is None else self._parsed_summary(server, text)
        state = self._state_of(summary, digest)
        if state != "valid" or not parse:
            return state, None
        with self._state_lock:
            raw = self._view_entry(server)
        return self._state_of(raw, digest), raw

    def _state_of(self, raw: Any, digest: str, now_ms: int | None = None) -> EntryState:
        """``raw``'s state for the config hash ``digest`` (``now_ms``: the clock, when the
        caller judges many entries at one moment)."""
        if not isinstance(raw, Mapping):
            return "missing"
        if raw.get("configHash") != digest:
            return "config-changed"
        listed_under = _capabilities_of(raw)
        if (
            listed_under is not None
            and self._capabilities is not None
            and not set(listed_under) <= set(self._capabilities)
        ):
            return "capabilities-lacking"
        fresh = entry_is_fresh(
            raw.get("cachedAt"),
            raw.get("ttlMs"),
            now_ms=self._now_ms() if now_ms is None else now_ms,
            max_age_ms=self._max_age_ms,
        )
        return "valid" if fresh else "stale"

    def definition_changes(self, server: str) -> DefinitionChanges:
        """Unacknowledged tool-definition changes recorded for ``server`` (empty if none)."""
        self._ensure_loaded()
        with self._state_lock:
            if server not in self._entries and _summary_says_unchanged(self._summaries.get(server)):
                return DefinitionChanges()  # no entry parsed for nothing
            raw = self._view_entry(server)
        if not isinstance(raw, Mapping):
            return DefinitionChanges()
        return DefinitionChanges.from_json(raw.get("definitionChanges"))

    def changed_tools(self, server: str) -> tuple[str, ...]:
        """Names of the tools in :meth:`definition_changes`."""
        return self.definition_changes(server).names()

    # ------------------------------------------------------------------------ writing

    def store(self, server: str, entry: ServerEntry, metadata: ServerMetadata) -> DefinitionChanges:
        """Record what ``server`` offers now and return how its tools differ from before.

        Changes are computed against the previous entry when it was made for the same
        configuration (a changed configuration is the user's doing, not the server's) and are
        added to the entry's unacknowledged record. Returns only this call's changes.

        Raises:
            UsageError: ``metadata`` holds something JSON cannot represent (nothing is written).
        """
        if isinstance(metadata, CachedListing):
            raise UsageError(f"{server!r}: a cached listing lacks its tools' schemas; not stored")
        now_ms = self._now_ms()
        fresh: JsonObject = {
            "configHash": config_hash(entry, environ=self._environ),
            "tools": list(metadata.tools),
            "resources": list(metadata.resources),
            "prompts": list(metadata.prompts),
            "cachedAt": now_ms,
        }
        if metadata.instructions is not None:
            fresh["instructions"] = metadata.instructions
        if self._capabilities is not None:
            fresh["clientCapabilities"] = list(self._capabilities)
        try:
            # A JSON round trip both validates and normalises (tuples to lists) before diffing.
            fresh = json.loads(json.dumps(fresh, ensure_ascii=False, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"metadata of server {server!r} cannot be cached as JSON: {exc}"
            ) from exc

        def update(previous: Any) -> tuple[Any, DefinitionChanges]:
            pending = DefinitionChanges()
            changes = DefinitionChanges()
            if isinstance(previous, Mapping):
                pending = DefinitionChanges.from_json(previous.get("definitionChanges"))
                same_client = _capabilities_of(previous) == self._capabilities
                if previous.get("configHash") == fresh["configHash"] and same_client:
                    # A listing under other client capabilities may differ by design.
                    changes = _diff_tools(previous.get("tools"), fresh["tools"], now_ms=now_ms)
            record = pending.merged_with(changes) if changes else pending
            # A new dict each time: the update is applied to the view now and replayed
            # onto the store's row when it is written.
            stored = dict(fresh)
            if record:
                stored["definitionChanges"] = record.to_json()
            same_config = (
                isinstance(previous, Mapping) and previous.get("configHash") == fresh["configHash"]
            )
            observed = _observed_of(previous) if same_config else {}
            if observed:
                # Shapes seen in results outlive a relisting; a changed tool is seen anew.
                kept = {k: v for k, v in observed.items() if k not in changes.names()}
                if kept:
                    stored[OBSERVED_RESULTS_FIELD] = kept
            return stored, changes

        return self._modify(server, update, at_once=False)

    def observed_shapes(self, server: str) -> Mapping[str, str]:
        """The result shape each of ``server``'s tools (its own names) returned last, as
        :meth:`record_observed_shape` recorded it; empty when none was recorded."""
        self._ensure_loaded()
        with self._state_lock:
            raw = self._view_entry(server)
        return _observed_of(raw) if isinstance(raw, Mapping) else {}

    def record_observed_shape(self, server: str, tool: str, shape: str) -> None:
        """Record the shape (types and keys, never values) of a result of ``server``'s
        ``tool``, for the signature of a tool that declares no ``outputSchema``. Written with
        the stores around it, and only when it differs from the recorded one; an entry that
        does not exist yet (the server was never listed) gets nothing."""
        if self.observed_shapes(server).get(tool) == shape or len(shape) > _MAX_OBSERVED_CHARS:
            return

        def update(raw: Any) -> tuple[Any, None]:
            if not isinstance(raw, dict):
                return raw, None
            observed = dict(_observed_of(raw))
            observed[tool] = shape
            return {**raw, OBSERVED_RESULTS_FIELD: observed}, None

        self._modify(server, update, at_once=False)

    def acknowledge_changes(self, server: str, tools: Collection[str] | None = None) -> None:
        """Forget ``server``'s recorded definition changes (the user has seen them): all of
        them, or those of ``tools`` (the server's own tool names)."""

        def update(raw: Any) -> tuple[Any, None]:
            if not isinstance(raw, dict):
                return raw, None
            # Replaced, not edited: the view and the written row may share the dict.
            raw = dict(raw)
            if tools is None:
                raw.pop("definitionChanges", None)
            else:
                left = DefinitionChanges.from_json(raw.get("definitionChanges")).without(tools)
                if left:
                    raw["definitionChanges"] = left.to_json()
                else:
                    raw.pop("definitionChanges", None)
            return raw, None

        self._modify(server, update, at_once=True)

    def remove(self, server: str) -> None:
        """Drop ``server``'s entry (a no-op when there is none)."""

        def update(raw: Any) -> tuple[Any, None]:
            return _ABSENT, None

        self._modify(server, update, at_once=True)

    def flush(self) -> None:
        """Write the stores still pending to the store (durably) and bring ``mcp-cache.json``
        up to date, and wait for both (see "Concurrency" above).

        Failures are warnings, as for every write: the view keeps the stores.
        """
        self._write_pending(export=True)

    # ------------------------------------------------------------------------ internals

    def _write_pending(self, *, export: bool) -> None:
        """Write the pending stores; with ``export``, bring the file up to date now too
        (otherwise a large file waits for its coalesced background export)."""
        with self._write_lock:
            with self._state_lock:
                updates, self._pending = self._pending, []
                timer, self._write_timer = self._write_timer, None
            if timer is not None:
                timer.cancel()
            if updates:
                self._write(updates)
            if export and self._export_due and self._store is not None:
                with self._state_lock:
                    export_timer, self._export_timer = self._export_timer, None
                if export_timer is not None:
                    export_timer.cancel()
                self._export(self._store)

    @property
    def _lock(self) -> filelock.FileLock:
        # Made on first use: reading the view (every command) needs no lock, nor filelock.
        if self._file_lock is None:
            import filelock

            self._file_lock = filelock.FileLock(
                f"{self.path}.lock", timeout=LOCK_TIMEOUT_S, poll_interval=LOCK_POLL_INTERVAL_S
            )
        return self._file_lock

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    def now_ms(self) -> int:
        """This cache's clock, in ms since the epoch (what freshness is judged by)."""
        return self._now_ms()

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _warn(self, message: str) -> None:
        self._warnings.append(f"metadata cache: {message}")

    def _json_exists(self) -> bool:
        return self._json_identity() is not None

    def _json_identity(self) -> str | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"

    # ---------------------------------------------------------------- the view

    def _parsed_summary(self, server: str, text: str) -> Any:
        """``server``'s summary ``text``, parsed; made again from its entry when the text is
        no JSON (a damaged row). Call with the state lock held."""
        summary = _parse(text)
        return self._summary_from_entry(server) if summary is _ABSENT else summary

    def _summary_from_entry(self, server: str) -> Any:
        """The summary of ``server``'s entry, for one whose stored summary is damaged; None
        when the entry cannot be read either (its server is then listed again). Call with
        the state lock held."""
        raw = self._view_entry(server)
        return None if raw is _ABSENT else json.loads(summary_of(raw)[0])

    def _view_entry(self, server: str) -> Any:
        """``server``'s entry in the view, parsed from the store on first use. Call with the
        state lock held."""
        if server in self._entries:
            return self._entries[server]
        if server not in self._summaries or self._store is None:
            return _ABSENT
        try:
            text = self._store.entry_text(server)
            raw = _ABSENT if text is None else json.loads(text)
        except (StoreLockedError, StoreUnreadableError, OSError, ValueError) as exc:
            self._warn(f"cannot read {server!r} from {self.store_path.name}: {exc}")
            return _ABSENT
        self._entries[server] = raw
        return raw

    @property
    def loaded_state(self) -> str | None:
        """A digest of what the last :meth:`load` read of the store (every server's summary,
        which carries its entry's digest and generation, and the ``mcp-cache.json`` it
        imported last), while the view is still that: two loads with the same digest read
        the same entries. None for no store, a store in memory or a team's shared state, or
        once the view changed (a store by this process, another process's store read)."""
        with self._state_lock:
            state = self._loaded_state
            if isinstance(state, _LoadedRows):
                state = self._loaded_state = state.digest(self._summaries)
            return state

    def fresh_until_ms(self, servers: Collection[str]) -> float:
        """When the first of ``servers``' entries stops being fresh (see
        :func:`entry_fresh_until_ms`): ``-inf`` when one has no entry or summary."""
        until = math.inf
        for summary in _parsed_texts(self._summary_texts(servers)):
            if not isinstance(summary, Mapping):
                return -math.inf
            until = min(
                until,
                entry_fresh_until_ms(
                    summary.get("cachedAt"), summary.get("ttlMs"), max_age_ms=self._max_age_ms
                ),
            )
        return until

    def _set_view(self, server: str, raw: Any) -> None:
        self._loaded_state = None
        if raw is _ABSENT:
            self._entries.pop(server, None)
            self._summaries.pop(server, None)
        else:
            if server not in self._summaries:
                self._unsettled.add(server)
            self._entries[server] = raw
            self._summaries[server] = summary_of(raw)[0]

    def _catch_up(self, store: CatalogStore, own: Mapping[str, Any], own_gen: int) -> None:
        """Take what other processes stored since the view was read (the rows newer than the
        generation seen: a handful, not the catalog). Call with the state lock held."""
        self._loaded_state = None
        gen, removals, rows = store.summaries(since_gen=self._seen_gen)
        waiting = {server for server, _update in self._pending}
        if removals != self._seen_removals:
            # Something was deleted: only the full list of names tells what.
            _gen, removals, every = store.summaries()
            present = {row.name for row in every}
            for name in [n for n in self._summaries if n not in present and n not in waiting]:
                self._summaries.pop(name, None)
                self._entries.pop(name, None)
        for row in rows:
            if row.name in self._unsettled:
                # First stored by this process: its place is the store's (first-stored order).
                self._unsettled.discard(row.name)
                summary = self._summaries.pop(row.name, row.summary)
                self._summaries[row.name] = summary
            if row.name in waiting or (row.name in own and row.gen == own_gen):
                continue
            self._summaries[row.name] = row.summary
            self._entries.pop(row.name, None)  # parsed again when asked for
        self._seen_gen, self._seen_removals = gen, removals

    # ---------------------------------------------------------------- the store

    def _open_store(self) -> CatalogStore:
        """The store, opened (and created) on first use; a private memory store when the file
        cannot be used, so the cache still works through ``mcp-cache.json``."""
        if self._store is not None:
            return self._store
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:
            # Nothing can be written there: the file's write reports it (one warning).
            self._store = CatalogStore(None)
            return self._store
        problem = _not_a_private_store(self.store_path)
        if problem is not None:
            self._store = self._memory_store(problem)
            return self._store
        store = CatalogStore(self.store_path)
        try:
            store.count()  # opens it: a file that is no database says so here
        except StoreUnreadableError as exc:
            store.close()
            self._set_aside_store(str(exc))
            store = CatalogStore(self.store_path)
            try:
                store.count()
            except (StoreUnreadableError, StoreLockedError, OSError) as again:
                store = self._memory_store(f"{again}")
        except (StoreLockedError, OSError) as exc:
            store = self._memory_store(str(exc))
        self._store = store
        return store

    def _memory_store(self, reason: str) -> CatalogStore:
        self._warn(
            f"cannot use {self.store_path.name} ({reason}); keeping entries in memory and "
            f"in {self.path.name}"
        )
        return CatalogStore(None)

    def _set_aside_store(self, reason: str) -> None:
        target = self._aside_name(self.store_path)
        try:
            os.replace(self.store_path, target)
            for journal in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.replace(f"{self.store_path}{journal}", f"{target}{journal}")
        except OSError as exc:
            self._warn(f"{self.store_path} is unreadable ({reason}) and could not be moved: {exc}")
            return
        self._warn(
            f"{self.store_path} was unreadable ({reason}); moved to {target.name}, "
            f"rebuilding from {self.path.name}"
        )

    def _modify(self, server: str, update: _Update[_T], *, at_once: bool) -> _T:
        """Apply ``update`` to the view now and write it to the store: ``at_once``, or with
        the stores around it (see "Concurrency" above)."""
        self._ensure_loaded()
        with self._state_lock:
            previous = self._view_entry(server)
            new, result = update(previous)
            self._set_view(server, new)
            shared = shared_state.active()
            if shared is not None and new is not previous:
                # This server's record only, as the store writes this server's row only.
                if new is _ABSENT:
                    shared.delete_digested(_SHARED_TABLE, server)
                else:
                    shared.put_digested(_SHARED_TABLE, server, _entry_text(new))
            self._pending.append((server, update))
            if at_once or self._write_timer is not None:
                write_now = at_once
            else:
                wait_s = self._last_write_end + self._write_interval_s - time.monotonic()
                # An event loop's thread never writes: a commit waits for the disk, and would
                # hold up every request it serves; a background thread writes even after a
                # quiet spell.
                write_now = wait_s <= 0 and not _on_event_loop()
                if not write_now:
                    self._write_timer = threading.Timer(
                        max(0.0, wait_s), self._write_pending, kwargs={"export": False}
                    )
                    self._write_timer.daemon = True
                    self._write_timer.start()
                    _CACHES_WITH_PENDING_WRITES.add(self)
        if write_now:
            self._write_pending(export=False)
        return result

    def _write(self, updates: list[tuple[str, _Update[Any]]]) -> None:
        """Replay ``updates`` onto the store's rows in one transaction, catch the view up and
        export the file (or schedule it). Call with the write lock held."""
        started = time.monotonic()
        try:
            store = self._open_store()
            try:
                written, gen = self._commit(store, updates)
            except StoreUnreadableError as exc:
                # Damaged while open: set aside, rebuilt from the file, and written again.
                store.close()
                self._store = None
                self._set_aside_store(str(exc))
                store = self._open_store()
                self._import_if_newer(store)
                written, gen = self._commit(store, updates)
            with self._state_lock:
                waiting = {server for server, _update in self._pending}
                for server, raw in written.items():
                    if server not in waiting:
                        self._set_view(server, raw)
                self._catch_up(store, written, gen)
        except StoreLockedError:
            self._warn(
                f"{self.store_path} stayed locked for {_store.BUSY_TIMEOUT_S:g} s; not saved"
            )
            return
        except (StoreUnreadableError, OSError) as exc:
            self._warn(f"cannot write {self.store_path}: {exc}; not saved")
            return
        except ValueError as exc:  # text JSON cannot carry as UTF-8 (a lone surrogate)
            self._warn(f"cannot write {self.store_path}: {exc}; not saved")
            return
        finally:
            self._last_write_end = time.monotonic()
            self._write_interval_s = max(
                MIN_WRITE_INTERVAL_S, WRITE_COST_FACTOR * (self._last_write_end - started)
            )
        self._export_due = True
        if not self._last_export_bytes:
            # A process's first write: the size the last export of any process recorded.
            with contextlib.suppress(StoreLockedError, StoreUnreadableError, OSError, ValueError):
                self._last_export_bytes = int(store.meta("json_bytes") or 0)
        if self._last_export_bytes <= SYNC_EXPORT_BYTES:
            self._export(store)
            # A write and its export together: stores closer than four times that coalesce.
            self._last_write_end = time.monotonic()
            self._write_interval_s = max(
                MIN_WRITE_INTERVAL_S, WRITE_COST_FACTOR * (self._last_write_end - started)
            )
        else:
            self._schedule_export()

    def _commit(
        self, store: CatalogStore, updates: list[tuple[str, _Update[Any]]]
    ) -> tuple[dict[str, Any], int]:
        """Each updated server's new entry as committed, and the commit's generation."""
        with store.transaction() as txn:
            before: dict[str, Any] = {}
            written: dict[str, Any] = {}
            for server, update in updates:
                if server not in written:
                    text = txn.entry_text(server)
                    before[server] = written[server] = _ABSENT if text is None else _parse(text)
                written[server] = update(written[server])[0]
            for server, raw in written.items():
                if raw is before[server]:
                    continue  # nothing to change (acknowledging a server with no entry)
                if raw is _ABSENT:
                    txn.delete(server)
                else:
                    text = _entry_text(raw)
                    summary, tools = summary_of(raw, text)
                    key = redact(json.dumps(server, ensure_ascii=False))
                    txn.put(server, key, text, summary, tools, _listing_of(raw))
            return written, txn.gen

    # ---------------------------------------------------------------- mcp-cache.json

    def _schedule_export(self) -> None:
        with self._state_lock:
            if self._export_timer is not None:
                return
            delay_s = max(MIN_EXPORT_INTERVAL_S, WRITE_COST_FACTOR * self._last_export_s)
            self._export_timer = threading.Timer(delay_s, self._export_in_background)
            self._export_timer.daemon = True
            self._export_timer.start()
            _CACHES_WITH_PENDING_WRITES.add(self)

    def _export_in_background(self) -> None:
        with self._write_lock:
            with self._state_lock:
                self._export_timer = None
            if self._export_due and self._store is not None:
                self._export(self._store)

    def _import_if_newer(self, store: CatalogStore) -> Literal["imported", "set-aside", "same"]:
        """Merge ``mcp-cache.json`` into the store when a program other than this cache wrote
        it since the store last wrote or read it. Call with the write lock held."""
        try:
            identity = self._json_identity()
            if identity is None or store.meta("json_identity") == identity:
                return "same"
            with self._lock:
                return self._import_locked(store)
        except TimeoutError:  # filelock.Timeout
            self._warn(f"{self.path} stayed locked for {LOCK_TIMEOUT_S:.0f} s; not imported")
        except (StoreLockedError, StoreUnreadableError, OSError) as exc:
            self._warn(f"cannot import {self.path}: {exc}")
        return "same"

    def _import_locked(self, store: CatalogStore) -> Literal["imported", "set-aside", "same"]:
        """See :meth:`_import_if_newer`; call with the file lock held."""
        identity = self._json_identity()
        if identity is None or store.meta("json_identity") == identity:
            return "same"
        try:
            servers = self._read()
        except FileNotFoundError:
            return "same"
        except _Unreadable as exc:
            self._set_aside(str(exc))
            count = store.count()
            if count:
                # The store still has every entry: the file is rebuilt from it at once.
                self._warn(f"restored {count} entries from {self.store_path.name}")
                self._export_due = True
                self._export_locked(store)
            return "set-aside"
        with store.transaction() as txn:
            for name, raw in servers.items():
                text = txn.entry_text(name)
                if text is not None and not _is_newer(raw, _parse(text)):
                    continue
                text = _entry_text(raw)
                summary, tools = summary_of(raw, text)
                key = redact(json.dumps(name, ensure_ascii=False))
                txn.put(name, key, text, summary, tools, _listing_of(raw))
            txn.set_meta("json_identity", identity)
            txn.set_meta("json_gen", "")  # the store may hold more: the next export writes it
        return "imported"

    def _export(self, store: CatalogStore) -> None:
        """Write ``mcp-cache.json`` from the store under the file lock. Call with the write
        lock held; failures are warnings."""
        started = time.monotonic()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._lock:
                self._export_locked(store)
        except TimeoutError:  # filelock.Timeout
            self._warn(f"{self.path} stayed locked for {LOCK_TIMEOUT_S:.0f} s; not saved")
        except (StoreLockedError, StoreUnreadableError) as exc:
            self._warn(f"cannot write {self.path}: {exc}; not saved")
        except OSError as exc:
            self._warn(f"cannot write {self.path}: {exc.strerror or exc}; not saved")
        finally:
            self._export_due = False
            self._last_export_s = time.monotonic() - started

    def _export_locked(self, store: CatalogStore) -> None:
        # Another program's file is merged first, so that nothing it added is lost.
        self._import_locked(store)
        gen, size = store.export_size()
        identity = self._json_identity()
        if (
            identity is not None
            and store.meta("json_identity") == identity
            and store.meta("json_gen") == str(gen)
        ):
            return  # another process exported this generation already
        recorded_bytes = store.meta("json_bytes")
        self._last_export_bytes = size
        if size > JSON_EXPORT_LIMIT_BYTES:
            if recorded_bytes != str(size):
                with store.transaction() as txn:
                    txn.set_meta("json_bytes", str(size))
            if not self._export_over_limit_warned:
                self._export_over_limit_warned = True
                self._warn(
                    f"{self.path.name} not written: the catalog takes {size:,} bytes, over the "
                    f"{JSON_EXPORT_LIMIT_BYTES:,}-byte limit ({self.store_path.name} has it all)"
                )
            return
        self._remove_orphaned_temp_files()
        with store.export_rows() as (gen, batches):
            write_atomically_in_chunks(
                self.path, _export_chunks(batches), temp_prefix=self._temp_prefix()
            )
        identity = self._json_identity()
        with store.transaction() as txn:
            txn.set_meta("json_identity", identity or "")
            txn.set_meta("json_gen", str(gen))
            txn.set_meta("json_bytes", str(size))

    def _read(self) -> dict[str, Any]:
        """The ``servers`` map of the file.

        Raises:
            FileNotFoundError: there is no file.
            _Unreadable: the file is not a version-1 cache.
            OSError: the file cannot be read.
        """
        raw = self.path.read_bytes()
        try:
            data = json.loads(raw)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise _Unreadable("not valid JSON") from exc
        if not isinstance(data, dict):
            raise _Unreadable("not a JSON object")
        version = data.get("version")
        if version != CACHE_VERSION or isinstance(version, bool):
            raise _Unreadable(f"format version {version!r}, expected {CACHE_VERSION}")
        servers = data.get("servers")
        if not isinstance(servers, dict):
            raise _Unreadable('no "servers" object')
        return servers

    def _aside_name(self, path: Path) -> Path:
        """Where an unreadable ``path`` is moved: ``<name>.corrupt-<UTC time>``, numbered when
        another was set aside in the same second."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self._clock()))
        target = path.with_name(f"{path.name}.corrupt-{stamp}")
        suffix = 1
        while target.exists():
            target = path.with_name(f"{path.name}.corrupt-{stamp}-{suffix}")
            suffix += 1
        return target

    def _set_aside(self, reason: str) -> None:
        target = self._aside_name(self.path)
        try:
            os.replace(self.path, target)
        except OSError as exc:
            self._warn(f"{self.path} is unreadable ({reason}) and could not be moved: {exc}")
            return
        self._warn(f"{self.path} was unreadable ({reason}); moved to {target.name}, rebuilding")

    def _temp_prefix(self) -> str:
        return f".{self.path.name}."

    def _remove_orphaned_temp_files(self) -> None:
        # Every writer holds the lock while its temporary file exists, so with the lock held
        # any temporary file left is from a process that died mid-write.
        for orphan in self.path.parent.glob(f"{self._temp_prefix()}*.tmp"):
            with contextlib.suppress(OSError):
                orphan.unlink()


def _not_a_private_store(path: Path) -> str | None:
    """Create ``path`` private (0600; SQLite gives its -wal and -shm the same mode) when it
    is missing; say why it cannot be the store when it is a link, a pipe or a device (SQLite
    would write through a link, and block on a pipe), else None."""
    flags = os.O_RDONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        return "a symbolic link" if path.is_symlink() else exc.strerror or str(exc)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "not a regular file"
    finally:
        os.close(fd)
    return None


def _export_chunks(batches: Iterator[list[tuple[str, str]]]) -> Iterator[bytes]:
    """``mcp-cache.json``'s bytes from the store's batches of ``(key, entry)`` texts, a piece
    per batch. Encoding each batch on its own bounds how long the interpreter lock is held:
    joining and encoding the whole file at once held it for 60 ms at 23,750 tools (16 MB),
    the longest stall a relisting caused; a batch is well under a millisecond, the lock is
    given up between servers and while each piece is written. One comprehension per batch,
    no Python call per server: the work is the file's, not a server's."""
    yield f'{{"version":{CACHE_VERSION},"servers":{{'.encode()
    separator = b""
    for batch in batches:
        yield separator + b",".join([f"{key}:{entry}".encode() for key, entry in batch])
        separator = b","
    yield b"}}"


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _ABSENT


def _summary_says_unchanged(text: str | None) -> bool:
    """Whether a summary records that its entry has no definition changes (one written
    before the summary said so does not)."""
    if text is None or '"changes": false' not in text:
        return False
    try:
        summary = json.loads(text)
    except ValueError:
        return False
    return isinstance(summary, dict) and summary.get("changes") is False
