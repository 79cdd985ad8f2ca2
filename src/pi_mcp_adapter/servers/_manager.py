"""The server manager: every configured server's connection, state and lifecycle.

Resource handling: ``async with ServerManager(...) as manager`` owns one task group. Connection
owner tasks, connect attempts and the health-check loop all live in it; leaving the block stops
the health checks, closes every connection (stdio children are stopped, their process groups
killed after a grace period) and cancels whatever is left. The manager cannot be re-entered.

Connects are deduplicated: one attempt per server is in flight at a time and every caller awaits
it. Each attempt carries a generation number; closing or reconnecting a server moves the
generation on, so an older attempt that finishes late closes itself instead of installing stale
state.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

import anyio
import anyio.abc
import anyio.lowlevel
from anyio import AsyncContextManagerMixin

from pi_mcp_adapter._errors import (
    ConnectionLostError,
    ConnectTimeoutError,
    McpAdapterError,
    NeedsAuthError,
    ServerBackoffError,
    ServerDisabledError,
    ServerNotConfiguredError,
    ServerStartError,
    ServerUnavailableError,
    ServerUntrustedError,
    UsageError,
)
from pi_mcp_adapter.catalog import ServerMetadata
from pi_mcp_adapter.config import ServerEntry, Settings

from ._failures import DEFAULT_BACKOFF_S, FailureMemory, backoff_after_s
from ._lifecycle import (
    HEALTH_PING_TIMEOUT_S,
    SHUTDOWN_TIMEOUT_S,
    connects_at_start,
    health_check_interval_s,
    idle_timeout_s,
    is_kept_alive,
    keep_alive_retry_delay_s,
)
from ._state import ConnectionStatus, ServerState, TaskState, TransportKind

if TYPE_CHECKING:
    # The connection module pulls in the MCP SDK (most of a second); it is imported when the
    # first connect begins, so that commands answered from the cache never pay for it.
    import mcp_types as types
    from mcp.shared.dispatcher import ProgressFnT

    from ._connection import ServerConnection
    from ._pool._client import PoolAccess
    from ._transports import AuthFactory

logger = logging.getLogger("pi_mcp_adapter.servers")

HEALTH_CHECK_SLOTS_PER_STEP = 500
"""A health-check pass yields to other tasks after this many servers: a few milliseconds of
work at most, however many servers are configured."""

MetadataListener = Callable[[str, ServerMetadata], Awaitable[None] | None]
"""``(server_name, metadata)``; may be a plain function or a coroutine function."""

StateListener = Callable[[ServerState], None]
"""Called with a server's new state each time its status changes."""


class _Attempt:
    """One in-flight connect; every caller that asked for the server waits on ``done``."""

    def __init__(self, generation: int, connection: ServerConnection) -> None:
        self.generation = generation
        self.connection = connection
        self.done = anyio.Event()
        self.result: ServerConnection | None = None
        self.error: ServerUnavailableError | None = None
        self.superseded = False
        """Set when a reconnect replaced this attempt: its waiters follow the new one."""


class _Slot:
    """Everything the manager tracks about one configured server."""

    def __init__(self, name: str, entry: ServerEntry) -> None:
        self.name = name
        self.entry = entry
        self.connection: ServerConnection | None = None
        self.attempt: _Attempt | None = None
        self.generation = 0
        self.status: ConnectionStatus = "closed" if entry.is_enabled else "disabled"
        if entry.untrusted is not None:
            self.status = "untrusted"
        self.transport: TransportKind | None = None
        self.error: str | None = None
        self.failed_at: float | None = None
        self.backoff_until: float | None = None
        self.in_flight = 0
        self.last_used_at: float | None = None
        self.has_history = False
        self.has_connected = False
        """True once a connect finished, either way: the next success is a reconnect."""
        self.detached = False
        """Removed or replaced by :meth:`ServerManager.set_servers`: never connects again."""
        self.keep_alive_failures = 0
        self.keep_alive_next_at: float | None = None


@dataclass(frozen=True, slots=True)
class ServerSetChange:
    """What :meth:`ServerManager.set_servers` did, by server name."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    """Servers whose entry changed: their connection is closed; the next use connects anew."""

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.replaced)


class ServerManager(AsyncContextManagerMixin):
    """Connections to a set of configured servers, with dedupe, backoff and lifecycle.

    ``clock`` returns monotonic seconds and drives idle, backoff and keep-alive timing (tests
    inject a fake one). ``backoff_s`` is how long after a failed connect further attempts fail
    fast with :class:`ServerBackoffError`. ``auth_factory(server_name)`` may return an
    ``httpx2.Auth`` (such as an OAuth provider) for HTTP servers; it is called on every connect,
    so it should hand out one long-lived provider per server. ``environ`` is the environment
    stdio servers inherit and ``bearerTokenEnv`` is read from (default: ``os.environ``).

    With ``failures`` (a :class:`FailureMemory`), failed connects are remembered across
    processes: a server that failed recently in any process starts in backoff here too, and the
    backoff doubles with each consecutive failure (up to ten minutes). A successful connect
    clears the record.

    With ``pool``, a stdio server is first asked of the warm pool of a running gateway (see
    :mod:`pi_mcp_adapter.servers._pool`); when none serves it, it is started here.
    """

    def __init__(
        self,
        servers: Mapping[str, ServerEntry],
        settings: Settings | None = None,
        *,
        log_dir: Path,
        npx_cache_path: Path | None = None,
        resolve_npx: bool = True,
        auth_factory: AuthFactory | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        backoff_s: float = DEFAULT_BACKOFF_S,
        relay_requests: bool = False,
        failures: FailureMemory | None = None,
        relay_sampling: bool = True,
        pool: PoolAccess | None = None,
    ) -> None:
        if backoff_s < 0:
            raise ValueError("backoff_s cannot be negative")
        self._settings = settings if settings is not None else Settings()
        self._slots = {name: _Slot(name, entry) for name, entry in servers.items()}
        self._log_dir = log_dir
        self._npx_cache_path = npx_cache_path
        self._resolve_npx = resolve_npx
        self._auth_factory = auth_factory
        self._environ = environ
        self._clock = clock
        self._backoff_s = backoff_s
        self._relay_requests = relay_requests
        self._relay_sampling = relay_sampling
        self._failures = failures
        self._pool = pool
        self._tools_changed: list[MetadataListener] = []
        self._reconnected: list[MetadataListener] = []
        self._resource_listeners: list[Callable[[str, str], Awaitable[None]]] = []
        self._state_listeners: list[StateListener] = []
        self._tg: anyio.abc.TaskGroup | None = None
        self._health_scope: anyio.CancelScope | None = None
        self._entered = False
        self._exiting = False
        self._limiter: anyio.CapacityLimiter | None = None
        self._detached: list[_Slot] = []
        self._detached_attempts: list[_Attempt] = []

    # -- context ----------------------------------------------------------------------------

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Self]:
        if self._entered:
            raise UsageError("a ServerManager can be entered only once; create a new one")
        self._entered = True
        self._limiter = anyio.CapacityLimiter(max(1, self._settings.startup_concurrency))
        self._recall_failures()
        # The body's own exception is raised after the task group, not through it: it would
        # come back wrapped in an ExceptionGroup, changing the type the caller sees. Child
        # tasks never raise, so there is nothing else for the group to report.
        body_error: Exception | None = None
        async with anyio.create_task_group() as tg:
            self._tg = tg
            interval_s = health_check_interval_s(self._settings)
            if interval_s > 0:
                tg.start_soon(self._health_loop, interval_s)
            try:
                yield self
            except Exception as exc:
                body_error = exc
            finally:
                self._exiting = True
                if self._health_scope is not None:
                    self._health_scope.cancel()
                try:
                    with anyio.CancelScope(shield=True), anyio.move_on_after(SHUTDOWN_TIMEOUT_S):
                        await self.close_all()
                finally:
                    tg.cancel_scope.cancel()
                    self._tg = None
        if body_error is not None:
            raise body_error

    # -- subscriptions ----------------------------------------------------------------------

    def on_tools_changed(self, listener: MetadataListener) -> Callable[[], None]:
        """Call ``listener(server, metadata)`` whenever a server's catalog is (re)loaded.

        That is: after every successful connect, after a ``list_changed`` notification was
        followed by a refresh, and after :meth:`refresh`. Returns a function that unsubscribes.
        Listener errors are logged and never affect the connection.
        """
        self._tools_changed.append(listener)
        return lambda: self._tools_changed.remove(listener)

    def on_reconnect(self, listener: MetadataListener) -> Callable[[], None]:
        """Call ``listener(server, metadata)`` when a server connects again.

        "Again" means after an earlier connection or failed attempt, whatever caused it (the
        next use, a health check, the end of a turn, :meth:`reconnect`). Returns a function that
        unsubscribes.
        """
        self._reconnected.append(listener)
        return lambda: self._reconnected.remove(listener)

    def on_resource_updated(
        self, listener: Callable[[str, str], Awaitable[None]]
    ) -> Callable[[], None]:
        """Call ``listener(server, uri)`` when a server says a subscribed resource changed.
        Returns a function that unsubscribes."""
        self._resource_listeners.append(listener)
        return lambda: self._resource_listeners.remove(listener)

    async def _resource_updated(self, server: str, uri: str) -> None:
        for listener in list(self._resource_listeners):
            try:
                await listener(server, uri)
            except Exception:
                logger.exception("resource listener %r failed for server %r", listener, server)

    def on_state_changed(self, listener: StateListener) -> Callable[[], None]:
        """Call ``listener(state)`` whenever a server's status changes (connecting, connected,
        failed, needs-auth, closed), from the task that changed it. Returns a function that
        unsubscribes. Listener errors are logged and never affect the connection.
        """
        self._state_listeners.append(listener)
        return lambda: self._state_listeners.remove(listener)

    # -- queries ----------------------------------------------------------------------------

    @property
    def server_names(self) -> tuple[str, ...]:
        return tuple(self._slots)

    def now(self) -> float:
        """The manager's clock, in the seconds that :class:`ServerState` times use."""
        return self._clock()

    def state(self, name: str) -> ServerState:
        """A snapshot of ``name``'s status and counters.

        Raises:
            ServerNotConfiguredError: no server of that name.
        """
        slot = self._slot(name)
        connection = slot.connection
        live = connection is not None and connection.is_alive
        status, error, failed_at = slot.status, slot.error, slot.failed_at
        if connection is not None and not live and status == "connected":
            # The owner task has not finished closing yet; report what already happened.
            if connection.end_reason is not None:
                status, error = "failed", f"connection lost: {connection.end_reason}"
            else:
                status = "closed"
        return ServerState(
            server=name,
            status=status,
            transport=slot.transport,
            error=error,
            failed_at=failed_at,
            connected_at=connection.connected_at if connection is not None and live else None,
            in_flight=slot.in_flight,
            last_used_at=slot.last_used_at,
            tool_count=len(connection.metadata.tools) if connection is not None and live else None,
        )

    def states(self) -> dict[str, ServerState]:
        """Snapshots of every configured server, in configuration order."""
        return {name: self.state(name) for name in self._slots}

    def metadata(self, name: str) -> ServerMetadata | None:
        """The live connection's catalog, or None when ``name`` is not connected."""
        connection = self._slot(name).connection
        if connection is None or not connection.is_alive:
            return None
        return connection.metadata

    def running_tasks(self) -> tuple[TaskState, ...]:
        """The tasks that calls in flight are following, oldest first."""
        now = self._clock()
        found = [
            TaskState(
                server=task.server,
                tool=task.tool,
                task_id=task.task_id,
                status=task.status,
                age_s=max(0.0, now - task.started_at),
            )
            for slot in self._slots.values()
            if slot.connection is not None
            for task in slot.connection.running_tasks.values()
        ]
        return tuple(sorted(found, key=lambda t: -t.age_s))

    def process_id(self, name: str) -> int | None:
        """The id of the process started here for ``name`` (see
        :attr:`ServerConnection.process_id`), None when none runs."""
        connection = self._slot(name).connection
        return connection.process_id if connection is not None else None

    def is_idle(self, name: str, timeout_s: float) -> bool:
        """Whether ``name`` is connected, has no call in flight and was unused for ``timeout_s``."""
        slot = self._slot(name)
        connection = slot.connection
        if connection is None or not connection.is_alive or slot.in_flight > 0:
            return False
        last = slot.last_used_at if slot.last_used_at is not None else connection.connected_at
        return last is not None and self._clock() - last >= timeout_s

    # -- connecting -------------------------------------------------------------------------

    async def connect(self, name: str) -> ServerConnection:
        """Return a live connection to ``name``, connecting if needed.

        A healthy connection is reused; concurrent callers share one attempt.

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerDisabledError: the server is disabled.
            ServerUntrustedError: the server comes from a project file not trusted yet.
            ServerBackoffError: a connect failed less than ``backoff_s`` ago.
            ServerUnavailableError: another subclass saying why connecting failed.
            UsageError: the manager is not entered.
        """
        return await self._ensure(self._slot(name), respect_backoff=True)

    async def reconnect(self, name: str) -> ServerConnection:
        """Close ``name`` (or abandon its pending connect) and connect afresh.

        Clears the failure backoff first: this is the explicit retry. Raises like
        :meth:`connect`, except for :class:`ServerBackoffError`.
        """
        slot = self._slot(name)
        self._usable(slot)
        slot.backoff_until = None
        slot.keep_alive_failures = 0
        slot.keep_alive_next_at = None
        old = slot.connection
        slot.connection = None
        attempt = self._begin_attempt(slot)
        if old is not None:
            await old.close()
        return await self._await_attempt(slot, attempt)

    async def refresh(self, name: str) -> ServerMetadata:
        """List ``name``'s tools, resources and prompts again (connecting if needed).

        This is an explicit request (``pi-mcp connect``, ``mcp({connect})``): it connects even
        while the server is backing off after a failure. Raises like :meth:`connect` and
        :meth:`call_tool`, except for :class:`ServerBackoffError`.
        """
        async with self._in_use(name, respect_backoff=False) as (_slot, connection):
            return await connection.refresh_metadata()

    async def start(self) -> dict[str, ServerUnavailableError | None]:
        """Connect every eager and keep-alive server, in parallel.

        At most ``settings.startupConcurrency`` connect at once, each within its own startup
        deadline; a failure is reported in the result and never stops the others. A keep-alive
        server that fails is retried by the health checks. Returns ``{name: None or error}``.
        """
        names = [name for name, slot in self._slots.items() if connects_at_start(slot.entry)]
        return await self._connect_many(names, respect_backoff=False)

    async def connect_many(
        self, names: list[str], *, deadline_s: float | None = None
    ) -> dict[str, ServerUnavailableError | None]:
        """Connect ``names`` in parallel (respecting backoff), all within one overall deadline.

        At most ``settings.startupConcurrency`` connect at once. A server still connecting when
        ``deadline_s`` runs out is abandoned with a :class:`ConnectTimeoutError`. When its own
        ``startupTimeoutMs`` is longer than ``deadline_s`` it did not fail, the caller only
        stopped waiting: the error says it is still starting (``still_starting``) and nothing
        is recorded, so neither this process nor any other backs off from a healthy server that
        starts slowly. Otherwise the deadline is its own start-up timeout and the failure is
        recorded as any other. Never raises for a server; returns ``{name: None or error}`` in
        the order given.
        """
        if deadline_s is None:
            return await self._connect_many(names, respect_backoff=True)
        results: dict[str, ServerUnavailableError | None] = {}
        with anyio.move_on_after(deadline_s):
            results = await self._connect_many(names, respect_backoff=True, into=results)
        for name in names:
            if name in results:
                continue
            slot = self._slots[name]
            await self.close(name)
            startup_timeout_s = slot.entry.startup_timeout_s
            if startup_timeout_s > deadline_s:
                results[name] = ConnectTimeoutError(
                    name,
                    f"server {name!r} is still starting: stopped waiting after {deadline_s:g} s "
                    f"of its {startup_timeout_s:g} s start-up time (startupTimeoutMs)",
                    timeout_s=deadline_s,
                    still_starting=True,
                )
                continue
            error = ConnectTimeoutError(
                name,
                f"server {name!r} did not finish connecting within the {deadline_s:g} s "
                f"start-up deadline",
                timeout_s=deadline_s,
            )
            self._record_failure(slot, error)
            results[name] = error
        return {name: results[name] for name in names}

    async def end_turn(self) -> dict[str, ServerUnavailableError | None]:
        """Reconnect eager and keep-alive servers that dropped; call at the end of each turn.

        Failed servers stay in backoff (eager) or on their retry schedule (keep-alive). Returns
        ``{name: None or error}`` for the servers it tried.
        """
        now = self._clock()
        names: list[str] = []
        for name, slot in self._slots.items():
            if not connects_at_start(slot.entry) or slot.attempt is not None:
                continue
            if slot.connection is not None and slot.connection.is_alive:
                continue
            if slot.backoff_until is not None and now < slot.backoff_until:
                continue
            if slot.entry.lifecycle == "keep-alive" and not self._keep_alive_due(slot, now):
                continue
            names.append(name)
        for name, slot in self._slots.items():
            # A lazy-keep-alive server that has connected once is kept up like keep-alive.
            if slot.entry.lifecycle != "lazy-keep-alive" or slot.attempt is not None:
                continue
            if not is_kept_alive(slot.entry, has_connected=slot.has_connected):
                continue
            if slot.connection is not None and slot.connection.is_alive:
                continue
            if self._keep_alive_due(slot, now):
                names.append(name)
        return await self._connect_many(names, respect_backoff=False)

    # -- using ------------------------------------------------------------------------------

    @asynccontextmanager
    async def _in_use(
        self, name: str, *, respect_backoff: bool = True
    ) -> AsyncIterator[tuple[_Slot, ServerConnection]]:
        """A live connection to ``name``, counted in flight (so idle closing leaves it alone)
        until the block ends."""
        slot = self._slot(name)
        slot.in_flight += 1
        try:
            yield slot, await self._ensure(slot, respect_backoff=respect_backoff)
        finally:
            self._release(slot)

    def _timeout(self, slot: _Slot, timeout_s: float | None) -> float | None:
        return timeout_s if timeout_s is not None else slot.entry.request_timeout_s

    async def call_tool(
        self,
        name: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout_s: float | None = None,
        progress: ProgressFnT | None = None,
    ) -> types.CallToolResult:
        """Call ``tool`` on server ``name`` (connecting if needed) and return its raw result.

        ``timeout_s`` defaults to the server's ``requestTimeoutMs``. A result with
        ``is_error`` set is returned, not raised.

        Raises:
            ServerUnavailableError: connecting failed (a subclass says why), or
                ConnectionLostError: the connection dropped during the call.
            RequestTimeoutError: no answer in time; the connection stays open.
            ServerReportedError: the server answered with a JSON-RPC error.
        """
        async with self._in_use(name) as (slot, connection):
            limit = self._timeout(slot, timeout_s)
            try:
                return await connection.call_tool(
                    tool, arguments, timeout_s=limit, progress=progress
                )
            except McpAdapterError as exc:
                connection = await self._recover_session(slot, connection, exc)
                return await connection.call_tool(
                    tool, arguments, timeout_s=limit, progress=progress
                )

    async def read_resource(
        self, name: str, uri: str, *, timeout_s: float | None = None
    ) -> types.ReadResourceResult:
        """Read resource ``uri`` from server ``name``; raises like :meth:`call_tool`."""
        async with self._in_use(name) as (slot, connection):
            limit = self._timeout(slot, timeout_s)
            try:
                return await connection.read_resource(uri, timeout_s=limit)
            except McpAdapterError as exc:
                connection = await self._recover_session(slot, connection, exc)
                return await connection.read_resource(uri, timeout_s=limit)

    async def _recover_session(
        self, slot: _Slot, connection: ServerConnection, error: McpAdapterError
    ) -> ServerConnection:
        """A new connection when ``connection``'s HTTP session expired, else ``error`` raised."""
        if not connection.session_expired:
            raise error
        logger.info("server %r: the session expired (HTTP 404); reconnecting once", slot.name)
        if slot.connection is connection:
            await self.close(slot.name)  # concurrent callers share the one new connection
        return await self._ensure(slot, respect_backoff=False)

    async def get_prompt(
        self,
        name: str,
        prompt: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout_s: float | None = None,
    ) -> types.GetPromptResult:
        """Render ``prompt`` of server ``name``; raises like :meth:`call_tool`."""
        async with self._in_use(name) as (slot, connection):
            limit = self._timeout(slot, timeout_s)
            return await connection.get_prompt(prompt, arguments, timeout_s=limit)

    async def list_resource_templates(
        self, name: str, *, timeout_s: float | None = None
    ) -> list[types.ResourceTemplate]:
        """Every resource template of server ``name``; raises like :meth:`call_tool`."""
        async with self._in_use(name) as (slot, connection):
            limit = self._timeout(slot, timeout_s)
            return await connection.list_resource_templates(timeout_s=limit)

    async def complete(
        self, name: str, params: types.CompleteRequestParams, *, timeout_s: float | None = None
    ) -> types.CompleteResult:
        """Argument completions from server ``name``; raises like :meth:`call_tool`."""
        async with self._in_use(name) as (slot, connection):
            limit = self._timeout(slot, timeout_s)
            return await connection.complete(params, timeout_s=limit)

    async def subscribe_resource(
        self, name: str, uri: str, *, subscribe: bool = True, timeout_s: float | None = None
    ) -> None:
        """(Un)subscribe to updates of ``uri`` on server ``name``; raises like
        :meth:`call_tool`."""
        async with self._in_use(name) as (slot, connection):
            limit = self._timeout(slot, timeout_s)
            await connection.subscribe_resource(uri, subscribe=subscribe, timeout_s=limit)

    # -- closing ----------------------------------------------------------------------------

    async def close(self, name: str) -> None:
        """Close ``name``'s connection, or abandon its pending connect (whose callers then get
        :class:`ConnectionLostError`). Idempotent."""
        slot = self._slot(name)
        slot.generation += 1
        attempt = slot.attempt
        if attempt is not None:
            slot.attempt = None
            attempt.connection.request_close()
        connection = slot.connection
        slot.connection = None
        if slot.status in ("connected", "connecting"):
            slot.status = "closed"
            self._state_changed(slot)
        if connection is not None:
            await connection.close()
        if attempt is not None:
            await attempt.done.wait()

    async def close_all(self) -> None:
        """Close every connection in parallel (those of removed servers included)."""
        async with anyio.create_task_group() as tg:
            for name, slot in self._slots.items():
                # Only slots with something to close get a task: a gateway of 19,641 servers,
                # a few connected, spent 0.4 s closing the others.
                open_ = slot.attempt is not None or slot.connection is not None
                if open_ or slot.status in ("connected", "connecting"):
                    tg.start_soon(self.close, name)
            tg.start_soon(self.close_detached)

    # -- reconfiguring ----------------------------------------------------------------------

    def set_servers(
        self, servers: Mapping[str, ServerEntry], settings: Settings | None = None
    ) -> ServerSetChange:
        """Make ``servers`` the configured set, at once: new names are added, missing names
        removed, and a name whose entry changed gets a fresh slot (a new connection on next
        use). Unchanged servers keep their connections, counters and backoff.

        Connections of removed and replaced servers stop being used immediately; calls in
        flight on them may fail with :class:`ConnectionLostError`. They are closed by
        :meth:`close_detached` (or when the manager exits). ``settings``, when given, replace
        the current ones for everything but the health-check interval and the start-up
        concurrency, which are fixed when the manager is entered.
        """
        if settings is not None:
            self._settings = settings
        old = self._slots
        added = tuple(n for n in servers if n not in old)
        removed = tuple(n for n in old if n not in servers)
        replaced = tuple(n for n in servers if n in old and old[n].entry != servers[n])
        slots: dict[str, _Slot] = {}
        for name, entry in servers.items():
            slots[name] = old[name] if name in old and name not in replaced else _Slot(name, entry)
        for name in (*removed, *replaced):
            slot = old[name]
            slot.detached = True
            # A connect in progress closes itself when it finishes, and its waiters get its
            # error rather than following a newer attempt on this slot (there is none).
            slot.generation += 1
            attempt, slot.attempt = slot.attempt, None
            if attempt is not None:
                attempt.connection.request_close()
                self._detached_attempts.append(attempt)
            self._detached.append(slot)
        self._slots = slots
        return ServerSetChange(added, removed, replaced)

    async def close_detached(self) -> None:
        """Close the connections of servers removed or replaced by :meth:`set_servers`."""
        detached, self._detached = self._detached, []
        attempts, self._detached_attempts = self._detached_attempts, []

        async def close_slot(slot: _Slot) -> None:
            connection, slot.connection = slot.connection, None
            slot.status = "closed"
            if connection is not None:
                await connection.close()

        async with anyio.create_task_group() as tg:
            for slot in detached:
                tg.start_soon(close_slot, slot)
            for attempt in attempts:
                tg.start_soon(attempt.done.wait)

    # -- health -----------------------------------------------------------------------------

    async def check_health(self) -> None:
        """One health-check pass (the loop runs this every ``healthCheckIntervalMs``).

        Closes lazy servers idle past their timeout (never with calls in flight), pings
        keep-alive HTTP servers (a dead HTTP server is only noticed by a request) and reconnects
        keep-alive servers that are down and due by their retry schedule.
        """
        async with anyio.create_task_group() as tg:
            for checked, slot in enumerate(list(self._slots.values()), start=1):
                if checked % HEALTH_CHECK_SLOTS_PER_STEP == 0:
                    # Tens of thousands of configured servers: let other requests run between
                    # steps, so a pass never holds the event loop for longer than one step.
                    await anyio.lowlevel.checkpoint()
                if not slot.entry.is_enabled:
                    continue
                if is_kept_alive(slot.entry, has_connected=slot.has_connected):
                    tg.start_soon(self._keep_alive_check, slot)
                    continue
                timeout_s = idle_timeout_s(slot.entry, self._settings)
                if timeout_s > 0 and self.is_idle(slot.name, timeout_s):
                    logger.info("server %r: closing after %g s idle", slot.name, timeout_s)
                    tg.start_soon(self.close, slot.name)

    async def _health_loop(self, interval_s: float) -> None:
        with anyio.CancelScope() as scope:
            self._health_scope = scope
            while True:
                await anyio.sleep(interval_s)
                try:
                    await self.check_health()
                except Exception:
                    logger.exception("health check failed")

    async def _keep_alive_check(self, slot: _Slot) -> None:
        connection = slot.connection
        if connection is not None and connection.is_alive:
            if connection.transport in ("stdio", "pool"):
                return  # a dead child (or pool) is seen at once through end of stream
            try:
                await connection.ping(timeout_s=HEALTH_PING_TIMEOUT_S)
            except ConnectionLostError:
                pass
            except Exception:
                return  # slow or refusing ping, but reachable: leave it alone
            else:
                return
        if slot.attempt is not None or not self._keep_alive_due(slot, self._clock()):
            return
        try:
            assert self._limiter is not None
            async with self._limiter:
                await self._ensure(slot, respect_backoff=False)
        except ServerUnavailableError as exc:
            logger.info("server %r: keep-alive reconnect failed: %s", slot.name, exc.message)

    def _keep_alive_due(self, slot: _Slot, now: float) -> bool:
        return slot.keep_alive_next_at is None or now >= slot.keep_alive_next_at

    # -- internals --------------------------------------------------------------------------

    def _slot(self, name: str) -> _Slot:
        slot = self._slots.get(name)
        if slot is None:
            known = ", ".join(sorted(self._slots)) or "none"
            raise ServerNotConfiguredError(
                name, f"no server named {name!r} is configured (configured: {known})"
            )
        return slot

    def _usable(self, slot: _Slot) -> anyio.abc.TaskGroup:
        if slot.detached:
            raise ConnectionLostError(
                slot.name, f"server {slot.name!r} was reconfigured while in use; try again"
            )
        untrusted = slot.entry.untrusted
        if untrusted is not None:
            # Checked before anything of the entry is used: its command, `!command` values
            # and headers come from a file the person has not trusted.
            raise ServerUntrustedError(
                slot.name,
                f"server {slot.name!r} {untrusted.message}",
                files=[str(f) for f in untrusted.files],
                trust_command=untrusted.command,
            )
        if not slot.entry.is_enabled:
            raise ServerDisabledError(
                slot.name, f"server {slot.name!r} is disabled in the configuration"
            )
        if self._tg is None or self._exiting:
            raise UsageError(
                "the ServerManager is not running; use it inside `async with ServerManager(...)`"
            )
        return self._tg

    def _release(self, slot: _Slot) -> None:
        slot.in_flight -= 1
        slot.last_used_at = self._clock()

    async def _ensure(self, slot: _Slot, *, respect_backoff: bool) -> ServerConnection:
        while True:
            connection = slot.connection
            if connection is not None and connection.is_alive:
                return connection
            attempt = slot.attempt
            if attempt is None:
                self._usable(slot)
                if respect_backoff:
                    self._raise_if_backing_off(slot)
                attempt = self._begin_attempt(slot)
            try:
                return await self._await_attempt(slot, attempt)
            except _Superseded:
                continue

    async def _await_attempt(self, slot: _Slot, attempt: _Attempt) -> ServerConnection:
        await attempt.done.wait()
        if attempt.result is not None:
            return attempt.result
        if attempt.superseded:
            raise _Superseded
        assert attempt.error is not None
        raise attempt.error

    def _raise_if_backing_off(self, slot: _Slot) -> None:
        now = self._clock()
        if slot.backoff_until is None or now >= slot.backoff_until:
            return
        if slot.status == "needs-auth":
            # Failing again costs a few quick requests, and a sign-in in another process
            # (`pi-mcp auth`) must take effect at once, not after the backoff.
            return
        failed_ago = now - (slot.failed_at if slot.failed_at is not None else now)
        reason = (slot.error or "unknown error").splitlines()[0]
        raise ServerBackoffError(
            slot.name,
            f"server {slot.name!r} not available (last failed {failed_ago:.0f} s ago: "
            f"{reason}); it is retried automatically after {slot.backoff_until - now:.0f} s, "
            f"or now with `pi-mcp reconnect {slot.name}`",
            retry_in_s=slot.backoff_until - now,
        )

    def _begin_attempt(self, slot: _Slot) -> _Attempt:
        from ._connection import ServerConnection

        tg = self._usable(slot)
        previous = slot.attempt
        slot.generation += 1
        connection = ServerConnection(
            slot.name,
            slot.entry,
            log_dir=self._log_dir,
            npx_cache_path=self._npx_cache_path,
            resolve_npx=self._resolve_npx,
            auth_factory=self._auth_factory,
            environ=self._environ,
            clock=self._clock,
            on_metadata=self._connection_metadata,
            on_end=self._connection_ended,
            relay_requests=self._relay_requests,
            relay_sampling=self._relay_sampling,
            on_resource_updated=self._resource_updated,
            pool=self._pool,
        )
        attempt = _Attempt(slot.generation, connection)
        slot.attempt = attempt
        slot.status = "connecting"
        self._state_changed(slot)
        if previous is not None:
            previous.superseded = True
            previous.connection.request_close()
        tg.start_soon(self._run_attempt, slot, attempt, name=f"connect {slot.name}")
        return attempt

    async def _run_attempt(self, slot: _Slot, attempt: _Attempt) -> None:
        tg = self._tg
        assert tg is not None
        started_at = self._clock()
        error: ServerUnavailableError
        try:
            connection = await tg.start(attempt.connection.run, name=f"server {slot.name}")
        except ServerUnavailableError as exc:
            error = exc
        except Exception as exc:
            error = ServerStartError(
                slot.name, f"server {slot.name!r} failed while connecting: {exc!r}"
            )
            error.__cause__ = exc
        except BaseException:
            attempt.error = ConnectionLostError(
                slot.name, f"server {slot.name!r}: the manager shut down while connecting"
            )
            attempt.done.set()
            raise
        else:
            if attempt.generation != slot.generation:
                # A close or reconnect happened meanwhile: this result is stale.
                attempt.superseded = attempt.superseded or slot.attempt is not None
                attempt.error = ConnectionLostError(
                    slot.name, f"server {slot.name!r} was closed while connecting"
                )
                attempt.done.set()
                await connection.close()
                return
            self._install(slot, attempt, connection, started_at)
            return

        if attempt.generation == slot.generation:
            self._record_failure(slot, error)
        else:
            attempt.superseded = attempt.superseded or slot.attempt is not None
        attempt.error = error
        attempt.done.set()

    def _install(
        self, slot: _Slot, attempt: _Attempt, connection: ServerConnection, started_at: float
    ) -> None:
        reconnected = slot.has_history
        slot.attempt = None
        slot.connection = connection
        slot.status = "connected"
        slot.transport = connection.transport
        if slot.error is not None and self._failures is not None:
            self._failures.clear(slot.name)
        slot.error = None
        slot.backoff_until = None
        slot.has_history = True
        slot.has_connected = True
        slot.keep_alive_failures = 0
        slot.keep_alive_next_at = None
        slot.last_used_at = self._clock()
        # Published before the connection is handed out: whoever awaited this connect finds
        # the server's tools in every listener's view (the engine's catalog) when it resumes.
        self._publish(self._tools_changed, slot.name, connection.metadata)
        if reconnected:
            self._publish(self._reconnected, slot.name, connection.metadata)
        attempt.result = connection
        attempt.done.set()
        self._state_changed(slot)
        logger.info(
            "server %r connected over %s in %.2f s (%d tools)",
            slot.name,
            connection.transport,
            self._clock() - started_at,
            len(connection.metadata.tools),
        )

    def _recall_failures(self) -> None:
        """Put servers that failed recently (in any process) into backoff, as if here."""
        if self._failures is None:
            return
        now, wall_now = self._clock(), self._failures.now()
        # One read of the file for every server (not one per server): a start with tens of
        # thousands of configured servers paid a read and parse of it for each.
        records = self._failures.get_many(
            {slot.name: slot.entry for slot in self._slots.values() if slot.entry.is_enabled}
        )
        for name, record in records.items():
            slot = self._slots[name]
            ago_s = max(0.0, wall_now - record.failed_at)
            remaining_s = record.backoff_left_s(wall_now, base_s=self._backoff_s)
            slot.error = record.message
            slot.failed_at = now - ago_s
            slot.has_history = True
            if remaining_s > 0:
                slot.status = "failed"
                slot.backoff_until = now + remaining_s

    def _record_failure(self, slot: _Slot, error: ServerUnavailableError) -> None:
        now = self._clock()
        slot.attempt = None
        slot.status = "needs-auth" if isinstance(error, NeedsAuthError) else "failed"
        slot.error = error.message
        slot.failed_at = now
        backoff_s = self._backoff_s
        if self._failures is not None and not isinstance(error, NeedsAuthError):
            # A sign-in is missing, the server is not failing: another process (a replica
            # with a token, one restarted after `pi-mcp auth`) must not inherit a backoff.
            record = self._failures.record(slot.name, slot.entry, error.message)
            backoff_s = backoff_after_s(self._backoff_s, record.attempts)
        slot.backoff_until = now + backoff_s
        slot.has_history = True
        slot.keep_alive_failures += 1
        slot.keep_alive_next_at = now + keep_alive_retry_delay_s(slot.keep_alive_failures)
        logger.warning("%s", error.message.splitlines()[0])
        self._state_changed(slot)

    def _connection_ended(self, connection: ServerConnection) -> None:
        slot = self._slots.get(connection.server)
        if slot is None or slot.connection is not connection:
            return
        slot.connection = None
        if slot.attempt is not None:
            return  # a newer attempt owns the status now
        if connection.end_reason is not None and not self._exiting:
            slot.status = "failed"
            slot.error = f"connection lost: {connection.end_reason}"
            slot.failed_at = self._clock()
            slot.keep_alive_next_at = None  # a keep-alive server reconnects at the next check
        else:
            slot.status = "closed"
        self._state_changed(slot)

    def _state_changed(self, slot: _Slot) -> None:
        if not self._state_listeners or self._slots.get(slot.name) is not slot:
            return
        state = self.state(slot.name)
        for listener in list(self._state_listeners):
            try:
                listener(state)
            except Exception:
                logger.exception("state listener %r failed for server %r", listener, slot.name)

    async def _connection_metadata(
        self, connection: ServerConnection, metadata: ServerMetadata
    ) -> None:
        slot = self._slots.get(connection.server)
        if slot is not None and slot.connection is connection:
            await self._notify(self._tools_changed, connection.server, metadata)

    def _publish(
        self, listeners: list[MetadataListener], name: str, metadata: ServerMetadata
    ) -> None:
        """Call plain listeners now; a coroutine listener runs in the manager's task group."""
        for listener in list(listeners):
            try:
                outcome = listener(name, metadata)
            except Exception:
                logger.exception("listener %r failed for server %r", listener, name)
                continue
            if inspect.isawaitable(outcome):
                assert self._tg is not None
                self._tg.start_soon(_await_listener, outcome, listener, name)

    async def _notify(
        self, listeners: list[MetadataListener], name: str, metadata: ServerMetadata
    ) -> None:
        for listener in list(listeners):
            try:
                outcome = listener(name, metadata)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                logger.exception("listener %r failed for server %r", listener, name)

    async def _connect_many(
        self,
        names: list[str],
        *,
        respect_backoff: bool,
        into: dict[str, ServerUnavailableError | None] | None = None,
    ) -> dict[str, ServerUnavailableError | None]:
        results: dict[str, ServerUnavailableError | None] = {} if into is None else into
        limiter = self._limiter
        if limiter is None:
            raise UsageError(
                "the ServerManager is not running; use it inside `async with ServerManager(...)`"
            )

        async def connect_one(name: str) -> None:
            async with limiter:
                try:
                    await self._ensure(self._slots[name], respect_backoff=respect_backoff)
                except ServerUnavailableError as exc:
                    results[name] = exc
                else:
                    results[name] = None

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(connect_one, name)
        return {name: results[name] for name in names}


async def _await_listener(outcome: Awaitable[None], listener: object, name: str) -> None:
    try:
        await outcome
    except Exception:
        logger.exception("listener %r failed for server %r", listener, name)


class _Superseded(Exception):
    """Internal: the awaited attempt was replaced by a newer one."""
