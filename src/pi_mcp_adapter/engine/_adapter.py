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

import logging
import os
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from pi_mcp_adapter._errors import (
    AmbiguousToolError,
    McpAdapterError,
    ServerDisabledError,
    ServerNotConfiguredError,
    ServerReportedError,
    ServerUnavailableError,
    ToolNotFoundError,
    UsageError,
)
from pi_mcp_adapter.catalog import Catalog, DefinitionChanges, MetadataCache
from pi_mcp_adapter.catalog._definition_diff import ToolDefinitionDiff, diff_definitions
from pi_mcp_adapter.catalog._metadata import ServerMetadata, ToolInfo
from pi_mcp_adapter.catalog._naming import format_tool_name
from pi_mcp_adapter.catalog._prompts import PromptCatalog, PromptInfo
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_semantic import search_vector_cache_path
from pi_mcp_adapter.config import LoadedConfig, load_config
from pi_mcp_adapter.config._locations import default_agent_dir
from pi_mcp_adapter.config._models import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerManager, ServerState
from pi_mcp_adapter.servers._failures import FAILURES_FILE_NAME, FailureMemory
from pi_mcp_adapter.servers._prompt_policy import allow_prompts

from ._approval import Ask, AsksQuestions, ToolApprovals
from ._arguments import argument_problems
from ._host import Host, NotifyLevel
from ._questions import Elicit, Sample, ServerQuestions
from ._trace import open_call_trace
from ._validate import validate_arguments
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
    from mcp.shared.dispatcher import ProgressFnT

    from pi_mcp_adapter.servers._oauth import OAuthProviders

    from ._stats import CallStats

ProgressCallback = Callable[[str, str, str | None], None]
"""``(server, phase, detail)`` with phase ``connecting`` | ``connected`` | ``failed``."""

logger = logging.getLogger("pi_mcp_adapter")

DEFAULT_SEARCH_LIMIT = 12
DEFAULT_STATUS_DEBOUNCE_S = 0.2
"""Servers connecting together at start update the status line once, not once each."""
_CONNECTED = "connected"


class McpAdapter:
    """The engine. Create one per host session; use it with ``async with``.

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
        connect_missing: connect, at start, every enabled server whose tools are not in the
            metadata cache yet (the first run), so search and describe have something to show.
        connect_eager: connect eager and keep-alive servers at start (a one-shot command
            that needs none of them passes False).
        start_deadline_s: one overall deadline for the connects at start; servers still
            connecting then are abandoned, reported as failed and back off.
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

    Telling the user: with a ``host``, the engine sends ``host.notify`` when a server fails
    to start or is lost, needs authentication, comes back after that, when a tool is renamed
    because another server's tool has its name, and when a server's tool definitions change;
    it keeps ``host.set_status`` at ``MCP: <connected>/<enabled> servers, <n> tools``.
    """

    def __init__(
        self,
        *,
        config: LoadedConfig | None = None,
        agent_dir: Path | None = None,
        project_dir: Path | None = None,
        config_path: Path | None = None,
        home: Path | None = None,
        config_loader: Callable[[], LoadedConfig] | None = None,
        host: Host | None = None,
        connect_missing: bool = True,
        connect_eager: bool = True,
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
    ) -> None:
        self.agent_dir = (agent_dir or default_agent_dir()).expanduser()
        self.project_dir = (project_dir or Path.cwd()).expanduser()
        self._config_path = config_path
        self._home = home
        self._environ = dict(os.environ if environ is None else environ)
        self._config_loader = config_loader
        # A configuration given in code, without a loader, has no files to read again.
        self._config_given = config is not None and config_loader is None
        self.config = config or self._load_config()
        self.host = host
        self._oauth = oauth
        self._connect_missing = connect_missing
        self._connect_eager = connect_eager
        self._start_deadline_s = start_deadline_s
        self._ranking = ranking
        self._resolve_npx = resolve_npx
        self._on_progress = on_progress
        self._clock = clock
        self.cache = MetadataCache(self.agent_dir / "mcp-cache.json")
        self._metadata: dict[str, ServerMetadata] = {}
        self._changes: dict[str, DefinitionChanges] = {}
        """Unacknowledged tool-definition changes per server, as the cache records them."""
        self._processed: dict[str, ServerMetadata] = {}
        """The metadata object last cached per server: the manager announces each once, but
        a call may process it first (see :meth:`_call_server`)."""
        self._catalog: Catalog | None = None
        self._prompt_catalog: PromptCatalog | None = None
        self._index: SearchIndex | None = None
        self._manager: ServerManager | None = None
        self._stack: AsyncExitStack | None = None
        self._state: Literal["new", "running", "closed"] = "new"
        self._stats: CallStats | None = None
        self.ask = ask
        self._approvals = ToolApprovals(self.agent_dir, clock=clock)
        self._trace = open_call_trace(
            self.settings, self.servers, project_dir=self.project_dir, environ=self._environ
        )
        self._listeners: list[Callable[[], None]] = []
        self._relay_server_requests = relay_server_requests
        self._questions = ServerQuestions(elicit, sample, tell=self._tell_person)
        self._resource_listeners: list[Callable[[str, str], Awaitable[None]]] = []
        self._status_debounce_s = status_debounce_s
        self._status_wanted: anyio.Event | None = None
        self._status_line: str | None = None
        self._unavailable: dict[str, str] = {}
        """Servers the host was told are failing or need auth, with that status."""
        self._announced_collisions: set[tuple[str, str, str]] = set()
        self._reload_generation = 0

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

    # ------------------------------------------------------------------ lifecycle

    @property
    def oauth(self) -> OAuthProviders:
        """One OAuth provider per remote server, made on first use (it loads the SDK)."""
        if self._oauth is None:
            from pi_mcp_adapter.servers._oauth import OAuthProviders

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
        if self._state != "new":
            raise UsageError(f"McpAdapter cannot be started when it is {self._state}")
        self._state = "running"
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
                failures=FailureMemory(self.agent_dir / FAILURES_FILE_NAME),
            )
            self._manager = await stack.enter_async_context(manager)
            manager.on_tools_changed(self._server_connected)
            manager.on_resource_updated(self._resource_updated)
            manager.on_state_changed(self._server_state_changed)
            self._load_cache()
            if self.host is not None:
                stack.callback(self._clear_status_line)
            if self.settings.capture_stats:
                from ._stats import CallStats

                self._stats = CallStats.from_setting(self.settings.capture_stats, self.agent_dir)
                # Registered before the task group: runs after the flusher has stopped.
                stack.callback(self._stats.flush)
            tasks = await stack.enter_async_context(anyio.create_task_group())
            stack.callback(tasks.cancel_scope.cancel)
            if self._stats is not None:
                tasks.start_soon(self._stats.run_flusher)
            if self.host is not None:
                self._status_wanted = anyio.Event()
                tasks.start_soon(self._run_status_line)
            self._rebuild()
            if self.host is not None:
                self.host.on("session_start", self._on_session_start)
                self.host.on("turn_end", self.on_turn_end)
                self.host.on("shutdown", self.stop)
            await self._connect_at_start()
        except BaseException:
            await stack.aclose()
            self._state = "closed"
            raise
        self._stack = stack

    async def stop(self) -> None:
        """Close every connection and background task. Safe to call twice."""
        if self._state != "running":
            self._state = "closed"
            return
        self._state = "closed"
        stack, self._stack = self._stack, None
        if stack is not None:
            # Not under a shielding scope: the manager's task group must exit in the scope
            # stack it was entered in; the manager shields its own shutdown waits.
            await stack.aclose()
        self._manager = None

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
        self._load_cache()
        self._rebuild()

    def _load_cache(self) -> None:
        self.cache.load()
        for name in self.enabled_servers():
            cached = self.cache.get(name, self.servers[name])
            if cached is not None:
                self._metadata[name] = cached
                self._changes[name] = self.cache.definition_changes(name)

    async def _connect_at_start(self, among: Collection[str] | None = None) -> None:
        wanted = [
            name
            for name in self.enabled_servers()
            if (among is None or name in among)
            and (
                (self._connect_eager and self.servers[name].lifecycle in ("eager", "keep-alive"))
                or (self._connect_missing and name not in self._metadata)
            )
        ]
        await self.connect_uncached(wanted, only_uncached=False)

    async def connect_uncached(
        self, names: Sequence[str] | None = None, *, only_uncached: bool = True
    ) -> None:
        """Connect ``names`` (default: every enabled server whose tools are not cached) in
        parallel, under the start deadline; failures are reported through ``on_progress``."""
        manager = self._require_manager()
        wanted = list(names if names is not None else self.enabled_servers())
        if only_uncached:
            wanted = [n for n in wanted if n in self.servers and n not in self._metadata]
        if not wanted:
            return
        for name in wanted:
            self._progress(name, "connecting", None)
        results = await manager.connect_many(wanted, deadline_s=self._start_deadline_s)
        for name, error in results.items():
            metadata = manager.metadata(name)
            if error is None and metadata is not None and name not in self._metadata:
                self._server_connected(name, metadata)  # before the caller reads the catalog
            self._progress(name, "failed" if error else "connected", str(error) if error else None)

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
        await anyio.to_thread.run_sync(self.cache.load)
        if generation != self._reload_generation or self._manager is None:
            return ReloadReport(superseded=True)
        manager = self._manager
        old_entries = {n: e for n, e in self.servers.items() if e.is_enabled}
        self.config = config
        new_entries = {n: e for n, e in self.servers.items() if e.is_enabled}
        change = manager.set_servers(new_entries, self.settings)
        for name in change.removed:
            for table in (self._metadata, self._changes, self._processed, self._unavailable):
                table.pop(name, None)
        for name, entry in new_entries.items():
            # Another process may have trusted changes (`pi-mcp trust`) since they were read.
            self._changes[name] = self.cache.definition_changes(name)
            live = manager.metadata(name)
            if live is not None and name not in change.replaced:
                continue  # unchanged and connected: the live listing is the truth
            cached = self.cache.get(name, entry)
            self._processed.pop(name, None)
            if cached is not None:
                self._metadata[name] = cached
            elif name in change.added or name in change.replaced:
                self._metadata.pop(name, None)
        self._rebuild()
        report = ReloadReport(
            added=change.added,
            removed=change.removed,
            changed=change.replaced,
            unchanged=tuple(
                n for n in new_entries if n in old_entries and n not in change.replaced
            ),
        )
        await manager.close_detached()
        if generation == self._reload_generation:
            await self._connect_at_start(among={*change.added, *change.replaced})
        return report

    async def _on_session_start(self) -> None:
        await self.reload()

    def _progress(self, server: str, phase: str, detail: str | None) -> None:
        if self._on_progress is not None:
            self._on_progress(server, phase, detail)

    def _server_connected(self, server: str, metadata: ServerMetadata) -> None:
        """A connection (re)opened or its tools changed: cache, rebuild, tell listeners."""
        entry = self.servers.get(server)
        if entry is None or self._processed.get(server) is metadata:
            return
        self._processed[server] = metadata
        changes = self.cache.store(server, entry, metadata)
        self._metadata[server] = metadata
        self._changes[server] = self.cache.definition_changes(server)
        self._rebuild()
        if self.host is not None and changes:
            names = ", ".join(changes.names()[:10])
            self.host.notify(
                f"MCP server {server!r} changed its tool definitions: {names}", "warning"
            )

    def _rebuild(self) -> None:
        enabled = {n: self.servers[n] for n in self.enabled_servers()}
        metadata = {n: m for n, m in self._metadata.items() if n in enabled}
        self._catalog = Catalog.build(metadata, enabled, self.settings)
        self._prompt_catalog = None
        self._index = None
        self._announce_collisions(self._catalog)
        self._want_status_line()
        for listener in list(self._listeners):
            listener()

    # ------------------------------------------------------------------ telling the user

    def _notify(self, message: str, level: NotifyLevel) -> None:
        if self.host is not None:
            self.host.notify(message, level)

    def _server_state_changed(self, state: ServerState) -> None:
        """Tell the user when a server becomes unusable, and when it is usable again."""
        server, status = state.server, state.status
        if status in ("failed", "needs-auth"):
            if self._unavailable.get(server) != status:
                self._unavailable[server] = status
                if status == "needs-auth":
                    self._notify(
                        f"MCP server {server!r} needs authentication: run `/mcp-auth {server}` "
                        f"(or `pi-mcp auth {server}`)",
                        "warning",
                    )
                else:
                    reason = (state.error or "unknown error").splitlines()[0]
                    self._notify(f"MCP server {server!r} is unavailable: {reason}", "error")
        elif status == "connected" and self._unavailable.pop(server, None) is not None:
            self._notify(f"MCP server {server!r} is back: connected", "info")
        self._want_status_line()

    def _announce_collisions(self, catalog: Catalog) -> None:
        for collision in catalog.collisions:
            key = (collision.server, collision.original_name, collision.assigned_name)
            if key in self._announced_collisions:
                continue
            self._announced_collisions.add(key)
            self._notify(
                f"MCP tool {collision.original_name!r} of server {collision.server!r} is "
                f"called {collision.assigned_name!r}: {collision.name!r} is taken by server "
                f"{collision.kept_by!r} (a toolPrefix avoids the clash)",
                "warning",
            )

    def status_line(self) -> str:
        """The one-line summary a host shows: ``MCP: 4/6 servers, 132 tools``."""
        report = self.status()
        return f"MCP: {report.connected}/{report.enabled} servers, {report.tool_count} tools"

    def _want_status_line(self) -> None:
        if self._status_wanted is not None:
            self._status_wanted.set()

    async def _run_status_line(self) -> None:
        """Keep the host's status line current, at most once per ``status_debounce_s``."""
        while self._status_wanted is not None:
            await self._status_wanted.wait()
            await anyio.sleep(self._status_debounce_s)
            self._status_wanted = anyio.Event()
            text = self.status_line()
            if text != self._status_line and self.host is not None:
                self._status_line = text
                self.host.set_status(text)

    def _clear_status_line(self) -> None:
        if self.host is not None and self._status_line is not None:
            self._status_line = None
            self.host.set_status(None)

    def on_catalog_changed(self, listener: Callable[[], None]) -> Callable[[], None]:
        """Call ``listener`` after each catalog rebuild; returns a function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    async def on_turn_end(self) -> None:
        """Host hook: eager servers that dropped reconnect on the next turn."""
        if self._manager is not None:
            await self._manager.on_turn_end()

    # ------------------------------------------------------------------ catalog views

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._rebuild()
        assert self._catalog is not None
        return self._catalog

    @property
    def index(self) -> SearchIndex:
        if self._index is None:
            ranking = self._ranking
            if ranking == "default":
                ranking = self.settings.search_ranking or "default"
            self._index = SearchIndex(
                self.catalog.tools(),
                ranking=ranking,
                vector_cache=search_vector_cache_path(self.agent_dir),
            )
        return self._index

    def tools(self, server: str | None = None) -> Sequence[ToolInfo]:
        return self.catalog.tools(server)

    def lookup(self, name: str) -> ToolInfo:
        """Resolve a tool name by the catalog's rules.

        Raises:
            ToolNotFoundError: no such tool (with suggestions).
            AmbiguousToolError: several tools match (with candidates).
        """
        return self.catalog.lookup(name)

    def prompts(self, server: str | None = None) -> Sequence[PromptInfo]:
        """Upstream prompts (all, or ``server``'s), named like tools; from the cache or live."""
        if self._prompt_catalog is None:
            enabled = {n: self.servers[n] for n in self.enabled_servers()}
            self._prompt_catalog = PromptCatalog.build(self._metadata, enabled, self.settings)
        return self._prompt_catalog.prompts(server)

    def lookup_prompt(self, name: str) -> PromptInfo:
        """Resolve a prompt name by the same rules as tool names.

        Raises:
            ToolNotFoundError: no such prompt (with suggestions).
            AmbiguousToolError: several prompts match.
        """
        self.prompts()
        assert self._prompt_catalog is not None
        return self._prompt_catalog.lookup(name)

    async def render_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> PromptMessages:
        """Resolve prompt ``name`` (any accepted form) and render it with ``arguments``.

        Raises:
            ToolNotFoundError, AmbiguousToolError: the name does not resolve to one prompt.
            ServerUnavailableError: the server could not be reached.
            ServerReportedError: the server refused (a missing or invalid argument).
        """
        prompt = self.lookup_prompt(name)
        return await self.get_prompt(prompt.server, prompt.original_name, arguments)

    def metadata(self, server: str) -> ServerMetadata | None:
        """What ``server`` offered when last listed (live or from the cache)."""
        return self._metadata.get(server)

    def server_status(self, name: str) -> ServerStatus:
        """One server's state; connects nothing."""
        entry = self.servers.get(name)
        invalid = self.config.invalid_servers.get(name)
        if invalid is not None:
            return ServerStatus(name, "invalid", 0, error=invalid.message)
        if entry is None:
            raise ServerNotConfiguredError(name, self._unknown_server_message(name))
        tool_count = len(self.catalog.tools(name)) if entry.is_enabled else 0
        record = self._changes.get(name, DefinitionChanges())
        changed = record.names()
        diffs: tuple[ToolDefinitionDiff, ...] = ()
        if record:
            meta = self._metadata.get(name)
            diffs = diff_definitions(record, meta.tools if meta is not None else ())
        if not entry.is_enabled:
            return ServerStatus(name, "disabled", 0, lifecycle=entry.lifecycle)
        state = self._manager.state(name) if self._manager is not None else None
        if state is None or state.status in ("closed", "idle", "new"):
            status = "cached" if name in self._metadata else "not-cached"
            if entry.oauth_mode == "explicit" and self.oauth.needs_auth(name):
                status = "needs-auth"
            return ServerStatus(
                name,
                status,
                tool_count,
                lifecycle=entry.lifecycle,
                changed_tools=changed,
                definition_changes=diffs,
            )
        failed_ago = None
        if state.failed_at is not None:
            failed_ago = max(0.0, self._manager_clock() - state.failed_at)
        return ServerStatus(
            name,
            state.status,
            tool_count,
            transport=state.transport,
            lifecycle=entry.lifecycle,
            error=state.error,
            failed_ago_s=failed_ago,
            changed_tools=changed,
            definition_changes=diffs,
        )

    def _manager_clock(self) -> float:
        return self._manager.now() if self._manager is not None else time.monotonic()

    def status(self) -> StatusReport:
        """Every configured server's state, invalid ones included, and the config errors."""
        names = list(self.servers) + [
            n for n in self.config.invalid_servers if n not in self.servers
        ]
        return StatusReport(
            servers=tuple(self.server_status(n) for n in names),
            config_errors=tuple(str(e) for e in self.config.errors),
        )

    def search(
        self,
        query: str,
        *,
        server: str | None = None,
        regex: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> SearchResults:
        """Ranked (or regex) search over cached metadata; never connects a server.

        Raises:
            UsageError: an invalid regex.
            ServerNotConfiguredError: an unknown server filter.
        """
        if server is not None and server not in self.servers:
            raise ServerNotConfiguredError(server, self._unknown_server_message(server))
        page = self.index.search(
            query, server=server, regex=regex, limit=limit or DEFAULT_SEARCH_LIMIT, offset=offset
        )
        unavailable: tuple[ServerStatus, ...] = ()
        if not page.hits:
            names = [server] if server is not None else list(self.servers)
            unavailable = tuple(
                s for s in (self.server_status(n) for n in names) if not s.is_searchable
            )
        return SearchResults(page, unavailable)

    def _unknown_server_message(self, server: str) -> str:
        known = ", ".join(sorted(self.servers)) or "none configured"
        return f"Unknown MCP server {server!r}. Configured servers: {known}"

    def require_server(self, server: str) -> ServerEntry:
        """The config entry of ``server``.

        Raises:
            ServerNotConfiguredError: no server of that name (the message lists the known ones).
        """
        entry = self.servers.get(server)
        if entry is None:
            raise ServerNotConfiguredError(server, self._unknown_server_message(server))
        return entry

    def instructions(self, server: str) -> str | None:
        """The server's instructions, or ``None`` (none given, or never listed).

        Raises:
            ServerNotConfiguredError: no server of that name.
        """
        self.require_server(server)
        meta = self._metadata.get(server)
        return meta.instructions if meta is not None else None

    async def connect(self, server: str) -> ServerMetadata:
        """Connect (or reconnect) ``server`` and refresh its metadata and cache entry.

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerDisabledError: the server is disabled in config.
            ServerUnavailableError: the server could not be reached (with the reason).
        """
        entry = self.require_server(server)
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
        self._server_connected(server, metadata)
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
        progress: ProgressFnT | None = None,
    ) -> CallOutcome:
        """Call a tool by (any accepted form of) its name. Never raises for tool errors.

        Unknown and ambiguous names, invalid arguments, unavailable servers and JSON-RPC
        errors come back as outcomes with an ``error_kind``; a server's own error result
        comes back as its result. ``progress`` receives the server's progress notifications
        for this call; cancelling the calling task cancels the request upstream.
        """
        arguments = dict(args or {})
        try:
            tool = self.lookup(name)
        except ToolNotFoundError as exc:
            return CallOutcome(
                name, error_kind="unknown_tool", message=str(exc), suggestions=exc.suggestions
            )
        except AmbiguousToolError as exc:
            return CallOutcome(
                name, error_kind="ambiguous_tool", message=str(exc), candidates=exc.candidates
            )
        # Text JSON cannot carry, or nesting that would exhaust the encoder's stack, is the
        # caller's mistake: it is never sent (a server would get a broken connection).
        problems = argument_problems(arguments)
        if not problems and self.settings.validate_args and not tool.is_resource:
            problems = validate_arguments(tool.input_schema, arguments)
        if problems:
            return CallOutcome(
                name,
                tool,
                error_kind="invalid_arguments",
                message=f"Invalid arguments for {tool.name}",
                problems=tuple(problems),
            )
        blocked = self._refused_for_change(name, tool)
        if blocked is not None:
            return blocked
        refusal = await self._approvals.check(
            tool,
            arguments,
            entry=self.servers.get(tool.server),
            settings=self.settings,
            ask=self._asker(),
        )
        if refusal is not None:
            return CallOutcome(name, tool, error_kind="approval_denied", message=refusal)
        with allow_prompts(self.oauth.may_prompt), self._questions.asked_during(tool.server):
            outcome = await self._call_server(name, tool, arguments, progress)
        if self._stats is not None and outcome.error_kind != "definition_changed":
            self._stats.record(
                tool.server,
                tool.original_name,
                latency_ms=outcome.latency_ms,
                ok=not outcome.is_error,
                bytes_out=_result_bytes(outcome),
                connect_ms=outcome.connect_ms,
            )
        if self._trace is not None and self._trace.traces(self.servers.get(tool.server)):
            failed = outcome.error_kind is not None
            self._trace.record(
                server=tool.server,
                tool=tool.original_name,
                duration_ms=outcome.latency_ms + outcome.connect_ms,
                bytes_out=_result_bytes(outcome),
                outcome="failed" if failed else ("error" if outcome.is_error else "ok"),
                error=outcome.error_kind,
            )
        return outcome

    def _tell_person(self, message: str) -> None:
        if self.host is not None:
            self.host.notify(message, "warning")
        else:
            logger.warning("%s", message)

    def _asker(self) -> Ask | None:
        if self.ask is not None:
            return self.ask
        host = self.host
        return host.ask if isinstance(host, AsksQuestions) else None

    async def _call_server(
        self,
        requested: str,
        tool: ToolInfo,
        arguments: dict[str, Any],
        progress: ProgressFnT | None,
    ) -> CallOutcome:
        manager = self._require_manager()
        entry = self.servers[tool.server]
        started = time.perf_counter()
        connect_ms = 0.0
        try:
            if manager.state(tool.server).status != _CONNECTED:
                await manager.connect(tool.server)
                connect_ms = (time.perf_counter() - started) * 1000
                # What the server lists now is checked before the call, not after: the
                # manager announces a new connection from another task, maybe too late.
                live = manager.metadata(tool.server)
                if live is not None:
                    self._server_connected(tool.server, live)
                blocked = self._refused_for_change(requested, tool)
                if blocked is not None:
                    return blocked
            called = time.perf_counter()
            result: Any
            if tool.resource_uri is not None:
                result = await manager.read_resource(tool.server, tool.resource_uri)
            else:
                result = await manager.call_tool(
                    tool.server,
                    tool.original_name,
                    arguments,
                    timeout_s=entry.request_timeout_s,
                    progress=progress,
                )
        except ServerUnavailableError as exc:
            return CallOutcome(
                requested,
                tool,
                error_kind="server_unavailable",
                message=str(exc),
                latency_ms=_elapsed_ms(started) - connect_ms,
                connect_ms=connect_ms,
            )
        except ServerReportedError as exc:
            return CallOutcome(
                requested,
                tool,
                error_kind="server_error",
                message=str(exc),
                error_code=exc.code,
                latency_ms=_elapsed_ms(started) - connect_ms,
                connect_ms=connect_ms,
            )
        return CallOutcome(
            requested, tool, result, latency_ms=_elapsed_ms(called), connect_ms=connect_ms
        )

    def _refused_for_change(self, requested: str, tool: ToolInfo) -> CallOutcome | None:
        """Under ``onDefinitionChange: "block"``, the refusal of a tool changed since trusted."""
        if self.settings.on_definition_change != "block" or tool.is_resource:
            return None
        record = self._changes.get(tool.server)
        if record is None:
            return None
        changed = {c.name: c.fields for c in record.changed}
        if tool.original_name in changed:
            how = f"its {', '.join(changed[tool.original_name])} changed"
        elif tool.original_name in record.added:
            how = "it is new"
        else:
            return None
        return CallOutcome(
            requested,
            tool,
            error_kind="definition_changed",
            message=(
                f"Tool {tool.name} was not called: {how} since its server {tool.server!r} was "
                f'last trusted, and settings.onDefinitionChange is "block". Ask the user to '
                f"review the change (`pi-mcp status`) and trust it with "
                f"`pi-mcp trust {tool.server} {tool.original_name}` (or `/mcp trust "
                f"{tool.server} {tool.original_name}`)."
            ),
        )

    def definition_changes(self, server: str) -> DefinitionChanges:
        """``server``'s unacknowledged tool-definition changes (empty when there are none).

        Raises:
            ServerNotConfiguredError: no server of that name.
        """
        self.require_server(server)
        return self._changes.get(server, DefinitionChanges())

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
        self._changes[server] = self.cache.definition_changes(server)
        self._want_status_line()
        return names

    async def read_resource(self, server: str, uri: str) -> types.ReadResourceResult:
        """Read resource ``uri`` of ``server`` (connecting it if needed).

        Raises:
            ServerNotConfiguredError: no server of that name.
            ServerUnavailableError: the server could not be reached.
            ServerReportedError: the server answered with an error (an unknown URI).
        """
        self.require_server(server)
        return await self._require_manager().read_resource(server, uri)

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
        result = await self._require_manager().get_prompt(server, name, arguments)
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
        await self._require_manager().subscribe_resource(server, uri, subscribe=subscribe)

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


def _elapsed_ms(since: float) -> float:
    return max(0.0, (time.perf_counter() - since) * 1000)


def _result_bytes(outcome: CallOutcome) -> int:
    """UTF-8 size of the text a server answered with (what a model would read)."""
    result = outcome.result
    if result is None:
        return len(outcome.message.encode())
    total = 0
    blocks = getattr(result, "content", None) or getattr(result, "contents", None) or []
    for block in blocks:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            total += len(text.encode())
    return total
