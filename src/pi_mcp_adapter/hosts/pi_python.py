"""The pi-python extension: pi-mcp-adapter inside the Python Pi port (``pi-agent-harness-lc``).

``pip install 'pi-mcp-adapter[pi]'`` is all a user does: the ``pi_agent.extensions`` entry point
``pi-mcp-adapter`` names :func:`activate`, which the harness loads with auto-discovery (as the
ACP CLI does), or a program passes ``AgentHarness(extensions=[activate])``.

What it installs: the ``mcp`` proxy tool (or ``ToolSearch`` with deferred tools), direct tools,
and the ``/mcp`` and ``/mcp-auth`` commands, kept current as servers connect. The active tool set
is applied with ``set_active_tools``; notices go to ``notify``. pi-python has no status line,
and no way to ask the person for input: a server's elicitation is declined with a notice.

Lifecycle. One task owns the adapter (``async with McpAdapter(...)``), as every resource here
has one owner: the harness's ``session_start`` event starts that task, which loads config and
cache, connects eager servers, registers the surfaces and then waits. A turn barrier holds the
first turn until the surfaces are registered, bounded by the slowest eager server's startup
timeout (plus :data:`STARTUP_GRACE_S`). ``turn_end`` asks the owner task to run the engine's
turn hook (eager servers that dropped reconnect), so the harness never waits on a reconnect.
``register_cleanup`` (``harness.close()``) tells the owner task to close every server and
waits for it, bounded by :data:`SHUTDOWN_TIMEOUT_S`.

Configuration: the runtime has no ``--mcp-config`` option, so ``PI_MCP_CONFIG`` names one
exclusive config file; otherwise the usual files of ``$PI_CODING_AGENT_DIR`` (``~/.pi/agent``)
and the session's working directory are merged.

The MCP servers an ACP client passes for the session (``pi.client_mcp_servers``: Zed, say) are
added to the configuration, unless a configured server has the same name, and claimed, so the
CLI does not report them as ignored.

Another extension that registers ``/mcp`` (``pi-mcp-py`` does) is detected: the user is warned
and this extension's commands are offered as ``/mcp-adapter`` and ``/mcp-adapter-auth``
instead of fighting over the name.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

try:
    from pi_agent_core.extensions import ClientMcpServer, ExtensionAPI
    from pi_agent_core.extensions import ToolDefinition as PiToolDefinition
    from pi_agent_core.types import AgentToolResult
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "pi_mcp_adapter.hosts.pi_python needs the pi-python runtime: "
        "pip install 'pi-mcp-adapter[pi]'"
    ) from exc

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.config import LoadedConfig, ServerEntry, load_config
from pi_mcp_adapter.config._locations import default_agent_dir
from pi_mcp_adapter.engine import (
    CommandHandler,
    EventHandler,
    HostEvent,
    ImagePart,
    McpAdapter,
    NotifyLevel,
    TextPart,
    ToolDefinition,
    ToolResult,
)
from pi_mcp_adapter.surface import SessionExposure, Surfaces

from ._answers import elicit_or_decline
from ._attach import attach
from ._export import run_tool

__all__ = [
    "CONFIG_ENV",
    "SHUTDOWN_TIMEOUT_S",
    "STARTUP_GRACE_S",
    "McpToolError",
    "PiHost",
    "activate",
]

CONFIG_ENV = "PI_MCP_CONFIG"
NO_BROWSER_ENV = "PI_MCP_NO_BROWSER"
"""Set (to anything) so ``/mcp app`` prints the view's URL instead of opening a browser."""
"""Names one exclusive config file, in place of the merged user and project files."""

STARTUP_GRACE_S = 5.0
"""Added to the slowest eager server's startup timeout when holding the first turn: loading
config and cache and spawning processes take time before any server's own clock starts."""

SHUTDOWN_TIMEOUT_S = 15.0
"""How long ``harness.close()`` waits for the owner task to close every server. The manager
bounds each of its own shutdown waits, so this is only reached when something hangs."""

_NO_EAGER_WAIT_S = 10.0
"""The first-turn bound when no server starts eagerly (config, cache, a first-run listing)."""

ADAPTER_COMMANDS = ("mcp", "mcp-auth")
FALLBACK_COMMANDS = ("mcp-adapter", "mcp-adapter-auth")


def activate(pi: ExtensionAPI) -> None:
    """The extension's entry point (group ``pi_agent.extensions``, name ``pi-mcp-adapter``)."""
    PiHost(pi).install()


class McpToolError(Exception):
    """Raised from a tool's ``execute``: pi-python turns it into an ``isError`` tool result.

    The message is the text the model reads; it never carries a secret (the surfaces' error
    texts are the same as on every other host).
    """


class PiHost:
    """The :class:`~pi_mcp_adapter.engine.Host` over one ``ExtensionAPI``, and the owner of the
    adapter for one harness session."""

    def __init__(self, pi: ExtensionAPI, *, environ: Mapping[str, str] | None = None) -> None:
        self._pi = pi
        self._environ = dict(os.environ if environ is None else environ)
        self._definitions: dict[str, ToolDefinition] = {}
        self._registered: dict[str, tuple[str, str]] = {}
        self._exposure = SessionExposure()
        self._retired: set[str] = set()
        self._handlers: dict[HostEvent, list[EventHandler]] = {}
        self.command_names: tuple[str, str] = ADAPTER_COMMANDS
        self.status_line: str | None = None
        self.surfaces: Surfaces | None = None
        self.adapter: McpAdapter | None = None
        self.failure: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._configured = anyio.Event()
        self._ready = anyio.Event()
        self._finished = anyio.Event()
        self._wake = anyio.Event()
        self._stopping = False
        self._turn_ends = 0
        self._ready_deadline: float | None = None
        self._warned_slow_start = False
        self._listed_up_front = False
        self._client_servers: dict[str, ServerEntry] = {}

    # ------------------------------------------------------------------ installation

    def install(self) -> None:
        """Register commands, lifecycle hooks, the turn barrier and the cleanup."""
        pi = self._pi
        self._client_servers = client_server_entries(pi.client_mcp_servers)
        if self._client_servers:
            pi.claim_client_mcp_servers(self._client_servers)
        owner = command_owner(pi, ADAPTER_COMMANDS[0])
        if owner is not None and owner != pi.extension_name:
            self._warn_command_taken(owner)
        for name, verb in zip(self.command_names, ADAPTER_COMMANDS, strict=True):
            self._register_adapter_command(name, verb)
        self._prepare()
        pi.on("session_start", self._on_session_start)
        pi.on("turn_end", self._on_turn_end)
        pi.add_turn_barrier(self._wait_until_ready)
        pi.on("before_provider_request", self._on_provider_request)
        pi.register_cleanup(self.close)

    def _warn_command_taken(self, owner: str) -> None:
        self.command_names = FALLBACK_COMMANDS
        self.notify(
            f"Extension {owner!r} also registers /mcp; pi-mcp-adapter's commands are "
            f"/{FALLBACK_COMMANDS[0]} and /{FALLBACK_COMMANDS[1]} in this session.",
            "warning",
        )

    def _register_adapter_command(self, name: str, verb: str) -> None:
        descriptions = {
            "mcp": "MCP servers: status | tools [server] | reconnect [server] | auth <server> "
            "| app <tool> [json object | key=value ...]",
            "mcp-auth": "Authenticate an MCP server: /mcp-auth SERVER",
        }

        async def handler(args: str) -> None:
            self._pi.send_message(await self.run_command(verb, args))

        self._pi.register_command(name, description=descriptions[verb], handler=handler)

    async def run_command(self, verb: str, args: str = "") -> str:
        """``/mcp args`` (``verb="mcp"``) or ``/mcp-auth args``: the text shown to the user."""
        await self._wait_until_ready()
        if self.failure is not None:
            return f"pi-mcp-adapter could not start: {self.failure}"
        if self.surfaces is None:
            return "MCP servers are still starting; try again in a moment."
        commands = self.surfaces.commands
        try:
            if verb == "mcp-auth":
                return await commands.auth(args)
            return await commands.run(args)
        except McpAdapterError as exc:
            return str(exc)

    # ------------------------------------------------------------------ lifecycle

    def _on_session_start(self, event: object = None) -> None:
        pi = self._pi
        owner = command_owner(pi, self.command_names[0])
        if self.command_names == ADAPTER_COMMANDS and owner not in (None, pi.extension_name):
            # Loaded after this one, another extension took /mcp: keep ours reachable.
            assert owner is not None
            self._warn_command_taken(owner)
            for name, verb in zip(self.command_names, ADAPTER_COMMANDS, strict=True):
                self._register_adapter_command(name, verb)
        if self._task is None and self.adapter is not None:
            self._task = asyncio.get_running_loop().create_task(self._own_adapter())
        elif self.adapter is not None and self.adapter.is_running:
            # A new session in the same harness: read the configuration again.
            asyncio.get_running_loop().create_task(self._reload())

    def _config_path(self) -> Path | None:
        value = self._environ.get(CONFIG_ENV, "").strip()
        return Path(value).expanduser() if value else None

    def _load_config(self, project_dir: Path) -> LoadedConfig:
        """The merged config files, plus the client's servers whose names are still free."""
        config = load_config(
            agent_dir=default_agent_dir(),
            project_dir=project_dir,
            config_path=self._config_path(),
            environ=self._environ,
        )
        taken = {*config.servers, *config.invalid_servers}
        added = {n: e for n, e in self._client_servers.items() if n not in taken}
        for name in sorted(set(self._client_servers) - set(added)):
            self.notify(
                f"The client's MCP server {name!r} is not used: a configured server has that name.",
                "warning",
            )
        if not added:
            return config
        return dataclasses.replace(config, servers={**config.servers, **added})

    def _prepare(self) -> None:
        """Load config and cache and register the surfaces, before any server starts, so the
        tools exist as soon as the extensions are loaded (an ACP agent advertises them then).
        A call made before the servers are up waits for them (the engine's readiness)."""
        try:
            project_dir = Path(self._pi.cwd)
            adapter = McpAdapter(
                config_loader=lambda: self._load_config(project_dir),
                project_dir=project_dir,
                environ=self._environ,
                background_listing=True,
                # pi-python's extension API can notify but not ask (no dialog, no input), so a
                # server's form is declined with a notice instead of waiting for no one.
                elicit=elicit_or_decline(
                    None, "pi-python has no input dialog to answer it", self.notify
                ),
            )
            adapter.load_cached()
        except McpAdapterError as exc:
            self._fail(str(exc))
            return
        except Exception as exc:
            self._fail(f"unexpected {type(exc).__name__} while loading the configuration")
            return
        self._ready_deadline = anyio.current_time() + startup_budget_s(adapter)
        for error in adapter.config.errors:
            self.notify(str(error), "warning")
        self.adapter = adapter
        self.surfaces = attach(adapter, self, commands=False)
        self._configured.set()

    async def _own_adapter(self) -> None:
        """The owner task: the adapter is opened, used and closed here and nowhere else."""
        adapter = self.adapter
        if adapter is None:
            self._finished.set()
            return
        try:
            async with adapter:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(adapter.watch_config)
                    # MCP Apps views are served by this task group: they end with the session.
                    if self.surfaces is not None:
                        self.surfaces.commands.open_view = self._app_opener(adapter, tg)
                    # The tools are registered already; a call that needs a server still
                    # being listed waits for that server alone (the engine's readiness).
                    self._ready.set()
                    await self._serve()
                    tg.cancel_scope.cancel()
                await self._emit("shutdown")
        except McpAdapterError as exc:
            self._fail(str(exc))
        except Exception as exc:
            self._fail(f"unexpected {type(exc).__name__}")
        finally:
            if self.surfaces is not None:
                self.surfaces.close()
            self.adapter = None
            self._ready.set()
            self._configured.set()
            self._finished.set()

    def _app_opener(
        self, adapter: McpAdapter, task_group: anyio.abc.TaskGroup
    ) -> Callable[[str, dict[str, Any]], Awaitable[str]]:
        """``/mcp app TOOL``: serve the tool's view on loopback and open the system browser."""
        from pi_mcp_adapter.surface._apps import AppViews

        views = AppViews(adapter, task_group, on_message=lambda url, text: self.notify(text))

        async def open_view(tool: str, arguments: dict[str, Any]) -> str:
            import webbrowser

            view = await views.open(tool, arguments)
            if self._environ.get(NO_BROWSER_ENV) or not await anyio.to_thread.run_sync(
                webbrowser.open, view.url
            ):
                return f"The view of {view.tool.name} is served at {view.url}"
            return f"Opened the view of {view.tool.name} in the browser: {view.url}"

        return open_view

    async def _serve(self) -> None:
        """Run the turn hook when a turn ends, until the session closes."""
        handled = 0
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            if self._stopping:
                break
            if self._turn_ends != handled:
                handled = self._turn_ends
                try:
                    await self._emit("turn_end")
                except McpAdapterError as exc:
                    self.notify(str(exc), "warning")

    async def _reload(self) -> None:
        adapter = self.adapter
        if adapter is not None:
            try:
                await adapter.reload()
            except McpAdapterError as exc:
                self.notify(str(exc), "warning")

    def _on_turn_end(self, event: object = None) -> None:
        self._turn_ends += 1
        self._wake.set()

    async def close(self) -> None:
        """The cleanup callback: ask the owner task to close everything, and wait for it."""
        self._stopping = True
        self._wake.set()
        task = self._task
        if task is None:
            return
        with anyio.move_on_after(SHUTDOWN_TIMEOUT_S):
            await self._finished.wait()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _on_provider_request(self, event: object = None) -> None:
        # Each provider request is sent the active tools in active order (ToolSearch appends):
        # from now on each keeps its place and its definition for the session.
        active = [self._definitions[n] for n in self.get_active_tools() if n in self._definitions]
        self._exposure.mark_sent(active)

    async def _wait_until_ready(self) -> None:
        """The turn barrier: hold a turn until the surfaces are registered and the tools shown
        up front (direct tools, eager servers' tools) are listed, bounded by the start-up
        budget: the first turn's tool list has them even on a fresh machine."""
        if self._listed_up_front or self._task is None:
            return
        with anyio.move_on_after(_NO_EAGER_WAIT_S):
            await self._configured.wait()
        deadline = self._ready_deadline or anyio.current_time()
        with anyio.move_on_after(max(0.0, deadline - anyio.current_time())):
            await self._ready.wait()
            if self.surfaces is not None and self.failure is None:
                await self.surfaces.ready()
            self._listed_up_front = True
        if not self._listed_up_front and not self._warned_slow_start:
            self._warned_slow_start = True
            self.notify("MCP servers are still starting; their tools come on a later turn.")

    def _fail(self, message: str) -> None:
        self.failure = message
        self.notify(f"pi-mcp-adapter could not start: {message}", "error")
        self._ready.set()

    async def _emit(self, event: HostEvent) -> None:
        for handler in list(self._handlers.get(event, [])):
            await handler()

    # ------------------------------------------------------------------ Host protocol

    def register_tool(self, tool: ToolDefinition) -> None:
        # A definition the model was already sent stays as sent (surface/_exposure.py).
        tool = self._exposure.pinned(tool)
        self._retired.discard(tool.name)
        signature = (tool.description, json.dumps(tool.parameters, sort_keys=True, default=str))
        if self._registered.get(tool.name) != signature:
            replacing = tool.name in self._registered
            try:
                with _quiet_replacement(tool.name) if replacing else contextlib.nullcontext():
                    self._pi.register_tool(
                        PiToolDefinition(
                            name=tool.name,
                            description=tool.description,
                            parameters=dict(tool.parameters),
                            execute=self._executor(tool.name),
                        )
                    )
            except ValueError as exc:  # a name pi-python (and providers) reject
                self.notify(f"MCP tool {tool.name!r} is not offered: {exc}", "warning")
                return
            self._registered[tool.name] = signature
        self._definitions[tool.name] = tool

    def unregister_tool(self, name: str) -> None:
        # ExtensionAPI cannot remove a tool: it stays registered, inactive, and answers that
        # it is gone if a model still calls it.
        retired = self._exposure.retired(name)
        if retired is not None:
            # Sent already: it keeps its place in the active list, and a call says it is gone.
            self._definitions[name] = retired
            self._retired.add(name)
            return
        self._definitions.pop(name, None)
        active = list(self._pi.get_active_tools())
        if name in active:
            self._pi.set_active_tools([n for n in active if n != name])

    def _stale(self, name: str) -> bool:
        return name in self._registered and name not in self._definitions

    def get_active_tools(self) -> Sequence[str]:
        return [n for n in self._pi.get_active_tools() if not self._stale(n)]

    def set_active_tools(self, names: Sequence[str]) -> None:
        known = {t.name for t in self._pi.get_all_tools()}
        wanted = list(dict.fromkeys(n for n in names if n in known and not self._stale(n)))
        # A retired tool stays where the model saw it (see unregister_tool).
        wanted += [n for n in self._pi.get_active_tools() if n in self._retired and n not in wanted]
        if wanted != list(self._pi.get_active_tools()):
            self._pi.set_active_tools(wanted)

    def host_tool_names(self) -> Sequence[str]:
        return [t.name for t in self._pi.get_all_tools() if t.name not in self._registered]

    def register_command(self, name: str, description: str, handler: CommandHandler) -> None:
        async def run(args: str) -> None:
            self._pi.send_message(redact(await handler(args)))

        self._pi.register_command(name, description=description, handler=run)

    def on(self, event: HostEvent, handler: EventHandler) -> None:
        self._handlers.setdefault(event, []).append(handler)

    def notify(self, message: str, level: NotifyLevel = "info") -> None:
        prefix = {"info": "", "warning": "Warning: ", "error": "Error: "}[level]
        self._pi.notify(redact(f"{prefix}{message}"))

    def set_status(self, text: str | None) -> None:
        # pi-python has no status line; the text is kept for whoever asks.
        self.status_line = text

    # ------------------------------------------------------------------ tool calls

    def _executor(self, name: str) -> Callable[..., Awaitable[AgentToolResult]]:
        async def execute(
            tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None
        ) -> AgentToolResult:
            tool = self._definitions.get(name)
            if tool is None:
                raise McpToolError(f"Tool {name!r} is no longer available.")
            arguments = params if isinstance(params, Mapping) else {}
            result = await run_tool(tool, arguments)
            if result.is_error:
                raise McpToolError(result.text_content or f"Tool {name!r} failed.")
            return to_agent_tool_result(result)

        return execute


def to_agent_tool_result(result: ToolResult) -> AgentToolResult:
    """A :class:`ToolResult` as pi-python's result: text and image blocks, details kept."""
    content: list[Any] = []
    for part in result.content:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            content.append({"type": "image", "data": part.data, "mimeType": part.mime_type})
        else:
            note = f"[audio content: {part.mime_type}; not shown: pi-python takes no audio]"
            content.append({"type": "text", "text": note})
    return AgentToolResult(content=content, details=dict(result.details))


def client_server_entries(servers: Iterable[ClientMcpServer]) -> dict[str, ServerEntry]:
    """The servers an ACP client passed, as config entries (the ones with a usable address)."""
    entries: dict[str, ServerEntry] = {}
    for server in servers:
        if server.transport == "stdio" and server.command:
            entries[server.name] = ServerEntry(
                command=server.command, args=tuple(server.args), env=dict(server.env)
            )
        elif server.transport in ("http", "sse") and server.url:
            # The HTTP transport falls back to SSE by itself.
            entries[server.name] = ServerEntry(url=server.url, headers=dict(server.headers))
    return entries


def startup_budget_s(adapter: McpAdapter) -> float:
    """How long the first turn may wait: the slowest server that may connect at start (eager
    and keep-alive ones, and any whose tools are not cached yet), plus grace."""
    timeouts = [entry.startup_timeout_s for entry in adapter.servers.values() if entry.is_enabled]
    if not timeouts:
        return _NO_EAGER_WAIT_S
    return max(timeouts) + STARTUP_GRACE_S


def command_owner(pi: ExtensionAPI, name: str) -> str | None:
    """The extension that holds command ``name`` in this session, if any.

    ``ExtensionAPI`` 0.6 lists no commands, so this reads the shared registry every extension
    registers into; with a runtime that hides it, nothing is detected.
    """
    registry = getattr(pi, "_registry", None)
    get_commands = getattr(registry, "get_commands", None)
    if get_commands is None:
        return None
    command = get_commands().get(name)
    if command is None:
        return None
    owner = getattr(command, "extension_name", None)
    return owner if isinstance(owner, str) else "another extension"


_REGISTRY_LOGGER = "pi_agent_core.extensions.registry"


@contextlib.contextmanager
def _quiet_replacement(name: str) -> Iterator[None]:
    """Keep pi-python from warning that tool ``name`` is "already registered" while this
    extension replaces its own definition (a new description once servers connect): the
    warning is meant for two extensions claiming one name, and still comes when another
    extension registers one of these names."""

    def not_this_replacement(record: logging.LogRecord) -> bool:
        return not (record.args == (name,) and "already registered" in str(record.msg))

    logger = logging.getLogger(_REGISTRY_LOGGER)
    logger.addFilter(not_this_replacement)
    try:
        yield
    finally:
        logger.removeFilter(not_this_replacement)
