"""The MCP gateway: the adapter served as one MCP server to any number of MCP clients.

One :class:`~pi_mcp_adapter.engine.McpAdapter` owns every upstream connection for the life of
the process; each client connection gets its own :class:`GatewayHost`, on which
:func:`~pi_mcp_adapter.surface.register_surfaces` installs the ``mcp`` proxy tool (or
``ToolSearch`` with its deferred tools) and the direct tools. The tools a client lists are
exactly its host's active tools, so one client's ToolSearch activations never show up in
another's list.

What crosses the gateway unchanged:

- Direct and activated tools are called through the engine and answer with the upstream
  server's own result (images, audio, embedded resources, structured content, ``isError``).
  The ``mcp`` proxy and ``ToolSearch`` answer with their rendered results.
- Upstream progress notifications reach the calling client; a client's cancellation cancels
  the handler task, and with it the upstream request (the SDK sends ``notifications/cancelled``).
- Upstream sampling and elicitation requests made during a call go to the client that made the
  call, and are refused when that client lacks the capability (see
  :mod:`pi_mcp_adapter.servers._relay`); upstream log messages go to the same client.
- A 2026-07-28 client cannot be sent requests: the gateway's own questions (tool approval)
  are asked by answering the call with ``input_required`` before any server is reached, and
  the client's retry carries the answer (:class:`_InputRequired`). A server's question in the
  middle of a call cannot wait for a retry (the call would run twice) and is refused.
- Upstream resources and prompts are listed and readable; prompt and resource names carry the
  server prefix the catalog gives tools, resource URIs are the upstream's own.
- A change of a client's tool list (an activation, an upstream tool change, a reconnect) is
  announced with ``notifications/tools/list_changed`` on the client's connection (handshake
  era) and on ``subscriptions/listen`` streams (2026-07-28 era).

Sessionless requests (stateless HTTP, and the 2026-07-28 era, which has no connection to keep
state on) share one host, so ToolSearch activations made that way are seen by every such
client.

Resource handling: ``async with gateway.running():`` around serving; it owns the task group
that sends notifications and follows catalog changes; leaving it stops both. The adapter is
the caller's to open and close.
"""

from __future__ import annotations

import hashlib
import logging
import warnings
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from importlib import metadata as importlib_metadata
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import MCPError
from mcp.server import Server
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import (
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from pi_mcp_adapter._errors import McpAdapterError, ServerReportedError
from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.config._models import GatewayClient, GatewayJwt
from pi_mcp_adapter.engine import (
    AudioPart,
    CallerPolicy,
    CommandHandler,
    EventHandler,
    HostEvent,
    ImagePart,
    McpAdapter,
    NotifyLevel,
    Question,
    TextPart,
    ToolDefinition,
    ToolResult,
    UnknownPromptError,
    UnknownResourceError,
    acting_for,
    with_form_defaults,
)
from pi_mcp_adapter.servers import (
    CallRelay,
    current_relay,
    elicitation_to_client,
    relay_calls,
    sampling_to_client,
)
from pi_mcp_adapter.surface import (
    SurfaceKind,
    Surfaces,
    register_surfaces,
    render_outcome,
    wait_for_up_front_tools,
)

from ._gateway_clients import ClientAccess, ClientConfig, client_access, requesting_client
from ._gateway_telemetry import request_middleware

logger = logging.getLogger("pi_mcp_adapter.gateway")

GATEWAY_NAME = "pi-mcp-adapter"
_HOST_STATE_KEY = "pi_mcp_adapter.gateway.host"
_LOG_LEVELS: tuple[types.LoggingLevel, ...] = (
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
)
_NOTIFY_LEVELS: Mapping[NotifyLevel, types.LoggingLevel] = {
    "info": "info",
    "warning": "warning",
    "error": "error",
}
_INSTRUCTIONS = (
    "This server is a gateway to many MCP servers. Call the `mcp` tool (or `ToolSearch`) to "
    "find tools by what they do, then call them; servers start when first used."
)


def _version() -> str:
    try:
        return importlib_metadata.version("pi-mcp-adapter")
    except importlib_metadata.PackageNotFoundError:
        return "0"


class GatewayHost:
    """One client's host: its registered tools and active set.

    ``on_tools_changed`` is called (synchronously, from whichever task changed the host) when
    the list of tools the client sees may have changed; ``on_notice`` when the engine or a
    surface wants to tell the user something.
    """

    def __init__(
        self,
        *,
        on_tools_changed: Callable[[GatewayHost], None],
        on_notice: Callable[[GatewayHost, str, NotifyLevel], None],
        policy: CallerPolicy | None = None,
    ) -> None:
        self.policy = policy
        """The client this host serves (None: no ``gatewayClients``, or the one local user);
        its surfaces are registered, and kept current, with that client's view of the
        catalog."""
        self.tools: dict[str, ToolDefinition] = {}
        self.active: list[str] = []
        self.commands: dict[str, tuple[str, CommandHandler]] = {}
        self.handlers: dict[HostEvent, list[EventHandler]] = {}
        self.surfaces: Surfaces | None = None
        self.log_level: types.LoggingLevel = "debug"
        self._on_tools_changed = on_tools_changed
        self._on_notice = on_notice

    # Host protocol -------------------------------------------------------------------
    def register_tool(self, tool: ToolDefinition) -> None:
        previous = self.tools.get(tool.name)
        self.tools[tool.name] = tool
        if tool.name in self.active and previous != tool:
            self._on_tools_changed(self)

    def unregister_tool(self, name: str) -> None:
        self.tools.pop(name, None)
        if name in self.active:
            self.active = [n for n in self.active if n != name]
            self._on_tools_changed(self)

    def get_active_tools(self) -> Sequence[str]:
        return list(self.active)

    def set_active_tools(self, names: Sequence[str]) -> None:
        active = list(dict.fromkeys(n for n in names if n in self.tools))
        if active != self.active:
            self.active = active
            self._on_tools_changed(self)

    def host_tool_names(self) -> Sequence[str]:
        return ()

    def register_command(self, name: str, description: str, handler: CommandHandler) -> None:
        self.commands[name] = (description, handler)

    def on(self, event: HostEvent, handler: EventHandler) -> None:
        self.handlers.setdefault(event, []).append(handler)

    def notify(self, message: str, level: NotifyLevel = "info") -> None:
        self._on_notice(self, message, level)

    def set_status(self, text: str | None) -> None:
        """MCP has no status line; the gateway's status is the ``mcp`` tool's status mode."""

    # Gateway side --------------------------------------------------------------------
    def visible_tools(self) -> list[ToolDefinition]:
        """The tools this client lists, in activation order."""
        return [self.tools[n] for n in self.active if n in self.tools]

    def is_catalog_tool(self, name: str) -> bool:
        """An upstream tool registered under its own name (direct, or deferred by ToolSearch)."""
        surfaces = self.surfaces
        if surfaces is None:
            return False
        if name in surfaces.direct.names:
            return True
        return surfaces.toolsearch is not None and name in surfaces.toolsearch.deferred

    def close(self) -> None:
        if self.surfaces is not None:
            self.surfaces.close()
            self.surfaces = None


class _GatewayServer(Server[Any]):
    """The SDK's low-level server, advertising ``listChanged`` in the handshake era too.

    The SDK derives handshake-era ``listChanged`` flags from options passed at run time; every
    transport calls this method, so overriding it covers stdio and HTTP alike.
    """

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        options = notification_options or NotificationOptions(
            tools_changed=True, resources_changed=True, prompts_changed=True
        )
        return super().create_initialization_options(options, experimental_capabilities, extensions)


class McpGateway:
    """The adapter as an MCP server (see the module docstring).

    Args:
        adapter: a started adapter, created with ``relay_server_requests=True`` so upstream
            sampling, elicitation and logs can reach clients.
        surface: ``proxy`` or ``toolsearch``; defaults to ``settings.surface``.
        stateless: the HTTP transport runs stateless; every request shares one host (one
            per client with ``clients``).
        clients: ``settings.gatewayClients``: each request acts for the client whose token it
            carries (verified by the HTTP app), with that client's policy and surface.
            A reload that changes ``gatewayClients`` or ``gatewayJwt`` takes effect for the
            next request (:meth:`client_config`); with none left, only the shared token
            (``--auth-token``) is accepted until a restart.
        jwt: ``settings.gatewayJwt``, for the HTTP app's token verifier.
    """

    def __init__(
        self,
        adapter: McpAdapter,
        *,
        surface: SurfaceKind | None = None,
        stateless: bool = False,
        clients: Sequence[GatewayClient] = (),
        jwt: GatewayJwt | None = None,
    ) -> None:
        self.adapter = adapter
        if adapter.ask is None:
            # Tool approval (approveTools) asks the user of the client making the call.
            adapter.ask = ask_calling_client
        self.surface: SurfaceKind = surface or adapter.settings.surface
        self.stateless = stateless
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._tg: anyio.abc.TaskGroup | None = None
        self._shared: GatewayHost | None = None
        # settings.gatewayClients: each client's policy and surface, and (sessionless) its
        # own shared host, so one client's list is never another's.
        self._clients: dict[str, ClientAccess] = client_access(clients) if clients else {}
        self._client_config: ClientConfig = (tuple(clients), jwt)
        self._client_settings_seen = _client_settings(adapter)
        self._client_hosts: dict[str, GatewayHost] = {}
        self._sessionless: set[GatewayHost] = set()
        # Each host with the connection it notifies (None: the shared host, which publishes on
        # the subscription bus). A connection's teardown removes its host.
        self._hosts: dict[GatewayHost, Connection | None] = {}
        self._pending: set[GatewayHost] = set()
        self._registering: set[GatewayHost] = set()
        self._listing_signature: tuple[Any, ...] = ()
        self.server = self._build_server()
        # The engine's notices (a server failed, needs auth, changed its tools, a reload)
        # go to the gateway's log and to every connected client as a log message.
        self._notice_host = GatewayHost(
            on_tools_changed=lambda host: None, on_notice=self._broadcast_notice
        )

    # ------------------------------------------------------------------ server

    def _build_server(self) -> _GatewayServer:
        server = _GatewayServer(
            GATEWAY_NAME,
            version=_version(),
            instructions=_INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts,
            on_get_prompt=self._get_prompt,
            on_completion=self._complete,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=self._listen,
        )
        # The gateway's own request spans replace the SDK's (which know no client, session or
        # transport) when telemetry is on; off, no span is made at all (docs/observability.md).
        server.middleware = request_middleware(server.middleware, client=requesting_client)
        # logging/setLevel is deprecated in the 2026-07-28 era but is how handshake-era clients
        # choose which forwarded upstream log messages they get.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            server.add_request_handler(
                "logging/setLevel", types.SetLevelRequestParams, self._set_logging_level
            )
        return server

    @asynccontextmanager
    async def running(self) -> AsyncIterator[McpGateway]:
        """Follow catalog changes and send notifications while the block runs."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            self._listing_signature = self.adapter.routes.listing_signature()
            unsubscribe = self.adapter.on_catalog_changed(self._catalog_changed)
            stop_updates = self.adapter.on_resource_updated(self._resource_updated)
            self.adapter.bind_host(self._notice_host)
            # Long-lived: an edited configuration file takes effect without a restart, and
            # clients hear of it through list_changed.
            tg.start_soon(self.adapter.watch_config)
            try:
                yield self
            finally:
                unsubscribe()
                stop_updates()
                self._listen.close()
                for host in list(self._hosts):
                    host.close()
                self._tg = None
                tg.cancel_scope.cancel()

    # ------------------------------------------------------------------ hosts

    def _new_host(
        self, connection: Connection | None, client: ClientAccess | None = None
    ) -> GatewayHost:
        policy = client.policy if client is not None else None
        host = GatewayHost(
            on_tools_changed=self._tools_changed, on_notice=self._notice, policy=policy
        )
        self._hosts[host] = connection
        if connection is None:
            self._sessionless.add(host)
        # Its first tools are not announced as a change: the client has not listed anything.
        self._registering.add(host)
        try:
            # Registered as the client: direct and deferred tools, ToolSearch's description
            # and the namespace tools come from its view of the catalog, and stay so.
            with acting_for(policy):
                host.surfaces = register_surfaces(
                    self.adapter,
                    host,
                    surface=(client.surface if client is not None else None) or self.surface,
                )
        finally:
            self._registering.discard(host)
        return host

    def caller(self) -> CallerPolicy | None:
        """The policy of the configured client making the running request (None without
        ``gatewayClients``, or over stdio, where the one local user is trusted)."""
        access = self._client_access()
        return access.policy if access is not None else None

    def host_for(self, ctx: ServerRequestContext[Any, Any]) -> GatewayHost:
        """The host of the client connection ``ctx`` came from (shared when sessionless)."""
        client = self._client_access()
        if self.stateless or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            if client is not None:
                return self._client_host(client)
            return self._shared_host()
        # The SDK hands low-level handlers a per-request ServerSession; the per-connection
        # Connection behind it (with its state and teardown stack) is what identifies a client.
        connection = getattr(ctx.session, "_connection", None)
        if not isinstance(connection, Connection):
            return self._shared_host()
        # One host per client on a connection: a request carrying another client's token on
        # this session must not see the tools registered for the first one.
        key = _HOST_STATE_KEY if client is None else f"{_HOST_STATE_KEY}:{client.policy.name}"
        host = connection.state.get(key)
        policy = client.policy if client is not None else None
        if isinstance(host, GatewayHost):
            if host.policy == policy:
                return host
            self._forget(host)  # the client's policy was edited: its view changed
        host = self._new_host(connection, client)
        connection.state[key] = host
        connection.exit_stack.callback(self._forget, host)
        return host

    def client_config(self) -> ClientConfig:
        """The clients and JWT settings requests are verified against: those the gateway
        started with, then those of each reloaded configuration that changes them."""
        if not self._clients:
            return self._client_config  # no authentication to follow: a restart adds it
        current = _client_settings(self.adapter)
        if current != self._client_settings_seen:
            self._client_settings_seen = current
            self._client_config = current
            clients = client_access(current[0])
            for name, host in list(self._client_hosts.items()):
                if clients.get(name) != self._clients.get(name):
                    # Its surface or policy changed: its next request builds a new host.
                    del self._client_hosts[name]
                    host.close()
            self._clients = clients
        return self._client_config

    def client_names(self) -> list[str]:
        """The configured clients' names (the status page lists them)."""
        return sorted(self._clients)

    def _client_access(self) -> ClientAccess | None:
        if not self._clients:
            return None
        self.client_config()
        name = requesting_client()
        return self._clients.get(name) if name is not None else None

    def _client_host(self, client: ClientAccess) -> GatewayHost:
        host = self._client_hosts.get(client.policy.name)
        if host is None:
            host = self._client_hosts[client.policy.name] = self._new_host(None, client)
        return host

    def _shared_host(self) -> GatewayHost:
        if self._shared is None:
            self._shared = self._new_host(None)
        return self._shared

    def _forget(self, host: GatewayHost) -> None:
        host.close()
        self._hosts.pop(host, None)
        self._pending.discard(host)
        if self._tg is not None:
            self._tg.start_soon(self.adapter.routes.forget, host)

    def _tools_changed(self, host: GatewayHost) -> None:
        tg = self._tg
        if tg is None or host in self._pending or host in self._registering:
            return
        # Coalesce: an activation or a catalog rebuild changes several tools in one go.
        self._pending.add(host)
        tg.start_soon(self._send_tools_changed, host)

    async def _send_tools_changed(self, host: GatewayHost) -> None:
        await anyio.lowlevel.checkpoint()
        self._pending.discard(host)
        connection = self._hosts.get(host)
        if connection is not None:
            await connection.send_tool_list_changed()  # best effort: never raises
        elif host in self._sessionless:
            await self.bus.publish(ToolsListChanged())

    def _notice(self, host: GatewayHost, message: str, level: NotifyLevel) -> None:
        """A surface's notice for one client's user: the gateway's log and that client."""
        self._tell(message, level, [host])

    def _broadcast_notice(self, _sink: GatewayHost, message: str, level: NotifyLevel) -> None:
        """An engine notice: the gateway's log and every connected client that may see the
        whole catalog (a notice names any server's tools: changed definitions, renames)."""
        self._tell(message, level, [h for h in self._hosts if _sees_everything(h.policy)])

    def _tell(self, message: str, level: NotifyLevel, hosts: list[GatewayHost]) -> None:
        logger.log(
            logging.WARNING if level != "info" else logging.INFO, "%s", message.splitlines()[0]
        )
        if self._tg is None:
            return
        wire_level = _NOTIFY_LEVELS[level]
        for host in hosts:
            connection = self._hosts.get(host)
            if connection is not None and _at_least(wire_level, host.log_level):
                self._tg.start_soon(_send_log, connection, wire_level, message)

    def _catalog_changed(self) -> None:
        """Resources or prompts may have changed: tell every client when they did."""
        if self.adapter.routes.has_subscriptions and self._tg is not None:
            # A rebuild follows every (re)connect, and a reconnected server has forgotten
            # its subscriptions; subscribing again is harmless where it has not.
            self._tg.start_soon(self.adapter.routes.resubscribe)
        signature = self.adapter.routes.listing_signature()
        if signature == self._listing_signature or self._tg is None:
            return
        old, self._listing_signature = self._listing_signature, signature
        self._tg.start_soon(self._send_listings_changed, old[0] != signature[0])

    async def _send_listings_changed(self, resources_changed: bool) -> None:
        for connection in list(self._hosts.values()):
            if connection is None:
                continue
            if resources_changed:
                await connection.send_resource_list_changed()
            else:
                await connection.send_prompt_list_changed()
        await self.bus.publish(
            ResourcesListChanged() if resources_changed else PromptsListChanged()
        )

    # ------------------------------------------------------------------ tools

    async def _list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        # A client that lists once, as most do, must find the tools shown up front of a server
        # never listed before (a fresh machine): its surfaces say which (under ToolSearch every
        # server's first listing, so the core set and the summary are whole from the start).
        host = self.host_for(ctx)
        if host.surfaces is not None:
            await host.surfaces.ready()
        else:
            await wait_for_up_front_tools(self.adapter)
        with acting_for(self.caller()):
            return types.ListToolsResult(
                tools=[self._wire_tool(host, d) for d in self._listed(host)]
            )

    def _listed(self, host: GatewayHost) -> list[ToolDefinition]:
        """The tools ``host``'s client lists now: its active tools, the catalog's among them
        only while the running caller's view holds them (a host is its client's, so this
        only bites between a catalog change and the host's next sync)."""
        catalog = self.adapter.catalog
        return [
            d for d in host.visible_tools() if not host.is_catalog_tool(d.name) or d.name in catalog
        ]

    def _wire_tool(self, host: GatewayHost, definition: ToolDefinition) -> types.Tool:
        info = self._catalog_info(host, definition.name)
        return types.Tool(
            name=definition.name,
            description=definition.description,
            input_schema=dict(definition.parameters),
            output_schema=dict(info.output_schema) if info and info.output_schema else None,
            annotations=(
                types.ToolAnnotations.model_validate(dict(info.annotations))
                if info and info.annotations
                else None
            ),
            # MCP Apps (``_meta.ui.resourceUri``) and other extensions: clients that render
            # them need the server's own ``_meta``; its ``ui://`` resources pass through too.
            _meta=dict(info.meta) if info and info.meta else None,
        )

    def _catalog_info(self, host: GatewayHost, name: str) -> ToolInfo | None:
        if not host.is_catalog_tool(name):
            return None
        try:
            info = self.adapter.lookup(name)
        except McpAdapterError:
            return None
        return info if info.name == name else None

    async def _call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        host = self.host_for(ctx)
        name = params.name
        arguments = dict(params.arguments or {})
        if name not in host.active:
            await self.adapter.ready()  # a direct tool of a server still being listed
        pending = (
            _InputRequired(params.input_responses or {})
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            else None
        )
        try:
            with relay_calls(self._relay(ctx, host, pending)), acting_for(self.caller()):
                if name in host.active and host.is_catalog_tool(name):
                    result = await self._call_upstream(name, arguments)
                else:
                    definition = host.tools.get(name) if name in host.active else None
                    if definition is None:
                        self.adapter.pipeline.record_denied(name)  # the operator's trace
                        return _error_result(self._unknown_tool_text(host, name))
                    result = _wire_result(await definition.execute(arguments))
        except McpAdapterError as exc:
            result = _error_result(str(exc))
        required = pending.result() if pending is not None else None
        return required if required is not None else result

    async def _call_upstream(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        outcome = await self.adapter.call(name, arguments)
        if outcome.error_kind is None and isinstance(outcome.result, types.CallToolResult):
            return outcome.result
        # Errors, and resources exposed as tools, in the words every surface uses.
        return _wire_result(render_outcome(self.adapter, outcome))

    def _unknown_tool_text(self, host: GatewayHost, name: str) -> str:
        """Said (under the caller's view) to a client calling a tool it has not listed."""
        loadable = name in host.tools and (
            not host.is_catalog_tool(name) or name in self.adapter.catalog
        )
        if loadable and host.surfaces is not None and host.surfaces.toolsearch:
            return (
                f"Tool {name!r} is not loaded: call ToolSearch with "
                f'{{"query": "select:{name}"}} first.'
            )
        listed = ", ".join(d.name for d in self._listed(host)) or "none"
        return f"Unknown tool {name!r}. This gateway lists: {listed}."

    def _relay(
        self,
        ctx: ServerRequestContext[Any, Any],
        host: GatewayHost,
        pending: _InputRequired | None = None,
    ) -> CallRelay:
        session = ctx.session
        capabilities = session.client_capabilities or types.ClientCapabilities()
        meta: Mapping[str, Any] = ctx.meta or {}
        progress_token = meta.get("progress_token", meta.get("progressToken"))
        log_levels = allowed_log_levels(ctx.protocol_version, ctx.meta)
        # Sessionless requests share a host but not a caller: each request is its own.
        caller: object = host if host not in self._sessionless else session

        async def report(progress: float, total: float | None, message: str | None) -> None:
            await session.report_progress(progress, total, message)

        ask_client = elicitation_to_client(session, ctx.request_id)

        async def elicitation(
            params: types.ElicitRequestParams,
        ) -> types.ElicitResult | types.ErrorData:
            answer = await ask_client(params)
            if isinstance(answer, types.ErrorData):
                return answer
            # The engine's rule for every host: an accepted form gets its defaults.
            return with_form_defaults(params, answer)

        async def log(params: types.LoggingMessageNotificationParams) -> None:
            if params.level not in log_levels or not _at_least(params.level, host.log_level):
                return
            await session.send_notification(
                types.LoggingMessageNotification(params=params),
                related_request_id=ctx.request_id,
            )

        if pending is not None and capabilities.elicitation is not None:
            # 2026-07-28: no requests to the client; questions ride the call's result.
            return CallRelay(
                caller=caller,
                progress=report if progress_token is not None else None,
                elicitation=pending.elicit,
                log=log,
                sent=pending.server_reached,
            )
        if self.stateless:
            # No session: the client's answer to a server request could reach another replica.
            return CallRelay(
                caller=caller,
                progress=report if progress_token is not None else None,
                sampling=_refuse_sampling,
                elicitation=_refuse_elicitation,
                log=log,
            )
        return CallRelay(
            caller=caller,
            progress=report if progress_token is not None else None,
            sampling=(
                sampling_to_client(session, ctx.request_id)
                if capabilities.sampling is not None
                else None
            ),
            elicitation=elicitation if capabilities.elicitation is not None else None,
            log=log,
        )

    async def _set_logging_level(
        self, ctx: ServerRequestContext[Any, Any], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        self.host_for(ctx).log_level = params.level
        return types.EmptyResult()

    # ------------------------------------------------------------------ resources

    async def _list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        with acting_for(self.caller()):
            resources = await self.adapter.routes.list_resources()
        return types.ListResourcesResult(resources=resources)

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        with acting_for(self.caller()):
            templates = await self.adapter.routes.list_resource_templates()
        return types.ListResourceTemplatesResult(resource_templates=templates)

    async def _read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        with (
            _as_mcp_error(),
            relay_calls(self._relay(ctx, self.host_for(ctx))),
            acting_for(self.caller()),
        ):
            return await self.adapter.routes.read_resource(str(params.uri))

    # ------------------------------------------------------------------ subscriptions

    async def _subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        with _as_mcp_error(), acting_for(self.caller()):
            await self.adapter.routes.subscribe(self.host_for(ctx), str(params.uri))
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        await self.adapter.routes.unsubscribe(self.host_for(ctx), str(params.uri))
        return types.EmptyResult()

    async def _resource_updated(self, server: str, uri: str) -> None:
        for host in self.adapter.routes.subscribers(uri):
            connection = self._hosts.get(host) if isinstance(host, GatewayHost) else None
            if connection is not None:
                await connection.send_resource_updated(uri)
            elif host is self._shared:
                await self.bus.publish(ResourceUpdated(uri=uri))

    # ------------------------------------------------------------------ completions

    async def _complete(
        self, ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        with _as_mcp_error(), acting_for(self.caller()):
            return await self.adapter.routes.complete(params)

    # ------------------------------------------------------------------ prompts

    async def _list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        with acting_for(self.caller()):
            prompts = await self.adapter.routes.list_prompts()
        return types.ListPromptsResult(prompts=prompts)

    async def _get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult:
        with (
            _as_mcp_error(),
            relay_calls(self._relay(ctx, self.host_for(ctx))),
            acting_for(self.caller()),
        ):
            return await self.adapter.routes.get_prompt(params.name, params.arguments or {})


def _sees_everything(policy: CallerPolicy | None) -> bool:
    return policy is None or not (policy.allow or policy.deny)


def _client_settings(adapter: McpAdapter) -> ClientConfig:
    return (adapter.settings.gateway_clients, adapter.settings.gateway_jwt)


class _InputRequired:
    """The questions of one 2026-07-28 ``tools/call``, asked through ``input_required``.

    That era has no requests from server to client: a server that needs an answer returns
    :class:`~mcp_types.InputRequiredResult` with the questions, and the client repeats the
    call with the answers (``input_responses``), keyed as asked. The gateway's own questions
    (tool approval) come before any server is reached, so the call can be answered that way
    and run again: the first run asks, is refused, and its result is replaced by the
    questions; the retry finds its answer under the same key (a script asks about the tools it
    names before it runs, so all of them come in one round). A question asked after a server
    was reached (the server's own, or a script's about a tool it did not name up front) cannot
    be: running the call again would repeat what the server did. It is refused, and the
    call's result stands.
    """

    def __init__(self, answers: Mapping[str, types.InputResponse]) -> None:
        self._answers = answers
        self._asked: dict[str, types.InputRequest] = {}
        self._reached = False

    def server_reached(self) -> None:
        self._reached = True

    async def elicit(
        self, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        key = _question_key(params)
        answer = self._answers.get(key)
        if isinstance(answer, types.ElicitResult):
            # The engine's rule for every host: an accepted form gets its defaults.
            return with_form_defaults(params, answer)
        if self._reached:
            return types.ErrorData(
                code=types.INVALID_REQUEST,
                message=(
                    "the client speaks MCP 2026-07-28, which cannot be asked a question in "
                    "the middle of a call that has reached a server"
                ),
            )
        self._asked[key] = types.ElicitRequest(params=params)
        return types.ErrorData(
            code=types.INVALID_REQUEST, message="asked of the client with input_required"
        )

    def result(self) -> types.InputRequiredResult | None:
        """The questions to answer the call with; None when the call's own result stands."""
        if not self._asked or self._reached:
            return None
        return types.InputRequiredResult(input_requests=dict(self._asked))


def _question_key(params: types.ElicitRequestParams) -> str:
    """The same question gets the same key on the retry; another question another key, so an
    answer is never taken for a question it was not given to."""
    digest = hashlib.sha256(params.model_dump_json(by_alias=True).encode()).hexdigest()
    return f"pi-mcp-{digest[:16]}"


@contextmanager
def _as_mcp_error() -> Iterator[None]:
    """The engine's errors as the MCP errors a client expects: a request naming something
    unknown is invalid params; a server's own error keeps its code."""
    try:
        yield
    except (UnknownPromptError, UnknownResourceError) as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=redact(str(exc))) from exc
    except ServerReportedError as exc:
        code = exc.code or types.INTERNAL_ERROR
        raise MCPError(code=code, message=redact(exc.message)) from exc
    except McpAdapterError as exc:
        raise MCPError(code=types.INTERNAL_ERROR, message=redact(str(exc))) from exc


_STATELESS_REFUSAL = "a stateless gateway has no channel for requests to its clients"


async def _refuse_sampling(
    params: types.CreateMessageRequestParams,
) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_REQUEST, message=f"Sampling not supported: {_STATELESS_REFUSAL}"
    )


async def _refuse_elicitation(params: types.ElicitRequestParams) -> types.ErrorData:
    return types.ErrorData(
        code=types.INVALID_REQUEST, message=f"Elicitation not supported: {_STATELESS_REFUSAL}"
    )


async def ask_calling_client(question: Question) -> str | None:
    """Ask the user of the client whose request is calling the tool, through elicitation.

    The form has one required string ``decision`` whose ``enum`` is the options' ids (and
    ``enumNames`` their labels). ``accept`` answers the chosen id, ``decline`` answers
    ``deny``; a cancel, a client without elicitation and a request without a session answer
    None, so the engine refuses the call.
    """
    relay = current_relay()
    if relay is None or relay.elicitation is None:
        return None
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "enum": [o.id for o in question.options],
                "enumNames": [o.label for o in question.options],
            }
        },
        "required": ["decision"],
    }
    params = types.ElicitRequestFormParams(
        message=f"{question.title}\n\n{question.text}", requested_schema=schema
    )
    answer = await relay.elicitation(params)
    if not isinstance(answer, types.ElicitResult):
        return None
    if answer.action == "decline":
        return "deny"
    if answer.action == "accept" and answer.content is not None:
        decision = answer.content.get("decision")
        return decision if isinstance(decision, str) else None
    return None


async def _send_log(connection: Connection, level: types.LoggingLevel, message: str) -> None:
    # Handshake-era connections only (hosts of the 2026-07-28 era have no connection here), for
    # which logging is not deprecated; the SDK marks the method for the new era.
    with warnings.catch_warnings():  # warns when called; the coroutine runs outside
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        sending = connection.log(level, redact(message), logger=GATEWAY_NAME)
    await sending


def _at_least(level: types.LoggingLevel, threshold: types.LoggingLevel) -> bool:
    return _LOG_LEVELS.index(level) >= _LOG_LEVELS.index(threshold)


def _error_result(text: str) -> types.CallToolResult:
    text = redact(text)  # often an exception's text, which may quote what a server said
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _wire_result(result: ToolResult) -> types.CallToolResult:
    """A surface's :class:`ToolResult` as an MCP tool result."""
    content: list[types.ContentBlock] = []
    for part in result.content:
        if isinstance(part, TextPart):
            content.append(types.TextContent(type="text", text=part.text))
        elif isinstance(part, ImagePart):
            content.append(
                types.ImageContent(type="image", data=part.data, mime_type=part.mime_type)
            )
        elif isinstance(part, AudioPart):
            content.append(
                types.AudioContent(type="audio", data=part.data, mime_type=part.mime_type)
            )
    return types.CallToolResult(content=content, is_error=result.is_error)
