"""Plain export: a host for callers that build their own agent loop.

The caller asks for the current tool definitions each turn in its provider's shape
(:meth:`ExportHost.tool_definitions`), runs the ones the model calls through
:meth:`ExportHost.execute`, and calls :meth:`ExportHost.turn_end` after each turn. Notices go to
a callback. It is also the host the CLI and the tests use, and the registry the runtime
bindings (pydantic-ai, openai-agents) keep the active set in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.engine import (
    CommandHandler,
    EventHandler,
    HostEvent,
    McpAdapter,
    NotifyLevel,
    ToolDefinition,
    ToolResult,
)
from pi_mcp_adapter.surface import TOOL_SEARCH_NAME, SurfaceKind, Surfaces

from ._attach import attach
from ._formats import ToolFormat, check_format, provider_search_tool, tool_shape

ExportFormat = Literal["openai", "anthropic"]
"""The formats of :meth:`ExportHost.export`; :data:`ToolFormat` names every shape."""


@dataclass
class ExportHost:
    """An in-memory :class:`~pi_mcp_adapter.surface.Host`.

    ``builtin_tools`` are the caller's own tool names: MCP tools never shadow them, and they
    stay in the active set.
    """

    builtin_tools: Sequence[str] = ()
    on_notify: Callable[[str, NotifyLevel], None] | None = None
    tools: dict[str, ToolDefinition] = field(default_factory=dict)
    active: list[str] = field(default_factory=list)
    commands: dict[str, tuple[str, CommandHandler]] = field(default_factory=dict)
    handlers: dict[HostEvent, list[EventHandler]] = field(default_factory=dict)
    notices: list[tuple[NotifyLevel, str]] = field(default_factory=list)
    status_line: str | None = None
    provider_search: bool = False
    """The provider runs its own tool search over deferred tools (``tool_definitions(...,
    defer=True)`` was asked for): a deferred tool the model calls is then loaded and run."""

    def __post_init__(self) -> None:
        self.active = list(self.builtin_tools)

    # Host protocol -------------------------------------------------------------------
    def register_tool(self, tool: ToolDefinition) -> None:
        self.tools[tool.name] = tool

    def unregister_tool(self, name: str) -> None:
        self.tools.pop(name, None)
        self.active = [n for n in self.active if n != name]

    def get_active_tools(self) -> Sequence[str]:
        return list(self.active)

    def set_active_tools(self, names: Sequence[str]) -> None:
        seen: dict[str, None] = {}
        for name in names:
            if name in self.tools or name in self.builtin_tools:
                seen[name] = None
        self.active = list(seen)

    def host_tool_names(self) -> Sequence[str]:
        return list(self.builtin_tools)

    def register_command(self, name: str, description: str, handler: CommandHandler) -> None:
        self.commands[name] = (description, handler)

    def on(self, event: HostEvent, handler: EventHandler) -> None:
        self.handlers.setdefault(event, []).append(handler)

    def notify(self, message: str, level: NotifyLevel = "info") -> None:
        self.notices.append((level, message))
        if self.on_notify is not None:
            self.on_notify(message, level)

    def set_status(self, text: str | None) -> None:
        self.status_line = text

    # Caller side ---------------------------------------------------------------------
    def attach(
        self, adapter: McpAdapter, *, surface: SurfaceKind | None = None, commands: bool = True
    ) -> Surfaces:
        """Bind this host to the adapter (notices, status, lifecycle) and register its
        surfaces (see :func:`~pi_mcp_adapter.hosts.attach`)."""
        return attach(adapter, self, surface=surface, commands=commands)

    def active_definitions(self) -> list[ToolDefinition]:
        """The MCP tools the model should see this turn (the caller's own tools excluded)."""
        return [self.tools[n] for n in self.active if n in self.tools]

    def deferred_definitions(self) -> list[ToolDefinition]:
        """Registered MCP tools that are not active: under ToolSearch, the deferred ones."""
        skip = {*self.active, TOOL_SEARCH_NAME}
        return [d for name, d in self.tools.items() if name not in skip]

    def tool_definitions(
        self, format: ToolFormat = "openai-chat", *, defer: bool = False
    ) -> list[dict[str, Any]]:
        """The MCP tools the model should see this turn, in ``format``'s exact tool shape.

        ``defer=True`` (Anthropic and OpenAI Responses only) hands tool search to the provider:
        the provider's search tool comes first, then the active tools without ``ToolSearch``,
        then every deferred tool marked ``defer_loading: true``. A deferred tool the model then
        calls is loaded (made active) by :meth:`execute`. Use it with the ToolSearch surface;
        under the proxy surface there are no deferred tools.

        Raises:
            UsageError: an unknown format, or ``defer`` for a format without deferred loading.
        """
        format = check_format(format)
        if not defer:
            return [tool_shape(d, format) for d in self.active_definitions()]
        shapes = [provider_search_tool(format)]
        shapes += [
            tool_shape(d, format) for d in self.active_definitions() if d.name != TOOL_SEARCH_NAME
        ]
        shapes += [tool_shape(d, format, deferred=True) for d in self.deferred_definitions()]
        self.provider_search = True
        return shapes

    def export(self, format: ExportFormat = "openai") -> list[dict[str, Any]]:
        """Active MCP tool definitions in a provider's request shape (``openai`` is
        ``openai-chat``); :meth:`tool_definitions` knows every format."""
        return [to_provider_shape(d, format) for d in self.active_definitions()]

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run a tool the model called; never raises.

        Unknown and inactive names come back as error results, except a deferred tool when the
        provider searches (:attr:`provider_search`): the provider loaded it, so it is activated
        and run.
        """
        tool = self.tools.get(name)
        loadable = tool is not None and name != TOOL_SEARCH_NAME
        if loadable and self.provider_search and name not in self.active:
            self.set_active_tools([*self.active, name])
        if tool is None or name not in self.active:
            hint = f" Load it with {TOOL_SEARCH_NAME} first." if tool is not None else ""
            return ToolResult.text(
                f"Tool {name!r} is not available this turn.{hint}", is_error=True
            )
        return await run_tool(tool, arguments)

    async def run_command(self, name: str, args: str = "") -> str:
        """Run command ``name`` (``mcp``, ``mcp-auth``) as a user would type ``/name args``.

        Raises:
            UsageError: no command of that name is registered.
        """
        entry = self.commands.get(name)
        if entry is None:
            known = ", ".join(sorted(self.commands)) or "none"
            raise UsageError(f"Unknown command {name!r}; registered commands: {known}")
        return await entry[1](args)

    async def emit(self, event: HostEvent) -> None:
        for handler in list(self.handlers.get(event, [])):
            await handler()

    async def turn_end(self) -> None:
        await self.emit("turn_end")


async def run_tool(tool: ToolDefinition, arguments: Mapping[str, Any]) -> ToolResult:
    """``tool.execute`` with whatever arguments the runtime decoded (a non-object becomes
    ``{}``). Every tool a surface registers is guarded already (``surface/_guard.py``): an
    error comes back as an error result, never as an exception."""
    return await tool.execute(arguments if isinstance(arguments, Mapping) else {})


def to_provider_shape(tool: ToolDefinition, format: ExportFormat | ToolFormat) -> dict[str, Any]:
    """One tool definition as OpenAI's (Chat Completions) or Anthropic's ``tools`` entry."""
    return tool_shape(tool, "openai-chat" if format == "openai" else check_format(format))
