"""The server pool's daemon: a running gateway lends its stdio server connections to other
processes (the client side is :mod:`._client`, beside this module).

Every ``pi-mcp`` command, pi session or Python agent would otherwise start its own copy of every
server it uses (a second or more each). While a gateway runs, it serves the socket described in
:mod:`._client`: a client asks for one server by name and fingerprint, and gets an MCP session
that the pool answers from its own connection to that server, so N sessions share one server
process.

What is shared is the transport only, which is why the daemon lives in the servers layer and
not with the hosts: it works on a :class:`~pi_mcp_adapter.servers.ServerManager` and the current
server entries (a :class:`PoolOwner`, which ``McpAdapter`` is), and never runs the engine's
call pipeline for a client: the client's engine has already looked the tool up, checked the
arguments, asked for approval and will record the call; the pool forwards the request to the
server (counted in flight, so the server is not closed as idle under it) and relays what the
server sends during the call (progress, log messages, sampling and elicitation requests) to
that client alone. A host adds what is its own (request telemetry) through ``middleware``.

Resource handling: :meth:`ServerPool.serving` holds ``<agent dir>/pool/pool.lock`` for as long
as it serves, so one process per agent dir owns the socket; another gateway of the same agent
dir serves without a pool. The socket is created 0600 in a 0700 directory (only the user can
connect) and removed when serving ends; a socket left by a process that died is replaced.
Every pooled session ends when the pool stops; its clients notice at once (end of stream) and
start the server themselves on the next use.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from filelock import FileLock, Timeout
from mcp import MCPError
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from pi_mcp_adapter._errors import McpAdapterError, ServerReportedError, UsageError
from pi_mcp_adapter._execution_context import (
    context_differences,
    context_fingerprint,
    execution_context,
    peer_execution_context,
)
from pi_mcp_adapter._signals import stop_on_signal
from pi_mcp_adapter.catalog import ServerMetadata
from pi_mcp_adapter.config import ServerEntry
from pi_mcp_adapter.servers._http_extras import open_line_streams
from pi_mcp_adapter.servers._manager import ServerManager
from pi_mcp_adapter.servers._relay import (
    CallRelay,
    elicitation_to_client,
    relay_calls,
    sampling_to_client,
)

from ._client import POOL_PROTOCOL, pool_socket_path, read_hello_line, server_fingerprint

__all__ = ["PoolOwner", "ServerPool", "open_server_pool", "serve_pool"]

logger = logging.getLogger("pi_mcp_adapter.pool")

LOCK_NAME = "pool.lock"
HELLO_TIMEOUT_S = 10.0
"""A client writes its hello as soon as it connects; one that does not is dropped."""
_T = TypeVar("_T")
Middleware = Callable[[list[Any]], list[Any]]
"""What a host does to each pooled session's request middleware (the gateway's telemetry)."""


class PoolOwner(Protocol):
    """What the pool serves from: the running adapter of the agent dir (``McpAdapter``)."""

    @property
    def agent_dir(self) -> Path: ...

    @property
    def project_dir(self) -> Path: ...

    @property
    def servers(self) -> Mapping[str, ServerEntry]:
        """The current entries (a configuration reload replaces them)."""
        ...

    def server_manager(self) -> ServerManager: ...


class PoolHost(PoolOwner, Protocol):
    """An owner the pool opens and closes itself, and keeps in step with its configuration."""

    async def __aenter__(self) -> Any: ...

    async def __aexit__(self, *exc_info: object) -> Any: ...

    async def watch_config(self) -> None: ...


_CONNECTION_LOST = -32000
"""The JSON-RPC code a client's SDK reads as "connection closed"."""


class _Session:
    """One client's MCP session with one pooled server."""

    def __init__(self, server: str, fingerprint: str) -> None:
        self.server = server
        self.fingerprint = fingerprint
        self.peer: Any = None
        """The SDK's server session, known from the client's first request."""
        self.subscriptions: set[str] = set()
        self.closed = anyio.Event()


class ServerPool:
    """The pool of one running adapter (see the module docstring)."""

    def __init__(
        self, adapter: PoolOwner, *, cwd: Path | None = None, middleware: Middleware | None = None
    ) -> None:
        self.adapter = adapter
        self._middleware = middleware
        self.socket_path = pool_socket_path(adapter.agent_dir)
        self._cwd = cwd or Path.cwd()
        self._sessions: list[_Session] = []
        self._upstream_subscriptions: set[tuple[str, str]] = set()
        self._started_at = time.time()
        self._stop: Callable[[], None] = _stop_this_process

    # -- serving ----------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def serving(self, *, stop: Callable[[], None] | None = None) -> AsyncIterator[bool]:
        """Serve the pool socket while the block runs; yields False when another process
        owns the agent dir's pool (then nothing is served).

        ``stop`` is what a client's stop request does (default: SIGTERM to this process, which
        the gateway answers by closing everything).
        """
        if stop is not None:
            self._stop = stop
        directory = self.socket_path.parent
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)  # an existing directory may have been made wider
        lock = FileLock(str(directory / LOCK_NAME))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            logger.info("another process serves the server pool of %s", self.adapter.agent_dir)
            yield False
            return
        try:
            # The lock is ours, so a socket still there belongs to a process that died.
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()
            try:
                listener = await anyio.create_unix_listener(self.socket_path, mode=0o600)
            except OSError as exc:  # a path too long for a socket, a read-only directory
                logger.warning(
                    "the server pool cannot listen on %s (%s); serving without it",
                    self.socket_path,
                    exc.strerror or exc,
                )
                yield False
                return
            manager = self.adapter.server_manager()
            stop_changes = manager.on_tools_changed(self._tools_changed)
            stop_updates = manager.on_resource_updated(self._resource_updated)
            try:
                async with listener, anyio.create_task_group() as tg:
                    tg.start_soon(listener.serve, self._handle)
                    logger.info("server pool listening on %s", self.socket_path)
                    try:
                        yield True
                    finally:
                        tg.cancel_scope.cancel()
            finally:
                stop_changes()
                stop_updates()
                with contextlib.suppress(FileNotFoundError):
                    self.socket_path.unlink()
        finally:
            lock.release()

    async def _handle(self, stream: anyio.abc.ByteStream) -> None:
        # One client's connection must never end the listener's task group (the pool).
        try:
            await self._handle_one(stream)
        except Exception:
            logger.exception("server pool: a connection failed")

    async def _handle_one(self, stream: anyio.abc.ByteStream) -> None:
        async with stream:
            try:
                with anyio.fail_after(HELLO_TIMEOUT_S):
                    hello, received = await read_hello_line(stream)
            except (ValueError, TimeoutError, OSError):
                return
            if hello.get("pool") != POOL_PROTOCOL:
                await _answer(stream, ok=False, reason="unsupported pool protocol version")
            elif hello.get("status") is True:
                await _answer(stream, ok=True, **self.status())
            elif hello.get("stop") is True:
                differences = _caller_differences(stream, hello)
                if {"unknown", "namespace user", "namespace pid"} & set(differences):
                    # A caller that could not signal this process itself may not stop it.
                    await _answer(stream, ok=False, reason=_another_context(differences))
                    return
                await _answer(stream, ok=True, pid=os.getpid())
                self._stop()
            elif isinstance(hello.get("server"), str):
                differences = _caller_differences(stream, hello, claimed=True)
                if differences:
                    # The pool's servers run with this process's namespaces, cgroup, limits
                    # and scheduling: the client starts the server itself, in its own.
                    await _answer(stream, ok=False, reason=_another_context(differences))
                    return
                await self._serve_session(stream, hello, received)
            else:
                await _answer(stream, ok=False, reason="unknown request")

    def status(self) -> dict[str, Any]:
        """What the pool holds: for the ``status`` request and ``pi-mcp status``."""
        manager = self.adapter.server_manager()
        servers: dict[str, Any] = {}
        for name, entry in self.adapter.servers.items():
            if entry.command is None or not entry.is_enabled:
                continue
            state = manager.state(name) if name in manager.server_names else None
            servers[name] = {
                "status": state.status if state is not None else "closed",
                "pid": manager.process_id(name) if state is not None else None,
                "sessions": sum(1 for s in self._sessions if s.server == name),
            }
        return {
            "pid": os.getpid(),
            "socket": str(self.socket_path),
            "agentDir": str(self.adapter.agent_dir),
            "projectDir": str(self.adapter.project_dir),
            "startedAt": self._started_at,
            "servers": servers,
            "runningTasks": [
                {
                    "server": task.server,
                    "tool": task.tool,
                    "taskId": task.task_id,
                    "status": task.status,
                    "ageS": task.age_s,
                }
                for task in manager.running_tasks()
            ],
        }

    # -- one client's session ---------------------------------------------------------------

    async def _serve_session(
        self, stream: anyio.abc.ByteStream, hello: Mapping[str, Any], received: bytes
    ) -> None:
        name = str(hello["server"])
        manager = self.adapter.server_manager()
        entry = self.adapter.servers.get(name)
        fingerprint = server_fingerprint(entry, cwd=self._cwd) if entry is not None else None
        if entry is None or entry.command is None or name not in manager.server_names:
            await _answer(stream, ok=False, reason=f"the pool holds no stdio server {name!r}")
            return
        if hello.get("fingerprint") != fingerprint:
            await _answer(stream, ok=False, reason=f"the pool's entry for {name!r} differs")
            return
        try:
            await manager.connect(name)
        except McpAdapterError as exc:
            await _answer(stream, ok=False, reason=str(exc).splitlines()[0])
            return
        await _answer(stream, ok=True)
        session = _Session(name, str(fingerprint))
        self._sessions.append(session)
        server = self._session_server(session, manager)
        try:
            async with open_line_streams(stream, session.closed.set, received=received) as (
                read,
                write,
            ):
                await server.run(read, write, server.create_initialization_options())
        except Exception as exc:  # one client's broken session must not stop the pool
            logger.info("server pool: a session of %r ended: %s", name, exc)
        finally:
            self._sessions.remove(session)

    def _session_server(self, session: _Session, manager: ServerManager) -> Server[Any]:
        name = session.server
        metadata = manager.metadata(name) or ServerMetadata()

        async def live_metadata(ctx: ServerRequestContext[Any, Any]) -> ServerMetadata:
            self._check_current(session)
            session.peer = ctx.session
            known = manager.metadata(name)
            if known is None:  # closed as idle meanwhile: connect again
                await _forwarded(manager.connect(name))
                known = manager.metadata(name)
            return known or ServerMetadata()

        async def list_tools(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            tools = (await live_metadata(ctx)).tools
            return types.ListToolsResult(tools=[types.Tool.model_validate(t) for t in tools])

        async def list_resources(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            items = (await live_metadata(ctx)).resources
            return types.ListResourcesResult(
                resources=[types.Resource.model_validate(r) for r in items]
            )

        async def list_prompts(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListPromptsResult:
            items = (await live_metadata(ctx)).prompts
            return types.ListPromptsResult(prompts=[types.Prompt.model_validate(p) for p in items])

        async def call_tool(
            ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
        ) -> types.CallToolResult:
            self._check_current(session)
            with relay_calls(_relay(ctx)):
                return await _forwarded(
                    manager.call_tool(name, params.name, params.arguments or {})
                )

        async def read_resource(
            ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
        ) -> types.ReadResourceResult:
            self._check_current(session)
            with relay_calls(_relay(ctx)):
                return await _forwarded(manager.read_resource(name, str(params.uri)))

        async def list_resource_templates(
            ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            self._check_current(session)
            templates = await _forwarded(manager.list_resource_templates(name))
            return types.ListResourceTemplatesResult(resource_templates=templates)

        async def get_prompt(
            ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
        ) -> types.GetPromptResult:
            self._check_current(session)
            with relay_calls(_relay(ctx)):
                return await _forwarded(manager.get_prompt(name, params.name, params.arguments))

        async def complete(
            ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
        ) -> types.CompleteResult:
            self._check_current(session)
            return await _forwarded(manager.complete(name, params))

        async def subscribe(
            ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
        ) -> types.EmptyResult:
            self._check_current(session)
            session.peer = ctx.session
            uri = str(params.uri)
            if (name, uri) not in self._upstream_subscriptions:
                await _forwarded(manager.subscribe_resource(name, uri))
                self._upstream_subscriptions.add((name, uri))
            session.subscriptions.add(uri)
            return types.EmptyResult()

        async def unsubscribe(
            ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
        ) -> types.EmptyResult:
            # The server stays subscribed for the pool: other sessions may want the updates.
            session.subscriptions.discard(str(params.uri))
            return types.EmptyResult()

        server: Server[Any] = Server(
            f"pi-mcp pool: {name}",
            instructions=metadata.instructions,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
        )
        if self._middleware is not None:
            # As in the gateway: request spans only when telemetry is on (docs/observability.md).
            server.middleware = self._middleware(list(server.middleware))
        return server

    def _check_current(self, session: _Session) -> None:
        """Refuse a session whose server was reconfigured since it began: its client must
        compare fingerprints again (and start its own server if they now differ)."""
        entry = self.adapter.servers.get(session.server)
        current = server_fingerprint(entry, cwd=self._cwd) if entry is not None else None
        if current != session.fingerprint:
            raise MCPError(
                code=_CONNECTION_LOST,
                message=f"server {session.server!r} was reconfigured in the pool; reconnect",
            )

    # -- what servers send on their own ---------------------------------------------------

    async def _tools_changed(self, server: str, metadata: ServerMetadata) -> None:
        for session in list(self._sessions):
            if session.server == server and session.peer is not None:
                with contextlib.suppress(Exception):  # that client is going away
                    await session.peer.send_tool_list_changed()

    async def _resource_updated(self, server: str, uri: str) -> None:
        for session in list(self._sessions):
            if session.server == server and uri in session.subscriptions and session.peer:
                with contextlib.suppress(Exception):
                    await session.peer.send_resource_updated(uri)


def _caller_differences(
    stream: anyio.abc.ByteStream, hello: Mapping[str, Any], *, claimed: bool = False
) -> list[str]:
    """How the execution context of the client's process, read from that process itself,
    differs from the pool's (empty: none). With ``claimed``, the context the client says it
    has must also agree (a client that cannot tell is refused: it runs the server itself)."""
    raw = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
    caller = peer_execution_context(raw) if raw is not None else None
    differences = context_differences(execution_context(), caller)
    if (
        claimed
        and not differences
        and caller is not None
        and hello.get("context") != context_fingerprint(caller)
    ):
        differences = ["the context the client sent"]
    return differences


def _another_context(differences: list[str]) -> str:
    return "the pool runs in another execution context (" + ", ".join(differences) + ")"


def _relay(ctx: ServerRequestContext[Any, Any]) -> CallRelay:
    """Route what the server sends during this request to the client that made it."""
    session = ctx.session
    capabilities = session.client_capabilities or types.ClientCapabilities()
    meta: Mapping[str, Any] = ctx.meta or {}
    progress_token = meta.get("progress_token", meta.get("progressToken"))

    async def report(progress: float, total: float | None, message: str | None) -> None:
        await session.report_progress(progress, total, message)

    async def log(params: types.LoggingMessageNotificationParams) -> None:
        await session.send_notification(
            types.LoggingMessageNotification(params=params), related_request_id=ctx.request_id
        )

    return CallRelay(
        caller=session,
        progress=report if progress_token is not None else None,
        sampling=(
            sampling_to_client(session, ctx.request_id)
            if capabilities.sampling is not None
            else None
        ),
        elicitation=(
            elicitation_to_client(session, ctx.request_id)
            if capabilities.elicitation is not None
            else None
        ),
        log=log,
    )


async def _forwarded(call: Awaitable[_T]) -> _T:
    """``await call``, with the engine's errors given back to the client as JSON-RPC errors:
    the server's own error as it sent it, anything else as a lost connection."""
    try:
        return await call
    except ServerReportedError as exc:
        cause = exc.__cause__
        if isinstance(cause, MCPError):
            raise MCPError(code=cause.code, message=cause.message, data=cause.data) from exc
        raise MCPError(code=exc.code, message=exc.message, data=exc.data) from exc
    except McpAdapterError as exc:
        raise MCPError(code=_CONNECTION_LOST, message=str(exc)) from exc


async def _answer(stream: anyio.abc.ByteStream, *, ok: bool, **fields: Any) -> None:
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.send(json.dumps({"ok": ok, **fields}).encode() + b"\n")


def _stop_this_process() -> None:
    # The gateway stops on SIGTERM, closing every server; a stop request means the same.
    os.kill(os.getpid(), signal.SIGTERM)


@contextlib.asynccontextmanager
async def open_server_pool(
    adapter: PoolOwner, *, middleware: Middleware | None = None
) -> AsyncIterator[ServerPool | None]:
    """Serve ``adapter``'s stdio servers as the agent dir's pool while the block runs.

    Yields None (and serves nothing) when another process already serves that pool.
    """
    pool = ServerPool(adapter, middleware=middleware)
    async with pool.serving() as serving:
        yield pool if serving else None


async def serve_pool(
    adapter: PoolHost,
    *,
    announce: Callable[[str], None] | None = None,
    open_pool: Callable[[Any], AbstractAsyncContextManager[ServerPool | None]] = open_server_pool,
) -> signal.Signals | None:
    """Open ``adapter`` and serve only its pool (no MCP transport of its own) until a stop
    request, SIGINT, SIGTERM or SIGHUP; then close every server. ``open_pool`` opens the pool
    (and whatever a host runs beside it).

    Returns:
        The signal that stopped the pool.

    Raises:
        UsageError: another process serves this agent dir's pool already.
    """
    received: list[signal.Signals] = []
    async with adapter, anyio.create_task_group() as tg:
        await tg.start(
            stop_on_signal, tg.cancel_scope.cancel, received, logger, "closing every pooled server"
        )
        async with open_pool(adapter) as pool:
            if pool is None:
                raise UsageError(f"a server pool already serves {adapter.agent_dir}")
            (announce or _print_socket)(str(pool.socket_path))
            # An edited configuration takes effect without a restart; sessions of a server
            # whose entry changed are refused from then on (see ``_check_current``).
            tg.start_soon(adapter.watch_config)
            await anyio.sleep_forever()
    return received[0] if received else None


def _print_socket(path: str) -> None:
    sys.stdout.write(f"pi-mcp server pool listening on {path}\n")
    sys.stdout.flush()
