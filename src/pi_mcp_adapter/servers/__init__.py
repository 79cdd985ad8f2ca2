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
- ``_pool``        the server pool: a running gateway's daemon that lends its stdio server
                   sessions (``_pool._daemon``) and the client that asks it first, same
                   entry fingerprint, before starting the server here (``_pool._client``).
- ``_tasks``       tool calls the server runs as tasks (``io.modelcontextprotocol/tasks``):
                   polled to their end, their questions answered, cancelled when abandoned.
- ``_relay``      per-call routing of a server's sampling, elicitation and log messages to the
                   caller that made the call (the gateway's and the pool's clients), and the
                   one relay of a sampling or elicitation request to a client session.
- ``_npx``         ``npx``/``npm exec`` commands resolved to the package's own binary.
- ``_failures``    failed connects remembered across processes (``mcp-failures.json``).
- ``_stdio``       the stdio process: its own process group, bounded shutdown.
- ``_reaper``      the supervisor a stdio server runs under, so its tree dies with us.

See the package docstring of pi_mcp_adapter for how this layer fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._failures import (
    DEFAULT_BACKOFF_S,
    FAILURES_FILE_NAME,
    FailureMemory,
    FailureRecord,
    entry_digest,
)
from ._manager import MetadataListener, ServerManager, ServerSetChange, StateListener
from ._prompt_policy import allow_prompts
from ._state import ConnectionStatus, ServerState, TaskState, TransportKind

if TYPE_CHECKING:
    from ._connection import ServerConnection
    from ._http_extras import open_line_streams
    from ._npx import ResolvedCommand, resolve_npx_command
    from ._oauth import OAuthProviders, OAuthState
    from ._oauth_prompt import AuthorizationPrompt
    from ._packages import resolve_package_command, split_package_target
    from ._pool._client import (
        POOL_PROTOCOL,
        PoolAccess,
        pool_socket_path,
        query_pool,
        read_hello_line,
        server_fingerprint,
    )
    from ._pool._daemon import PoolOwner, ServerPool, open_server_pool, serve_pool
    from ._probe import ProbeReport, ProbeStep, probe_server
    from ._relay import (
        CallRelay,
        current_relay,
        elicitation_to_client,
        relay_calls,
        sampling_to_client,
    )
    from ._token_store import BearerRecord, BearerStore, create_bearer_store


_POOL_CLIENT = (
    "POOL_PROTOCOL",
    "PoolAccess",
    "pool_socket_path",
    "query_pool",
    "read_hello_line",
    "server_fingerprint",
)


def __getattr__(name: str) -> Any:
    # Loaded when asked for: ServerConnection imports the MCP SDK, and commands answered from
    # the cache need neither it nor npx resolution.
    if name == "ServerConnection":
        from ._connection import ServerConnection

        return ServerConnection
    if name in ("ResolvedCommand", "resolve_npx_command"):
        from . import _npx

        return getattr(_npx, name)
    if name in ("OAuthProviders", "OAuthState"):
        from . import _oauth

        return getattr(_oauth, name)
    if name == "AuthorizationPrompt":
        from ._oauth_prompt import AuthorizationPrompt

        return AuthorizationPrompt
    if name in (
        "CallRelay",
        "current_relay",
        "elicitation_to_client",
        "relay_calls",
        "sampling_to_client",
    ):
        from . import _relay

        return getattr(_relay, name)
    if name in ("BearerRecord", "BearerStore", "create_bearer_store"):
        from . import _token_store

        return getattr(_token_store, name)
    if name in ("ProbeReport", "ProbeStep", "probe_server"):
        from . import _probe

        return getattr(_probe, name)
    if name in ("resolve_package_command", "split_package_target"):
        from . import _packages

        return getattr(_packages, name)
    if name in (
        "POOL_PROTOCOL",
        "PoolAccess",
        "pool_socket_path",
        "query_pool",
        "read_hello_line",
        "server_fingerprint",
    ):
        from ._pool import _client as _pool_client

        return getattr(_pool_client, name)
    if name in ("PoolOwner", "ServerPool", "open_server_pool", "serve_pool"):
        from ._pool import _daemon as _pool_daemon

        return getattr(_pool_daemon, name)
    if name in ("open_line_streams",):
        from . import _http_extras

        return getattr(_http_extras, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_BACKOFF_S",
    "FAILURES_FILE_NAME",
    "POOL_PROTOCOL",
    "AuthorizationPrompt",
    "BearerRecord",
    "BearerStore",
    "CallRelay",
    "ConnectionStatus",
    "FailureMemory",
    "FailureRecord",
    "MetadataListener",
    "OAuthProviders",
    "OAuthState",
    "PoolAccess",
    "PoolOwner",
    "ProbeReport",
    "ProbeStep",
    "ResolvedCommand",
    "ServerConnection",
    "ServerManager",
    "ServerPool",
    "ServerSetChange",
    "ServerState",
    "StateListener",
    "TaskState",
    "TransportKind",
    "allow_prompts",
    "create_bearer_store",
    "current_relay",
    "elicitation_to_client",
    "entry_digest",
    "open_line_streams",
    "open_server_pool",
    "pool_socket_path",
    "probe_server",
    "query_pool",
    "read_hello_line",
    "relay_calls",
    "resolve_npx_command",
    "resolve_package_command",
    "sampling_to_client",
    "serve_pool",
    "server_fingerprint",
    "split_package_target",
]
