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

import os
import time
from collections.abc import Callable, Mapping, Sequence
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
from pi_mcp_adapter.catalog import Catalog, MetadataCache
from pi_mcp_adapter.catalog._metadata import ServerMetadata, ToolInfo
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_semantic import search_vector_cache_path
from pi_mcp_adapter.config import LoadedConfig, load_config
from pi_mcp_adapter.config._locations import default_agent_dir
from pi_mcp_adapter.config._models import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerManager
from pi_mcp_adapter.servers._failures import FAILURES_FILE_NAME, FailureMemory

from ._approval import Ask, AsksQuestions, ToolApprovals
from ._arguments import argument_problems
from ._host import Host
from ._trace import open_call_trace
from ._validate import validate_arguments
from ._values import CallOutcome, PromptMessages, SearchResults, ServerStatus, StatusReport

if TYPE_CHECKING:
    # SDK types appear in signatures only: the SDK is imported by the first connect, so that
    # commands answered from the cache never pay for it.
    import mcp_types as types
    from mcp.shared.dispatcher import ProgressFnT

    from ._stats import CallStats

ProgressCallback = Callable[[str, str, str | None], None]
"""``(server, phase, detail)`` with phase ``connecting`` | ``connected`` | ``failed``."""

DEFAULT_SEARCH_LIMIT = 12
_CONNECTED = "connected"


class McpAdapter:
    """The engine. Create one per host session; use it with ``async with``.

    Args:
        config: an already loaded configuration; when ``None`` it is loaded from
            ``agent_dir``/``project_dir``/``config_path``.
        host: the binding the engine tells about events (notices, the status line, lifecycle
            hooks); ``None`` for library/CLI use. Registering tools is the surfaces' job.
        connect_missing: connect, at start, every enabled server whose tools are not in the
            metadata cache yet (the first run), so search and describe have something to show.
        connect_eager: connect eager and keep-alive servers at start (a one-shot command
            that needs none of them passes False).
        start_deadline_s: one overall deadline for the connects at start; servers still
            connecting then are abandoned, reported as failed and back off.
        clock: wall clock in seconds (``time.time``), injectable for tests.
        ask: answers the questions the engine asks the user (tool approval, see
            ``approveTools``): ``async ask(question) -> option id | None``. Without it the host
            answers if it implements :class:`AsksQuestions`; with neither, calls that need an
            approval are refused.
    """

    def __init__(
        self,
        *,
        config: LoadedConfig | None = None,
        agent_dir: Path | None = None,
        project_dir: Path | None = None,
        config_path: Path | None = None,
        host: Host | None = None,
        connect_missing: bool = True,
        connect_eager: bool = True,
        start_deadline_s: float | None = None,
        ranking: str = "default",
        resolve_npx: bool = True,
        on_progress: ProgressCallback | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
        ask: Ask | None = None,
    ) -> None:
        self.agent_dir = (agent_dir or default_agent_dir()).expanduser()
        self.project_dir = (project_dir or Path.cwd()).expanduser()
        self._config_path = config_path
        self._environ = dict(os.environ if environ is None else environ)
        self.config = config or self._load_config()
        self.host = host
        self._connect_missing = connect_missing
        self._connect_eager = connect_eager
        self._start_deadline_s = start_deadline_s
        self._ranking = ranking
        self._resolve_npx = resolve_npx
        self._on_progress = on_progress
        self._clock = clock
        self.cache = MetadataCache(self.agent_dir / "mcp-cache.json")
        self._metadata: dict[str, ServerMetadata] = {}
        self._changed_tools: dict[str, tuple[str, ...]] = {}
        self._catalog: Catalog | None = None
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

    def _load_config(self) -> LoadedConfig:
        return load_config(
            agent_dir=self.agent_dir,
            project_dir=self.project_dir,
            config_path=self._config_path,
            environ=self._environ,
        )

    # ------------------------------------------------------------------ lifecycle

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
                environ=self._environ,
                failures=FailureMemory(self.agent_dir / FAILURES_FILE_NAME),
            )
            self._manager = await stack.enter_async_context(manager)
            manager.on_tools_changed(self._server_connected)
            self._load_cache()
            if self.settings.capture_stats:
                from ._stats import CallStats

                stats = CallStats.from_setting(self.settings.capture_stats, self.agent_dir)
                self._stats = stats
                # Last registered, first run: the flusher stops before the final flush.
                stack.callback(stats.flush)
                tasks = await stack.enter_async_context(anyio.create_task_group())
                tasks.start_soon(stats.run_flusher)
                stack.callback(tasks.cancel_scope.cancel)
            self._rebuild()
            if self.host is not None:
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
                self._changed_tools[name] = self.cache.changed_tools(name)

    async def _connect_at_start(self) -> None:
        wanted = [
            name
            for name in self.enabled_servers()
            if (self._connect_eager and self.servers[name].lifecycle in ("eager", "keep-alive"))
            or (self._connect_missing and name not in self._metadata)
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

    def _progress(self, server: str, phase: str, detail: str | None) -> None:
        if self._on_progress is not None:
            self._on_progress(server, phase, detail)

    def _server_connected(self, server: str, metadata: ServerMetadata) -> None:
        """A connection (re)opened or its tools changed: cache, rebuild, tell listeners."""
        entry = self.servers.get(server)
        if entry is None:
            return
        changes = self.cache.store(server, entry, metadata)
        self._metadata[server] = metadata
        self._changed_tools[server] = self.cache.changed_tools(server)
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
        self._index = None
        for listener in list(self._listeners):
            listener()

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
        changed = self._changed_tools.get(name, ())
        if not entry.is_enabled:
            return ServerStatus(name, "disabled", 0, lifecycle=entry.lifecycle)
        state = self._manager.state(name) if self._manager is not None else None
        if state is None or state.status in ("closed", "idle", "new"):
            status = "cached" if name in self._metadata else "not-cached"
            return ServerStatus(
                name, status, tool_count, lifecycle=entry.lifecycle, changed_tools=changed
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
        refusal = await self._approvals.check(
            tool,
            arguments,
            entry=self.servers.get(tool.server),
            settings=self.settings,
            ask=self._asker(),
        )
        if refusal is not None:
            return CallOutcome(name, tool, error_kind="approval_denied", message=refusal)
        outcome = await self._call_server(name, tool, arguments, progress)
        if self._stats is not None:
            self._stats.record(
                tool.server,
                tool.original_name,
                latency_ms=outcome.latency_ms,
                ok=not outcome.is_error,
                bytes_out=_result_bytes(outcome),
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
