"""``pi-mcp trust SERVER [TOOL]``: accept a server's recorded tool-definition changes."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ._app import JsonOption, app, print_json
from ._engine_cmds import run

if TYPE_CHECKING:
    from pi_mcp_adapter.engine import McpAdapter


@app.command()
def trust(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="Server whose changed tools to trust.")],
    tool: Annotated[
        str | None, typer.Argument(help="Only this tool (its own or its prefixed name).")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Accept the changed tool definitions `pi-mcp status` shows, as the new trusted ones."""

    async def body(adapter: McpAdapter) -> tuple[str, ...]:
        if not adapter.definition_changes(server):
            return ()  # nothing changed: the wanted state holds already, which is no error
        return adapter.trust(server, tool)

    names = run(ctx, body, connect_missing=False, quiet=as_json)
    if as_json:
        print_json({"server": server, "trusted": list(names)})
    elif not names:
        sys.stdout.write(f"Nothing to trust: {server} has no changed tool definitions.\n")
    else:
        sys.stdout.write(f"Trusted the current definitions of {server}: {', '.join(names)}\n")
