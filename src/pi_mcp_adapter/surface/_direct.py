"""Direct tools: the few MCP tools registered with the host as first-class tools.

Which tools are direct comes from each server's ``directTools`` (``true``, a list of names, or
``false``), unless the ``MCP_DIRECT_TOOLS`` environment variable is set, which replaces the
config's choice entirely: ``*`` (every server), ``server`` (all of its tools),
``server/tool`` (one tool), ``__none__`` (none). Direct tools register from the metadata
cache at start, before any server connects, and connect their server when first called.
"""

from __future__ import annotations

import fnmatch
import os
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.config import ServerEntry
from pi_mcp_adapter.engine import Host, McpAdapter, ToolDefinition, ToolResult

from ._calls import call_tool
from ._guard import guard_execute

DIRECT_TOOLS_ENV = "MCP_DIRECT_TOOLS"
_NONE = "__none__"


@dataclass(frozen=True, slots=True)
class DirectSelection:
    """Per server: ``None`` = all tools, else the names (original or prefixed, globs allowed)."""

    servers: Mapping[str, tuple[str, ...] | None]

    def selects(self, tool: ToolInfo) -> bool:
        if tool.server not in self.servers:
            return False
        names = self.servers[tool.server]
        if names is None:
            return True
        return any(
            fnmatch.fnmatchcase(tool.original_name, pattern)
            or fnmatch.fnmatchcase(tool.name, pattern)
            for pattern in names
        )


def resolve_direct_selection(
    servers: Mapping[str, ServerEntry], env_value: str | None
) -> DirectSelection:
    """Combine config and ``MCP_DIRECT_TOOLS`` into one selection (the variable wins)."""
    if env_value is not None and env_value.strip():
        return _parse_env(servers, env_value)
    chosen: dict[str, tuple[str, ...] | None] = {}
    for name, entry in servers.items():
        if entry.direct_tools is True:
            chosen[name] = None
        elif isinstance(entry.direct_tools, tuple) and entry.direct_tools:
            chosen[name] = entry.direct_tools
    return DirectSelection(chosen)


def _parse_env(servers: Mapping[str, ServerEntry], value: str) -> DirectSelection:
    chosen: dict[str, list[str] | None] = {}
    for raw in value.split(","):
        item = raw.strip()
        if not item or item == _NONE:
            continue
        if item == "*":
            return DirectSelection(dict.fromkeys(servers))
        server, sep, tool = item.partition("/")
        # A server name may itself contain "/", so prefer the longest configured match.
        for candidate in sorted(servers, key=len, reverse=True):
            if item == candidate:
                server, tool, sep = candidate, "", ""
                break
            if item.startswith(candidate + "/"):
                server, tool, sep = candidate, item[len(candidate) + 1 :], "/"
                break
        if not sep:
            chosen[server] = None
        elif chosen.get(server, []) is not None:
            existing = chosen.setdefault(server, [])
            assert existing is not None
            existing.append(tool)
    return DirectSelection({s: None if t is None else tuple(t) for s, t in chosen.items()})


def direct_servers(adapter: McpAdapter) -> list[str]:
    """The enabled servers some of whose tools are direct tools (config or
    ``MCP_DIRECT_TOOLS``): a host that lists its tools once wants theirs in that list."""
    enabled = {n: e for n, e in adapter.servers.items() if e.is_enabled}
    selection = resolve_direct_selection(enabled, os.environ.get(DIRECT_TOOLS_ENV))
    return [name for name in selection.servers if name in enabled]


async def wait_for_up_front_tools(adapter: McpAdapter) -> None:
    """Wait for the first listing of the servers whose tools a host shows before any search:
    eager servers and servers with direct tools. Each wait is bounded by the server's start-up
    timeout; a server known from the cache is listed from it at once, so this costs nothing
    after a first run. Every host calls it before the tool list a model or client reads first
    (an MCP client's ``tools/list``, an agent's first step): on a fresh machine that list
    would otherwise lack the direct tools of servers still starting."""
    await adapter.ready(_up_front_servers(adapter))


_UP_FRONT: weakref.WeakKeyDictionary[
    McpAdapter, tuple[Mapping[str, ServerEntry], str | None, frozenset[str]]
] = weakref.WeakKeyDictionary()
"""Per adapter, the up-front servers of its configuration: every ``tools/list`` asks, and
finding them walks every configured server (tens of thousands in a large catalog), so they are
found once per configuration (a reload replaces the mapping) and ``MCP_DIRECT_TOOLS`` value."""


def _up_front_servers(adapter: McpAdapter) -> frozenset[str]:
    servers, env_value = adapter.servers, os.environ.get(DIRECT_TOOLS_ENV)
    known = _UP_FRONT.get(adapter)
    if known is not None and known[0] is servers and known[1] == env_value:
        return known[2]
    found = frozenset({*adapter.eager_servers(), *direct_servers(adapter)})
    _UP_FRONT[adapter] = (servers, env_value, found)
    return found


_SELECTED: weakref.WeakKeyDictionary[
    McpAdapter, tuple[Mapping[str, ServerEntry], str | None, DirectSelection, tuple[str, ...]]
] = weakref.WeakKeyDictionary()
"""Per adapter, the direct-tool selection of its configuration and the selected servers in
catalog (configuration) order: every catalog change asks, and resolving it walks every
configured server, so it is resolved once per configuration and ``MCP_DIRECT_TOOLS`` value."""


def _direct_selection(adapter: McpAdapter) -> tuple[DirectSelection, tuple[str, ...]]:
    servers, env_value = adapter.servers, os.environ.get(DIRECT_TOOLS_ENV)
    known = _SELECTED.get(adapter)
    if known is not None and known[0] is servers and known[1] == env_value:
        return known[2], known[3]
    enabled = {n: e for n, e in servers.items() if e.is_enabled}
    selection = resolve_direct_selection(enabled, env_value)
    ordered = tuple(name for name in enabled if name in selection.servers)
    _SELECTED[adapter] = (servers, env_value, selection, ordered)
    return selection, ordered


def choose_direct_tools(
    adapter: McpAdapter, reserved: Sequence[str] = ()
) -> tuple[list[ToolInfo], list[str]]:
    """The catalog's direct tools, and the names skipped for shadowing ``reserved`` ones.

    Only the selected servers' tools are looked at (in catalog order), so the cost follows
    the direct tools, not the catalog."""
    selection, servers = _direct_selection(adapter)
    taken = set(reserved)
    chosen: list[ToolInfo] = []
    skipped: list[str] = []
    for server in servers:
        for tool in adapter.tools(server):
            if not selection.selects(tool):
                continue
            if tool.name in taken:
                skipped.append(tool.name)
                continue
            taken.add(tool.name)
            chosen.append(tool)
    return chosen, skipped


def tool_definition(
    adapter: McpAdapter, tool: ToolInfo, *, host_tools: Sequence[str] = ()
) -> ToolDefinition:
    """``tool`` as a first-class host tool with its own schema; calls go through the engine."""
    name = tool.name

    async def execute(params: Mapping[str, Any]) -> ToolResult:
        return await call_tool(adapter, name, params, host_tools=host_tools)

    description = tool.description.strip() or f"{tool.original_name} ({tool.server})"
    return ToolDefinition(
        name=tool.name,
        description=f"{description}\n[MCP server: {tool.server}]",
        parameters=dict(tool.input_schema) or {"type": "object", "properties": {}},
        execute=guard_execute(tool.name, execute),
    )


class DirectTools:
    """Keeps a host's direct-tool registrations in step with the catalog."""

    def __init__(self, adapter: McpAdapter, host: Host, *, reserved: Sequence[str]) -> None:
        self._adapter = adapter
        self._host = host
        self._reserved = tuple(reserved)
        self._registered: dict[str, ToolInfo] = {}
        self._warned: set[str] = set()
        self.skipped: list[str] = []

    def chosen_tools(self) -> list[ToolInfo]:
        """Direct tools from the current catalog, minus names that would shadow reserved ones."""
        chosen, self.skipped = choose_direct_tools(self._adapter, self._reserved)
        return chosen

    def sync(self) -> tuple[list[str], list[str]]:
        """Register what the catalog now selects; returns the names added and removed."""
        host = self._host
        wanted = {t.name: t for t in self.chosen_tools()}
        for name in self.skipped:
            if name not in self._warned:
                self._warned.add(name)
                host.notify(
                    f"MCP direct tool {name!r} skipped: the host already has a tool of that name",
                    "warning",
                )
        removed = [n for n in self._registered if n not in wanted]
        for name in removed:
            host.unregister_tool(name)
            del self._registered[name]
        added = []
        for name, tool in wanted.items():
            if self._registered.get(name) != tool:
                host.register_tool(
                    tool_definition(self._adapter, tool, host_tools=host.host_tool_names())
                )
                if name not in self._registered:
                    added.append(name)
                self._registered[name] = tool
        return added, removed

    @property
    def names(self) -> list[str]:
        return list(self._registered)
