"""The host protocol: the only abilities the engine asks of the program it runs in.

A host registers tools the model can call, decides which are active, runs commands, tells the
engine about its lifecycle, and shows notices to the user. Bindings (the MCP gateway, the
pi-python extension, pydantic-ai, plain export) implement :class:`Host`; the surfaces use
nothing else.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from pi_mcp_adapter._secrets import redact, redact_data

HostEvent = Literal["session_start", "turn_end", "shutdown"]
NotifyLevel = Literal["info", "warning", "error"]


@dataclass(frozen=True, slots=True)
class TextPart:
    """Text for the model. Registered secret values are replaced by their references here, so
    no result, error text or notice a model or client receives can carry one."""

    text: str
    type: Literal["text"] = "text"

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", redact(self.text))


@dataclass(frozen=True, slots=True)
class ImagePart:
    """Base64 image data, kept as data for hosts that can show it to the model."""

    data: str
    mime_type: str
    type: Literal["image"] = "image"


@dataclass(frozen=True, slots=True)
class AudioPart:
    data: str
    mime_type: str
    type: Literal["audio"] = "audio"


ContentPart = TextPart | ImagePart | AudioPart


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns to the model. Errors are results with ``is_error=True``, not raises.

    ``details`` carries machine-readable extras (the mode, matches, structured content) for
    hosts and tests; it is not shown to the model.
    """

    content: tuple[ContentPart, ...]
    is_error: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Structured content and server errors travel in details to the gateway's clients.
        object.__setattr__(self, "details", redact_data(self.details))

    @classmethod
    def text(
        cls, text: str, *, is_error: bool = False, details: Mapping[str, Any] | None = None
    ) -> ToolResult:
        return cls((TextPart(text),), is_error=is_error, details=details or {})

    @property
    def text_content(self) -> str:
        """All text parts joined, for hosts and tests that only read text."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


ToolExecute = Callable[[Mapping[str, Any]], Awaitable[ToolResult]]


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as a host registers it: a name, a description, a JSON schema and a function."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    execute: ToolExecute = field(compare=False, repr=False)


CommandHandler = Callable[[str], Awaitable[str]]
EventHandler = Callable[[], Awaitable[None]]


@runtime_checkable
class Host(Protocol):
    """What a binding provides. Every method may be called from the engine's task only."""

    def register_tool(self, tool: ToolDefinition) -> None:
        """Make ``tool`` known to the host. Registering an existing name replaces it."""

    def unregister_tool(self, name: str) -> None:
        """Forget a tool registered earlier (a server's tool disappeared)."""

    def get_active_tools(self) -> Sequence[str]:
        """Names of the tools the model currently sees."""
        ...

    def set_active_tools(self, names: Sequence[str]) -> None:
        """Replace the active set; a binding announces the change as its host requires."""

    def host_tool_names(self) -> Sequence[str]:
        """Names of the host's own tools, which MCP tools must never shadow."""
        ...

    def register_command(self, name: str, description: str, handler: CommandHandler) -> None:
        """Offer ``/name args`` to the user (or the binding's equivalent)."""

    def on(self, event: HostEvent, handler: EventHandler) -> None:
        """Call ``handler`` on a host lifecycle event."""

    def notify(self, message: str, level: NotifyLevel = "info") -> None:
        """Show a notice to the user."""

    def set_status(self, text: str | None) -> None:
        """Set (or clear, with ``None``) a one-line status; may be a no-op."""
