"""Direct tools: the few MCP tools registered with the host as first-class tools.

Which tools are direct comes from each server's ``directTools`` (``true``, a list of names, or
``false``), unless the ``MCP_DIRECT_TOOLS`` environment variable is set, which replaces the
config's choice entirely: ``*`` (every server), ``server`` (all of its tools),
``server/tool`` (one tool), ``__none__`` (none). Direct tools register from the metadata
cache at start, before any server connects, and connect their server when first called.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pi_mcp_adapter.catalog._metadata import ToolInfo
from pi_mcp_adapter.config._models import ServerEntry

from ._guard import guard_execute
from ._host import Host, ToolDefinition, ToolResult

if TYPE_CHECKING:
    from ._engine import McpAdapter

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


class DirectTools:
    """Keeps the host's direct-tool registrations in step with the catalog."""

    def __init__(self, adapter: McpAdapter) -> None:
        self._adapter = adapter
        self._registered: dict[str, ToolInfo] = {}
        self._host: Host | None = None
        self.skipped: list[str] = []

    def selection(self) -> DirectSelection:
        import os

        return resolve_direct_selection(
            {n: e for n, e in self._adapter.servers.items() if e.is_enabled},
            os.environ.get(DIRECT_TOOLS_ENV),
        )

    def chosen_tools(self, reserved: Sequence[str] = ()) -> list[ToolInfo]:
        """Direct tools from the current catalog, minus names that would shadow ``reserved``."""
        selection = self.selection()
        taken = set(reserved)
        chosen: list[ToolInfo] = []
        self.skipped = []
        for tool in self._adapter.tools():
            if not selection.selects(tool):
                continue
            if tool.name in taken:
                self.skipped.append(tool.name)
                continue
            taken.add(tool.name)
            chosen.append(tool)
        return chosen

    def definition(self, tool: ToolInfo) -> ToolDefinition:
        adapter = self._adapter
        name = tool.name

        async def execute(params: Mapping[str, Any]) -> ToolResult:
            return await adapter.call(name, params)

        description = tool.description.strip() or f"{tool.original_name} ({tool.server})"
        return ToolDefinition(
            name=tool.name,
            description=f"{description}\n[MCP server: {tool.server}]",
            parameters=dict(tool.input_schema) or {"type": "object", "properties": {}},
            execute=guard_execute(tool.name, execute),
        )

    def register(self, host: Host) -> list[str]:
        """Register the direct tools with ``host``; returns their names. Call once at start."""
        self._host = host
        self._sync(host)
        self._adapter.on_catalog_changed(self._on_catalog_changed)
        return list(self._registered)

    def _reserved(self, host: Host) -> list[str]:
        from ._proxy import PROXY_TOOL_NAME
        from ._toolsearch import TOOL_SEARCH_NAME

        return [*host.host_tool_names(), PROXY_TOOL_NAME, TOOL_SEARCH_NAME]

    def _sync(self, host: Host) -> tuple[list[str], list[str]]:
        wanted = {t.name: t for t in self.chosen_tools(self._reserved(host))}
        for name in self.skipped:
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
                host.register_tool(self.definition(tool))
                if name not in self._registered:
                    added.append(name)
                self._registered[name] = tool
        return added, removed

    def _on_catalog_changed(self) -> None:
        host = self._host
        if host is None:
            return
        added, removed = self._sync(host)
        if added or removed:
            active = [n for n in host.get_active_tools() if n not in removed]
            host.set_active_tools([*active, *[n for n in added if n not in active]])

    @property
    def names(self) -> list[str]:
        return list(self._registered)
