"""How a server's tools and resources become the names a model calls.

A model-facing name is ``<prefix><separator><tool>``. The prefix comes from the server name
(mode ``server``), the server name without a trailing ``mcp`` (mode ``short``), ``mcp__`` and
the server name (mode ``mcp``) or nothing (mode ``none``); the mode is set globally
(``settings.toolPrefix``) or per server (``toolPrefix``).
Every name is made acceptable to the common LLM tool APIs (``^[A-Za-z0-9_-]{1,64}$``).
With ``settings.toolSeparator: "__"`` (the ToolSearch design's spelling) hyphens in the prefix
become ``_`` as well: server ``jetbrains-index`` gives ``jetbrains_index__find``.

Names built here are unique per tool identity but not yet across the catalog: two servers may
produce the same name. :class:`~pi_mcp_adapter.catalog.Catalog` settles that and reports it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.config._models import ToolOverride, ToolPrefixMode

from ._filters import ToolFilter, keywords_for
from ._metadata import (
    SCHEMA_DIGEST_KEY,
    CachedListing,
    DeferredSchemas,
    JsonObject,
    ServerMetadata,
    ToolInfo,
    stored_tool_info,
)

__all__ = [
    "MAX_TOOL_NAME_LENGTH",
    "build_tool_infos",
    "format_tool_name",
    "resource_tool_name",
    "separated_prefix",
    "server_prefix",
]

MAX_TOOL_NAME_LENGTH = 64
"""OpenAI, Anthropic and Bedrock all reject tool names longer than this."""

_HASH_SUFFIX_HEX = 8
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
_SHORT_SUFFIX = re.compile(r"[-_]?mcp$", re.IGNORECASE)
_NOT_ALNUM_RUN = re.compile(r"[^A-Za-z0-9]+")


def _escape_server_name(server: str) -> str:
    # Escaping (rather than replacing) keeps two server names that differ only in punctuation
    # apart: "a.b" and "a_b" must not share a prefix. The `_<hex>_` form matches the reference.
    # One substitution over the name, not a match per character: a catalog of 20,000
    # servers spent a fifth of its build here.
    return _INVALID_NAME_CHARS.sub(_escaped_char, server)


def _escaped_char(match: re.Match[str]) -> str:
    return f"_{ord(match.group()):x}_"


def server_prefix(server: str, mode: ToolPrefixMode) -> str:
    """The prefix a server's tools carry under ``mode`` (empty for ``none``)."""
    if mode == "none":
        return ""
    if mode == "short":
        return _escape_server_name(_SHORT_SUFFIX.sub("", server)) or "mcp"
    if mode == "mcp":
        # Claude Code's spelling (mcp__<server>__<tool> there; one "_" before the tool here,
        # as the TypeScript adapter writes it).
        return f"mcp__{_escape_server_name(server)}"
    return _escape_server_name(server)


def _sanitize_tool_part(name: str) -> str:
    return _INVALID_NAME_CHARS.sub("_", name)


def _fit_length(name: str, identity: str) -> str:
    if len(name) <= MAX_TOOL_NAME_LENGTH:
        return name
    # The suffix hashes the tool's identity, not the cut text, so two long names sharing their
    # first 55 characters still get different, stable names.
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:_HASH_SUFFIX_HEX]
    return f"{name[: MAX_TOOL_NAME_LENGTH - _HASH_SUFFIX_HEX - 1]}_{digest}"


def format_tool_name(
    tool_name: str, server: str, *, mode: ToolPrefixMode = "server", separator: str = "_"
) -> str:
    """The model-facing name of ``tool_name`` on ``server``, before catalog-wide deduplication.

    Characters outside ``[A-Za-z0-9_-]`` become ``_``; a tool whose name already starts with
    its prefix and ``_`` keeps that name instead of being prefixed twice; names longer than 64
    characters are cut and end in a hash of the server and tool name.
    """
    return _qualify(
        tool_name, server, separated_prefix(server_prefix(server, mode), separator), separator
    )


def carries_prefix_of(
    name: str, server: str, *, mode: ToolPrefixMode = "server", separator: str = "_"
) -> bool:
    """Whether ``name`` is written as ``server``'s tools are (its prefix and separator): a
    tool of ``git`` is ``git_x``, while ``github_x`` is not. Never under ``none``."""
    prefix = separated_prefix(server_prefix(server, mode), separator)
    return bool(prefix) and name.startswith(f"{prefix}{separator}")


def separated_prefix(prefix: str, separator: str) -> str:
    """``prefix`` as written before ``separator``: with ``__``, hyphens become ``_``."""
    return prefix.replace("-", "_") if separator == "__" else prefix


def _qualify(tool_name: str, server: str, prefix: str, separator: str) -> str:
    tool_part = _sanitize_tool_part(tool_name) or "_"
    if not prefix or (tool_part.startswith(f"{prefix}_") and len(tool_part) > len(prefix) + 1):
        full = tool_part
    else:
        full = f"{prefix}{separator}{tool_part}"
    return _fit_length(full, f"{server}\x00{tool_name}")


def resource_tool_name(resource_name: str) -> str:
    """The unprefixed tool name of a resource: ``read_`` plus its lower-cased, underscored name."""
    core = _NOT_ALNUM_RUN.sub("_", resource_name).strip("_").lower()
    if not core or core[0].isdigit():
        core = f"resource_{core}" if core else "resource"
    return f"read_{core}"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object_or_none(value: Any) -> Mapping[str, Any] | None:
    # The plain cases first: isinstance against the Mapping ABC is slow on big catalogs, and
    # most tools lack most optional fields (None).
    if value is None or type(value) is dict:
        return value
    return value if isinstance(value, Mapping) else None


def _tool_info(server: str, tool: JsonObject, prefix: str, separator: str) -> ToolInfo:
    original = tool["name"]
    kwargs: dict[str, Any] = {}
    input_schema = _object_or_none(tool.get("inputSchema"))
    if input_schema is not None:
        kwargs["input_schema"] = input_schema
    return ToolInfo(
        name=_qualify(original, server, prefix, separator),
        original_name=original,
        server=server,
        # A title is the best short text a server gives when it omits the description.
        description=_text(tool.get("description")) or _text(tool.get("title")),
        output_schema=_object_or_none(tool.get("outputSchema")),
        annotations=_object_or_none(tool.get("annotations")),
        meta=_object_or_none(tool.get("_meta")),
        **kwargs,
    )


def _stored_tool_infos(
    server: str, tools: Sequence[Any], prefix: str, separator: str, schemas: DeferredSchemas
) -> list[ToolInfo]:
    """:func:`_tool_info` of each of a cached listing's tools (their schemas are read when
    asked for). A large catalog's build runs this once per server for every tool, so the
    checks of :func:`build_tool_infos` are written out here; the name is :func:`_qualify`'s."""
    infos: list[ToolInfo] = []
    append = infos.append
    for tool in tools:
        if type(tool) is not dict and not isinstance(tool, Mapping):
            continue
        original = tool.get("name")
        if not isinstance(original, str) or not original:
            continue
        digest = tool.get(SCHEMA_DIGEST_KEY)
        append(
            stored_tool_info(
                _qualify(original, server, prefix, separator),
                original,
                server,
                _text(tool.get("description")) or _text(tool.get("title")),
                _object_or_none(tool.get("annotations")),
                _object_or_none(tool.get("_meta")),
                schemas,
                digest if isinstance(digest, str) else None,
            )
        )
    return infos


def _resource_info(server: str, resource: JsonObject, prefix: str, separator: str) -> ToolInfo:
    uri: str = resource["uri"]
    base = resource_tool_name(resource["name"])
    detail = _text(resource.get("description")).strip()
    description = f"Read resource: {uri}" + (f" - {detail}" if detail else "")
    return ToolInfo(
        name=_qualify(base, server, prefix, separator),
        original_name=base,
        server=server,
        description=description,
        resource_uri=uri,
    )


def _named(item: Any, *keys: str) -> bool:
    return isinstance(item, dict) and all(isinstance(item.get(k), str) and item[k] for k in keys)


def named_counts(entry: Mapping[str, Any]) -> list[int]:
    """How many of a cached entry's tools and resources :func:`build_tool_infos` would name
    (the rest it skips), without building anything: kept in the store's summary."""
    tools, resources = entry.get("tools"), entry.get("resources")
    return [
        sum(1 for t in tools if _named(t, "name")) if isinstance(tools, list) else 0,
        sum(1 for r in resources if _named(r, "uri", "name")) if isinstance(resources, list) else 0,
    ]


def shown_tool_count(named: Any, entry: ServerEntry) -> int | None:
    """How many tools :func:`build_tool_infos` gives a server whose listing has ``named``
    (:func:`named_counts`) under ``entry``, when the counts alone decide it; ``None`` when a
    filter or an override decides tool by tool (or ``named`` is not such a count)."""
    if not tools_counted_alone(entry):
        return None
    return counted_tool_count(named, expose_resources=entry.expose_resources)


def tools_counted_alone(entry: ServerEntry) -> bool:
    """Whether the counts of a listing (:func:`named_counts`) alone give how many tools
    ``entry`` shows: no filter or override decides tool by tool."""
    return not entry.tool_overrides and ToolFilter.for_entry(entry).is_empty


def counted_tool_count(named: Any, *, expose_resources: bool) -> int | None:
    """How many tools a listing with the counts ``named`` (:func:`named_counts`) shows under
    an entry of which :func:`tools_counted_alone` holds; ``None`` when ``named`` is not such
    a count."""
    # Each check by type, not isinstance: this runs for every server of a status.
    if type(named) is not list or len(named) != 2:
        return None
    tools, resources = named
    if type(tools) is not int or type(resources) is not int or tools < 0 or resources < 0:
        return None
    return tools + resources if expose_resources else tools


def build_tool_infos(
    server: str,
    metadata: ServerMetadata,
    *,
    entry: ServerEntry | None,
    settings: Settings,
) -> list[ToolInfo]:
    """Every tool (and, unless ``exposeResources`` is false, every resource) ``server`` offers.

    Entries without a usable ``name`` (or resources without ``uri``) are skipped, never fatal.
    ``includeTools``/``excludeTools`` of ``entry`` are applied. Names are prefixed and sanitised
    but not deduplicated across servers; build a :class:`Catalog` for that.
    """
    mode: ToolPrefixMode = (entry.tool_prefix if entry else None) or settings.tool_prefix
    separator = settings.tool_separator
    prefix = separated_prefix(server_prefix(server, mode), separator)
    schemas = metadata.schemas if isinstance(metadata, CachedListing) else None
    if schemas is not None:
        infos = _stored_tool_infos(server, metadata.tools, prefix, separator, schemas)
    else:
        infos = []
        for tool in metadata.tools:
            if _object_or_none(tool) is not None and _text(tool.get("name")):
                infos.append(_tool_info(server, tool, prefix, separator))
    if entry is None or entry.expose_resources:
        for resource in metadata.resources:
            if (
                _object_or_none(resource) is not None
                and _text(resource.get("uri"))
                and _text(resource.get("name"))
            ):
                infos.append(_resource_info(server, resource, prefix, separator))
    keywords = entry.search_keywords if entry is not None else None
    if keywords:
        infos = [
            replace(info, keywords=keywords_for(keywords, info.original_name, info.name))
            for info in infos
        ]
    overrides = entry.tool_overrides if entry is not None else None
    if overrides:
        infos = [
            overridden
            for info in infos
            if (overridden := _overridden(info, overrides, prefix, separator)) is not None
        ]
    tool_filter = ToolFilter.for_entry(entry)
    if tool_filter.is_empty:
        return infos
    return [info for info in infos if tool_filter.allows(info.original_name, info.name)]


def _overridden(
    info: ToolInfo, overrides: Mapping[str, ToolOverride], prefix: str, separator: str
) -> ToolInfo | None:
    """``info`` as ``toolOverrides`` presents it (``None``: hidden). Only the model-facing
    name, title and description change: ``original_name`` stays the server's, which calls,
    approval lists and definition pinning use, and the metadata cache keeps the server's
    words (overrides apply when the catalog is built, every time)."""
    override = overrides.get(info.original_name)
    if override is None or info.is_resource:
        return info
    if override.hidden:
        return None
    changes: dict[str, Any] = {}
    if override.name:
        changes["name"] = _qualify(override.name, info.server, prefix, separator)
    if override.description is not None:
        changes["description"] = override.description
    if override.title is not None:
        changes["annotations"] = {**(info.annotations or {}), "title": override.title}
    return replace(info, **changes) if changes else info
