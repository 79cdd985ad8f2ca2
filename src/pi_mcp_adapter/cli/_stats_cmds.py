"""``pi-mcp stats``: the call statistics ``settings.captureStats`` collects, most used first."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._app import JsonOption, app, fail, get_context, print_json

if TYPE_CHECKING:
    from pi_mcp_adapter.engine._stats import ToolStats


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _row_json(entry: ToolStats) -> dict[str, Any]:
    return {
        "server": entry.server,
        "tool": entry.tool,
        "calls": entry.calls,
        "errors": entry.errors,
        "p50LatencyMs": entry.p50_latency_ms,
        "p95LatencyMs": entry.p95_latency_ms,
        "meanLatencyMs": round(entry.mean_latency_ms, 3),
        "bytesOut": entry.bytes_out,
        "connects": entry.connects,
        "meanConnectMs": round(entry.mean_connect_ms, 3),
        "lastCalledAtMs": entry.last_called_at_ms,
    }


@app.command()
def stats(
    ctx: typer.Context,
    clear_learned: Annotated[
        bool,
        typer.Option(
            "--clear-learned",
            help=(
                "Forget every word search learned from your calls (the agent dir's "
                "mcp-search-learned.json and, with sharedState, the team's copy)."
            ),
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Calls, errors, p50/p95 latency and bytes returned per tool, most used first."""
    # Imported here so that `pi-mcp --help` does not pay for the config and engine modules.
    from rich.console import Console
    from rich.table import Table

    if clear_learned:
        from pi_mcp_adapter import _shared_state as shared_state
        from pi_mcp_adapter.engine._learned import clear_learned as forget

        cli = get_context(ctx)
        shared_state.activate(cli.load_config().settings.shared_state)
        cleared = forget(cli.agent_dir)
        if as_json:
            print_json({"clearedLearned": cleared})
        else:
            said = "Learned search words cleared." if cleared else "No learned search words."
            cli.console.print(said, highlight=False)
        return

    from pi_mcp_adapter.engine._stats import (
        DEFAULT_STATS_FILE,
        CallStats,
        read_shared_stats,
        read_stats,
    )

    cli = get_context(ctx)
    config = cli.load_config()
    setting = config.settings.capture_stats
    if setting is False:
        path = cli.agent_dir / DEFAULT_STATS_FILE
    else:
        path = CallStats.from_setting(setting, cli.agent_dir).path
    from pi_mcp_adapter import _shared_state as shared_state

    # With shared state, every replica's calls; the file when Redis does not answer.
    shared = shared_state.activate(config.settings.shared_state)
    entries = read_shared_stats() if shared is not None else None
    source = shared.status().url if shared is not None and entries is not None else str(path)
    if entries is None:
        try:
            entries = read_stats(path)
        except (OSError, ValueError) as exc:
            raise fail(f"cannot read call statistics from {path}: {exc}") from None
    # Most used first; among equals the one that fails more, then by name.
    entries.sort(key=lambda e: (-e.calls, -e.errors, e.server, e.tool))
    if as_json:
        print_json(
            {
                "path": source,
                "captureStats": setting is not False,
                "tools": [_row_json(e) for e in entries],
            }
        )
        return
    if not entries:
        hint = (
            "" if setting is not False else ' Turn them on with "settings": {"captureStats": true}.'
        )
        sys.stdout.write(f"No calls recorded in {source}.{hint}\n")
        return
    table = Table(
        "tool",
        "calls",
        "errors",
        "p50 ms",
        "p95 ms",
        "bytes",
        "connect ms",
        box=None,
        pad_edge=False,
    )
    for e in entries:
        connect = f"{e.mean_connect_ms:.0f} ({e.connects}x)" if e.connects else "-"
        table.add_row(
            f"{e.server}/{e.tool}",
            str(e.calls),
            str(e.errors),
            _ms(e.p50_latency_ms),
            _ms(e.p95_latency_ms),
            str(e.bytes_out),
            connect,
        )
    Console(soft_wrap=False).print(table)
    sys.stdout.write(f"from {source}; latency excludes the time to start a server (connect ms)\n")
