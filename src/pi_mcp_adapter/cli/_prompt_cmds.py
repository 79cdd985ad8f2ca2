"""``pi-mcp prompt NAME [ARGS_JSON]``: render an upstream prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pi_mcp_adapter._errors import McpAdapterError

if TYPE_CHECKING:
    from pi_mcp_adapter.engine import McpAdapter, ToolResult

from ._app import JsonOption, app, fail
from ._engine_cmds import emit_result, run


@app.command()
def prompt(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Prompt name (prefixed or the server's own).")],
    args_json: Annotated[str | None, typer.Argument(help="Arguments as a JSON object.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Render a server's prompt and print its messages (exit 1 on an error)."""
    try:
        from pi_mcp_adapter.surface._proxy import parse_args

        arguments = parse_args(args_json)
    except McpAdapterError as exc:
        raise fail(str(exc)) from None

    async def body(adapter: McpAdapter) -> ToolResult:
        from pi_mcp_adapter.surface._prompts import run_prompt

        return await run_prompt(adapter, name, arguments)

    emit_result(run(ctx, body, quiet=as_json), as_json=as_json)
