"""``McpAdapter``: the one object a host creates.

It loads the configuration and the metadata cache, owns the server manager (and through it
every connection and background task), keeps the catalog and search index current, and offers
the operations every surface is built from: status, list, search, describe, instructions,
connect and call. Surfaces (the ``mcp`` proxy tool, ``ToolSearch``, direct tools) and the CLI
only call these.

Resource handling: ``async with McpAdapter(...)`` (or ``start()``/``stop()`` from one task)
opens everything; leaving it closes every connection, stops every background task and kills
every child process. An adapter is single use.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from pi_mcp_adapter._errors import (
    AmbiguousToolError,
    McpAdapterError,
    ServerBackoffError,
    ServerDisabledError,
    ServerNotConfiguredError,
    ServerReportedError,
    ServerUnavailableError,
    ToolNotFoundError,
    UsageError,
)
from pi_mcp_adapter.catalog import Catalog, MetadataCache
from pi_mcp_adapter.catalog._metadata import ServerMetadata, ToolInfo
from pi_mcp_adapter.catalog._schema import render_parameters
from pi_mcp_adapter.catalog._search import SearchIndex, SearchPage
from pi_mcp_adapter.config import LoadedConfig, load_config
from pi_mcp_adapter.config._locations import default_agent_dir
from pi_mcp_adapter.config._models import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerManager
from pi_mcp_adapter.servers._failures import FAILURES_FILE_NAME, FailureMemory

from ._content import convert_call_result, convert_read_resource_result
from ._direct import DirectTools
from ._guard import argument_problems
from ._host import ContentPart, Host, TextPart, ToolResult
from ._output_guard import guard_output
from ._proxy import ProxyTool
from ._render import (
    ServerRow,
    StatusView,
    render_describe,
    render_list,
    render_tool_card,
    render_tool_line,
)
from ._toolsearch import ToolSearchSurface
from ._toon import encode_if_shorter, should_toon
from ._validate import validate_arguments

if TYPE_CHECKING:
    from ._stats import CallStats

ProgressCallback = Callable[[str, str, str | None], None]
"""``(server, phase, detail)`` with phase ``connecting`` | ``connected`` | ``failed``."""

DEFAULT_SEARCH_LIMIT = 12
COMMAND_USAGE = "status | tools [server] | reconnect [server] | auth <server>"
_CONNECTED = "connected"


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """A search page plus, when nothing was found, why some servers could not contribute."""

    page: SearchPage
    unavailable: tuple[str, ...]


class McpAdapter:
    """The engine. Create one per host session; use it with ``async with``.

    Args:
        config: an already loaded configuration; when ``None`` it is loaded from
            ``agent_dir``/``project_dir``/``config_path``.
        host: the binding to register surfaces with; ``None`` for library/CLI use.
        connect_missing: connect, at start, every enabled server whose tools are not in the
            metadata cache yet (the first run), so search and describe have something to show.
        connect_eager: connect eager and keep-alive servers at start (a one-shot command
            that needs none of them passes False).
        start_deadline_s: one overall deadline for the connects at start; servers still
            connecting then are abandoned, reported as failed and back off.
        clock: wall clock in seconds (``time.time``), injectable for tests.
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
    ) -> None:
        self.agent_dir = (agent_dir or default_agent_dir()).expanduser()
        self.project_dir = (project_dir or Path.cwd()).expanduser()
        self._environ = dict(os.environ if environ is None else environ)
        self.config = config or load_config(
            agent_dir=self.agent_dir,
            project_dir=self.project_dir,
            config_path=config_path,
            environ=self._environ,
        )
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
        self._listeners: list[Callable[[], None]] = []
        self.proxy = ProxyTool(self)
        self.toolsearch = ToolSearchSurface(self)
        self.direct = DirectTools(self)

    # ------------------------------------------------------------------ lifecycle

    @property
    def settings(self) -> Settings:
        return self.config.settings

    @property
    def servers(self) -> Mapping[str, ServerEntry]:
        return self.config.servers

    def enabled_servers(self) -> list[str]:
        return [name for name, entry in self.servers.items() if entry.is_enabled]

    async def __aenter__(self) -> McpAdapter:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Open the manager, load the cache, register surfaces, connect what must connect.

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

                self._stats = CallStats.from_setting(self.settings.capture_stats, self.agent_dir)
                stack.callback(self._stats.flush)
            self._rebuild()
            if self.host is not None:
                self._register_with_host(self.host)
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
        """A connection (re)opened or its tools changed: cache, rebuild, re-register."""
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

    def on_catalog_changed(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each catalog rebuild (surfaces re-register tools)."""
        self._listeners.append(listener)

    def _register_with_host(self, host: Host) -> None:
        builtin_active = list(host.get_active_tools())
        if self.settings.surface == "toolsearch":
            surface_tool = self.toolsearch.register(host)
        else:
            surface_tool = self.proxy.definition()
            host.register_tool(surface_tool)
        direct_names = self.direct.register(host)
        host.set_active_tools([*builtin_active, surface_tool.name, *direct_names])
        host.on("turn_end", self.on_turn_end)
        host.on("shutdown", self.stop)
        host.register_command(
            "mcp", "MCP servers: status | tools [server] | reconnect [server]", self.run_command
        )

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
            self._index = SearchIndex(self.catalog.tools(), ranking=self._ranking)
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

    def server_row(self, name: str) -> ServerRow:
        entry = self.servers.get(name)
        invalid = self.config.invalid_servers.get(name)
        if invalid is not None:
            return ServerRow(name, "invalid", 0, error=invalid.message)
        assert entry is not None
        tool_count = len(self.catalog.tools(name)) if entry.is_enabled else 0
        changed = self._changed_tools.get(name, ())
        if not entry.is_enabled:
            return ServerRow(name, "disabled", 0, lifecycle=entry.lifecycle)
        state = self._manager.state(name) if self._manager is not None else None
        if state is None or state.status in ("closed", "idle", "new"):
            status = "cached" if name in self._metadata else "not-cached"
            return ServerRow(
                name, status, tool_count, lifecycle=entry.lifecycle, changed_tools=changed
            )
        failed_ago = None
        if state.failed_at is not None:
            failed_ago = max(0.0, self._manager_clock() - state.failed_at)
        return ServerRow(
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

    def status(self) -> StatusView:
        names = list(self.servers) + [
            n for n in self.config.invalid_servers if n not in self.servers
        ]
        return StatusView(
            rows=tuple(self.server_row(n) for n in names),
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
    ) -> SearchOutcome:
        """Ranked (or regex) search over cached metadata; never connects a server.

        Raises:
            UsageError: an invalid regex, or an unknown server filter.
        """
        if server is not None and server not in self.servers:
            raise ServerNotConfiguredError(server, self._unknown_server_message(server))
        page = self.index.search(
            query, server=server, regex=regex, limit=limit or DEFAULT_SEARCH_LIMIT, offset=offset
        )
        unavailable: tuple[str, ...] = ()
        if not page.hits:
            names = [server] if server is not None else list(self.servers)
            rows = [self.server_row(n) for n in names]
            unavailable = tuple(
                r.describe() for r in rows if r.status not in ("connected", "cached")
            )
        return SearchOutcome(page, unavailable)

    def _unknown_server_message(self, server: str) -> str:
        known = ", ".join(sorted(self.servers)) or "none configured"
        return f"Unknown MCP server {server!r}. Configured servers: {known}"

    def instructions(self, server: str) -> str | None:
        if server not in self.servers:
            raise ServerNotConfiguredError(server, self._unknown_server_message(server))
        meta = self._metadata.get(server)
        return meta.instructions if meta is not None else None

    async def connect(self, server: str) -> ServerMetadata:
        """Connect (or reconnect) ``server`` and refresh its metadata and cache entry.

        Raises:
            ServerUnavailableError: the server could not be reached (with the reason).
        """
        entry = self.servers.get(server)
        if entry is None:
            raise ServerNotConfiguredError(server, self._unknown_server_message(server))
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

    async def call(self, name: str, args: Mapping[str, Any] | None = None) -> ToolResult:
        """Call a tool by (any accepted form of) its name. Never raises for tool errors.

        Unknown and ambiguous names, unavailable servers, invalid arguments and server
        errors all come back as results with ``is_error=True`` and text that says what to do.
        """
        arguments = dict(args or {})
        try:
            tool = self.lookup(name)
        except ToolNotFoundError as exc:
            return self._unknown_tool_result(name, exc)
        except AmbiguousToolError as exc:
            return ToolResult.text(
                str(exc),
                is_error=True,
                details={
                    "mode": "call",
                    "error": "ambiguous_tool",
                    "candidates": list(exc.candidates),
                },
            )
        unsendable = argument_problems(arguments)
        if unsendable:
            return self._bad_arguments_result(tool, unsendable)
        if self.settings.validate_args and not tool.is_resource:
            problems = validate_arguments(tool.input_schema, arguments)
            if problems:
                return self._bad_arguments_result(tool, problems)
        started = time.perf_counter()
        ok = False
        result: ToolResult
        try:
            result = await self._call_server(tool, arguments)
            ok = not result.is_error
        except ServerBackoffError as exc:
            result = self._error_result(tool, str(exc), "server_unavailable")
        except ServerUnavailableError as exc:
            result = self._error_result(tool, str(exc), "server_unavailable")
        except ServerReportedError as exc:
            message = f"Failed to call tool {tool.name}: {exc}"
            if exc.code == -32602:  # invalid params: the schema tells the model how to fix it
                message += "\n\nExpected parameters:\n" + render_parameters(tool.input_schema)
            result = self._error_result(tool, message, "server_error")
        latency_ms = (time.perf_counter() - started) * 1000
        if self._stats is not None:
            self._stats.record(
                tool.server,
                tool.original_name,
                latency_ms=latency_ms,
                ok=ok,
                bytes_out=len(result.text_content.encode()),
            )
        return result

    async def _call_server(self, tool: ToolInfo, arguments: dict[str, Any]) -> ToolResult:
        manager = self._require_manager()
        entry = self.servers[tool.server]
        if tool.resource_uri is not None:
            raw = await manager.read_resource(tool.server, tool.resource_uri)
            result = convert_read_resource_result(raw)
        else:
            call = await manager.call_tool(
                tool.server, tool.original_name, arguments, timeout_s=entry.request_timeout_s
            )
            result = convert_call_result(call)
        if should_toon(tool.server, self.settings.toon_encode):
            result = _toon_result(result)
        result = guard_output(
            result,
            limit_bytes=self.settings.output_limit_bytes,
            limit_lines=self.settings.output_limit_lines,
        )
        details = {
            "mode": "call",
            "server": tool.server,
            "tool": tool.original_name,
            "name": tool.name,
            **result.details,
        }
        return ToolResult(result.content, is_error=result.is_error, details=details)

    def _error_result(self, tool: ToolInfo, message: str, kind: str) -> ToolResult:
        return ToolResult.text(
            message,
            is_error=True,
            details={"mode": "call", "server": tool.server, "name": tool.name, "error": kind},
        )

    def _unknown_tool_result(self, name: str, exc: ToolNotFoundError) -> ToolResult:
        text = str(exc)
        host_tools = set(self.host.host_tool_names()) if self.host is not None else set()
        if name in host_tools:
            text += f"\n{name!r} is one of your own tools: call it directly, not through mcp."
        elif not self.catalog.tools():
            text += "\nNo MCP tools are known yet; mcp({}) shows each server's state."
        return ToolResult.text(
            text,
            is_error=True,
            details={"mode": "call", "error": "unknown_tool", "suggestions": list(exc.suggestions)},
        )

    def _bad_arguments_result(self, tool: ToolInfo, problems: Sequence[str]) -> ToolResult:
        text = (
            f"Invalid arguments for {tool.name}:\n"
            + "\n".join(f"- {p}" for p in problems)
            + "\n\nExpected parameters:\n"
            + render_parameters(tool.input_schema)
        )
        return ToolResult.text(
            text,
            is_error=True,
            details={
                "mode": "call",
                "server": tool.server,
                "name": tool.name,
                "error": "invalid_arguments",
                "problems": list(problems),
            },
        )

    # ------------------------------------------------------------------ mode results

    def status_result(self) -> ToolResult:
        view = self.status()
        return ToolResult.text(
            view.render(),
            details={
                "mode": "status",
                "servers": [
                    {"name": r.name, "status": r.status, "tools": r.tool_count} for r in view.rows
                ],
            },
        )

    def list_result(self, server: str) -> ToolResult:
        if server not in self.servers:
            return ToolResult.text(
                self._unknown_server_message(server), is_error=True, details={"mode": "list"}
            )
        row = self.server_row(server)
        tools = self.tools(server)
        if not tools and row.status not in ("connected", "cached"):
            return ToolResult.text(
                f"{server}: no tools to show.\n{row.describe()}", details={"mode": "list"}
            )
        text = render_list(
            server,
            tools,
            connected=row.status == _CONNECTED,
            instructions=self._metadata[server].instructions if server in self._metadata else None,
        )
        return ToolResult.text(
            text, details={"mode": "list", "server": server, "count": len(tools)}
        )

    def search_result(
        self,
        query: str,
        *,
        server: str | None = None,
        regex: bool = False,
        include_schemas: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> ToolResult:
        outcome = self.search(query, server=server, regex=regex, limit=limit, offset=offset)
        page = outcome.page
        details: dict[str, Any] = {
            "mode": "search",
            "query": query,
            "matches": [
                {
                    "server": h.tool.server,
                    "tool": h.tool.original_name,
                    "name": h.tool.name,
                    "score": h.score,
                }
                for h in page.hits
            ],
            "count": page.total,
            "nextOffset": page.next_offset,
            "confident": page.confident,
        }
        if not page.hits:
            where = f" in {server!r}" if server else ""
            lines = [f'No tools matching "{query}"{where}.']
            if outcome.unavailable:
                lines += ["Not searchable right now:"] + [f"  {u}" for u in outcome.unavailable]
            return ToolResult.text("\n".join(lines), details=details)
        header = f'Found {page.total} tool{"s" if page.total != 1 else ""} matching "{query}"'
        if not page.confident:
            header += " (weak matches; none fits the query well)"
        blocks = [
            render_tool_card(h.tool) if include_schemas else render_tool_line(h.tool)
            for h in page.hits
        ]
        sep = "\n\n" if include_schemas else "\n"
        text = header + ":\n\n" + sep.join(blocks)
        if page.next_offset is not None:
            shown = page.offset + len(page.hits)
            text += f"\n\n{shown} of {page.total}; offset: {page.next_offset} for more"
        return ToolResult.text(text, details=details)

    def describe_result(self, name: str) -> ToolResult:
        try:
            tool = self.lookup(name)
        except ToolNotFoundError as exc:
            return self._unknown_tool_result(name, exc)
        except AmbiguousToolError as exc:
            return ToolResult.text(str(exc), is_error=True, details={"mode": "describe"})
        return ToolResult.text(
            render_describe(tool),
            details={"mode": "describe", "server": tool.server, "name": tool.name},
        )

    def instructions_result(self, server: str) -> ToolResult:
        try:
            text = self.instructions(server)
        except McpAdapterError as exc:
            return ToolResult.text(str(exc), is_error=True, details={"mode": "instructions"})
        if text is None:
            known = server in self._metadata
            note = (
                "has no instructions"
                if known
                else (f"has not been connected yet; mcp({{connect: {server!r}}}) loads them")
            )
            return ToolResult.text(f"{server} {note}.", details={"mode": "instructions"})
        return ToolResult.text(
            f"{server} instructions:\n\n{text}", details={"mode": "instructions", "server": server}
        )

    async def connect_result(self, server: str) -> ToolResult:
        try:
            metadata = await self.connect(server)
        except McpAdapterError as exc:
            return ToolResult.text(
                str(exc), is_error=True, details={"mode": "connect", "server": server}
            )
        tools = self.tools(server)
        text = render_list(server, tools, connected=True, instructions=metadata.instructions)
        return ToolResult.text(
            f"Connected to {server}.\n\n{text}",
            details={"mode": "connect", "server": server, "count": len(tools)},
        )

    # ------------------------------------------------------------------ commands

    async def run_command(self, argv: str) -> str:
        """``/mcp status | tools [server] | reconnect [server] | auth <server>``."""
        parts = argv.split()
        verb = parts[0] if parts else "status"
        arg = parts[1] if len(parts) > 1 else None
        if verb == "status":
            return self.status().render()
        if verb == "tools":
            if arg:
                return self.list_result(arg).text_content
            return "\n".join(render_tool_line(t) for t in self.tools()) or "No tools known."
        if verb == "reconnect":
            results = await self.reconnect(arg)
            return (
                "\n".join(
                    f"✓ {n} reconnected" if err is None else f"✗ {n}: {err}"
                    for n, err in sorted(results.items())
                )
                or "No servers to reconnect."
            )
        if verb == "auth":
            return auth_help(self, arg)
        return f"Unknown command {verb!r}. Use: " + COMMAND_USAGE


def auth_help(adapter: McpAdapter, server: str | None) -> str:
    """What a user can do today to authenticate ``server``."""
    if not server:
        return "Usage: auth <server>"
    entry = adapter.servers.get(server)
    if entry is None:
        return f"Unknown MCP server {server!r}."
    if entry.url is None:
        return f"{server} is a local (stdio) server; it needs no sign-in."
    return (
        f"{server} authenticates with a bearer token or headers: set `bearerTokenEnv` (or "
        "`bearerToken`, or an `Authorization` header with ${VAR}) in its config entry, then "
        f"`pi-mcp reconnect {server}`. Interactive OAuth sign-in is not available in this version."
    )


def _toon_result(result: ToolResult) -> ToolResult:
    parts: list[ContentPart] = []
    changed = False
    for part in result.content:
        if isinstance(part, TextPart):
            encoded = encode_if_shorter(part.text)
            if encoded is not None:
                parts.append(TextPart(encoded))
                changed = True
                continue
        parts.append(part)
    if not changed:
        return result
    return ToolResult(
        tuple(parts), is_error=result.is_error, details={**result.details, "toon": True}
    )
