"""``pi-mcp app NAME [ARGS]``: call a tool that has an MCP Apps view and show the view.

The tool is called as ``pi-mcp call`` would, its ``ui://`` view is served on a loopback page
(see :mod:`pi_mcp_adapter.surface._apps`) and opened in the system browser; the URL goes to
stdout (the only way in when no browser can be opened). The command serves until Ctrl-C:
calls the view makes meanwhile go through the same pipeline as any call, approval prompts
on this terminal included.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ._app import EXIT_USAGE, ToolArgsArgument, ToolNameArgument, app, fail

if TYPE_CHECKING:
    from pi_mcp_adapter.engine import McpAdapter


@app.command("app", short_help="Call a tool and open its MCP Apps view in the browser.")
def app_view(
    ctx: typer.Context,
    name: ToolNameArgument,
    args_json: ToolArgsArgument = None,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the view's URL without opening it.")
    ] = False,
) -> None:
    """Call a tool whose _meta.ui.resourceUri names a ui:// view, serve the view on
    127.0.0.1 and open it in the browser; serve until Ctrl-C."""
    from pi_mcp_adapter._errors import McpAdapterError

    from ._engine_cmds import read_arguments, run

    try:
        arguments = read_arguments(args_json)
    except McpAdapterError as exc:
        raise fail(str(exc), code=EXIT_USAGE) from None

    def said(url: str, message: str) -> None:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()

    async def body(adapter: McpAdapter) -> None:
        import webbrowser

        import anyio

        from pi_mcp_adapter.surface._apps import AppViews
        from pi_mcp_adapter.surface._arguments import arguments_for

        async with anyio.create_task_group() as tg:
            view = await AppViews(adapter, tg, on_message=said).open(
                name, arguments_for(adapter, name, arguments)
            )
            sys.stdout.write(view.url + "\n")
            sys.stdout.flush()
            opened = not no_browser and await anyio.to_thread.run_sync(webbrowser.open, view.url)
            what = f"the view of {view.tool.name}"
            told = f"Opened {what} in the browser" if opened else f"Open the URL above for {what}"
            sys.stderr.write(f"{told}; Ctrl-C stops serving it.\n")
            sys.stderr.flush()
            await anyio.sleep_forever()

    run(ctx, body)
