"""``pi-mcp doctor [SERVER]``: check servers step by step, one timed line per step.

The checks are ``servers/_probe.py``'s. This module picks the servers, says why a server is
not probed (a broken entry, disabled, or from an untrusted project file, which is never
started here), and prints each step as it ends so a slow step is seen while it runs.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._app import EXIT_FAILED, JsonOption, app, get_context, print_json, require_known_server

if TYPE_CHECKING:
    from pi_mcp_adapter.servers import ProbeReport, ProbeStep

_MARK = {"ok": "ok", "fail": "FAIL", "warn": "warn", "skip": "skip"}


def _step_json(step: ProbeStep) -> dict[str, Any]:
    return {
        "name": step.name,
        "status": step.status,
        "detail": step.detail,
        "elapsedMs": round(step.elapsed_ms, 1),
        "fix": step.fix,
    }


def _step_line(step: ProbeStep) -> str:
    line = f"  {_MARK[step.status]:<5} {step.name:<11} {step.elapsed_ms:>7.0f} ms  {step.detail}"
    if step.fix:
        line += f". Fix: {step.fix}"
    return line + "\n"


@app.command(short_help="Check servers step by step and say what to fix.")
def doctor(
    ctx: typer.Context,
    server: Annotated[str | None, typer.Argument(help="Only this server.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Check each server (or SERVER) step by step, with the time of each step.

    HTTP: DNS, TCP, TLS, HTTP status, transport, auth discovery, initialize, tools/list.
    stdio: command found, starts, initialize, tools/list, stderr tail. A failing step says
    what to do. Disabled servers and servers from untrusted project files are reported, not
    started. Exits with 1 when a check fails.
    """
    import anyio

    from pi_mcp_adapter.servers import ProbeStep, probe_server

    cli = get_context(ctx)
    loaded = cli.load_config()
    names = [*loaded.servers, *(n for n in loaded.invalid_servers if n not in loaded.servers)]
    require_known_server(names, server)
    chosen = [server] if server is not None else names
    environ = cli.environ
    out = sys.stdout

    def not_probed(name: str, status: str, detail: str, fix: str) -> dict[str, Any]:
        step = ProbeStep(status, "fail" if server is not None else "skip", detail, 0.0, fix)
        if not as_json:
            out.write(f"{name}\n{_step_line(step)}")
        return {"name": name, "status": status, "steps": [_step_json(step)], "stderrTail": []}

    async def probe_all() -> tuple[list[dict[str, Any]], bool]:
        results: list[dict[str, Any]] = []
        failed = False
        for name in chosen:
            invalid = loaded.invalid_servers.get(name)
            entry = loaded.servers.get(name)
            if invalid is not None or entry is None:
                results.append(
                    not_probed(name, "invalid", str(invalid), "fix the entry: `pi-mcp edit`")
                )
                failed = True
                continue
            if entry.untrusted is not None:
                results.append(
                    not_probed(
                        name,
                        "untrusted",
                        "from a project file that is not trusted; not started",
                        f"review it, then run `{entry.untrusted.command}`",
                    )
                )
                failed = failed or server is not None
                continue
            if not entry.enabled or entry.disabled:
                results.append(
                    not_probed(name, "disabled", "disabled; not started", f"pi-mcp enable {name}")
                )
                failed = failed or server is not None
                continue
            if not as_json:
                out.write(f"{name} ({entry.transport_kind})\n")
                out.flush()

            def show(step: ProbeStep) -> None:
                if not as_json:
                    out.write(_step_line(step))
                    out.flush()

            report: ProbeReport = await probe_server(
                name,
                entry,
                agent_dir=cli.agent_dir,
                settings=loaded.settings,
                environ=environ,
                on_step=show,
            )
            started = any(step.name == "start" for step in report.steps)
            if not as_json and started:
                if report.stderr_tail:
                    out.write("  stderr (last lines):\n")
                    out.writelines(f"    {line}\n" for line in report.stderr_tail)
                else:
                    out.write("  stderr: (nothing written)\n")
            failed = failed or not report.ok
            results.append(
                {
                    "name": name,
                    "status": "ok" if report.ok else "failed",
                    "transport": report.transport,
                    "steps": [_step_json(step) for step in report.steps],
                    "stderrTail": report.stderr_tail,
                }
            )
        return results, failed

    results, failed = anyio.run(probe_all)
    if as_json:
        print_json({"ok": not failed, "servers": results})
    elif not chosen:
        out.write("No servers configured.\n")
    if failed:
        raise typer.Exit(EXIT_FAILED)
