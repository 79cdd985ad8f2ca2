"""Commands that run the engine: status, tools, search, describe, call, connect, reconnect,
tokens and demo."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, contextmanager
from dataclasses import asdict
from typing import Annotated, Any, TypeVar

import anyio
import typer
from rich.console import Console
from rich.table import Table

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter.engine import AudioPart, ImagePart, McpAdapter, TextPart, ToolResult
from pi_mcp_adapter.surface import ProxyTool, call_tool
from pi_mcp_adapter.surface._render import render_status
from pi_mcp_adapter.surface._tokens_report import TokenReport, measure_tokens

from ._app import CliContext, JsonOption, app, fail, get_context, print_json
from ._ask import ask_on_terminal

T = TypeVar("T")


class _Progress:
    """Shows servers connecting: a live rich display on a terminal, plain lines otherwise."""

    def __init__(self, console: Console, *, quiet: bool) -> None:
        self._console = console
        self._quiet = quiet
        self._live = console.is_terminal and not quiet
        self._status: Any = None
        self._pending: set[str] = set()

    def __call__(self, server: str, phase: str, detail: str | None) -> None:
        if self._quiet:
            return
        if phase == "connecting":
            self._pending.add(server)
        else:
            self._pending.discard(server)
        if self._live:
            if phase == "failed":
                self._console.print(f"[red]✗[/red] {server}: {detail}", highlight=False)
            elif phase == "connected":
                self._console.print(f"[green]✓[/green] {server} connected", highlight=False)
            if self._status is not None:
                waiting = ", ".join(sorted(self._pending)) or "done"
                self._status.update(f"Connecting MCP servers: {waiting}")
        elif phase == "failed":
            self._console.print(f"✗ {server}: {detail}", highlight=False)

    @contextmanager
    def shown(self) -> Any:
        if self._live:
            with self._console.status("Connecting MCP servers…") as status:
                self._status = status
                yield
                self._status = None
        else:
            yield


@asynccontextmanager
async def open_adapter(
    cli: CliContext, *, connect_missing: bool = True, quiet: bool = False
) -> AsyncIterator[McpAdapter]:
    progress = _Progress(cli.err_console, quiet=quiet)
    adapter = McpAdapter(
        agent_dir=cli.agent_dir,
        project_dir=cli.project_dir,
        config_path=cli.config_path,
        connect_missing=connect_missing,
        on_progress=progress,
        environ=cli.environ,
        ask=ask_on_terminal,
    )
    for error in adapter.config.errors:
        if not quiet:
            cli.err_console.print(f"[yellow]config:[/yellow] {error}", highlight=False)
    with progress.shown():
        await adapter.start()
    try:
        yield adapter
    finally:
        await adapter.stop()


def run(
    ctx: typer.Context,
    body: Callable[[McpAdapter], Awaitable[T]],
    *,
    connect_missing: bool = True,
    quiet: bool = False,
) -> T:
    cli = get_context(ctx)

    async def main() -> T:
        async with open_adapter(cli, connect_missing=connect_missing, quiet=quiet) as adapter:
            return await body(adapter)

    try:
        return anyio.run(main)
    except McpAdapterError as exc:
        raise fail(str(exc)) from None


def result_json(result: ToolResult) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for part in result.content:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart | AudioPart):
            content.append({"type": part.type, "mimeType": part.mime_type, "data": part.data})
    return {"isError": result.is_error, "content": content, "details": dict(result.details)}


def emit_result(result: ToolResult, *, as_json: bool) -> None:
    if as_json:
        print_json(result_json(result))
    else:
        for part in result.content:
            if isinstance(part, TextPart):
                sys.stdout.write(part.text.rstrip("\n") + "\n")
            else:
                sys.stdout.write(
                    f"[{part.type}: {part.mime_type}, {len(part.data)} base64 chars]\n"
                )
    if result.is_error:
        raise typer.Exit(1)


@app.command()
def status(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Each server's state and tool count (from the cache; connects nothing)."""

    async def body(adapter: McpAdapter) -> None:
        view = adapter.status()
        if as_json:
            print_json(
                {
                    "servers": [asdict(r) for r in view.servers],
                    "connected": view.connected,
                    "enabled": view.enabled,
                    "tools": view.tool_count,
                    "configErrors": list(view.config_errors),
                }
            )
        else:
            sys.stdout.write(render_status(view) + "\n")

    run(ctx, body, connect_missing=False, quiet=as_json)


@app.command()
def tools(
    ctx: typer.Context,
    server: Annotated[str | None, typer.Argument(help="Only this server's tools.")] = None,
    as_json: JsonOption = False,
) -> None:
    """List known tools (servers without cached metadata are connected once)."""

    async def body(adapter: McpAdapter) -> None:
        if server is not None and server not in adapter.servers:
            raise fail(f"unknown server {server!r}")
        found = adapter.tools(server)
        if as_json:
            print_json(
                [
                    {
                        "name": t.name,
                        "server": t.server,
                        "originalName": t.original_name,
                        "description": t.description,
                        "resourceUri": t.resource_uri,
                    }
                    for t in found
                ]
            )
            return
        console = Console(soft_wrap=False)
        table = Table("name", "server", "description", box=None, pad_edge=False)
        for t in found:
            table.add_row(t.name, t.server, (t.description.splitlines() or [""])[0][:90])
        console.print(table)
        if not found:
            sys.stdout.write("No tools known. `pi-mcp status` shows why.\n")

    run(ctx, body, quiet=as_json)


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="Words (ranked) or, with --regex, a pattern.")],
    server: Annotated[str | None, typer.Option("--server", help="Only this server.")] = None,
    regex: Annotated[bool, typer.Option("--regex", help="Treat QUERY as a regex.")] = False,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 12,
    offset: Annotated[int, typer.Option("--offset", min=0)] = 0,
    no_schemas: Annotated[bool, typer.Option("--no-schemas", help="Names only.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Search tools by words, ranked, from the metadata cache."""

    async def body(adapter: McpAdapter) -> ToolResult:
        return ProxyTool(adapter).search_result(
            query,
            server=server,
            regex=regex,
            include_schemas=not no_schemas,
            limit=limit,
            offset=offset,
        )

    emit_result(run(ctx, body, quiet=as_json), as_json=as_json)


@app.command()
def describe(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Tool name (prefixed or original).")],
    as_json: JsonOption = False,
) -> None:
    """Show a tool's description and parameters."""

    async def body(adapter: McpAdapter) -> ToolResult:
        result = ProxyTool(adapter).describe_result(name)
        if as_json and not result.is_error:
            tool = adapter.lookup(name)
            details = {
                **result.details,
                "description": tool.description,
                "originalName": tool.original_name,
                "inputSchema": dict(tool.input_schema),
                "resourceUri": tool.resource_uri,
            }
            return ToolResult(result.content, details=details)
        return result

    emit_result(run(ctx, body, quiet=as_json), as_json=as_json)


@app.command()
def call(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Tool name.")],
    args_json: Annotated[str | None, typer.Argument(help="Arguments as a JSON object.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Call a tool and print its converted result (exit 1 when the tool reports an error)."""
    from pi_mcp_adapter.surface._proxy import parse_args

    try:
        arguments = parse_args(args_json)
    except McpAdapterError as exc:
        raise fail(str(exc)) from None

    async def body(adapter: McpAdapter) -> ToolResult:
        return await call_tool(adapter, name, arguments)

    emit_result(run(ctx, body, quiet=as_json), as_json=as_json)


@app.command()
def connect(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="Server to connect and refresh.")],
    as_json: JsonOption = False,
) -> None:
    """Connect a server, refresh its tools and update the cache."""

    async def body(adapter: McpAdapter) -> ToolResult:
        return await ProxyTool(adapter).connect_result(server)

    emit_result(run(ctx, body, connect_missing=False, quiet=as_json), as_json=as_json)


@app.command()
def reconnect(
    ctx: typer.Context,
    server: Annotated[str | None, typer.Argument(help="Server (default: all).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Close and reopen a server (or all), clearing any failure backoff."""

    async def body(adapter: McpAdapter) -> dict[str, str | None]:
        return await adapter.reconnect(server)

    results = run(ctx, body, connect_missing=False, quiet=as_json)
    if as_json:
        print_json({name: {"ok": err is None, "error": err} for name, err in results.items()})
    else:
        for name, err in sorted(results.items()):
            sys.stdout.write(f"✓ {name}\n" if err is None else f"✗ {name}: {err}\n")
    if any(err is not None for err in results.values()):
        raise typer.Exit(1)


@app.command()
def tokens(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """What the model-facing surface costs in tokens (o200k), against registering every tool."""

    async def body(adapter: McpAdapter) -> TokenReport:
        return measure_tokens(adapter)

    report = run(ctx, body, quiet=as_json)
    if as_json:
        print_json(asdict(report))
        return
    table = Table("surface", "tokens", "vs. every tool", box=None, pad_edge=False)
    every = report.all_tools_tokens

    def ratio(n: int) -> str:
        return f"{every / n:.1f}x smaller" if n and every else "-"

    table.add_row("mcp proxy tool", str(report.proxy_tokens), ratio(report.proxy_tokens))
    table.add_row("ToolSearch tool", str(report.toolsearch_tokens), ratio(report.toolsearch_tokens))
    table.add_row(f"direct tools ({report.direct_tool_count})", str(report.direct_tokens), "")
    table.add_row(f"every tool registered ({report.tool_count})", str(every), "1x")
    Console(soft_wrap=False).print(table)


@app.command()
def demo(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Run real servers end to end: status, search, describe, call and the token saving."""
    from ._demo import run_demo

    run_demo(get_context(ctx), as_json=as_json)
