"""What servers offer, known without talking to them.

- ``_metadata``  :class:`ToolInfo` (one tool as the model sees it) and :class:`ServerMetadata`
                 (a server's tools, resources, prompts and instructions in wire shape).
- ``_naming``    prefixes, separators, sanitising, resources as tools: :func:`build_tool_infos`.
- ``_filters``   ``includeTools`` / ``excludeTools``.
- ``_catalog``   :class:`Catalog`: every server's tools under unique names, and lookup.
- ``_prompts``   :class:`PromptCatalog`: upstream prompts named and resolved like tools.
- ``_cache``     :class:`MetadataCache`: the process-safe metadata cache (its store and the
                 reference's ``mcp-cache.json``) and tool-definition change records (with
                 the trusted baseline).
- ``_store``     ``mcp-cache.db``: one SQLite row per server, WAL, read a server at a time.
- ``_definition_diff``  :func:`diff_definitions`: how a changed tool differs, in short.
- ``_schema``    :func:`render_parameters` and :func:`render_shape` for input schemas.
- ``_signatures``  :func:`render_call_line`: a tool as ``name(params) -> result``.
- ``_search``    :class:`SearchIndex` for ``mcp({search})`` and ``ToolSearch``; its parts:
                 ``_search_text`` (words, values, steps), ``_search_rankings`` (lexical,
                 hybrid, BM25), ``_search_semantic`` (the offline model and the tool-vector
                 cache ``mcp-search-vectors.npz``), ``_eval`` (labelled-set measurement).

See the package docstring of :mod:`pi_mcp_adapter` for how this layer fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._cache import (
    CACHE_FILE_NAME,
    DefinitionChanges,
    EntryState,
    LoadResult,
    MetadataCache,
    ToolChange,
    config_hash,
)
from ._catalog import Catalog, NameCollision
from ._definition_diff import ToolDefinitionDiff, diff_definitions
from ._filters import ToolFilter
from ._metadata import CachedListing, ServerMetadata, ToolInfo
from ._naming import (
    build_tool_infos,
    carries_prefix_of,
    counted_tool_count,
    format_tool_name,
    resource_tool_name,
    server_prefix,
    shown_tool_count,
    tools_counted_alone,
)
from ._prompts import PromptArgument, PromptCatalog, PromptInfo
from ._schema import render_parameters, render_shape
from ._signatures import (
    observed_result_shape,
    one_line,
    render_call_line,
    render_result_type,
    render_signature,
    shape_is_observed,
    value_shape,
)

if TYPE_CHECKING:
    from ._eval import (
        EvalReport,
        evaluate,
        gold_called_in_history,
        load_labelled_set,
        split_history,
        write_rankings,
    )
    from ._search_semantic import preload_default_embedder


def __getattr__(name: str) -> Any:
    # Loaded when asked for: measuring search is a command of its own.
    if name in (
        "EvalReport",
        "evaluate",
        "gold_called_in_history",
        "load_labelled_set",
        "split_history",
        "write_rankings",
    ):
        from . import _eval

        return getattr(_eval, name)
    if name == "preload_default_embedder":
        # The search's model and its libraries load with the first search, not with the catalog.
        from . import _search_semantic

        return _search_semantic.preload_default_embedder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CACHE_FILE_NAME",
    "CachedListing",
    "Catalog",
    "DefinitionChanges",
    "EntryState",
    "EvalReport",
    "LoadResult",
    "MetadataCache",
    "NameCollision",
    "PromptArgument",
    "PromptCatalog",
    "PromptInfo",
    "ServerMetadata",
    "ToolChange",
    "ToolDefinitionDiff",
    "ToolFilter",
    "ToolInfo",
    "build_tool_infos",
    "carries_prefix_of",
    "config_hash",
    "counted_tool_count",
    "diff_definitions",
    "evaluate",
    "format_tool_name",
    "gold_called_in_history",
    "load_labelled_set",
    "observed_result_shape",
    "one_line",
    "preload_default_embedder",
    "render_call_line",
    "render_parameters",
    "render_result_type",
    "render_shape",
    "render_signature",
    "resource_tool_name",
    "server_prefix",
    "shape_is_observed",
    "shown_tool_count",
    "split_history",
    "tools_counted_alone",
    "value_shape",
    "write_rankings",
]
