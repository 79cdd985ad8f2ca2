"""What the manager reports about one server: its status and counters, as an immutable value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ConnectionStatus = Literal[
    "connected", "connecting", "closed", "failed", "needs-auth", "disabled", "untrusted"
]
"""``closed``: not connected (never started, idle-closed or closed on request); ``failed``: the
last connect failed or the connection was lost; ``needs-auth``: the server answered HTTP 401;
``untrusted``: it comes from a project file not trusted yet, so it never starts."""

TransportKind = Literal["stdio", "streamable-http", "sse", "socket", "pool"]
"""``pool``: a stdio server reached through the warm pool of a running gateway."""

CONNECTION_STATUSES: tuple[ConnectionStatus, ...] = (
    "connected",
    "connecting",
    "closed",
    "failed",
    "needs-auth",
    "disabled",
    "untrusted",
)


@dataclass(frozen=True, slots=True)
class ServerState:
    """A snapshot of one server as the manager sees it.

    Times are in seconds of the manager's clock (monotonic by default), so subtract them from
    ``ServerManager.now()`` to get ages. ``transport`` is the transport of the current or most
    recent connection; ``error`` is the message of the last failure, kept until the next
    successful connect; ``tool_count`` is ``None`` while no live connection has listed tools.
    """

    server: str
    status: ConnectionStatus
    transport: TransportKind | None = None
    error: str | None = None
    failed_at: float | None = None
    connected_at: float | None = None
    in_flight: int = 0
    last_used_at: float | None = None
    tool_count: int | None = None

    def __post_init__(self) -> None:
        if self.status not in CONNECTION_STATUSES:
            raise ValueError(f"unknown server status {self.status!r}")
        if self.in_flight < 0:
            raise ValueError("in_flight cannot be negative")


@dataclass(frozen=True, slots=True)
class TaskState:
    """A task that a call in flight is following (a tool call the server runs as a task).

    ``status`` is the task's last reported status (``working``, ``input_required``);
    ``age_s`` is how long ago the server made the call a task.
    """

    server: str
    tool: str
    task_id: str
    status: str
    age_s: float
