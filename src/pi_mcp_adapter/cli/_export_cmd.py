"""``pi-mcp export``: the tool definitions to paste into a provider's API request.

The definitions are the ones a model would be given (the surface's tools: the ``mcp`` proxy
tool, or ``ToolSearch``, plus direct tools), rendered by the same code as the Python export host
(``hosts/_formats.py``). Executing them is the caller's job (``pi-mcp call``, ``pi-mcp serve``
or the Python API): this command only prints JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._app import EXIT_USAGE, JsonOption, app, fail, print_json
from ._engine_cmds import run_from_cache

if TYPE_CHECKING:
    from pi_mcp_adapter.engine import McpAdapter

FORMATS = ("openai-chat", "openai-responses", "anthropic", "mcp")
SURFACES = ("proxy", "toolsearch")


@app.command(short_help="Print tool definitions for a provider's API request.")
def export(
    ctx: typer.Context,
    format: Annotated[
        str,
        typer.Option(
            "--format",
            metavar="FORMAT",
            help="openai-chat, openai-responses, anthropic or mcp.",
        ),
    ] = "openai-chat",
    surface: Annotated[
        str | None,
        typer.Option(
            "--surface",
            metavar="SURFACE",
            help="proxy (the one `mcp` tool) or toolsearch (ToolSearch); default "
            "settings.surface, or toolsearch with --defer.",
        ),
    ] = None,
    defer: Annotated[
        bool,
        typer.Option(
            "--defer",
            help="anthropic and openai-responses: add the provider's own tool search and every "
            "deferred tool with defer_loading: true.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Print the tools a model is given, as JSON for the "tools" field of a provider's API request.

    The output is always JSON (--json changes nothing). Tool metadata comes from the cache;
    servers never listed before are connected once.
    """
    from pi_mcp_adapter.hosts._formats import DEFERRING_FORMATS

    if format not in FORMATS:
        raise fail(
            f"unknown --format {format!r}; use one of: {', '.join(FORMATS)}", code=EXIT_USAGE
        )
    if surface is not None and surface not in SURFACES:
        raise fail(
            f"unknown --surface {surface!r}; use one of: {', '.join(SURFACES)}", code=EXIT_USAGE
        )
    if defer and format not in DEFERRING_FORMATS:
        raise fail(
            f"--defer needs a format whose provider searches deferred tools itself: "
            f"{' or '.join(sorted(DEFERRING_FORMATS))}",
            code=EXIT_USAGE,
        )
    if defer and surface == "proxy":
        raise fail(
            "--defer hands deferred tools to the provider's search, and the proxy surface "
            "defers none: use --surface toolsearch (the default with --defer)",
            code=EXIT_USAGE,
        )
    chosen = surface or ("toolsearch" if defer else None)

    def body(adapter: McpAdapter) -> list[dict[str, Any]]:
        from pi_mcp_adapter.hosts import ExportHost
        from pi_mcp_adapter.hosts._formats import check_format

        host = ExportHost()
        surfaces = host.attach(
            adapter,
            surface="toolsearch" if chosen == "toolsearch" else "proxy" if chosen else None,
            commands=False,
        )
        try:
            return host.tool_definitions(check_format(format), defer=defer)
        finally:
            surfaces.close()

    print_json(run_from_cache(ctx, body, quiet=True))
