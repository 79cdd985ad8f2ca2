"""``pi-mcp script FILE|-``: run a Python script that calls MCP tools, in the sandbox.

The same script a model sends to ``mcp_script``: ``await call(...)``, ``await search(...)``,
``await describe(...)``. What it prints goes to stderr as it comes (progress); its value goes
to stdout (text as it is, anything else as JSON), or the whole run as one JSON document with
``--json``. A script that fails or goes over a budget exits 1.

What a script controls (its printed text, its error, its value) reaches the terminal with
control characters escaped, so a script cannot move the cursor, clear the screen or forge a
question; a value written to a pipe or a file is left as it is.
"""

from __future__ import annotations

import atexit
import contextlib
import math
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from ._app import EXIT_FAILED, EXIT_USAGE, JsonOption, app, fail, print_error, print_json

if TYPE_CHECKING:
    from pi_mcp_adapter.engine import McpAdapter
    from pi_mcp_adapter.surface import ScriptRun


@app.command(short_help="Run a Python script that calls MCP tools, in a sandbox.")
def script(
    ctx: typer.Context,
    source: Annotated[
        str, typer.Argument(metavar="FILE", help="The script's file, or - to read stdin.")
    ],
    timeout: Annotated[
        float | None,
        typer.Option("--timeout", metavar="SECONDS", help="Wall-time budget (default 60)."),
    ] = None,
    max_calls: Annotated[
        int | None,
        typer.Option("--max-calls", metavar="N", help="Tool calls allowed (default 100)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run a script with await call(tool, args), await search(words) and await
    describe(tool); print its value (exit 1 when it fails or goes over a budget)."""
    from dataclasses import replace

    from pi_mcp_adapter.surface import ScriptLimits
    from pi_mcp_adapter.surface._sandbox import SANDBOX_MISSING, sandbox_available

    from ._engine_cmds import run

    code = _read_source(source)
    if not sandbox_available():
        raise fail(SANDBOX_MISSING)
    limits = ScriptLimits()
    if timeout is not None:
        if not (timeout > 0 and math.isfinite(timeout)):
            raise fail(
                f"--timeout must be a positive number of seconds, got {timeout}", code=EXIT_USAGE
            )
        limits = replace(limits, timeout_s=timeout)
    if max_calls is not None:
        if max_calls < 1:
            raise fail(f"--max-calls must be at least 1, got {max_calls}", code=EXIT_USAGE)
        limits = replace(limits, max_calls=max_calls)

    def progress(text: str) -> None:
        sys.stderr.write(_for_terminal(text, sys.stderr))
        sys.stderr.flush()

    async def body(adapter: McpAdapter) -> ScriptRun:
        from pi_mcp_adapter.surface import ScriptTool

        return await ScriptTool(adapter, limits=limits).run(
            code, on_print=None if as_json else progress
        )

    finished = run(ctx, body, quiet=as_json)
    if as_json:
        print_json(
            {
                "ok": finished.ok,
                "result": finished.value,
                "output": finished.output,
                "error": finished.error or None,
                "errorKind": finished.error_kind,
                "budget": finished.budget,
                "calls": finished.calls,
                "bytesMoved": finished.bytes_moved,
                "durationMs": round(finished.duration_ms, 1),
            }
        )
    elif finished.ok:
        from pi_mcp_adapter.surface._script import render_value

        if finished.value is not None:
            value = render_value(finished.value).rstrip("\n") + "\n"
            sys.stdout.write(_for_terminal(value, sys.stdout))
    else:
        from pi_mcp_adapter.engine._approval import escape_controls

        what = "stopped" if finished.budget else "failed"
        error = escape_controls(finished.error, keep="")
        print_error(f"script {what}: {error} ({finished.calls} calls made)")
    _leave(EXIT_FAILED if not finished.ok else 0)


def _for_terminal(text: str, stream: TextIO) -> str:
    from pi_mcp_adapter.engine._approval import escape_controls

    return escape_controls(text, keep="\n\t") if stream.isatty() else text


def _leave(code: int) -> None:
    """End the command with ``code``.

    pydantic-monty 1.4's client aborts the interpreter (SIGABRT, exit 134) in about one exit
    of three after a run: its threads die while Python finalises. When this process is the
    ``pi-mcp`` command, nothing is left to finalise once the result is written, so it runs its
    exit handlers, flushes and leaves without finalising; called from elsewhere (a test's
    runner), it exits as any command does.
    """
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    is_command = Path(sys.argv[0]).name == "pi-mcp" or (
        spec is not None and spec.name == "pi_mcp_adapter.__main__"
    )
    if is_command and threading.current_thread() is threading.main_thread():
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    if code:
        raise typer.Exit(code)


def _read_source(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    from pi_mcp_adapter.engine._approval import escape_controls

    path = Path(source).expanduser()
    shown = escape_controls(source, keep="")
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise fail(f"cannot read {shown}: {exc.strerror or exc}", code=EXIT_USAGE) from None
    except UnicodeDecodeError:
        raise fail(f"cannot read {shown}: not UTF-8 text", code=EXIT_USAGE) from None
