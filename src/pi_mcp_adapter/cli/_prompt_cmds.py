"""``pi-mcp prompts [SERVER]`` lists upstream prompts; ``pi-mcp prompt NAME [ARGS_JSON]``
renders one."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from pi_mcp_adapter._errors import McpAdapterError

if TYPE_CHECKING:
    from pi_mcp_adapter.catalog import PromptInfo
    from pi_mcp_adapter.engine import McpAdapter, ToolResult

from ._app import JsonOption, app, fail, print_json, print_warning, require_known_server
from ._engine_cmds import emit_result, run, run_from_cache

PROMPT_LIST_HINT = "List a server's prompts with mcp({server: ...})."
"""The engine's hint for an unknown prompt, in the proxy's syntax; the CLI names its own
command instead (``tools`` shows no prompts)."""


def usage_line(prompt: PromptInfo) -> str:
    """``pi-mcp prompt NAME '{"arg": "..."}'`` with the prompt's required arguments (or all)."""
    names = list(prompt.required_arguments) or [a.name for a in prompt.arguments][:1]
    if not names:
        return f"pi-mcp prompt {prompt.name}"
    example = json.dumps(dict.fromkeys(names, "..."), ensure_ascii=False)
    return f"pi-mcp prompt {prompt.name} '{example}'"


@app.command(short_help="List the servers' prompts.")
def prompts(
    ctx: typer.Context,
    server: Annotated[
        str | None, typer.Argument(metavar="SERVER", help="Only this server's prompts.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List upstream prompts with their arguments (* marks a required one).

    Servers never listed before are connected once; the rest come from the metadata cache.
    """

    def body(adapter: McpAdapter) -> None:
        require_known_server(adapter.servers, server)
        found = adapter.prompts(server)
        if as_json:
            print_json(
                [
                    {
                        "name": p.name,
                        "server": p.server,
                        "originalName": p.original_name,
                        "description": p.description,
                        "arguments": [
                            {"name": a.name, "description": a.description, "required": a.required}
                            for a in p.arguments
                        ],
                    }
                    for p in found
                ]
            )
            return
        if not found:
            where = f"server {server!r}" if server else "the configured servers"
            print_warning(f"no prompts known from {where}; `pi-mcp status` shows the servers")
            return
        lines: list[str] = []
        for p in found:
            summary = (p.description.strip().splitlines() or [""])[0]
            lines.append(f"{p.name}  ({p.server})" + (f"  {summary}" if summary else ""))
            for a in p.arguments:
                mark = "*" if a.required else ""
                lines.append(
                    f"    {a.name}{mark}" + (f"  {a.description}" if a.description else "")
                )
        sys.stdout.write("\n".join(lines) + "\n")
        if sys.stdout.isatty():
            sys.stdout.write(f"\n* required. Render one: {usage_line(found[0])}\n")

    run_from_cache(ctx, body, quiet=as_json)


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
        from pi_mcp_adapter.engine import ToolResult
        from pi_mcp_adapter.surface._prompts import run_prompt

        result = await run_prompt(adapter, name, arguments)
        if not result.is_error:
            return result
        # The engine words its hints for the model; a person at the CLI gets commands.
        text = result.text_content.replace(PROMPT_LIST_HINT, "List them with `pi-mcp prompts`.")
        if "needs argument(s)" in text:
            text += f"\nUsage: {usage_line(adapter.lookup_prompt(name))}"
        return ToolResult.text(text, is_error=True, details=result.details)

    emit_result(run(ctx, body, quiet=as_json), as_json=as_json)
