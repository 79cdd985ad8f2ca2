"""``pi-mcp serve``: the MCP gateway, and the client entries that run it (``--print-config``)."""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from pi_mcp_adapter._errors import McpAdapterError, UsageError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from pi_mcp_adapter.config._models import GatewayClient, GatewayJwt
    from pi_mcp_adapter.engine import McpAdapter
    from pi_mcp_adapter.hosts import GatewayOptions
    from pi_mcp_adapter.servers import ServerPool

from ._app import CliContext, app, fail, get_context, only_error, report_config_problems

TOKEN_ENV = "PI_MCP_GATEWAY_TOKEN"
"""The gateway's token variable (``hosts.TOKEN_ENV``), written out so that ``--help`` needs
no gateway import (the gateway and the MCP SDK load only when ``serve`` runs)."""

ClientName = Literal["claude-code", "cursor", "vscode", "codex", "claude-desktop", "opencode"]
CLIENTS: tuple[ClientName, ...] = (
    "claude-code",
    "cursor",
    "vscode",
    "codex",
    "claude-desktop",
    "opencode",
)
ENTRY_NAME = "pi-mcp"
logger = logging.getLogger("pi_mcp_adapter.gateway")
_TOKEN_PLACEHOLDER = "${" + TOKEN_ENV + "}"


@app.command()
def serve(
    ctx: typer.Context,
    transport: Annotated[
        str, typer.Option("--transport", help="stdio (default) or http (Streamable HTTP).")
    ] = "stdio",
    host: Annotated[
        str, typer.Option("--host", help="HTTP address to bind; not loopback needs a token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP port (0: any free port).")] = 8765,
    path: Annotated[str, typer.Option("--path", help="HTTP path of the MCP endpoint.")] = "/mcp",
    surface: Annotated[
        str | None,
        typer.Option("--surface", help="proxy (one `mcp` tool) or toolsearch (default: config)."),
    ] = None,
    stateless: Annotated[
        bool,
        typer.Option(
            "--stateless",
            help="Stateless HTTP (for replicas behind a load balancer): no server-initiated "
            "messages, ToolSearch activations shared by all clients.",
        ),
    ] = False,
    auth_token: Annotated[
        str | None,
        typer.Option(
            "--auth-token",
            help=f"Bearer token every HTTP request must carry (or set {TOKEN_ENV}).",
            show_default=False,
        ),
    ] = None,
    print_config: Annotated[
        str | None,
        typer.Option(
            "--print-config",
            metavar="CLIENT",
            help="Print the entry that runs this gateway from CLIENT: " + ", ".join(CLIENTS),
        ),
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", help="Log more (to stderr).")] = False,
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="Start the server pool (with --transport http, the HTTP gateway too) in the "
            "background and return once it listens.",
        ),
    ] = False,
    stop: Annotated[
        bool,
        typer.Option("--stop", help="Stop the server pool and the warm process of this agent dir."),
    ] = False,
    pool_only: Annotated[bool, typer.Option("--pool-only", hidden=True)] = False,
    warm_cli: Annotated[bool, typer.Option("--warm-cli", hidden=True)] = False,
) -> None:
    """Serve every configured MCP server as one MCP server (the gateway).

    Over stdio nothing but the protocol is written to stdout; logs go to stderr. SIGINT,
    SIGTERM and SIGHUP close every upstream server, then exit 130, 143 and 129.

    A gateway also serves its stdio servers to the other pi-mcp processes of the same agent
    dir (the server pool, a private socket in <agent dir>/pool): commands and Python agents use
    its running servers instead of starting their own.
    """
    import anyio

    from pi_mcp_adapter.config import LoadedConfig
    from pi_mcp_adapter.engine import McpAdapter
    from pi_mcp_adapter.hosts import GatewayOptions, serve_gateway
    from pi_mcp_adapter.hosts._gateway_serve import configure_logging, without_gateway_itself

    context = get_context(ctx)
    if transport not in ("stdio", "http"):
        raise fail(f"--transport must be stdio or http, got {transport!r}", code=2)
    if surface not in (None, "proxy", "toolsearch"):
        raise fail(f"--surface must be proxy or toolsearch, got {surface!r}", code=2)
    token = auth_token or os.environ.get(TOKEN_ENV) or None
    clients, jwt = _gateway_clients(context) if transport == "http" else ((), None)
    try:
        options = GatewayOptions(
            transport="http" if transport == "http" else "stdio",
            host=host,
            port=port,
            path=path,
            surface="toolsearch" if surface == "toolsearch" else "proxy" if surface else None,
            stateless=stateless,
            auth_token=token,
            clients=clients,
            jwt=jwt,
        )
    except McpAdapterError as exc:
        raise fail(str(exc), code=2) from None
    if print_config is not None:
        if print_config not in CLIENTS:
            raise fail(
                f"unknown client {print_config!r}; choose one of: {', '.join(CLIENTS)}", code=2
            )
        sys.stdout.write(client_entry(print_config, options, context) + "\n")
        return
    if stop:
        from ._pool_cmds import stop_pool, stop_warm_process

        stopped = stop_pool(context.agent_dir)
        if stopped is None:
            sys.stdout.write(f"no server pool runs for {context.agent_dir}\n")
        else:
            sys.stdout.write(f"stopped the server pool (pid {stopped})\n")
        warm = stop_warm_process(context.agent_dir)
        if warm is not None:
            sys.stdout.write(f"stopped the warm process (pid {warm})\n")
        return
    if background:
        from ._pool_cmds import start_background

        if token:
            os.environ[TOKEN_ENV] = token  # the background process inherits it
        status = start_background(context, _background_args(transport, options, stateless))
        sys.stdout.write(
            f"server pool listening on {status.get('socket')} (pid {status.get('pid')})\n"
        )
        return
    configure_logging(verbose=verbose)
    skipped_before: set[str] = set()
    reported = False

    def load() -> LoadedConfig:
        nonlocal reported
        raw = context.load_config()
        if not reported:
            reported = True
            report_config_problems(raw)  # once: a reload says what changed as a notice
        loaded, skipped = without_gateway_itself(raw)
        for name in skipped:
            if name not in skipped_before:
                skipped_before.add(name)
                logger.warning("server %r runs `pi-mcp serve` itself; the gateway skips it", name)
        return loaded

    adapter = McpAdapter(
        config_loader=load,
        agent_dir=context.agent_dir,
        project_dir=context.project_dir,
        config_path=context.config_path,
        # Serving starts at once; servers never listed before are listed in the background,
        # and a request that misses one of them waits for its listing.
        background_listing=True,
        relay_server_requests=True,
        use_pool=False,  # it is the pool, or stands beside the one that is
    )
    try:
        try:
            pool = functools.partial(_open_pool, warm_cli=warm_cli)
            if pool_only:
                from pi_mcp_adapter.servers import serve_pool

                stopped_by = anyio.run(functools.partial(serve_pool, open_pool=pool), adapter)
            else:
                stopped_by = anyio.run(
                    functools.partial(serve_gateway, alongside=pool), adapter, options
                )
        except BaseExceptionGroup as group:
            # The gateway's task groups wrap what failed inside; a lone error is the answer.
            raise only_error(group) from None
    except UsageError as exc:
        raise fail(str(exc), code=2) from None
    except McpAdapterError as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise typer.Exit(128 + signal.SIGINT) from None
    if stopped_by is not None:
        # 128 + the signal's number, as the shell reports a process the signal ended.
        raise typer.Exit(128 + stopped_by)


@asynccontextmanager
async def _open_pool(
    adapter: McpAdapter, *, warm_cli: bool = False
) -> AsyncIterator[ServerPool | None]:
    """The agent dir's server pool (None when another process serves it), with ``warm_cli``
    the warm process that runs short commands beside it.

    Only the background pool runs the warm process: it exists to make commands fast, while a
    gateway that an MCP client started should cost that client no more than itself.
    """
    from pi_mcp_adapter._warm import running_warm_cli
    from pi_mcp_adapter.hosts._gateway_telemetry import request_middleware
    from pi_mcp_adapter.servers import open_server_pool

    def telemetry(middleware: list[Any]) -> list[Any]:
        return request_middleware(middleware, client=lambda: None)

    async with open_server_pool(adapter, middleware=telemetry) as pool:
        if pool is None or not warm_cli:
            yield pool
            return
        async with running_warm_cli(pool.socket_path.parent):
            yield pool


def _background_args(transport: str, options: GatewayOptions, stateless: bool) -> list[str]:
    """The ``serve`` arguments of the background process (the token travels in its
    environment, inherited, never on a command line other users can read)."""
    if transport != "http":
        return ["--pool-only", "--warm-cli"]
    args = [
        "--warm-cli",
        "--transport",
        "http",
        "--host",
        options.host,
        "--port",
        str(options.port),
    ]
    args += ["--path", options.path]
    if options.surface is not None:
        args += ["--surface", options.surface]
    if stateless:
        args.append("--stateless")
    return args


def client_entry(client: ClientName, options: GatewayOptions, context: CliContext) -> str:
    """The text to paste into ``client``'s configuration to use this gateway.

    A token is never printed: HTTP entries refer to ``$PI_MCP_GATEWAY_TOKEN`` instead.
    """
    if options.transport == "http" and client != "claude-desktop":
        return _http_entry(client, options)
    command, args = _command_line(options, context)
    if client == "codex":
        quoted = ", ".join(json.dumps(a) for a in args)
        return f"[mcp_servers.{ENTRY_NAME}]\ncommand = {json.dumps(command)}\nargs = [{quoted}]"
    if client == "vscode":
        body: dict[str, Any] = {
            "servers": {ENTRY_NAME: {"type": "stdio", "command": command, "args": args}}
        }
    elif client == "opencode":
        body = {
            "$schema": "https://opencode.ai/config.json",
            "mcp": {ENTRY_NAME: {"type": "local", "command": [command, *args], "enabled": True}},
        }
    else:
        entry: dict[str, Any] = {"command": command, "args": args}
        if client == "claude-code":
            entry = {"type": "stdio", **entry}
        body = {"mcpServers": {ENTRY_NAME: entry}}
    return json.dumps(body, indent=2)


def _http_entry(client: ClientName, options: GatewayOptions) -> str:
    host = "127.0.0.1" if options.host in ("0.0.0.0", "::") else options.host
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{options.port}{options.path}"
    headers = {"Authorization": f"Bearer {_TOKEN_PLACEHOLDER}"} if options.auth_token else None
    if client == "codex":
        lines = [f"[mcp_servers.{ENTRY_NAME}]", f"url = {json.dumps(url)}"]
        if headers:
            lines.append(f'bearer_token_env_var = "{TOKEN_ENV}"')
        return "\n".join(lines)
    entry: dict[str, Any]
    if client == "opencode":
        entry = {"type": "remote", "url": url, "enabled": True}
        if headers:
            entry["headers"] = {"Authorization": "Bearer {env:" + TOKEN_ENV + "}"}
        return json.dumps(
            {"$schema": "https://opencode.ai/config.json", "mcp": {ENTRY_NAME: entry}}, indent=2
        )
    entry = {"type": "http", "url": url} if client in ("claude-code", "vscode") else {"url": url}
    if headers:
        entry["headers"] = headers
    key = "servers" if client == "vscode" else "mcpServers"
    return json.dumps({key: {ENTRY_NAME: entry}}, indent=2)


def _command_line(options: GatewayOptions, context: CliContext) -> tuple[str, list[str]]:
    """An absolute ``pi-mcp`` and the arguments that reproduce this configuration."""
    running = Path(sys.argv[0])
    if running.name == ENTRY_NAME and running.exists():
        command = str(running.absolute())
    else:
        command = shutil.which(ENTRY_NAME) or ENTRY_NAME
    args: list[str] = []
    if context.config_path is not None:
        args += ["--config", str(context.config_path)]
    if context.exclusive:
        args.append("--exclusive")
    from pi_mcp_adapter.config._locations import default_agent_dir

    if context.agent_dir != default_agent_dir().resolve():
        args += ["--agent-dir", str(context.agent_dir)]
    if context.project_dir != Path.cwd().resolve():
        args += ["--project", str(context.project_dir)]
    args.append("serve")
    if options.surface is not None:
        args += ["--surface", options.surface]
    return command, args


def _gateway_clients(
    context: CliContext,
) -> tuple[tuple[GatewayClient, ...], GatewayJwt | None]:
    """``settings.gatewayClients`` and ``gatewayJwt``, read before serving decides whether it
    may bind beyond loopback."""
    from pi_mcp_adapter.config._loader import PROJECT_LAYERS

    loaded = context.load_config()
    # Only the operator's files count: a project file's gateway settings are ignored anyway,
    # and a broken one must not let a repository stop the user's gateway.
    operator_files = {
        str(source.path)
        for source in loaded.sources
        if source.kind == "file" and source.name not in PROJECT_LAYERS
    }
    broken = [
        error
        for error in loaded.errors
        if (error.field or "").startswith(("settings.gatewayClients", "settings.gatewayJwt"))
        and error.path in operator_files
    ]
    if broken:
        # Fail closed: without the broken setting the gateway would check fewer tokens than
        # the user asked for (none at all, on loopback, when every client is dropped).
        raise fail(
            f"{broken[0]}\nnot serving over HTTP until gatewayClients/gatewayJwt are fixed: "
            "the gateway would otherwise sign in clients other than those configured",
            code=2,
        )
    return loaded.settings.gateway_clients, loaded.settings.gateway_jwt
