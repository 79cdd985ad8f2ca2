"""``McpAdapter``: the one object a host creates.

It loads the configuration and the metadata cache, owns the server manager (and through it
every connection and background task), keeps the catalog and search index current, and offers
typed operations: status, tools, search, lookup, instructions, connect, reconnect, call,
prompts and reload. It knows no surface: the ``mcp`` proxy tool, ``ToolSearch``, direct tools,
the CLI and the gateway render its values in their own words, and a host binding chooses which
surfaces to register (see :func:`pi_mcp_adapter.surface.register_surfaces`).

Resource handling: ``async with McpAdapter(...)`` (or ``start()``/``stop()`` from one task)
opens everything; leaving it closes every connection, stops every background task and kills
every child process. An adapter is single use.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._errors import (
    ConfigError,
    ConnectTimeoutError,
    McpAdapterError,
    ServerDisabledError,
    ServerNotConfiguredError,
    ServerUntrustedError,
    ToolNotFoundError,
    UsageError,
)
from pi_mcp_adapter._secrets import redact_model
from pi_mcp_adapter.catalog import (
    Catalog,
    DefinitionChanges,
    MetadataCache,
    PromptInfo,
    ServerMetadata,
    ToolInfo,
    format_tool_name,
)
from pi_mcp_adapter.config import (
    LoadedConfig,
    RecordingEnviron,
    ServerEntry,
    Settings,
    load_config,
)
from pi_mcp_adapter.config._locations import default_agent_dir
from pi_mcp_adapter.servers import (
    FAILURES_FILE_NAME,
    FailureMemory,
    FailureRecord,
    PoolAccess,
    ServerManager,
    ServerState,
    allow_prompts,
    entry_digest,
)

from ._approval import ApprovalScope, Ask, AsksQuestions, ToolApprovals
from ._caller import current_caller
from ._catalog_state import CatalogState
from ._host import Host
from ._learned import SearchMemory
from ._notices import DEFAULT_STATUS_DEBOUNCE_S, Notices
from ._pipeline import CallPipeline
from ._questions import Elicit, Sample, ServerQuestions
from ._server_status import ServerStatuses
from ._status_facts import (
    EntryNeeded,
    KeptStatus,
    StatusFacts,
    cached_status_rows,
    read_status_facts,
    write_status_facts,
)
from ._telemetry import flush_pending, search_span
from ._trace import open_call_trace
from ._values import (
    CallOutcome,
    PromptMessages,
    ReloadReport,
    SearchResults,
    ServerStatus,
    StatusReport,
)

if TYPE_CHECKING:
    # SDK types appear in signatures only: the SDK is imported by the first connect, so that
    # commands answered from the cache never pay for it.
    import mcp_types as types

    from pi_mcp_adapter.catalog._search import SearchIndex
    from pi_mcp_adapter.servers import OAuthProviders

    from ._routes import UpstreamRoutes
    from ._stats import CallStats

ProgressCallback = Callable[[str, str, str | None], None]
"""``(server, phase, detail)`` with phase ``connecting`` | ``connected`` | ``failed`` |
``still-starting`` (the start deadline ended before the server's own start-up time did)."""

logger = logging.getLogger("pi_mcp_adapter")

DEFAULT_SEARCH_LIMIT = 12
DEFAULT_CONFIG_POLL_S = 1.0
"""How often :meth:`McpAdapter.watch_config` looks at the configuration files."""
_LISTING_GRACE_S = 2.0
"""Added to a server's start-up timeout when waiting for its listing: spawning the process
and loading the SDK take time before the server's own clock starts."""


class McpAdapter:
    """The engine. Create one per host session; use it with ``async with``.

    A thin facade over its parts: :class:`CatalogState` (what is known, what is being listed),
    :class:`CallPipeline` (one path for every call), :class:`Notices` (what the person is
    told), :class:`ServerStatuses` (what is said about each server), :class:`UpstreamRoutes`
    (prompts, resources, completions) and the :class:`ServerManager` (the only thing that
    connects).

    Args:
        config: an already loaded configuration, kept for the adapter's life (:meth:`reload`
            then re-reads only the cache); when ``None`` it is loaded from
            ``agent_dir``/``project_dir``/``config_path`` (and ``home``, default the user's),
            and :meth:`reload` loads it again.
        config_loader: how to load the configuration instead (at start when ``config`` is
            ``None``, and on every :meth:`reload`): for a binding that adds servers of its own
            to the files' (it runs in a worker thread during a reload).
        host: the binding the engine tells about events (notices, the status line, lifecycle
            hooks); ``None`` for library/CLI use. Registering tools is the surfaces' job.
        connect_missing: list, at start, every enabled server whose tools are not in the
            metadata cache yet (the first run), so search and describe have something to show.
        connect_eager: connect eager and keep-alive servers at start (a one-shot command
            that needs none of them passes False).
        background_listing: do the connects at start in the background, so :meth:`start`
            returns at once (long-lived hosts: the gateway, pi). A request that misses while a
            server is being listed waits for that listing, bounded by the start-up deadline.
        start_deadline_s: one overall deadline for the connects at start; servers still
            connecting then are abandoned. One whose ``startupTimeoutMs`` is longer is
            reported as still starting (phase ``still-starting``) and nothing is held against
            it; one whose start-up time is over failed and backs off.
        clock: wall clock in seconds (``time.time``), injectable for tests.
        relay_server_requests: tell servers this client can sample and elicit, and route
            their sampling, elicitation and log messages to the caller of the call they belong
            to (see :func:`pi_mcp_adapter.servers.relay_calls`); the MCP gateway turns it on.
        status_debounce_s: how long the host's status line waits for more changes before it
            is updated (a burst of connects updates it once).
        ask: answers the questions the engine asks the user (tool approval, see
            ``approveTools``): ``async ask(question) -> option id | None``. Without it the host
            answers if it implements :class:`AsksQuestions`; with neither, calls that need an
            approval are refused.
        elicit: answers servers' ``elicitation/create`` (form and URL modes) for calls made
            through this adapter; ``sample`` answers their ``sampling/createMessage``. Giving
            one is what advertises that capability to servers (see ``engine/_questions.py``).
        use_pool: take stdio servers from the warm pool of a gateway that serves the same
            agent dir, when its entry for the server is the same as this adapter's, instead
            of starting them (``PI_MCP_POOL=0`` in the environment turns it off too). The
            engine's own rules (trust, approvals, statistics, redaction) still apply here;
            only the connection is shared.

    Telling the user: with a ``host``, the engine sends ``host.notify`` when a server fails
    to start or is lost, needs authentication, comes back after that, when a tool is renamed
    because another server's tool has its name, when a server's tool definitions change, and
    when a configuration reload fails; it keeps ``host.set_status`` at
    ``MCP: <connected>/<enabled> servers, <n> tools``.
    """

    def __init__(
        self,
        *,
        config: LoadedConfig | None = None,
        agent_dir: str | os.PathLike[str] | None = None,
        project_dir: str | os.PathLike[str] | None = None,
        config_path: str | os.PathLike[str] | None = None,
        home: str | os.PathLike[str] | None = None,
        config_loader: Callable[[], LoadedConfig] | None = None,
        host: Host | None = None,
        connect_missing: bool = True,
        connect_eager: bool = True,
        background_listing: bool = False,
        start_deadline_s: float | None = None,
        ranking: str = "default",
        resolve_npx: bool = True,
        on_progress: ProgressCallback | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        relay_server_requests: bool = False,
        status_debounce_s: float = DEFAULT_STATUS_DEBOUNCE_S,
        ask: Ask | None = None,
        oauth: OAuthProviders | None = None,
        elicit: Elicit | None = None,
        sample: Sample | None = None,
        use_pool: bool = True,
    ) -> None:
        # Paths may come as str or any PathLike (a caller's `agent_dir="..."`).
        self.agent_dir = (Path(agent_dir) if agent_dir else default_agent_dir()).expanduser()
        self.project_dir = (Path(project_dir) if project_dir else Path.cwd()).expanduser()
        self._config_path = Path(config_path).expanduser() if config_path else None
        self._home = Path(home) if home else None
        self._environ = dict(os.environ if environ is None else environ)
        self._config_loader = config_loader
        # A configuration given in code, without a loader, has no files to read again.
        self._config_given = config is not None and config_loader is None
        self.config = config or self._load_config()
        self._config_seen = _fingerprint(self.config)
        """The config files as they were when last read: an edit made after that (even
        before :meth:`watch_config` starts) is what the watcher reloads for."""
        self._oauth = oauth
        self._connect_missing = connect_missing
        self._connect_eager = connect_eager
        self._background_listing = background_listing
        self._start_deadline_s = start_deadline_s
        self._resolve_npx = resolve_npx
        self._on_progress = on_progress
        self._clock = clock
        self._relay_server_requests = relay_server_requests
        self._use_pool = use_pool and self._environ.get("PI_MCP_POOL", "1") != "0"
        # Before any store is read: with a shared state, every store reads it.
        self.shared_state = shared_state.activate(self.settings.shared_state, environ=self._environ)
        self.cache = _metadata_cache(
            self.agent_dir,
            relay=relay_server_requests or elicit is not None or sample is not None,
            sampling=relay_server_requests or sample is not None,
        )
        self._state_kind: Literal["new", "running", "closed"] = "new"
        self._manager: ServerManager | None = None
        self._stack: AsyncExitStack | None = None
        self._tasks: anyio.abc.TaskGroup | None = None
        self._stats: CallStats | None = None
        self._search_memory: SearchMemory | None = None
        self.ask = ask
        self._questions = ServerQuestions(elicit, sample, tell=self._tell_person)
        self._resource_listeners: list[Callable[[str, str], Awaitable[None]]] = []
        self._reload_generation = 0
        self._cache_loaded = False
        """:meth:`load_cached` ran: :meth:`start` need not read the cache file again."""
        self._held_while_loading: list[Callable[[], None]] | None = None
        """While :meth:`start` reads the cache in a worker thread: what servers published
        meanwhile, applied when it is done."""
        self._opened: anyio.Event | None = None
        """Set once :meth:`start` has opened the manager (made when someone waits)."""
        self.state = CatalogState(
            cache=self.cache,
            agent_dir=self.agent_dir,
            entries=lambda: self.servers,
            settings=lambda: self.settings,
            ranking=ranking,
        )
        self.notices = Notices(host, status_line=self.status_line, debounce_s=status_debounce_s)
        # The person running the adapter hears of every tool, whichever client's request
        # caused the rebuild.
        self.state.on_changed(lambda: self.notices.catalog_rebuilt(self.state.full_catalog))
        self._approvals = ToolApprovals(self.agent_dir, clock=clock)
        self.pipeline = CallPipeline(
            state=self.state,
            manager=self._require_manager,
            entries=lambda: self.servers,
            settings=lambda: self.settings,
            approvals=self._approvals,
            asker=self._asker,
            stats=lambda: self._stats,
            trace=open_call_trace(
                self.settings, self.servers, project_dir=self.project_dir, environ=self._environ
            ),
            may_prompt=lambda: self.oauth.may_prompt,
            listing_timeout_s=self.listing_timeout_s,
            explain_miss=self.explain_miss,
            questions_during=self._questions.asked_during,
        )
        self._failures = FailureMemory(self.agent_dir / FAILURES_FILE_NAME)
        self._statuses = ServerStatuses(
            config=lambda: self.config,
            state=self.state,
            manager=lambda: self._manager,
            oauth=lambda: self.oauth,
            failures=self._failures,
        )

    def _load_config(self) -> LoadedConfig:
        if self._config_loader is not None:
            return self._config_loader()
        return load_config(
            agent_dir=self.agent_dir,
            project_dir=self.project_dir,
            config_path=self._config_path,
            home=self._home,
            environ=self._environ,
        )

    # ------------------------------------------------------------------ configuration

    @property
    def host(self) -> Host | None:
        return self.notices.host

    @property
    def oauth(self) -> OAuthProviders:
        """One OAuth provider per remote server, made on first use (it loads the SDK)."""
        if self._oauth is None:
            from pi_mcp_adapter.servers import OAuthProviders

            self._oauth = OAuthProviders(
                self.servers,
                agent_dir=self.agent_dir,
                settings=self.settings,
                environ=self._environ,
            )
        return self._oauth

    @property
    def settings(self) -> Settings:
        return self.config.settings

    @property
    def servers(self) -> Mapping[str, ServerEntry]:
        return self.config.servers

    @property
    def stats(self) -> CallStats | None:
        """This session's call statistics, when ``settings.captureStats`` is on."""
        return self._stats

    def enabled_servers(self) -> list[str]:
        return [name for name, entry in self.servers.items() if entry.is_enabled]

    def servers_not_cached(self) -> list[str]:
        """Enabled servers whose state is ``not-cached``: nothing known of them, and none is
        being listed. A server the catalog knows is never one, so only the unknown few have
        their state worked out (at 19,641 servers, that was a tenth of ``pi-mcp search``)."""
        return [
            name
            for name in self.enabled_servers()
            if not self.state.is_known(name) and self.server_status(name).status == "not-cached"
        ]

    def eager_servers(self) -> list[str]:
        """Enabled servers that connect at start (eager and keep-alive)."""
        return [
            name
            for name, entry in self.servers.items()
            if entry.is_enabled and entry.lifecycle in ("eager", "keep-alive")
        ]

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> McpAdapter:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open the manager, load the cache, connect what must connect at start.

        Raises:
            UsageError: the adapter was already started or stopped.
        """
        if self._state_kind != "new":
            raise UsageError(f"McpAdapter cannot be started when it is {self._state_kind}")
        self._state_kind = "running"
        stack = AsyncExitStack()
        try:
            manager = ServerManager(
                {n: e for n, e in self.servers.items() if e.is_enabled},
                self.settings,
                log_dir=self.agent_dir / "logs",
                npx_cache_path=self.agent_dir / "mcp-npx-cache.json",
                resolve_npx=self._resolve_npx,
                auth_factory=lambda name: self.oauth.auth_for(name),
                environ=self._environ,
                relay_requests=self._relay_server_requests or self._questions.active,
                relay_sampling=self._relay_server_requests or self._questions.samples,
                failures=self._failures,
                pool=PoolAccess(self.agent_dir, Path.cwd()) if self._use_pool else None,
            )
            self._manager = await stack.enter_async_context(manager)
            manager.on_tools_changed(self._server_listed)
            manager.on_resource_updated(self._resource_updated)
            manager.on_state_changed(self.notices.server_state_changed)
            manager.on_state_changed(self._listing_progressed)
            listed_early: list[str] = []
            early_listed: anyio.Event | None = None
            if not self._cache_loaded:  # a host that showed cached tools first read it already
                listed_early, early_listed = await self._load_cache_while_eager_servers_start(stack)
            stack.callback(self.notices.clear_status_line)
            _start_telemetry(self)
            # Closed, the adapter's last calls have their spans and durations (telemetry's
            # worker thread makes them a moment after each answer).
            stack.callback(flush_pending)
            if self.settings.capture_stats:
                from ._stats import CallStats

                self._stats = CallStats.from_setting(self.settings.capture_stats, self.agent_dir)
                # Part of the statistics: the words that led to each tool (engine/_learned.py).
                self._search_memory = SearchMemory.in_agent_dir(self.agent_dir)
                # Registered before the task group: runs after the flusher has stopped.
                stack.callback(self._stats.flush)
            tasks = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tasks.cancel_scope.cancel)
            self._tasks = tasks
            # Search indexes are rebuilt in the background after a listing (see CatalogState).
            self.state.run_soon = tasks.start_soon
            stack.callback(setattr, self.state, "run_soon", None)
            if self._stats is not None:
                tasks.start_soon(self._stats.run_flusher)
            tasks.start_soon(self.notices.run_status_line)
            if early_listed is None:
                self.state.rebuild()
            else:  # the catalog was built with the cache read, and nothing changed since
                self.state.tell_listeners()
            self._apply_held()
            if self.host is not None:
                self._follow_host_events(self.host)
            await self._list_at_start(exclude=listed_early)
            if early_listed is not None:
                await early_listed.wait()
        except BaseException:
            self._held_while_loading = None
            if self._opened is not None:
                self._opened.set()
            self._tasks = None
            await stack.aclose()
            self._state_kind = "closed"
            raise
        self._stack = stack
        if self._opened is not None:
            self._opened.set()

    async def stop(self) -> None:
        """Close every connection and background task. Safe to call twice."""
        if self._state_kind != "running":
            self._state_kind = "closed"
            return
        self._state_kind = "closed"
        stack, self._stack = self._stack, None
        self._tasks = None
        if stack is not None:
            # Not under a shielding scope: the manager's task group must exit in the scope
            # stack it was entered in; the manager shields its own shutdown waits.
            await stack.aclose()
        self._manager = None
        # Listings stored in the last moments are written before the adapter is done.
        self.cache.flush()

    def bind_host(self, host: Host) -> None:
        """Tell ``host`` the engine's notices (those nobody has seen yet first) and status
        line, and follow its lifecycle events (session start reloads, turn end reconnects
        dropped eager servers, shutdown stops). A binding calls it through ``attach()``."""
        if host is self.host:
            return
        self.notices.bind(host)
        if self._manager is not None:
            self._follow_host_events(host)

    def _follow_host_events(self, host: Host) -> None:
        host.on("session_start", self._on_session_start)
        host.on("turn_end", self.end_turn)
        host.on("shutdown", self.stop)

    @property
    def is_running(self) -> bool:
        return self._manager is not None

    def server_manager(self) -> ServerManager:
        """The manager of this running adapter's connections, for a host that lends them to
        other processes (the gateway's server pool); calls made through it bypass the call
        pipeline, so only a host whose clients run their own pipeline may use it.

        Raises:
            UsageError: the adapter is not running.
        """
        return self._require_manager()

    def _require_manager(self) -> ServerManager:
        if self._manager is None:
            raise UsageError("McpAdapter is not running: use `async with McpAdapter(...)`")
        return self._manager

    def load_cached(self) -> None:
        """Read the metadata cache into the catalog without starting anything.

        For one-shot, read-only uses (``pi-mcp search`` from a warm cache): search, lookup and
        server states work on what the cache holds; anything that talks to a server still
        needs :meth:`start`.
        """
        self.state.load_cache()
        self._cache_loaded = True
        self.state.rebuild()

    # ------------------------------------------------------------------ listing and readiness

    async def _load_cache_while_eager_servers_start(
        self, stack: AsyncExitStack
    ) -> tuple[list[str], anyio.Event | None]:
        """Read the metadata cache; meanwhile the eager and keep-alive servers start.

        Returns the servers being listed meanwhile and the event set when that listing is
        done. At tens of thousands of cached tools the read (and the catalog built from it)
        takes a second or more, and a server's process about as long to start: with the read
        in a worker thread, neither waits for the other. What the servers publish meanwhile
        is held back until :meth:`_apply_held` (a cached entry read after a live listing would
        replace it, and a listing applied before the first catalog build would build it
        twice).
        """
        early = (
            self.state.servers_to_list(eager=True, missing=False, among=None)
            if self._connect_eager
            else []
        )
        if not early:
            self.state.load_cache()
            return [], None
        self._held_while_loading = []
        self.state.begin_listing(early)
        listed = anyio.Event()

        async def list_early() -> None:
            try:
                await self._list(early)
            finally:
                listed.set()

        tasks = await stack.enter_async_context(anyio.create_task_group())
        stack.callback(tasks.cancel_scope.cancel)
        tasks.start_soon(list_early)

        def read() -> None:
            self.state.load_cache()
            _ = self.state.full_catalog  # built here too, off the event loop

        await anyio.to_thread.run_sync(read)
        return early, listed

    def _apply_held(self) -> None:
        held, self._held_while_loading = self._held_while_loading, None
        for apply in held or ():
            apply()

    async def _list_at_start(
        self, among: Collection[str] | None = None, *, exclude: Collection[str] = ()
    ) -> None:
        names = self.state.servers_to_list(
            eager=self._connect_eager, missing=self._connect_missing, among=among
        )
        if exclude:
            names = [n for n in names if n not in exclude]
        if not names:
            return
        self.state.begin_listing(names)
        if not self._background_listing or self._tasks is None:
            await self._list(names)
            return
        # Eager and keep-alive servers are up before the adapter serves anything, as their
        # lifecycle promises; only servers never listed before are listed in the background.
        eager = [n for n in names if self.servers[n].lifecycle in ("eager", "keep-alive")]
        later = [n for n in names if n not in eager]
        if later:
            self._tasks.start_soon(self._list, later)
        if eager:
            await self._list(eager)

    async def connect_uncached(
        self,
        names: Sequence[str] | None = None,
        *,
        only_uncached: bool = True,
        whole_startup: bool = False,
    ) -> None:
        """Connect ``names`` (default: every enabled server whose tools are not cached) in
        parallel, under the start deadline (with ``whole_startup``, each within its own
        ``startupTimeoutMs``: the caller needs these servers, not a quick overview);
        failures are reported through ``on_progress``."""
        self._require_manager()
        wanted = list(names if names is not None else self.enabled_servers())
        if only_uncached:
            wanted = [n for n in wanted if n in self.servers and not self.state.is_known(n)]
        if wanted:
            self.state.begin_listing(wanted)
            await self._list(wanted, whole_startup=whole_startup)

    async def _list(self, names: Sequence[str], *, whole_startup: bool = False) -> None:
        """Connect ``names`` together under the start deadline (or, with ``whole_startup``,
        each within its own start-up time); each listing ends (and whoever waits for it
        resumes) as soon as that server is done."""
        try:
            manager = self._require_manager()
            for name in names:
                self._progress(name, "connecting", None)
            deadline_s = None if whole_startup else self._start_deadline_s
            results = await manager.connect_many(list(names), deadline_s=deadline_s)
            for name, error in results.items():
                if error is None:
                    self._progress(name, "connected", None)
                elif isinstance(error, ConnectTimeoutError) and error.still_starting:
                    self._progress(name, "still-starting", str(error))
                else:
                    self._progress(name, "failed", str(error))
        finally:
            for name in names:
                self._end_listing(name)

    def _listing_progressed(self, state: ServerState) -> None:
        """A server being listed connected (its tools are published by now) or failed:
        whoever waits for it resumes at once, not when the slowest server is done."""
        if state.status not in ("connecting", "closed"):
            self._end_listing(state.server)

    def _end_listing(self, server: str) -> None:
        if self._held_while_loading is not None:  # after what the server published
            self._held_while_loading.append(functools.partial(self.state.end_listing, server))
            return
        self.state.end_listing(server)

    @functools.cached_property
    def routes(self) -> UpstreamRoutes:
        """Which server answers a prompt, resource, completion or subscription."""
        from ._routes import UpstreamRoutes

        return UpstreamRoutes(self)

    def backing_off(self, server: str) -> tuple[FailureRecord, float] | None:
        """``server``'s last failed connect and the seconds until it is tried again, while it
        waits (in this or any process: failures are remembered in the agent dir)."""
        return self._failures.backing_off(server, self.require_server(server))

    def last_failure(self, server: str) -> FailureRecord | None:
        """``server``'s last failed connect, remembered in the agent dir until a connect of
        the same configuration succeeds (in this or any process)."""
        return self._failures.get(server, self.require_server(server))

    def last_failures(self) -> dict[str, FailureRecord]:
        """:meth:`last_failure` of every enabled server that has one, from one read of the
        failures file (not one per server)."""
        return self._failures.get_many(
            {name: self.servers[name] for name in self.enabled_servers()}
        )

    def listing_timeout_s(self) -> float:
        """How long a request that misses waits for listings in progress: the start-up
        deadline, or the slowest start-up timeout of the servers being listed."""
        if self._start_deadline_s is not None:
            return self._start_deadline_s
        return self._startup_bound_s(self.state.listing())

    def _startup_bound_s(self, names: Collection[str]) -> float:
        """The slowest start-up timeout among ``names``, plus grace."""
        timeouts = [self.servers[n].startup_timeout_s for n in names if n in self.servers]
        return max(timeouts, default=0.0) + _LISTING_GRACE_S

    async def ready(self, servers: Collection[str] | None = None) -> None:
        """Wait until the adapter is open (a host may register its surfaces before it
        starts) and ``servers`` (default: all) are no longer being listed, each bounded by
        :meth:`listing_timeout_s`. Cheap when nothing is pending."""
        await self._wait_until_open()
        await self.state.wait_for_listings(servers, timeout_s=self.listing_timeout_s())

    async def ready_to_search(self) -> None:
        """:meth:`ready`, then the current caller's search index made in a worker thread if
        no search made it yet: what a host awaits before :meth:`search`, which would
        otherwise make it on the event loop (tens of seconds for a large catalog's first
        build, every other request waiting)."""
        await self.ready()
        await self.state.prepare_index()

    async def _wait_until_open(self) -> None:
        if self._state_kind == "closed" or self._manager is not None:
            return
        if self._opened is None:
            self._opened = anyio.Event()
        # Bounded like a listing of every server: opening connects the eager ones.
        with anyio.move_on_after(self._startup_bound_s(self.enabled_servers())):
            await self._opened.wait()

    def explain_miss(self, name: str, server: str | None = None) -> str:
        """Why a tool called ``name`` (of ``server``, when the caller named it) may be
        missing, and what to do: servers that failed or were never listed, or tool lists read
        from the cache that may be stale. Empty when there is nothing to add. Written in the
        proxy tool's syntax, as every engine hint (the CLI rewords it into ``pi-mcp``
        commands)."""
        return self._statuses.explain_miss(name, server)

    # ------------------------------------------------------------------ reload

    async def reload(self) -> ReloadReport:
        """Read the configuration (unless it was given to the constructor) and the metadata
        cache again, and follow them.

        Removed (or now disabled) servers are closed, servers whose entry changed are closed
        and start afresh (at once if eager, keep-alive or not cached, else on first use),
        new servers are added, and unchanged servers keep their connections. The catalog is
        rebuilt, so registered surfaces follow (``on_catalog_changed``). Settings take effect
        for everything but the surface kind, call statistics, the call trace, the
        health-check interval and the start-up concurrency, which a restart changes.

        A file that loaded before and is broken now keeps the last good configuration: the
        report says ``kept_last_good`` and the host is told which file and why.

        Reloads may overlap (a host firing ``session_start`` twice): each takes a generation
        number, and one whose reading finishes after a newer reload began installs nothing
        (``superseded`` in the report).

        Raises:
            UsageError: the adapter is not running.
        """
        self._require_manager()
        self._reload_generation += 1
        generation = self._reload_generation
        config = self.config
        if not self._config_given:
            config = await anyio.to_thread.run_sync(self._load_config)
            self._config_seen = _fingerprint(config)
        await anyio.to_thread.run_sync(self.cache.load)
        if generation != self._reload_generation or self._manager is None:
            return ReloadReport(superseded=True)
        broken = _newly_broken(self.config, config)
        if broken:
            for error in broken:
                self.notices.notify(
                    f"MCP configuration not reloaded, the last good one stays in effect: {error}",
                    "error",
                )
            return ReloadReport(kept_last_good=True, errors=tuple(str(e) for e in broken))
        manager = self._manager
        old_entries = {n: e for n, e in self.servers.items() if e.is_enabled}
        self.config = config
        new_entries = {n: e for n, e in self.servers.items() if e.is_enabled}
        change = manager.set_servers(new_entries, self.settings)
        if self._oauth is not None:
            # Providers are made from the entry they serve: a server the edit added or
            # changed authenticates with its new entry, without a restart.
            self._oauth.set_servers(self.servers, self.settings)
        for name in change.removed:
            self.notices.forget(name)
        self.state.follow_reload(
            new_entries,
            removed=change.removed,
            restarted=(*change.added, *change.replaced),
            live=manager.metadata,
        )
        report = ReloadReport(
            added=change.added,
            removed=change.removed,
            changed=change.replaced,
            unchanged=tuple(
                n for n in new_entries if n in old_entries and n not in change.replaced
            ),
            errors=tuple(str(e) for e in config.errors),
        )
        await manager.close_detached()
        if generation == self._reload_generation:
            await self._list_at_start(among={*change.added, *change.replaced})
        return report

    async def watch_config(self, *, interval_s: float = DEFAULT_CONFIG_POLL_S) -> None:
        """Reload whenever a configuration file that was read (or looked for) changes; runs
        until cancelled. For long-lived hosts: the gateway, the pi binding, and the Python
        bindings on request. Polls: file-change APIs differ per platform and miss edits made
        by replacing a file, and one ``stat`` per file a second costs nothing."""
        if self._config_given:
            return
        while True:
            await anyio.sleep(interval_s)
            if _fingerprint(self.config) == self._config_seen:
                continue
            try:
                report = await self.reload()
            except McpAdapterError as exc:
                self._config_seen = _fingerprint(self.config)  # not again until edited again
                self.notices.notify(f"MCP configuration not reloaded: {exc}", "error")
                continue
            if report.added or report.removed or report.changed:
                self.notices.notify(f"MCP configuration reloaded: {report.summary()}", "info")

    async def _on_session_start(self) -> None:
        await self.reload()

    def _progress(self, server: str, phase: str, detail: str | None) -> None:
        if self._on_progress is not None:
            self._on_progress(server, phase, detail)

    def _server_listed(self, server: str, metadata: ServerMetadata) -> None:
        """A connection (re)opened or its tools changed: cache, rebuild, tell the person."""
        if self._held_while_loading is not None:
            self._held_while_loading.append(
                functools.partial(self._server_listed, server, metadata)
            )
            return
        changes = self.state.publish(server, metadata)
        if changes:
            self.notices.definitions_changed(server, changes)

    # ------------------------------------------------------------------ telling the user

    def status_line(self) -> str:
        """The one-line summary a host shows: ``MCP: 4/6 servers, 132 tools``."""
        # Counts kept as they change (see Notices): a status report walks every server.
        connected = len(self.notices.connected)
        enabled = len(self.state.enabled())
        return f"MCP: {connected}/{enabled} servers, {len(self.state.full_catalog)} tools"

    def on_catalog_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after each catalog rebuild; returns a function that unsubscribes."""
        return self.state.on_changed(listener)

    async def end_turn(self) -> None:
        """Host hook: eager servers that dropped reconnect on the next turn."""
        if self._manager is not None:
            await self._manager.end_turn()

    # ------------------------------------------------------------------ catalog views

    # Every view below is the current caller's (a gateway client sees only what its policy
    # lets it call; see ``_caller``): surfaces ask for these, never for the full catalog.

    @property
    def catalog(self) -> Catalog:
        return self.state.catalog

    @property
    def index(self) -> SearchIndex:
        return self.state.index

    def tools(self, server: str | None = None) -> Sequence[ToolInfo]:
        return self.state.tools(server)

    def lookup(self, name: str) -> ToolInfo:
        """Resolve a tool name by the catalog's rules, from what is known now.

        Raises:
            ToolNotFoundError: no such tool (with suggestions).
            AmbiguousToolError: several tools match (with candidates).
        """
        return self.state.catalog.lookup(name)

    def lookup_explained(self, name: str) -> ToolInfo:
        """Like :meth:`lookup`, but a miss says why the tool may be missing (its server failed,
        was never listed, or its tools come from a cache that may be stale) and how to retry.

        Raises:
            ToolNotFoundError: no such tool (with suggestions and the reason).
            AmbiguousToolError: several tools match (with candidates).
        """
        return self.pipeline.lookup_explained(name)

    def prompts(self, server: str | None = None) -> Sequence[PromptInfo]:
        """Upstream prompts (all, or ``server``'s), named like tools; from the cache or live."""
        return self.state.prompts(server)

    def lookup_prompt(self, name: str) -> PromptInfo:
        """Resolve a prompt name by the same rules as tool names.

        Raises:
            ToolNotFoundError: no such prompt (with suggestions).
            AmbiguousToolError: several prompts match.
        """
        return self.state.prompt_catalog().lookup(name)

    async def render_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> PromptMessages:
        """Resolve prompt ``name`` (any accepted form) and render it with ``arguments``.

        Raises:
            ToolNotFoundError, AmbiguousToolError: the name does not resolve to one prompt.
            ServerUnavailableError: the server could not be reached.
            ServerReportedError: the server refused (a missing or invalid argument).
        """
        try:
            prompt = self.lookup_prompt(name)
        except ToolNotFoundError:
            await self.ready()
            prompt = self.lookup_prompt(name)
        return await self.get_prompt(prompt.server, prompt.original_name, arguments)

    def metadata(self, server: str) -> ServerMetadata | None:
        """What ``server`` offered when last listed (live or from the cache), every tool with
        its schemas."""
        return self.state.whole_metadata(server)

    def server_status(self, name: str) -> ServerStatus:
        """One server's state; connects nothing.

        Raises:
            ServerNotConfiguredError: no server of that name (and none invalid).
        """
        return self._statuses.of(name)

    def status(self) -> StatusReport:
        """Every configured server's state, invalid ones included, and the config errors."""
        return self._statuses.report()

    def cached_status(self, facts: StatusFacts | None = None) -> StatusReport:
        """:meth:`status` as the metadata cache tells it, for a one-shot status with nothing
        started: each server's tool count comes from the cache's summary of its entry, so no
        entry is parsed and no catalog or search index is built (at 95,000 tools these took
        seconds), and a server whose recent connect failed (in any process) shows its backoff
        and error from the failures file, as a started manager would show them. Reads the
        cache and the failures file; connects nothing. ``facts``: what it reads of this
        configuration, when the caller worked them out (:func:`status_facts`)."""
        self.cache.load()
        return self._statuses.report(from_cache=True, facts=facts)

    def search(
        self,
        query: str,
        *,
        server: str | None = None,
        regex: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> SearchResults:
        """Ranked (or regex) search over what is known now; never connects a server (a host
        that may be asked while servers are being listed awaits :meth:`ready` first).

        Raises:
            UsageError: an invalid regex.
            ServerNotConfiguredError: an unknown server filter.
        """
        if server is not None:
            self.require_server(server)
        with search_span(server=server, regex=regex, query=query) as searched:
            memory = self._search_memory
            page = self.state.index.search(
                query,
                server=server,
                regex=regex,
                limit=limit or DEFAULT_SEARCH_LIMIT,
                offset=offset,
                learned=memory.words if memory is not None and not regex else None,
            )
            searched.hits = len(page.hits)
            if memory is not None and not regex:
                memory.note_search(query, [hit.tool for hit in page.hits])
        unavailable: tuple[ServerStatus, ...] = ()
        if not page.hits:
            names = [server] if server is not None else list(self.servers)
            unavailable = tuple(
                s for s in (self.server_status(n) for n in names) if not s.is_searchable
            )
        return SearchResults(page, unavailable)

    def require_server(self, server: str) -> ServerEntry:
        """The config entry of ``server``.

        Raises:
            ServerNotConfiguredError: no server of that name (the message lists the known ones).
        """
        entry = self.servers.get(server)
        if entry is None:
            raise ServerNotConfiguredError(server, self._statuses.unknown_server_message(server))
        return entry

    def instructions(self, server: str) -> str | None:
        """The server's instructions, or ``None`` (none given, or never listed).

        Raises:
            ServerNotConfiguredError: no server of that name.
        """
        self.require_server(server)
        meta = self.state.metadata(server)
        return meta.instructions if meta is not None else None

    async def connect(self, server: str) -> ServerMetadata:
        """Connect (or reconnect) ``server`` and refresh its metadata and cache entry.

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerDisabledError: the server is disabled in config.
            ServerUntrustedError: it comes from a project file not trusted yet.
            ServerUnavailableError: the server could not be reached (with the reason).
        """
        entry = self.require_server(server)
        untrusted = entry.untrusted
        if untrusted is not None:
            raise ServerUntrustedError(
                server,
                f"MCP server {server!r} {untrusted.message}",
                files=[str(f) for f in untrusted.files],
                trust_command=untrusted.command,
            )
        if not entry.is_enabled:
            raise ServerDisabledError(server, f"MCP server {server!r} is disabled in config")
        manager = self._require_manager()
        self._progress(server, "connecting", None)
        try:
            with allow_prompts(self.oauth.may_prompt):
                metadata = await manager.refresh(server)
        except McpAdapterError as exc:
            self._progress(server, "failed", str(exc))
            raise
        self._progress(server, "connected", None)
        self._server_listed(server, metadata)
        return metadata

    async def reconnect(self, server: str | None = None) -> dict[str, str | None]:
        """Close and reopen one server (or every enabled one). Returns errors per server."""
        manager = self._require_manager()
        names = [server] if server else self.enabled_servers()
        results: dict[str, str | None] = {}

        async def one(name: str) -> None:
            try:
                await manager.reconnect(name)
            except McpAdapterError as exc:
                results[name] = str(exc)
            else:
                results[name] = None

        async with anyio.create_task_group() as tg:
            for name in names:
                tg.start_soon(one, name)
        return results

    # ------------------------------------------------------------------ calling

    async def call(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        server: str | None = None,
        approval_scope: ApprovalScope | None = None,
    ) -> CallOutcome:
        """Call a tool by (any accepted form of) its name. Never raises for tool errors.

        With ``server``, only that server's tools answer to ``name`` (its catalog name or the
        server's own name for it): how a per-server namespace tool calls.

        Unknown and ambiguous names, invalid arguments, unavailable servers and JSON-RPC
        errors come back as outcomes with an ``error_kind``; a server's own error result
        comes back as its result. A name that misses while servers are being listed waits
        for them first. Cancelling the calling task cancels the request upstream. Calls that
        share an ``approval_scope`` (a script's) ask the person once per tool.
        """
        await self._wait_until_open()
        outcome = await self.pipeline.call(name, args, server=server, approval_scope=approval_scope)
        memory = self._search_memory
        if memory is not None and outcome.tool is not None and not outcome.is_error:
            lesson = memory.lesson_from_call(outcome.tool)  # a search's words that led here
            if lesson is not None:
                await anyio.to_thread.run_sync(memory.learn, lesson)
        return outcome

    async def ask_approvals(self, names: Iterable[str], *, scope: ApprovalScope) -> None:
        """Ask about the tools in ``names`` that need approval before calls under ``scope``
        (a script's) are made: every question comes before anything runs, and each answer
        holds for the scope's calls of that tool."""
        await self.pipeline.ask_approvals(names, scope)

    def _tell_person(self, message: str) -> None:
        if self.host is None:
            logger.warning("%s", message)
        self.notices.notify(message, "warning")

    def _asker(self) -> Ask | None:
        if self.ask is not None:
            return self.ask
        host = self.host
        return host.ask if isinstance(host, AsksQuestions) else None

    def definition_changes(self, server: str) -> DefinitionChanges:
        """``server``'s unacknowledged tool-definition changes (empty when there are none).

        Raises:
            ServerNotConfiguredError: no server of that name.
        """
        self.require_server(server)
        return self.state.changes(server)

    def trust(self, server: str, tool: str | None = None) -> tuple[str, ...]:
        """Accept ``server``'s recorded definition changes (all, or one tool's): they become
        the new trusted baseline. Returns the tools (their own names) that were trusted.

        ``tool`` may be the server's own name or the catalog name.

        Raises:
            ServerNotConfiguredError: no server of that name.
            UsageError: nothing is recorded for the server, or for that tool.
        """
        record = self.definition_changes(server)
        if not record:
            raise UsageError(f"MCP server {server!r} has no tool definition changes to trust")
        if tool is None:
            names = record.names()
            self.cache.acknowledge_changes(server)
        else:
            own = tool
            if own not in record.names():
                try:
                    own = self.catalog.lookup(tool, server=server).original_name
                except McpAdapterError:
                    own = tool
            if own not in record.names():
                listed = ", ".join(record.names())
                raise UsageError(
                    f"MCP server {server!r} has no recorded change to tool {tool!r}; "
                    f"changed: {listed}"
                )
            names = (own,)
            self.cache.acknowledge_changes(server, names)
        self.state.reread_changes(server)
        self.notices.want_status_line()
        return names

    async def read_resource(self, server: str, uri: str) -> types.ReadResourceResult:
        """Read resource ``uri`` of ``server`` (connecting it if needed).

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerUnavailableError: the server could not be reached.
            ServerReportedError: the server answered with an error (an unknown URI).
        """
        self.require_server(server)
        self._require_visible_resource(server, uri)
        # A server may quote what the adapter gave it (an injected key, a token).
        return redact_model(await self._require_manager().read_resource(server, uri))

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> PromptMessages:
        """Render ``server``'s prompt ``name`` (its own name) with ``arguments``.

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerUnavailableError: the server could not be reached.
            ServerReportedError: the server answered with an error (unknown prompt, bad args).
        """
        self.require_server(server)
        if current_caller() is not None and not any(
            p.original_name == name for p in self.state.prompts(server)
        ):
            from ._routes import UnknownPromptError

            raise UnknownPromptError(f"Unknown prompt {name!r} of MCP server {server!r}")
        result = redact_model(await self._require_manager().get_prompt(server, name, arguments))
        return PromptMessages(server, name, result.description, tuple(result.messages))

    # ------------------------------------------------------------------ resources and prompts

    def public_name(self, server: str, name: str) -> str:
        """``name`` (a server's prompt or resource name) as the catalog names that server's
        tools: with the server's prefix under ``toolPrefix``, unchanged under ``none``."""
        entry = self.require_server(server)
        mode = entry.tool_prefix or self.settings.tool_prefix
        return format_tool_name(name, server, mode=mode, separator=self.settings.tool_separator)

    async def list_resource_templates(self, server: str) -> list[types.ResourceTemplate]:
        """The resource templates of ``server`` (connecting it if needed).

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerUnavailableError: the server could not be reached.
            ServerReportedError: the server answered with an error.
        """
        self.require_server(server)
        return await self._require_manager().list_resource_templates(server)

    async def complete(
        self, server: str, params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        """Completions for an argument of ``server``'s prompt or resource template (``params``
        names them as the server does).

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerUnavailableError: the server could not be reached.
            ServerReportedError: the server answered with an error (no completion support).
        """
        self.require_server(server)
        return await self._require_manager().complete(server, params)

    async def subscribe_resource(self, server: str, uri: str, *, subscribe: bool = True) -> None:
        """Ask ``server`` for (or, with ``subscribe=False``, to stop) updates of ``uri``;
        :meth:`on_resource_updated` listeners hear of them.

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerUnavailableError: the server could not be reached.
            ServerReportedError: the server refused (it does not support subscriptions).
        """
        self.require_server(server)
        if subscribe:
            self._require_visible_resource(server, uri)
        await self._require_manager().subscribe_resource(server, uri, subscribe=subscribe)

    def may_see_resource(self, server: str, uri: str, listed: str | None = None) -> bool:
        """Whether the current caller may see and read ``server``'s resource or resource
        template ``uri`` (listed as ``listed``, default the URI itself)."""
        return self.state.may_see_resource(server, uri, listed or uri)

    def _require_visible_resource(self, server: str, uri: str) -> None:
        """Refuse a resource the current caller may not see, in the words used for one that
        does not exist: the refusal must not confirm what it hides."""
        if not self.may_see_resource(server, uri):
            from ._routes import UnknownResourceError

            raise UnknownResourceError(f"Unknown resource {uri!r}: no configured server lists it")

    def on_resource_updated(
        self, listener: Callable[[str, str], Awaitable[None]]
    ) -> Callable[[], None]:
        """Call ``listener(server, uri)`` when a subscribed resource changes; returns a
        function that unsubscribes."""
        self._resource_listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._resource_listeners:
                self._resource_listeners.remove(listener)

        return unsubscribe

    async def _resource_updated(self, server: str, uri: str) -> None:
        for listener in list(self._resource_listeners):
            await listener(server, uri)


def _newly_broken(old: LoadedConfig, new: LoadedConfig) -> list[ConfigError]:
    """Errors of files that loaded in ``old`` and are broken in ``new``: such an edit keeps
    the last good configuration (half a file would drop its servers)."""
    loaded_before = {source.path for source in old.sources if source.loaded}
    broken_now = {source.path for source in new.sources if source.status == "invalid"}
    paths = {str(p) for p in loaded_before & broken_now}
    if not paths:
        return []
    return [e for e in new.errors if e.path in paths] or [
        ConfigError(f"{path} cannot be read", path=path) for path in sorted(paths)
    ]


def _metadata_cache(agent_dir: Path, *, relay: bool, sampling: bool) -> MetadataCache:
    """The metadata cache of ``agent_dir`` for a client that relays servers' requests (and
    sampling) or not: what an adapter made with these options reads."""
    return MetadataCache(
        agent_dir / "mcp-cache.json",
        client_capabilities=_client_capabilities(relay=relay, sampling=sampling),
    )


def kept_cached_status(
    agent_dir: Path,
    *,
    key_of: Callable[[Sequence[str]], str],
    relay: bool,
    sampling: bool = False,
) -> KeptStatus | None:
    """:meth:`McpAdapter.cached_status` of an adapter made with these options, from the
    status facts kept in ``agent_dir`` (see :mod:`._status_facts`) when ``key_of`` says the
    configuration they were made from is still the one to load, without loading it. None
    when there are none for it; without a report when a server's status needs its entry
    (then the caller loads the configuration, and the facts kept are still current)."""
    facts = read_status_facts(agent_dir, key_of)
    if facts is None or not facts.keepable:  # kept facts are keepable, unless forged
        return None
    cache = _metadata_cache(agent_dir, relay=relay, sampling=sampling)
    failures = FailureMemory(agent_dir / FAILURES_FILE_NAME)
    cache.load()
    try:
        rows = cached_status_rows(
            facts,
            summaries=cache.summaries_by_hash,
            failures=lambda enabled: failures.get_many_digested(
                {n: f.failure_digest for n, f in enabled.items() if f.failure_digest is not None}
            ),
            now=failures.now(),
            listing=(),  # nothing is listed in a process that loaded nothing
            # Keepable facts hold no server signed in explicitly, which alone is asked.
            needs_auth=lambda _name: False,
            known_from_entry=None,
        )
    except EntryNeeded:
        return KeptStatus(None, facts, tuple(cache.warnings))
    report = StatusReport(servers=rows, config_errors=facts.errors)
    return KeptStatus(report, facts, tuple(cache.warnings))


def status_facts(adapter: McpAdapter, environ: RecordingEnviron) -> tuple[StatusFacts, bool]:
    """What a status from the cache reads of ``adapter``'s configuration, its config hashes
    worked out with ``environ`` (which noted the variables the load read, and notes those the
    hashes read), and whether they can be kept for :func:`kept_cached_status` (see
    :mod:`._status_facts`): loaded from inputs the digest covers, without shared state, and
    with no server that needs more than its facts. Facts that can be kept carry each entry's
    failure digest (worked out only then)."""
    config = adapter.config
    keep = config.inputs_known and adapter.shared_state is None
    facts = StatusFacts.of(config, environ=environ, failure_digest=entry_digest if keep else None)
    return facts, keep and facts.keepable and not environ.listed


def keep_status_facts(
    agent_dir: Path,
    facts: StatusFacts,
    names: Sequence[str],
    key_of: Callable[[Sequence[str]], str | None],
) -> bool:
    """Keep ``facts`` (which :func:`status_facts` said can be kept) in ``agent_dir`` for
    :func:`kept_cached_status`, under ``key_of(names)``, the digest of the inputs for the
    variables the load read; nothing when that is None (the files changed meanwhile). Says
    whether they were kept."""
    key = key_of(names)
    if key is None:
        return False
    write_status_facts(agent_dir, facts, key=key, names=names)
    return True


def _client_capabilities(*, relay: bool, sampling: bool) -> tuple[str, ...]:
    """What servers are told this client can do, as the metadata cache records it: a server
    may offer some tools only to clients that can sample or elicit. Mirrors what the manager
    passes to each connection (``relay_requests``, ``relay_sampling``)."""
    if not relay:
        return ()
    return ("elicitation", "sampling") if sampling else ("elicitation",)


def _fingerprint(config: LoadedConfig) -> tuple[tuple[str, int, int], ...]:
    """Size and modification time of every file the configuration read or looked for."""
    rows: list[tuple[str, int, int]] = []
    for source in config.sources:
        try:
            stat = source.path.stat()
        except OSError:
            rows.append((str(source.path), -1, -1))
        else:
            rows.append((str(source.path), stat.st_size, stat.st_mtime_ns))
    return tuple(rows)


def _start_telemetry(adapter: McpAdapter) -> None:
    """Traces and metrics of this adapter's work when configured (engine/_telemetry.py); a
    missing extra is said once in the log and the adapter runs without them."""
    from . import _telemetry

    try:
        telemetry = _telemetry.configure_telemetry(adapter.settings, adapter._environ)
    except _telemetry.TelemetryUnavailableError as exc:
        logger.warning("%s", exc)
        return
    if telemetry is not None:
        telemetry.watch(adapter)
