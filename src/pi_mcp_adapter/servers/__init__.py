"""Talking to MCP servers: connections, the manager and the lifecycle.

- ``_connection``  one connection, owned by one task: transports, handshake under a deadline,
                   catalog listing with pagination, ``list_changed`` refresh, raw tool calls.
- ``_transports``  stdio (full environment, captured stderr), Streamable HTTP, SSE fallback,
                   headers and bearer tokens, the end-of-stream watcher.
- ``_translate``   SDK/httpx2/OS failures into the package's exception tree.
- ``_manager``     ``ServerManager``: dedupe, in-flight counts, idle, backoff, generations.
- ``_lifecycle``   the policy: lazy / eager / keep-alive, idle timeouts, retry schedule.
- ``_npx``         ``npx``/``npm exec`` commands resolved to the package's own binary.
- ``_failures``    failed connects remembered across processes (``mcp-failures.json``).
- ``_stdio``       the stdio process: its own process group, bounded shutdown.
- ``_reaper``      the supervisor a stdio server runs under, so its tree dies with us.

See the package docstring of pi_mcp_adapter for how this layer fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._manager import MetadataListener, ServerManager
from ._state import ServerState, ServerStatus, TransportKind

if TYPE_CHECKING:
    from ._connection import ServerConnection
    from ._npx import ResolvedCommand, resolve_npx_command


def __getattr__(name: str) -> Any:
    # Loaded when asked for: ServerConnection imports the MCP SDK, and commands answered from
    # the cache need neither it nor npx resolution.
    if name == "ServerConnection":
        from ._connection import ServerConnection

        return ServerConnection
    if name in ("ResolvedCommand", "resolve_npx_command"):
        from . import _npx

        return getattr(_npx, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MetadataListener",
    "ResolvedCommand",
    "ServerConnection",
    "ServerManager",
    "ServerState",
    "ServerStatus",
    "TransportKind",
    "resolve_npx_command",
]
