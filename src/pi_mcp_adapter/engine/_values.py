"""The typed values the engine's operations return.

They carry facts, never wording: each surface (the ``mcp`` proxy, ``ToolSearch``, the CLI, the
gateway) renders them in its own words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pi_mcp_adapter.catalog import ToolDefinitionDiff, ToolInfo
from pi_mcp_adapter.servers import TaskState

if TYPE_CHECKING:
    # Only results of calls hold SDK types, and a call has imported the SDK already; commands
    # answered from the cache never load it (it takes most of a second).
    import mcp_types as types

    from pi_mcp_adapter.catalog._search import SearchPage

ServerStatusName = Literal[
    "connected",
    "connecting",
    "cached",
    "not-cached",
    "closed",
    "failed",
    "needs-auth",
    "disabled",
    "untrusted",
    "invalid",
]


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """One server's state as the engine sees it, without connecting anything."""

    name: str
    status: str
    """connected | connecting | cached | not-cached | closed | failed | needs-auth | disabled
    | untrusted (from a project file not trusted yet; ``error`` says how to trust it)
    | invalid (a config error makes it unusable)."""
    tool_count: int
    transport: str | None = None
    lifecycle: str = "lazy"
    error: str | None = None
    failed_ago_s: float | None = None
    changed_tools: tuple[str, ...] = ()
    """Tools (their own names) whose definitions changed since last trusted."""
    source: str | None = None
    definition_changes: tuple[ToolDefinitionDiff, ...] = ()
    """How each of ``changed_tools`` changed."""

    @property
    def is_searchable(self) -> bool:
        """Its tools are known (live or from the cache)."""
        return self.status in ("connected", "cached")


@dataclass(frozen=True, slots=True)
class StatusReport:
    """Every configured server (invalid ones included) and the config errors."""

    servers: tuple[ServerStatus, ...]
    config_errors: tuple[str, ...] = field(default_factory=tuple)
    running_tasks: tuple[TaskState, ...] = ()
    """Tool calls in flight that their servers run as tasks, oldest first."""

    @property
    def connected(self) -> int:
        return sum(1 for s in self.servers if s.status == "connected")

    @property
    def enabled(self) -> int:
        return sum(1 for s in self.servers if s.status not in ("disabled", "untrusted", "invalid"))

    @property
    def tool_count(self) -> int:
        return sum(s.tool_count for s in self.servers if s.status != "disabled")


@dataclass(frozen=True, slots=True)
class SearchResults:
    """A page of ranked (or regex) hits, and the servers that could not take part."""

    page: SearchPage
    unavailable: tuple[ServerStatus, ...] = ()
    """When nothing was found: the servers whose tools are not known, and why."""


CallErrorKind = Literal[
    "unknown_tool",
    "ambiguous_tool",
    "invalid_arguments",
    "server_unavailable",
    "server_error",
    "definition_changed",
    "approval_denied",
    "policy_denied",
    "outcome_unknown",
]
"""Why a call produced no server answer; a server's own ``isError`` result is not one.

``definition_changed``: the tool changed since it was last trusted and
``settings.onDefinitionChange`` is ``"block"``; nothing was sent. ``policy_denied``: the
caller's policy (a gateway client's) does not allow the tool; nothing was sent. Only the trace
records it: the caller itself is answered ``unknown_tool``, as for a tool that does not exist.
``outcome_unknown``: a load balancer replayed the request after a gateway replica failed, and
the tool is not safe to repeat; nothing was sent (see ``engine/_replays.py``)."""


@dataclass(frozen=True, slots=True)
class CallOutcome:
    """What one call came to: the server's raw answer, or why there is none.

    ``result`` is the server's answer untouched (``CallToolResult`` for tools,
    ``ReadResourceResult`` for resource tools); surfaces convert it for their host.
    """

    requested: str
    tool: ToolInfo | None = None
    result: types.CallToolResult | types.ReadResourceResult | None = None
    error_kind: CallErrorKind | None = None
    message: str = ""
    """The engine's explanation of an error (names the server, the tool and the reason)."""
    error_code: int | None = None
    """The JSON-RPC error code of a ``server_error``."""
    suggestions: tuple[str, ...] = ()
    """For ``unknown_tool``: close names that do exist."""
    candidates: tuple[str, ...] = ()
    """For ``ambiguous_tool``: the tools the name could mean."""
    problems: tuple[str, ...] = ()
    """For ``invalid_arguments``: what is wrong, one line per problem."""
    latency_ms: float = 0.0
    """Time the server took to answer, excluding connecting."""
    connect_ms: float = 0.0
    """Time spent connecting the server first (0 when it was connected)."""

    @property
    def is_error(self) -> bool:
        """No answer, or an answer the server marked as an error."""
        if self.error_kind is not None or self.result is None:
            return self.error_kind is not None
        import mcp_types

        return isinstance(self.result, mcp_types.CallToolResult) and self.result.is_error


@dataclass(frozen=True, slots=True)
class PromptMessages:
    """A rendered upstream prompt."""

    server: str
    name: str
    description: str | None
    messages: tuple[types.PromptMessage, ...]


@dataclass(frozen=True, slots=True)
class ReloadReport:
    """What :meth:`McpAdapter.reload` changed, by server name."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    """Removed from the configuration or disabled: closed."""
    changed: tuple[str, ...] = ()
    """Entry changed: closed, and started afresh."""
    unchanged: tuple[str, ...] = ()
    """Kept as they were, connections included."""
    superseded: bool = False
    """A newer reload began while this one read the files: this one changed nothing."""
    kept_last_good: bool = False
    """A file that loaded before is broken now: nothing changed (see ``errors``)."""
    errors: tuple[str, ...] = ()
    """Configuration errors found by this reload."""

    def summary(self) -> str:
        """``added a, b; removed c; changed d`` (or ``no server changed``)."""
        parts = [
            f"{label} {', '.join(names)}"
            for label, names in (
                ("added", self.added),
                ("removed", self.removed),
                ("changed", self.changed),
            )
            if names
        ]
        return "; ".join(parts) or "no server changed"
