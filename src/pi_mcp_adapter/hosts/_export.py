"""Plain export: a host for callers that build their own agent loop.

The caller asks for the current tool definitions each turn (OpenAI or Anthropic shape), runs
the ones the model calls through :meth:`ExportHost.execute`, and calls :meth:`turn_end` after
each turn. Notices go to a callback. It is also the host the CLI and the tests use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pi_mcp_adapter.engine import (
    CommandHandler,
    EventHandler,
    HostEvent,
    McpAdapter,
    NotifyLevel,
    ToolDefinition,
    ToolResult,
)
from pi_mcp_adapter.surface import SurfaceKind, Surfaces, register_surfaces

ExportFormat = Literal["openai", "anthropic"]


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
    def attach(self, adapter: McpAdapter, *, surface: SurfaceKind | None = None) -> Surfaces:
        """Register the adapter's surfaces with this host (call once the adapter started)."""
        return register_surfaces(adapter, self, surface=surface)

    def active_definitions(self) -> list[ToolDefinition]:
        """The MCP tools the model should see this turn (the caller's own tools excluded)."""
        return [self.tools[n] for n in self.active if n in self.tools]

    def export(self, format: ExportFormat = "openai") -> list[dict[str, Any]]:
        """Active MCP tool definitions in a provider's request shape."""
        return [to_provider_shape(d, format) for d in self.active_definitions()]

    async def execute(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run a tool the model called. Unknown or inactive names come back as error results."""
        tool = self.tools.get(name)
        if tool is None or name not in self.active:
            return ToolResult.text(f"Tool {name!r} is not available this turn.", is_error=True)
        return await tool.execute(arguments)

    async def emit(self, event: HostEvent) -> None:
        for handler in list(self.handlers.get(event, [])):
            await handler()

    async def turn_end(self) -> None:
        await self.emit("turn_end")


def to_provider_shape(tool: ToolDefinition, format: ExportFormat) -> dict[str, Any]:
    """One tool definition as OpenAI's ``tools`` entry or Anthropic's ``tools`` entry."""
    if format == "anthropic":
        return {
            "name": tool.name,
            "description": tool.description,
            "input_schema": dict(tool.parameters),
        }
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        },
    }
