"""The ``ToolSearch`` surface: every tool registered with its own schema, but inactive.

The model sees one ``ToolSearch`` tool whose description lists what can be loaded (each server
with its tool count, then one line per tool, within a fixed token budget, and counts for the
rest). Calling it with keywords, or
``select:name1,name2`` for exact names, activates the matches through the host; they can be
called directly from the next turn.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.config import ServerEntry
from pi_mcp_adapter.engine import Host, McpAdapter, ToolDefinition, ToolExecute, ToolResult

from ._direct import DIRECT_TOOLS_ENV, tool_definition
from ._guard import guard_execute
from ._render import WEAK_MATCH_HEADER, truncate_words
from ._tokens import count_tokens

TOOL_SEARCH_NAME = "ToolSearch"
SELECT_PREFIX = "select:"

TOOL_SEARCH_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": 'Keywords, or "select:name1,name2" to load tools by exact name',
        }
    },
    "required": ["query"],
}

_INTRO = (
    "Find and load MCP tools. Matching tools (at most {limit} per search) become callable "
    "with their full parameters from your next turn. Query with keywords describing the task, "
    'or "select:name1,name2" for exact tool names.'
)


def parse_select(query: str) -> list[str] | None:
    """Names of a ``select:a,b`` query, in order; ``None`` for a keyword query."""
    text = query.strip()
    if not text.lower().startswith(SELECT_PREFIX):
        return None
    return [n.strip() for n in text[len(SELECT_PREFIX) :].split(",") if n.strip()]


NO_TOOLS_YET = "No MCP tools to load yet."
"""How the ``ToolSearch`` description ends while nothing is listed: a placeholder, which the
session's exposure does not pin (``_exposure.py``), so the first listing still describes the
catalog to the model."""

_TOOL_DESCRIPTION_CHARS = 60
_TAIL_HEAD = "More tools, not listed (search finds them): "
# Share of the budget kept for the closing per-server counts while tool lines are added, so
# every server's name stays visible even when one server's tools would fill the budget.
_MAX_TAIL_SHARE = 3


def _tool_line(tool: ToolInfo) -> str:
    description = truncate_words(tool.description, _TOOL_DESCRIPTION_CHARS)
    return f"- {tool.name}: {description}" if description else f"- {tool.name}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def build_description(tools: Sequence[ToolInfo], *, budget_tokens: int, limit: int) -> str:
    """The ``ToolSearch`` description: what can be loaded, within ``budget_tokens``.

    Servers come in catalog order, each with its tool count and one line per tool (name and
    the start of its description) for as long as the budget lasts; the tools that do not fit
    are counted per server on one closing line, for which room is kept as the lines are
    added, so the model knows every server before it searches.
    """
    intro = _INTRO.format(limit=limit)
    by_server: dict[str, list[ToolInfo]] = {}
    for tool in tools:
        by_server.setdefault(tool.server, []).append(tool)
    if not by_server:
        return intro + "\n" + NO_TOOLS_YET
    servers = list(by_server)
    # What the closing line would cost if it had to name servers[i:] (a server cut short
    # costs about the same as one not listed at all).
    item_costs = [count_tokens(f"{s} ({_plural(len(by_server[s]), 'tool')})") + 1 for s in servers]
    tail_from = [0] * (len(servers) + 1)
    for i in range(len(servers) - 1, -1, -1):
        tail_from[i] = tail_from[i + 1] + item_costs[i]
    head_cost = count_tokens(_TAIL_HEAD)

    def reserve(first_unlisted: int) -> int:
        if first_unlisted >= len(servers):
            return 0
        return min(head_cost + tail_from[first_unlisted], budget_tokens // _MAX_TAIL_SHARE)

    lines = [intro, ""]
    used = count_tokens(intro) + 2
    unlisted: dict[str, int] = {}
    listing = True
    for i, server in enumerate(servers):
        server_tools = by_server[server]
        if not listing:
            unlisted[server] = len(server_tools)
            continue
        block = [f"{server} ({_plural(len(server_tools), 'tool')}):"]
        block_cost = count_tokens(block[0]) + 1
        shown = 0
        for tool in server_tools:
            line = _tool_line(tool)
            line_cost = count_tokens(line) + 1
            last_line = shown == len(server_tools) - 1
            kept = reserve(i + 1 if last_line else i)
            if used + block_cost + line_cost + kept > budget_tokens:
                listing = False
                break
            block.append(line)
            block_cost += line_cost
            shown += 1
        if shown:
            lines += block
            used += block_cost
        if shown < len(server_tools):
            unlisted[server] = len(server_tools) - shown
    if unlisted:
        lines.append(_tail(unlisted, by_server, budget_tokens - used))
    return "\n".join(lines)


def _tail(
    unlisted: Mapping[str, int], by_server: Mapping[str, Sequence[ToolInfo]], budget: int
) -> str:
    """``More tools, not listed (...): a (3 more), b (8 tools), … and 2 more servers (9 tools)``."""
    used = count_tokens(_TAIL_HEAD)
    items: list[str] = []
    servers = list(unlisted)
    for i, server in enumerate(servers):
        count = unlisted[server]
        partly = count < len(by_server[server])
        item = f"{server} ({count} more)" if partly else f"{server} ({_plural(count, 'tool')})"
        # Room for the "… and N more servers" ending whenever servers remain after this one.
        ending = 12 if i + 1 < len(servers) else 0
        cost = count_tokens(item) + 1
        if items and used + cost + ending > budget:
            hidden = servers[i:]
            total = sum(unlisted[s] for s in hidden)
            items.append(f"… and {_plural(len(hidden), 'more server')} ({_plural(total, 'tool')})")
            break
        items.append(item)
        used += cost
    return _TAIL_HEAD + ", ".join(items)


def toolsearch_definition(
    adapter: McpAdapter, *, tools: Sequence[ToolInfo] | None = None, execute: ToolExecute | None
) -> ToolDefinition:
    """The ``ToolSearch`` tool as the model sees it (``execute=None``: for measuring only).

    ``tools`` are the tools it can load (default: the whole catalog; a host passes the
    deferred ones, as direct tools are already visible).
    """
    settings = adapter.settings
    limit = max(1, settings.tool_search_limit)

    async def unavailable(params: Mapping[str, Any]) -> ToolResult:
        return ToolResult.text("ToolSearch is not registered with a host.", is_error=True)

    return ToolDefinition(
        name=TOOL_SEARCH_NAME,
        description=build_description(
            adapter.tools() if tools is None else tools,
            budget_tokens=settings.tool_search_budget_tokens,
            limit=limit,
        ),
        parameters=TOOL_SEARCH_PARAMETERS,
        execute=guard_execute(TOOL_SEARCH_NAME, execute or unavailable),
    )


def search_activated_servers(adapter: McpAdapter) -> set[str]:
    """Servers with ``directTools: "search"``: their tools wait, inactive, for a search.

    This is how the TypeScript adapter reads ``directTools: "search"`` under the ``mcp`` proxy:
    the deferred tools of the ``ToolSearch`` surface, for those servers only, turned on by
    ``mcp({search})``. ``MCP_DIRECT_TOOLS`` replaces the configuration's choice of direct tools,
    this one included.
    """
    if os.environ.get(DIRECT_TOOLS_ENV, "").strip():
        return set()
    servers = adapter.servers
    known = _SEARCH_ACTIVATED.get(adapter)
    if known is None or known[0] is not servers:
        found = frozenset(
            name
            for name, entry in servers.items()
            if entry.is_enabled and entry.direct_tools == "search"
        )
        known = _SEARCH_ACTIVATED[adapter] = (servers, found)
    return set(known[1])


_SEARCH_ACTIVATED: weakref.WeakKeyDictionary[
    McpAdapter, tuple[Mapping[str, ServerEntry], frozenset[str]]
] = weakref.WeakKeyDictionary()
"""Per adapter, its configuration's ``directTools: "search"`` servers: every catalog change
asks, and finding them walks every configured server, so once per configuration."""


class ToolSearchSurface:
    """Registers deferred tools and the ``ToolSearch`` tool; activates tools on request.

    ``exclude`` gives the names that must not be deferred at a given moment (the direct tools,
    registered active by :class:`DirectTools`).
    """

    def __init__(
        self,
        adapter: McpAdapter,
        host: Host,
        *,
        reserved: Sequence[str],
        exclude: Callable[[], Collection[str]] = frozenset,
        only_servers: Callable[[], Collection[str]] | None = None,
    ) -> None:
        """``only_servers``: defer only these servers' tools and register no ``ToolSearch``
        (the ``mcp`` proxy's ``directTools: "search"`` servers)."""
        self._adapter = adapter
        self._only_servers = only_servers
        self._host = host
        self._reserved = frozenset(reserved)
        self._exclude = exclude
        self._deferred: dict[str, ToolInfo] = {}
        self._warned: set[str] = set()

    @property
    def limit(self) -> int:
        return max(1, self._adapter.settings.tool_search_limit)

    def definition(self) -> ToolDefinition:
        # In catalog order (config order of servers), whatever order tools were deferred in.
        deferred = [t for t in self._adapter.tools() if t.name in self._deferred]
        return toolsearch_definition(self._adapter, tools=deferred, execute=self.execute)

    @property
    def deferred(self) -> list[str]:
        return list(self._deferred)

    def sync(self) -> None:
        """Register every tool that is neither direct nor reserved (inactive), and ToolSearch."""
        host = self._host
        excluded = set(self._exclude())
        only = set(self._only_servers()) if self._only_servers is not None else None
        wanted: dict[str, ToolInfo] = {}
        # With only_servers, those servers' tools alone: the cost follows them, not the catalog.
        tools = (
            self._adapter.tools()
            if only is None
            else [t for server in sorted(only) for t in self._adapter.tools(server)]
        )
        for tool in tools:
            if tool.name in excluded or (only is not None and tool.server not in only):
                continue
            if tool.name in self._reserved:
                if tool.name not in self._warned:
                    self._warned.add(tool.name)
                    host.notify(
                        f"MCP tool {tool.name!r} is not offered: the host already has a tool of "
                        f"that name (a toolPrefix on server {tool.server!r} avoids the clash)",
                        "warning",
                    )
                continue
            wanted[tool.name] = tool
        for name in [n for n in self._deferred if n not in wanted]:
            # A tool that became direct is now registered by DirectTools under the same name.
            if name not in excluded:
                host.unregister_tool(name)
            del self._deferred[name]
        host_tools = host.host_tool_names()
        for name, tool in wanted.items():
            if self._deferred.get(name) != tool:
                host.register_tool(tool_definition(self._adapter, tool, host_tools=host_tools))
                self._deferred[name] = tool
        if self._only_servers is None:
            host.register_tool(self.definition())

    def activate(self, names: Sequence[str]) -> list[str]:
        """Turn on the deferred tools among ``names``; returns those that were off."""
        host = self._host
        active = list(host.get_active_tools())
        new = [n for n in dict.fromkeys(names) if n in self._deferred and n not in active]
        if new:
            host.set_active_tools([*active, *new])
        return new

    def find(self, query: str) -> tuple[list[ToolInfo], list[str], bool]:
        """Tools a query selects, the names in a ``select:`` query that matched nothing, and
        whether the match is strong (False: the tools are only the closest ones)."""
        names = parse_select(query)
        if names is None:
            # Through the engine: the search is learned from (a call may follow it).
            page = self._adapter.search(query, limit=self.limit).page
            return [h.tool for h in page.hits], [], page.confident
        found: list[ToolInfo] = []
        missing: list[str] = []
        for name in names:
            try:
                tool = self._adapter.lookup(name)
            except McpAdapterError:
                missing.append(name)
                continue
            if tool not in found:
                found.append(tool)
        return found, missing, True

    async def execute(self, params: Mapping[str, Any]) -> ToolResult:
        query = params.get("query") if isinstance(params, Mapping) else None
        if not isinstance(query, str) or not query.strip():
            return ToolResult.text(
                'ToolSearch needs a query: keywords, or "select:name1,name2".', is_error=True
            )
        await self._adapter.ready_to_search()  # servers still being listed may hold the tools
        try:
            tools, missing, confident = self.find(query)
        except McpAdapterError as exc:
            return ToolResult.text(str(exc), is_error=True)
        host = self._host
        active = list(host.get_active_tools())
        new = [t.name for t in tools if t.name not in active]
        if new:
            host.set_active_tools([*active, *new])
        details = {
            "mode": "toolsearch",
            "query": query,
            "loaded": new,
            "matches": [t.name for t in tools],
            "missing": missing,
            "confident": confident,
        }
        if not tools:
            text = f'No tools matched "{query}".'
            if missing:
                text += f" Unknown names: {', '.join(missing)}."
            return ToolResult.text(text, details=details)
        lines = [] if confident else [WEAK_MATCH_HEADER]
        if new:
            lines.append(
                f"Loaded {len(new)} tool{'s' if len(new) != 1 else ''}; "
                "you can call them directly from your next turn:"
            )
        else:
            lines.append("These tools are already loaded; call them directly:")
        for tool in tools:
            desc = truncate_words(tool.description, 100)
            lines.append(f"- {tool.name}" + (f": {desc}" if desc else ""))
        if missing:
            lines.append(f"Unknown names: {', '.join(missing)}")
        return ToolResult.text("\n".join(lines), details=details)
