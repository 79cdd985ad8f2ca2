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
from pi_mcp_adapter.surface import TOOL_SEARCH_NAME, SessionExposure, SurfaceKind, Surfaces

from ._attach import attach
from ._formats import (
    DEFERRING_FORMATS,
    ToolFormat,
    check_format,
    client_search_tool,
    provider_search_tool,
    result_shape,
    tool_shape,
)

DeferMode = Literal["provider", "client"]
"""Who searches deferred tools: the provider's own search tool, or our ranking (``ToolSearch``)
answering through the provider's client-side hook."""

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
    exposure: SessionExposure = field(default_factory=SessionExposure)
    retired: set[str] = field(default_factory=set)
    """Tools the model was sent whose server no longer offers them: still listed, their call
    answers that they are gone."""
    """What the model was sent this session; kept byte-stable for the provider's cache."""
    deferred_layout: dict[str, bool] = field(default_factory=dict)
    """With ``defer``: every tool's place in the list and whether it is deferred, fixed the
    first time the tool is listed, so loading a tool changes nothing the provider cached."""

    def __post_init__(self) -> None:
        self.active = list(self.builtin_tools)

    # Host protocol -------------------------------------------------------------------
    def register_tool(self, tool: ToolDefinition) -> None:
        # A definition the model was already sent stays as sent (surface/_exposure.py).
        self.tools[tool.name] = self.exposure.pinned(tool)
        self.retired.discard(tool.name)

    def unregister_tool(self, name: str) -> None:
        retired = self.exposure.retired(name)
        if retired is not None:
            # Sent already: it keeps its place in the list, and a call says it is gone.
            self.tools[name] = retired
            self.retired.add(name)
            return
        self.tools.pop(name, None)
        self.active = [n for n in self.active if n != name]

    def get_active_tools(self) -> Sequence[str]:
        return list(self.active)

    def set_active_tools(self, names: Sequence[str]) -> None:
        seen: dict[str, None] = {}
        for name in names:
            if name in self.tools or name in self.builtin_tools:
                seen[name] = None
        # A retired tool stays listed where the model saw it (the surfaces drop it from the
        # set they want, as its server no longer offers it).
        seen.update(dict.fromkeys(n for n in self.active if n in self.retired))
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
        """The MCP tools the model should see this turn (the caller's own tools excluded):
        those sent earlier in the order first sent, then newly activated ones."""
        return [self.tools[n] for n in self.exposure.order(self.active) if n in self.tools]

    def send_definitions(self) -> list[ToolDefinition]:
        """:meth:`active_definitions`, recorded as sent to the model: from now on each keeps
        its place and its definition for the session (``surface/_exposure.py``)."""
        definitions = self.active_definitions()
        self.exposure.mark_sent(definitions)
        return definitions

    def deferred_definitions(self) -> list[ToolDefinition]:
        """Registered MCP tools that are not active: under ToolSearch, the deferred ones."""
        skip = {*self.active, TOOL_SEARCH_NAME}
        return [d for name, d in self.tools.items() if name not in skip]

    def tool_definitions(
        self, format: ToolFormat = "openai-chat", *, defer: bool | DeferMode = False
    ) -> list[dict[str, Any]]:
        """The MCP tools the model should see this turn, in ``format``'s exact tool shape.

        Without ``defer``, the active tools: those sent on an earlier turn keep their place and
        their definition, newly activated ones are appended, so each turn's list extends the
        last one (the provider's cached prefix is only ever appended to).

        ``defer`` (Anthropic and OpenAI Responses only) lists every tool with the provider's
        ``defer_loading`` flag, so the list stays byte-identical while tools are loaded:

        - ``True`` or ``"provider"``: the provider's own search tool comes first, then every
          registered tool except ``ToolSearch`` (deferred unless it was active when first
          listed). A deferred tool the model then calls is loaded by :meth:`execute`.
        - ``"client"``: our ``ToolSearch`` ranks. For Anthropic it stays a plain tool next to
          the deferred ones, and :meth:`result_shape` answers it with ``tool_reference``
          blocks; for OpenAI Responses it becomes a client-executed ``tool_search`` tool, the
          deferred tools are left out of the list, and :meth:`tool_search_output` answers a
          ``tool_search_call`` with the matching definitions.

        Use ``defer`` with the ToolSearch surface; under the proxy surface nothing is deferred.

        Raises:
            UsageError: an unknown format or mode, or ``defer`` for a format without deferred
                loading.
        """
        format = check_format(format)
        if defer is False:
            return [tool_shape(d, format) for d in self.send_definitions()]
        mode = _check_defer(defer, format)
        layout = self.deferred_layout
        for name in self.exposure.order(self.active):
            layout.setdefault(name, False)
        for name in self.tools:
            layout.setdefault(name, True)
        listed = [n for n in layout if n in self.tools]
        self.exposure.mark_sent(self.tools[n] for n in listed)
        shapes: list[dict[str, Any]] = []
        if mode == "provider":
            self.provider_search = True
            shapes.append(provider_search_tool(format))
            listed = [n for n in listed if n != TOOL_SEARCH_NAME]
        elif format == "openai-responses":
            search = self.tools.get(TOOL_SEARCH_NAME)
            if search is None:
                raise UsageError(
                    'defer="client" needs the ToolSearch surface (settings.surface: "toolsearch")'
                )
            shapes.append(client_search_tool(search))
            listed = [n for n in listed if n != TOOL_SEARCH_NAME and not layout[n]]
        for name in listed:
            deferred = layout[name] and name != TOOL_SEARCH_NAME
            shapes.append(tool_shape(self.tools[name], format, deferred=deferred))
        return shapes

    async def tool_search_output(
        self, arguments: Mapping[str, Any], *, call_id: str | None
    ) -> dict[str, Any]:
        """The ``tool_search_output`` item answering an OpenAI Responses client-executed
        ``tool_search_call`` (``tool_definitions("openai-responses", defer="client")``): our
        ranking picks the tools, which are loaded and returned as function definitions the
        provider appends to the conversation (never to the cached tool list)."""
        query = arguments.get("query") if isinstance(arguments, Mapping) else None
        search = self.tools.get(TOOL_SEARCH_NAME)
        tools: list[dict[str, Any]] = []
        if search is not None and isinstance(query, str):
            result = await search.execute({"query": query})
            for name in _matches(result):
                definition = self.tools.get(name)
                if definition is not None:
                    tools.append(tool_shape(definition, "openai-responses"))
        item: dict[str, Any] = {"type": "tool_search_output", "execution": "client"}
        if call_id is not None:
            item["call_id"] = call_id
        item["tools"] = tools
        return item

    def result_shape(
        self, name: str, result: ToolResult, format: ToolFormat, *, call_id: str
    ) -> dict[str, Any]:
        """``result`` of tool ``name`` as ``format``'s answer to call ``call_id``; for Anthropic,
        a ``ToolSearch`` result names the tools it loaded as ``tool_reference`` blocks, which
        expand the deferred definitions in place (``defer="client"``)."""
        references: list[str] = []
        if format == "anthropic" and name == TOOL_SEARCH_NAME and not result.is_error:
            references = [n for n in _matches(result) if n in self.tools]
        return result_shape(result, format, call_id=call_id, tool_references=references)

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


def _check_defer(defer: bool | str, format: ToolFormat) -> DeferMode:
    if format not in DEFERRING_FORMATS:
        raise UsageError(
            f"Format {format!r} has no deferred loading; use one of "
            f"{', '.join(sorted(DEFERRING_FORMATS))}, or the ToolSearch surface"
        )
    if defer is True or defer == "provider":
        return "provider"
    if defer == "client":
        return "client"
    raise UsageError(f'Unknown defer mode {defer!r}; use True, "provider" or "client"')


def _matches(result: ToolResult) -> list[str]:
    """The tool names a ``ToolSearch`` result selected (its ``details``)."""
    details = result.details if isinstance(result.details, Mapping) else {}
    matches = details.get("matches")
    return [m for m in matches if isinstance(m, str)] if isinstance(matches, list) else []
