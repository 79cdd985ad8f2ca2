"""Registering the model-facing surfaces with a host and keeping them current.

A host binding calls :func:`register_surfaces` once the adapter has started. From then on one
listener follows every catalog rebuild (a lazy server connecting, a server's tools changing, a
reconnect) and updates the host in a fixed order: direct tools first, then the deferred tools
and ``ToolSearch`` (or nothing more for the proxy tool, whose definition never changes), then
the ``mcp__<server>`` namespace tools, then the active set, once. One owner for the order
matters: a tool that turns direct must never be unregistered by the deferred-tool bookkeeping
after the direct tools registered it.

Surfaces are registered for a caller (a gateway client with a policy, or nobody: the one
trusted user) and every later sync reads the catalog as that caller, whichever request caused
the rebuild: a host never gets tools its caller may not see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pi_mcp_adapter.engine import (
    CallerPolicy,
    Host,
    McpAdapter,
    ToolDefinition,
    acting_for,
    current_caller,
)
from pi_mcp_adapter.engine._stats import most_called

from ._commands import COMMAND_USAGE, MCP_AUTH_COMMAND, MCP_COMMAND, McpCommands
from ._direct import DirectTools, wait_for_up_front_tools
from ._namespace import NamespaceTools
from ._proxy import PROXY_TOOL_NAME, ProxyTool
from ._script import SCRIPT_TOOL_NAME, ScriptTool, script_enabled
from ._toolsearch import TOOL_SEARCH_NAME, ToolSearchSurface, search_activated_servers

SurfaceKind = Literal["proxy", "toolsearch"]


@dataclass
class Surfaces:
    """The surfaces registered with one host.

    ``proxy`` always exists (the CLI and ``/mcp`` render with it) but is registered with the
    host only under the proxy surface; ``toolsearch`` exists only under the ToolSearch surface.
    """

    adapter: McpAdapter
    host: Host
    kind: SurfaceKind
    proxy: ProxyTool
    direct: DirectTools
    commands: McpCommands
    toolsearch: ToolSearchSurface | None = None
    search_activated: ToolSearchSurface | None = None
    """Under the proxy: the inactive tools of ``directTools: "search"`` servers."""
    script: ScriptTool | None = None
    core_tools: tuple[tuple[str, str], ...] = ()
    """``settings.alwaysLoadMostUsed``: the most called tools as ``(server, tool)``, chosen
    once (at registration, or at the first sync once the adapter is open and its call
    statistics exist) and loaded as soon as they are listed (ToolSearch surface)."""
    _core_chosen: bool = field(default=False, repr=False)
    """``mcp_script``, beside the surface tool when ``settings.scriptMode`` is on."""
    namespace: NamespaceTools | None = None
    """The ``mcp__<server>`` tools (none unless ``settings.namespaceProxyTools``)."""
    caller: CallerPolicy | None = None
    """Whom the surfaces were registered for: every sync reads that caller's catalog."""
    _unsubscribe: Callable[[], None] | None = field(default=None, repr=False)

    @property
    def surface_tool(self) -> ToolDefinition:
        """The one tool that reaches the whole catalog: ``mcp`` or ``ToolSearch``."""
        if self.toolsearch is not None:
            return self.toolsearch.definition()
        return self.proxy.definition()

    def sync(self) -> None:
        """Bring the host's registrations and active set in line with the catalog."""
        with acting_for(self.caller):
            self._sync()

    def choose_core_tools(self) -> None:
        """Choose :attr:`core_tools` once, when the statistics can be read: a host may register
        its surfaces before the adapter is open (pi-python does), and the session's tool list
        must not move as the counts do afterwards."""
        stats = self.adapter.stats
        if self._core_chosen or self.toolsearch is None or stats is None:
            return
        self._core_chosen = True
        self.core_tools = most_called(stats, self.adapter.settings.always_load_most_used)

    def _sync(self) -> None:
        self.choose_core_tools()
        host = self.host
        active_before = list(host.get_active_tools())
        added, removed = self.direct.sync()
        if self.toolsearch is not None:
            self.toolsearch.sync()
        if self.search_activated is not None:
            self.search_activated.sync()
        if self.namespace is not None:
            namespace_added, namespace_removed = self.namespace.sync()
            added = [*added, *namespace_added]
            removed = [*removed, *namespace_removed]
        known = self._known()
        # Registering may auto-activate in some hosts: keep the active set as it was, minus
        # what disappeared, plus new direct tools.
        active = [n for n in active_before if n in known and n not in removed]
        active += [n for n in added if n not in active]
        active += [n for n in self.core_names() if n not in active]
        # Compared with the set after registering: a host that activated a new deferred tool
        # on registration must be corrected even when the wanted set did not change.
        if active != list(host.get_active_tools()):
            host.set_active_tools(active)

    async def ready(self) -> None:
        """Wait until the tools shown up front (direct tools, eager servers' tools) are
        registered, each server bounded by its start-up timeout: call it before the first tool
        list a model reads (see :func:`wait_for_up_front_tools`).

        Under ToolSearch every server is shown up front: its description summarises the whole
        catalog and, once sent, stays fixed for the session (a changing tool list would cost
        the provider's prompt cache, ``_exposure.py``), so the first listing of every server
        is awaited, each bounded by its start-up timeout (instant from the metadata cache)."""
        if self.toolsearch is not None:
            await self.adapter.ready()
            return
        await wait_for_up_front_tools(self.adapter)

    def _known(self) -> set[str]:
        names = set(self.host.host_tool_names()) | set(self.direct.names)
        if self.toolsearch is not None:
            names |= set(self.toolsearch.deferred) | {TOOL_SEARCH_NAME}
        else:
            names.add(PROXY_TOOL_NAME)
        if self.script is not None:
            names.add(SCRIPT_TOOL_NAME)
        if self.search_activated is not None:
            names |= set(self.search_activated.deferred)
        if self.namespace is not None:
            names |= set(self.namespace.names)
        return names

    def core_names(self) -> list[str]:
        """The model-facing names of :attr:`core_tools` that ToolSearch can load now."""
        if not self.core_tools or self.toolsearch is None:
            return []
        deferred = set(self.toolsearch.deferred)
        by_origin = {(t.server, t.original_name): t.name for t in self.adapter.tools()}
        names = (by_origin.get(origin) for origin in self.core_tools)
        return [n for n in names if n is not None and n in deferred]

    def _taken_by_others(self) -> set[str]:
        """Names registered by everything but the namespace tools."""
        names = self._known()
        if self.namespace is not None:
            names -= set(self.namespace.names)
        return names

    def close(self) -> None:
        """Stop following catalog changes (the host's registrations stay as they are)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None


def register_surfaces(
    adapter: McpAdapter,
    host: Host,
    *,
    surface: SurfaceKind | None = None,
    commands: bool = True,
) -> Surfaces:
    """Register the ``mcp`` proxy tool (or ``ToolSearch`` with deferred tools), the direct
    tools and the ``/mcp`` commands with ``host``, and keep them current.

    ``surface`` defaults to ``settings.surface``. The host's own tools stay active; the
    surface tool and the direct tools become active; deferred tools stay inactive until
    ``ToolSearch`` loads them.
    """
    kind: SurfaceKind = surface or adapter.settings.surface
    host_tools = list(host.host_tool_names())
    builtin_active = list(host.get_active_tools())
    proxy = ProxyTool(adapter, host_tools=host_tools)
    reserved = [*host_tools, PROXY_TOOL_NAME, TOOL_SEARCH_NAME, SCRIPT_TOOL_NAME]
    direct = DirectTools(adapter, host, reserved=reserved)
    surfaces = Surfaces(
        adapter=adapter,
        host=host,
        kind=kind,
        proxy=proxy,
        direct=direct,
        commands=McpCommands(adapter, proxy),
        caller=current_caller(),
    )
    direct.sync()
    if kind == "toolsearch":
        toolsearch = ToolSearchSurface(
            adapter,
            host,
            reserved=reserved,
            exclude=lambda: direct.names,
        )
        surfaces.toolsearch = toolsearch
        surfaces.choose_core_tools()
        toolsearch.sync()
        surface_name = TOOL_SEARCH_NAME
    else:
        host.register_tool(proxy.definition())
        surface_name = PROXY_TOOL_NAME
        if search_activated_servers(adapter):
            search_activated = ToolSearchSurface(
                adapter,
                host,
                reserved=reserved,
                exclude=lambda: direct.names,
                only_servers=lambda: search_activated_servers(adapter),
            )
            surfaces.search_activated = search_activated
            proxy.activate = search_activated.activate
            search_activated.sync()
    surface_names = [surface_name]
    if script_enabled(adapter.settings):
        surfaces.script = ScriptTool(adapter)
        host.register_tool(surfaces.script.definition())
        surface_names.append(SCRIPT_TOOL_NAME)
    namespace = NamespaceTools(adapter, host, taken=surfaces._taken_by_others)
    surfaces.namespace = namespace
    namespace.sync()
    host.set_active_tools(
        [
            *builtin_active,
            *surface_names,
            *direct.names,
            *namespace.names,
            *surfaces.core_names(),
        ]
    )
    if commands:
        host.register_command(
            MCP_COMMAND,
            f"MCP servers: {COMMAND_USAGE}",
            surfaces.commands.run,
        )
        host.register_command(
            MCP_AUTH_COMMAND, "Authenticate an MCP server: /mcp-auth SERVER", surfaces.commands.auth
        )
    surfaces._unsubscribe = adapter.on_catalog_changed(surfaces.sync)
    return surfaces
