"""Talking to MCP servers: connections, the manager and the lifecycle.

- ``_connection``  one connection, owned by one task: transports, handshake under a deadline,
                   catalog listing with pagination, ``list_changed`` refresh, raw tool calls.
- ``_transports``  stdio (full environment, captured stderr), Streamable HTTP, SSE fallback,
                   headers and bearer tokens, the end-of-stream watcher.
- ``_translate``   SDK/httpx2/OS failures into the package's exception tree.
- ``_oauth``       OAuth on the SDK's client: one provider per server, stored expiry, the
                   cross-process refresh lock, when a person may be asked.
- ``_oauth_prompt`` the person's part: loopback callback, browser, headless paste.
- ``_token_store`` OAuth tokens and registrations in files (0600) or the OS keyring.
- ``_manager``     ``ServerManager``: dedupe, in-flight counts, idle, backoff, generations.
- ``_lifecycle``   the policy: lazy / eager / keep-alive, idle timeouts, retry schedule.
- ``_relay``      per-call routing of a server's sampling, elicitation and log messages to the
                   caller that made the call (the gateway's clients).
- ``_npx``         ``npx``/``npm exec`` commands resolved to the package's own binary.

See the package docstring of pi_mcp_adapter for how this layer fits.
"""

from __future__ import annotations

from ._connection import ServerConnection
from ._manager import MetadataListener, ServerManager, ServerSetChange, StateListener
from ._npx import ResolvedCommand, resolve_npx_command
from ._relay import CallRelay, current_relay, relay_calls
from ._state import ServerState, ServerStatus, TransportKind

__all__ = [
    "CallRelay",
    "MetadataListener",
    "ResolvedCommand",
    "ServerConnection",
    "ServerManager",
    "ServerSetChange",
    "ServerState",
    "ServerStatus",
    "StateListener",
    "TransportKind",
    "current_relay",
    "relay_calls",
    "resolve_npx_command",
]
