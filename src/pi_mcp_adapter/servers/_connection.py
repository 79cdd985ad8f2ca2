"""One connection to one MCP server, owned by one task.

Resource handling: :meth:`ServerConnection.run` is the owner task. Start it with
``await task_group.start(connection.run)``: it opens the transport and the SDK client, performs
the handshake and lists the server's tools, resources and prompts, all under one connect
deadline, then reports itself started and waits. Every other task may call the connection
concurrently; only the owner ever enters or exits the SDK's contexts (they must be exited by
the task that entered them). :meth:`close` asks the owner to exit and waits for it.

Protocol era: the entry's ``protocolVersion`` chooses it (legacy by default). On a
2026-07-28 connection the owner also holds the ``subscriptions/listen`` stream that replaces
pushed list-change notifications, and tool calls may become tasks (:mod:`._tasks`).

Error handling: a failure before the connection is started is translated into our exception
tree and raised from ``task_group.start``. After the start the owner never raises (it would
take the task group down with it): an ended connection records why in ``end_reason``, and
``on_end`` tells the owner of the connection.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AsyncExitStack
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from mcp import Client, MCPError
from mcp.client.extension import ClientExtension
from mcp.client.session import ClientSession
from mcp.client.subscriptions import ListenNotSupportedError, Subscription, SubscriptionLost
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter, ValidationError

from pi_mcp_adapter._errors import ConnectionLostError, NotMcpError, ServerUnavailableError
from pi_mcp_adapter.catalog import ServerMetadata
from pi_mcp_adapter.config import ServerEntry

from ._http_extras import open_unix_socket
from ._oauth import take_auth_denial
from ._oauth_prompt import connect_deadline
from ._pool._client import PoolAccess, open_pooled_session
from ._relay import AmbiguousCallerError, RelayBoard, current_relay
from ._state import TransportKind
from ._stderr import StderrCapture, terminal
from ._stdio import ProcessRecord
from ._tasks import (
    CALL_TOOL_OUTCOME,
    TASKS_EXTENSION,
    CallToolOutcome,
    RunningTask,
    TaskHandle,
    TasksExtension,
    follow_task,
    send_cancelling_late_task,
)
from ._translate import (
    HttpObservation,
    connect_error,
    connect_timeout_error,
    redact_url,
    request_error,
)
from ._transports import (
    AuthFactory,
    http_headers,
    http_options,
    open_sse,
    open_stdio,
    open_streamable_http,
    stdio_parameters,
)

logger = logging.getLogger("pi_mcp_adapter.servers")

CLOSE_TIMEOUT_S = 5.0
"""Upper bound for leaving the SDK client on close. The stdio transport's own shutdown
(close stdin, 2 s, SIGTERM to the process group, 2 s, SIGKILL) is shielded and always
completes; this only cuts short an HTTP session DELETE to an unresponsive server."""

MAX_LIST_PAGES = 1000
"""A server whose cursors never end must not hang a connect: 1,000 pages is far beyond any
real catalog (the 5,000-tool fixture needs 50)."""

_NOTIFICATION_DRAIN_CHECKPOINTS = 4
"""Scheduler turns given to the SDK's notification consumer after a relayed call returns, so a
log message sent just before the result is relayed before it (a few turns suffice; each is
microseconds)."""

_T = TypeVar("_T", bound=BaseModel)
_R = TypeVar("_R")

MAX_INPUT_ROUNDS = 10
"""Questions a 2026-07-28 server may embed in the results of one call before it is cut short
(the SDK's own client stops at the same count)."""

MetadataCallback = Callable[["ServerConnection", ServerMetadata], Awaitable[None]]
EndCallback = Callable[["ServerConnection"], None]
ResourceUpdatedCallback = Callable[[str, str], Awaitable[None]]
"""``(server, uri)``: the server said a resource a client subscribed to changed."""


def _client_info() -> types.Implementation:
    try:
        version = importlib_metadata.version("pi-mcp-adapter")
    except importlib_metadata.PackageNotFoundError:
        version = "0"
    return types.Implementation(name="pi-mcp-adapter", version=version)


class ServerConnection:
    """A live connection to one server (see the module docstring for the ownership rules).

    ``metadata`` is the server's catalog as of the last listing; ``transport`` says which
    transport carries the connection; ``connected_at`` is in the clock's seconds.
    """

    def __init__(
        self,
        server: str,
        entry: ServerEntry,
        *,
        log_dir: Path,
        npx_cache_path: Path | None = None,
        resolve_npx: bool = True,
        auth_factory: AuthFactory | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = anyio.current_time,
        on_metadata: MetadataCallback | None = None,
        on_end: EndCallback | None = None,
        relay_requests: bool = False,
        on_resource_updated: ResourceUpdatedCallback | None = None,
        relay_sampling: bool = True,
        pool: PoolAccess | None = None,
    ) -> None:
        self.server = server
        self.entry = entry
        self.log_dir = log_dir
        self.transport: TransportKind | None = None
        self.metadata = ServerMetadata()
        self.connected_at: float | None = None
        self.end_reason: str | None = None
        """Why a started connection ended unexpectedly; None while alive or after close()."""
        self._npx_cache_path = npx_cache_path
        self._resolve_npx = resolve_npx
        self._auth_factory = auth_factory
        self._environ = dict(os.environ if environ is None else environ)
        self._clock = clock
        self._on_metadata = on_metadata
        self._on_end = on_end
        self._client: Client | None = None
        self._started = False
        self._closing = False
        self._stop = anyio.Event()
        self._done = anyio.Event()
        self._changed = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._stdout_noise = ""
        self._capture: StderrCapture | None = None
        self._process: ProcessRecord | None = None
        self._auth: object = None
        self._relay_requests = relay_requests
        self._advertise_sampling = relay_sampling
        self._relays = RelayBoard()
        self._logs_relayed = 0
        self._on_resource_updated = on_resource_updated
        self._observation: HttpObservation | None = None
        self._pool = pool
        self._modern = False
        self._tasks = False
        self._owned: anyio.abc.TaskGroup | None = None
        """The owner's task group while connected: per-resource listen streams run in it."""
        self._resource_listens: dict[str, anyio.CancelScope] = {}
        self.running_tasks: dict[str, RunningTask] = {}
        """Tasks that calls on this connection are following, by task id."""

    # -- state ------------------------------------------------------------------------------

    @property
    def session_expired(self) -> bool:
        """A request carrying this connection's Streamable HTTP session id got 404.

        The spec says the server then no longer knows the session (it restarted) and the
        client must start a new one; the server rejected the request before running it, so
        retrying it on a new session cannot run it twice.
        """
        return self._observation is not None and self._observation.session_expired

    @property
    def protocol_era(self) -> Literal["legacy", "2026-07-28"]:
        """The protocol era the connection speaks (legacy until connected)."""
        return "2026-07-28" if self._modern else "legacy"

    @property
    def follows_tasks(self) -> bool:
        """The server advertised the tasks extension and the entry did not opt out."""
        return self._tasks

    @property
    def is_alive(self) -> bool:
        """Started, not asked to close, and the peer has not gone away."""
        return self._started and not self._stop.is_set() and not self._done.is_set()

    @property
    def process_id(self) -> int | None:
        """The id of the process this connection started for a stdio server, while it runs
        (on Linux the supervisor the server runs under, which leads its process group)."""
        process = self._process
        if process is None or process.returncode is not None or not self.is_alive:
            return None
        return process.pid

    @property
    def log_path(self) -> Path | None:
        """The stderr log of a stdio server, None for HTTP servers."""
        return self._capture.log_path if self._capture is not None else None

    # -- the owner task ---------------------------------------------------------------------

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[ServerConnection] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the connection: connect, report started, wait for close or loss, clean up.

        Raises (only before ``task_status.started``):
            ServerUnavailableError: a subclass saying why connecting failed.
        """
        timeout_s = self.entry.startup_timeout_s
        try:
            with anyio.CancelScope() as scope, connect_deadline(scope):
                self._scope = scope
                scope.deadline = anyio.current_time() + timeout_s
                plan: tuple[TransportKind, ...]
                if self.entry.command is not None:
                    pooled = self._pool is not None and self._pool.offers(self.entry)
                    plan = ("pool", "stdio") if pooled else ("stdio",)
                elif self.entry.socket is not None:
                    plan = ("socket",)
                elif self.entry.http_transport is not None:
                    plan = (self.entry.http_transport,)
                else:
                    plan = ("streamable-http", "sse")
                for kind in plan:
                    observation = HttpObservation()
                    try:
                        await self._serve(kind, scope, observation, task_status)
                        break
                    except Exception as exc:
                        if self._started:
                            self._note_end(f"the connection failed: {_first_line(exc)}")
                            break
                        if kind == "pool":
                            # Whatever kept the pool from serving it, the server is started
                            # here, within a start-up budget of its own.
                            logger.info(
                                "server %r: not from the pool (%s); starting it",
                                self.server,
                                _first_line(exc),
                            )
                            scope.deadline = anyio.current_time() + timeout_s
                            continue
                        if kind == "streamable-http" and observation.wants_sse_fallback:
                            logger.info(
                                "server %r: Streamable HTTP answered HTTP %s; trying SSE",
                                self.server,
                                observation.status,
                            )
                            continue
                        raise self._connect_error(exc, observation) from exc
            if not self._started:
                if self._closing:
                    raise ConnectionLostError(
                        self.server, f"server {self.server!r} was closed while connecting"
                    )
                raise connect_timeout_error(
                    self.server,
                    timeout_s=timeout_s,
                    stdout_noise=self._stdout_noise,
                    log_hint=self._log_hint(),
                )
        finally:
            self._client = None
            self._done.set()
            if self._started and self._on_end is not None:
                self._on_end(self)

    async def _serve(
        self,
        kind: TransportKind,
        scope: anyio.CancelScope,
        observation: HttpObservation,
        task_status: anyio.abc.TaskStatus[ServerConnection],
    ) -> None:
        transport = await self._open_transport(kind, observation)
        relayed: dict[str, Any] = {}
        if self._relay_requests:
            # Passing the callbacks is what advertises sampling and elicitation to the server.
            relayed = {
                "sampling_callback": self._relay_sampling,
                "elicitation_callback": self._relay_elicitation,
                "logging_callback": self._relay_log,
            }
            if not self._advertise_sampling:
                # A client with no model must not say it can sample: servers that check take
                # their other path, and those that ask anyway get the SDK's refusal.
                del relayed["sampling_callback"]
        # The pool hands over a session the gateway opened; it speaks the legacy era, and a
        # task on the gateway's own connection to the server is followed there.
        mode = "legacy" if kind == "pool" else self.entry.protocol_version
        extensions: list[ClientExtension] = []
        if mode != "legacy":
            if self.entry.tasks:
                extensions.append(TasksExtension())
            if self._relay_requests:
                # On 2026-07-28 a server logs only for requests that opt in with a level;
                # "debug" lets everything through, as a legacy connection does.
                relayed["log_level"] = "debug"
        async with (
            Client(
                transport,
                mode=mode,
                cache=None,  # results must reflect the server now, not a TTL the server chose
                message_handler=self._on_message,
                client_info=_client_info(),
                extensions=extensions or None,
                **relayed,
            ) as client,
            AsyncExitStack() as listening,
        ):
            self._modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
            if mode in MODERN_PROTOCOL_VERSIONS:
                # A pinned era adopts a made-up discovery with no capabilities; ask the server
                # for its own (a server that does not speak the era fails the connect here).
                try:
                    discovered = await client.session.send_discover(mode)
                    client.session.adopt(types.DiscoverResult.model_validate(discovered))
                except (MCPError, ValidationError, RuntimeError) as exc:
                    raise NotMcpError(
                        self.server,
                        f"server {self.server!r} does not speak the {mode} protocol "
                        f"(server/discover: {_first_line(exc)}); set its `protocolVersion` to "
                        '"auto" or "legacy"',
                    ) from exc
            subscription: Subscription | None = None
            if self._modern:
                # Listening before the first listing, so no change in between goes unseen.
                subscription = await self._listen(client, listening)
            self.metadata = await _fetch_metadata(client)
            self._observation = observation
            advertised = client.server_capabilities.extensions or {}
            self._tasks = self._modern and self.entry.tasks and TASKS_EXTENSION in advertised
            scope.deadline = math.inf
            self._client = client
            self.transport = kind
            self.connected_at = self._clock()
            self._started = True
            task_status.started(self)
            async with anyio.create_task_group() as tg:
                self._owned = tg
                tg.start_soon(self._refresh_on_change)
                if subscription is not None:
                    tg.start_soon(self._follow_changes, subscription)
                await self._stop.wait()
                tg.cancel_scope.cancel()
            self._owned = None
            self._resource_listens.clear()
            self._client = None
            scope.deadline = anyio.current_time() + CLOSE_TIMEOUT_S

    async def _open_transport(self, kind: TransportKind, observation: HttpObservation) -> Any:
        if kind == "stdio":
            params = await stdio_parameters(
                self.server,
                self.entry,
                environ=self._environ,
                npx_cache_path=self._npx_cache_path,
                resolve_npx=self._resolve_npx,
            )
            self._capture = StderrCapture(
                self.server, self.log_dir, echo=terminal() if self.entry.debug else None
            )
            self._process = ProcessRecord()
            return open_stdio(params, self._capture, self._process, self._on_eof)
        if kind == "pool":
            assert self._pool is not None
            return open_pooled_session(self._pool, self.server, self.entry, self._on_eof)
        if kind == "socket":
            assert self.entry.socket is not None
            return open_unix_socket(self.entry.socket, self._on_eof)
        url = self.entry.url
        if url is None:
            raise ConnectionLostError(self.server, f"server {self.server!r} has no `url`")
        headers = await http_headers(self.server, self.entry, self._environ)
        auth = self._auth_factory(self.server) if self._auth_factory is not None else None
        self._auth = auth
        options = http_options(self.server, self.entry, self._environ)
        opener = open_streamable_http if kind == "streamable-http" else open_sse
        return opener(
            url,
            headers=headers,
            auth=auth,
            observation=observation,
            on_eof=self._on_eof,
            options=options,
        )

    def _connect_error(
        self, exc: BaseException, observation: HttpObservation
    ) -> ServerUnavailableError:
        if self.entry.command is not None:
            target = self.entry.command
            process = self._process
            return connect_error(
                self.server,
                exc,
                target=target,
                stderr_tail=self._capture.tail() if self._capture is not None else "",
                log_hint=self._log_hint(),
                exit_code=process.returncode if process is not None else None,
                cwd=os.path.expanduser(self.entry.cwd) if self.entry.cwd else None,
            )
        if self.entry.socket is not None:
            return connect_error(self.server, exc, target=self.entry.socket, is_socket=True)
        return connect_error(
            self.server, exc, target=redact_url(self.entry.url or ""), observation=observation
        )

    def _log_hint(self) -> str:
        path = self.log_path
        return str(path) if path is not None else ""

    # -- events from the SDK ----------------------------------------------------------------

    def _on_eof(self) -> None:
        if not self._closing:
            if self.transport == "pool":
                # The pool stopped: no failure of the server's. The connection closes, and
                # the next use connects again (starting the server here if no pool runs).
                logger.info("server %r: the server pool ended the session", self.server)
                self._stop.set()
                return
            if self.entry.socket is not None:
                reason = "the server closed the socket"
            elif self.entry.command is None:
                reason = "the server closed the event stream"
            elif self._process is not None and self._process.returncode is not None:
                reason = f"the server process exited with code {self._process.returncode}"
            else:
                reason = "the server process exited"
            self._note_end(reason)

    def _note_end(self, reason: str) -> None:
        if not self._closing and self.end_reason is None:
            self.end_reason = reason
            logger.warning("server %r: connection lost: %s", self.server, reason)
        self._stop.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            # A stdio server printing non-MCP text; the SDK skips the line and goes on.
            if not self._stdout_noise:
                self._stdout_noise = _unparsed_input(message)[:200]
            return
        if isinstance(
            message,
            types.ToolListChangedNotification
            | types.ResourceListChangedNotification
            | types.PromptListChangedNotification,
        ):
            self._changed.set()
        elif isinstance(message, types.ResourceUpdatedNotification) and not self._modern:
            # On a 2026-07-28 connection the SDK hands the listen stream's events here as
            # well: the stream (``_follow_resource``) is the one that passes them on.
            await self._resource_updated(str(message.params.uri))

    async def _relay_sampling(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        try:
            relay = self._relays.route()
        except AmbiguousCallerError as exc:
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"Sampling refused: {exc}")
        if relay is None or relay.sampling is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="Sampling not supported: the client that made this call cannot sample",
            )
        with self._relays.asking(relay):
            return await relay.sampling(params)

    async def _relay_elicitation(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        try:
            relay = self._relays.route()
        except AmbiguousCallerError as exc:
            return types.ErrorData(
                code=types.INVALID_REQUEST, message=f"Elicitation refused: {exc}"
            )
        if relay is None or relay.elicitation is None:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message="Elicitation not supported: the client that made this call cannot "
                "ask its user",
            )
        with self._relays.asking(relay):
            return await relay.elicitation(params)

    async def _relay_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self._logs_relayed += 1
        try:
            relay = self._relays.route()
        except AmbiguousCallerError:
            relay = None
        if relay is not None and relay.log is not None:
            await relay.log(params)
            return
        logger.info("server %r logged (%s): %s", self.server, params.level, params.data)

    async def _listen(self, client: Client, stack: AsyncExitStack) -> Subscription | None:
        """On a 2026-07-28 connection, list changes arrive on a ``subscriptions/listen``
        stream instead of as pushed notifications; the owner task holds the stream."""
        try:
            return await stack.enter_async_context(
                client.listen(
                    tools_list_changed=True, prompts_list_changed=True, resources_list_changed=True
                )
            )
        except (MCPError, ListenNotSupportedError, SubscriptionLost) as exc:
            # A server without a listen handler answers "Method not found": it never tells
            # about changes, like a legacy server without listChanged.
            logger.info("server %r: no change notifications (%s)", self.server, _first_line(exc))
            return None

    async def _follow_changes(self, subscription: Subscription) -> None:
        try:
            async for event in subscription:
                if isinstance(event, ResourceUpdated):
                    await self._resource_updated(event.uri)
                else:
                    self._changed.set()
        except SubscriptionLost as exc:
            logger.info("server %r: change notifications ended (%s)", self.server, exc)

    async def _resource_updated(self, uri: str) -> None:
        if self._on_resource_updated is None:
            return
        try:
            await self._on_resource_updated(self.server, uri)
        except Exception as exc:  # a listener's failure must not end the connection
            logger.warning(
                "server %r: passing on the update of %s failed: %s", self.server, uri, exc
            )

    async def _refresh_on_change(self) -> None:
        while True:
            await self._changed.wait()
            # A burst of notifications collapses into one refresh.
            self._changed = anyio.Event()
            try:
                await self.refresh_metadata()
            except Exception as exc:
                logger.warning(
                    "server %r: refreshing after list_changed failed: %s",
                    self.server,
                    _first_line(exc),
                )

    # -- requests ---------------------------------------------------------------------------

    def _require_client(self, what: str) -> Client:
        client = self._client
        if client is None or not self.is_alive:
            reason = self.end_reason or "it is closed"
            raise ConnectionLostError(
                self.server, f"cannot send {what} to server {self.server!r}: {reason}"
            )
        return client

    async def _request(
        self,
        what: str,
        request: Any,
        result_type: type[_T] | TypeAdapter[_T],
        timeout_s: float | None,
        progress: ProgressFnT | None = None,
    ) -> _T:
        async def send(session: ClientSession, progress: ProgressFnT | None) -> _T:
            # No SDK timeout: the request's deadline is the one _exchange keeps, which
            # stands still while a person answers the server's questions.
            return await session.send_request(request, result_type, progress_callback=progress)

        return await self._exchange(what, send, timeout_s, progress)

    async def _exchange(
        self,
        what: str,
        send: Callable[[ClientSession, ProgressFnT | None], Awaitable[_R]],
        timeout_s: float | None,
        progress: ProgressFnT | None,
    ) -> _R:
        """Run ``send`` as the calling task's request: its relay routes what the server sends
        meanwhile, and its failures become our exceptions.

        ``timeout_s`` bounds the whole exchange (a task's polls included) except the time the
        caller spends answering the server's questions: the deadline stands still then
        (:meth:`RelayBoard.asking`). Leaving on the deadline cancels the request on the server
        (``notifications/cancelled``; a task gets ``tasks/cancel``), as any cancellation does.
        """
        client = self._require_client(what)
        relay = current_relay()
        if progress is None and relay is not None:
            progress = relay.progress
        try:
            with anyio.CancelScope() as deadline, self._relays.calling(relay, deadline):
                if timeout_s is not None:
                    deadline.deadline = anyio.current_time() + timeout_s
                result = await send(client.session, progress)
                if relay is not None and self._logs_relayed:
                    # Log notifications travel through the SDK's notification queue while the
                    # result goes straight to this task: let queued ones reach the caller first
                    # (only for servers that log at all; the turns cost a little on every call).
                    for _ in range(_NOTIFICATION_DRAIN_CHECKPOINTS):
                        await anyio.lowlevel.checkpoint()
            if deadline.cancelled_caught:
                raise MCPError(code=types.REQUEST_TIMEOUT, message=f"{what} timed out")
        except Exception as exc:
            denial = take_auth_denial(self._auth)
            if denial is not None:
                raise denial from exc
            error = request_error(self.server, exc, what=what, timeout_s=timeout_s)
            if isinstance(error, ConnectionLostError):
                self._note_end(error.message)
            raise error from exc
        return result

    async def call_tool(
        self,
        tool: str,
        arguments: Mapping[str, Any] | None,
        *,
        timeout_s: float | None,
        progress: ProgressFnT | None = None,
    ) -> types.CallToolResult:
        """Call ``tool`` and return the server's result untouched.

        The SDK's ``call_tool`` would validate ``structuredContent`` against the tool's output
        schema and raise on a mismatch; a gateway must pass results through, so this sends the
        request directly. An ``is_error`` result is a result, not an exception.

        On a 2026-07-28 connection, questions the server embeds in its answer
        (``input_required``) are answered by the caller's relay and the call is repeated with
        the answers; a call the server turns into a task is followed to its end (see
        :mod:`._tasks`), listed in :attr:`running_tasks` meanwhile, and cancelled on the server
        when the caller leaves early. ``timeout_s`` then bounds the whole call, less the time
        a person takes to answer.

        Raises:
            ConnectionLostError: the connection is closed or was lost during the call.
            RequestTimeoutError: no answer within ``timeout_s`` (the connection stays usable).
            ServerReportedError: the server answered with a JSON-RPC error, or its task
                failed or was cancelled.
        """
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(
                name=tool, arguments=dict(arguments) if arguments is not None else None
            )
        )
        what = f"tool {tool!r}"
        if not self._modern:
            return await self._request(what, request, types.CallToolResult, timeout_s, progress)

        async def send(
            session: ClientSession, progress: ProgressFnT | None
        ) -> types.CallToolResult:
            # A task's polls, questions and answers all count against the call's timeout
            # (kept by _exchange), except the time a person takes to answer.
            async def ask(request: types.CallToolRequest) -> CallToolOutcome:
                def send() -> Awaitable[CallToolOutcome]:
                    return session.send_request(
                        request, CALL_TOOL_OUTCOME, progress_callback=progress
                    )

                if self._tasks:
                    return await send_cancelling_late_task(session, send)
                return await send()

            outcome = await ask(request)
            rounds = 0
            while isinstance(outcome, types.InputRequiredResult):
                # The 2026-07-28 way of asking mid-call: answer, then call again.
                rounds += 1
                if rounds > MAX_INPUT_ROUNDS:
                    raise MCPError(
                        code=types.INTERNAL_ERROR,
                        message=f"the server asked for input {MAX_INPUT_ROUNDS} times",
                    )
                answers = await self._answer(outcome.input_requests or {})
                outcome = await ask(
                    types.CallToolRequest(
                        params=request.params.model_copy(
                            update={
                                "input_responses": answers or None,
                                "request_state": outcome.request_state,
                            }
                        )
                    )
                )
            if isinstance(outcome, TaskHandle):
                return await self._follow(session, tool, outcome)
            return outcome

        return await self._exchange(what, send, timeout_s, progress)

    async def _follow(
        self,
        session: ClientSession,
        tool: str,
        handle: TaskHandle,
    ) -> types.CallToolResult:
        record = RunningTask(
            server=self.server,
            tool=tool,
            task_id=handle.task_id,
            status=handle.status,
            started_at=self._clock(),
        )
        self.running_tasks[handle.task_id] = record
        try:
            # The task's questions go through the relays, which stop the call's deadline.
            return await follow_task(session, handle, answer=self._answer, record=record)
        finally:
            del self.running_tasks[handle.task_id]

    async def _answer(self, requests: types.InputRequests) -> types.InputResponses:
        """Answer the questions a 2026-07-28 server embedded in a result (or a task) the way
        the same questions sent as requests are answered: by the caller's relay."""
        answers: types.InputResponses = {}
        for key, request in requests.items():
            answer: types.InputResponse | types.ErrorData
            if isinstance(request, types.ElicitRequest):
                answer = await self._relay_elicitation(None, request.params)
            elif isinstance(request, types.CreateMessageRequest) and self._advertise_sampling:
                answer = await self._relay_sampling(None, request.params)
            elif isinstance(request, types.ListRootsRequest):
                answer = types.ListRootsResult(roots=[])
            else:
                answer = types.ErrorData(
                    code=types.INVALID_REQUEST,
                    message=f"this client cannot answer {request.method}",
                )
            if isinstance(answer, types.ErrorData):
                raise MCPError.from_error_data(answer)
            answers[key] = answer
        return answers

    async def read_resource(self, uri: str, *, timeout_s: float | None) -> types.ReadResourceResult:
        """Read the resource ``uri``. Raises like :meth:`call_tool`."""
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
        return await self._request(
            f"resource {uri!r}", request, types.ReadResourceResult, timeout_s
        )

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None, *, timeout_s: float | None
    ) -> types.GetPromptResult:
        """Render the prompt ``name`` with ``arguments``. Raises like :meth:`call_tool`."""
        request = types.GetPromptRequest(
            params=types.GetPromptRequestParams(
                name=name, arguments=dict(arguments) if arguments is not None else None
            )
        )
        return await self._request(f"prompt {name!r}", request, types.GetPromptResult, timeout_s)

    async def list_resource_templates(
        self, *, timeout_s: float | None
    ) -> list[types.ResourceTemplate]:
        """Every resource template of the server (none when it has no resources).

        Raises like :meth:`call_tool`.
        """
        client = self._require_client("a resource template listing")
        capabilities = client.session.server_capabilities or types.ServerCapabilities()
        if capabilities.resources is None:
            return []
        try:
            with anyio.fail_after(timeout_s if timeout_s is not None else math.inf):
                return await _list_all(client.session.list_resource_templates, "resource_templates")
        except TimeoutError as exc:
            raise request_error(
                self.server,
                MCPError(code=types.REQUEST_TIMEOUT, message="listing timed out"),
                what="the resource template listing",
                timeout_s=timeout_s,
            ) from exc
        except Exception as exc:
            raise request_error(self.server, exc, what="the resource template listing") from exc

    async def complete(
        self, params: types.CompleteRequestParams, *, timeout_s: float | None
    ) -> types.CompleteResult:
        """Ask for completions of a prompt or resource template argument (``params`` in the
        server's own names). Raises like :meth:`call_tool`."""
        request = types.CompleteRequest(params=params)
        return await self._request("a completion", request, types.CompleteResult, timeout_s)

    async def subscribe_resource(
        self, uri: str, *, subscribe: bool, timeout_s: float | None
    ) -> None:
        """Subscribe to (or, with ``subscribe=False``, unsubscribe from) updates of ``uri``.
        Raises like :meth:`call_tool`."""
        what = f"a {'' if subscribe else 'un'}subscription to {uri!r}"
        if self._modern:
            await self._listen_to_resource(uri, subscribe=subscribe, what=what, timeout_s=timeout_s)
            return
        request: Any
        if subscribe:
            request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
        else:
            request = types.UnsubscribeRequest(params=types.UnsubscribeRequestParams(uri=uri))
        await self._request(what, request, types.EmptyResult, timeout_s)

    async def _listen_to_resource(
        self, uri: str, *, subscribe: bool, what: str, timeout_s: float | None
    ) -> None:
        """On a 2026-07-28 connection a subscription is a ``subscriptions/listen`` stream for
        the resource, held in the owner's task group until unsubscribed or disconnected."""
        if not subscribe:
            scope = self._resource_listens.pop(uri, None)
            if scope is not None:
                scope.cancel()
            return
        if uri in self._resource_listens:
            return
        client = self._require_client(what)
        owned = self._owned
        if owned is None:
            raise ConnectionLostError(self.server, f"server {self.server!r} is not connected")
        try:
            with anyio.fail_after(timeout_s if timeout_s is not None else math.inf):
                await owned.start(self._follow_resource, client, uri)
        except Exception as exc:
            raise request_error(self.server, exc, what=what, timeout_s=timeout_s) from exc

    async def _follow_resource(
        self, client: Client, uri: str, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        with anyio.CancelScope() as scope:
            async with client.listen(resource_subscriptions=[uri]) as subscription:
                if uri not in (subscription.honored.resource_subscriptions or ()):
                    raise MCPError(
                        code=types.INVALID_PARAMS,
                        message=f"the server does not offer updates of {uri}",
                    )
                self._resource_listens[uri] = scope
                task_status.started()
                try:
                    async for event in subscription:
                        if isinstance(event, ResourceUpdated):
                            await self._resource_updated(event.uri)
                except SubscriptionLost as exc:
                    logger.info("server %r: updates of %s ended (%s)", self.server, uri, exc)
        if self._resource_listens.get(uri) is scope:
            del self._resource_listens[uri]

    async def ping(self, *, timeout_s: float) -> None:
        """Check that the server answers (raises like :meth:`call_tool`)."""
        if self._modern:
            # The 2026-07-28 era has no ping; a first page of tools is the cheapest question.
            request = types.ListToolsRequest(params=types.PaginatedRequestParams())
            await self._request("ping", request, types.ListToolsResult, timeout_s)
            return
        await self._request("ping", types.PingRequest(), types.EmptyResult, timeout_s)

    async def refresh_metadata(self) -> ServerMetadata:
        """List tools, resources and prompts again, store and return them.

        Raises:
            ConnectionLostError: the connection is closed or was lost.
            RequestTimeoutError: a listing took longer than the request timeout.
            ServerReportedError: the server rejected a listing.
        """
        client = self._require_client("a catalog listing")
        timeout_s = self.entry.request_timeout_s
        try:
            with anyio.fail_after(timeout_s):
                metadata = await _fetch_metadata(client)
        except TimeoutError as exc:
            raise request_error(
                self.server,
                MCPError(code=types.REQUEST_TIMEOUT, message="listing timed out"),
                what="the catalog listing",
                timeout_s=timeout_s,
            ) from exc
        except Exception as exc:
            error = request_error(self.server, exc, what="the catalog listing")
            if isinstance(error, ConnectionLostError):
                self._note_end(error.message)
            raise error from exc
        self.metadata = metadata
        if self._on_metadata is not None:
            await self._on_metadata(self, metadata)
        return metadata

    # -- closing ----------------------------------------------------------------------------

    def request_close(self) -> None:
        """Ask the owner to close the connection (or abandon connecting); do not wait."""
        self._closing = True
        if not self._started and self._scope is not None:
            self._scope.cancel()
        self._stop.set()

    async def close(self) -> None:
        """Close the connection and wait until its resources are released (idempotent)."""
        self.request_close()
        await self._done.wait()

    async def wait_closed(self) -> None:
        """Wait until the owner task has finished."""
        await self._done.wait()


async def _fetch_metadata(client: Client) -> ServerMetadata:
    session = client.session
    capabilities = session.server_capabilities or types.ServerCapabilities()
    tools = await _list_all(session.list_tools, "tools")
    resources: list[Any] = []
    prompts: list[Any] = []
    if capabilities.resources is not None:
        resources = await _list_all(session.list_resources, "resources")
    if capabilities.prompts is not None:
        prompts = await _list_all(session.list_prompts, "prompts")
    return ServerMetadata.from_mcp(tools, resources, prompts, session.instructions)


async def _list_all(fetch: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """Every item of a paginated listing; a server without the method has none."""
    items: list[Any] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        try:
            page = await fetch(params=params)
        except MCPError as exc:
            if exc.code == types.METHOD_NOT_FOUND and not items:
                return []
            raise
        items.extend(getattr(page, field))
        cursor = page.next_cursor
        if cursor is None:
            return items
        if cursor in seen:
            raise MCPError(
                code=types.INTERNAL_ERROR, message=f"{field} pagination repeated a cursor"
            )
        seen.add(cursor)
    raise MCPError(
        code=types.INTERNAL_ERROR, message=f"{field} listing exceeded {MAX_LIST_PAGES} pages"
    )


def _unparsed_input(exc: Exception) -> str:
    """The text a stdio server printed that failed to parse as JSON-RPC, when known."""
    if isinstance(exc, ValidationError):
        for detail in exc.errors():
            if isinstance(detail.get("input"), str):
                return str(detail["input"])
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
