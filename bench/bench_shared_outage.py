"""An event loop's stalls while the team's Redis stops answering.

One engine (the export host, a stdio fixture server, the ``toolsearch`` surface, call
statistics and learned search shared through a real ``redis-server``) searches and calls every
20 ms while a ticker measures how late the event loop wakes it (a 2 ms sleep). Three phases in
one run: Redis answering (the baseline), Redis stopped with SIGSTOP (a partition: connections
open, nothing answers) and Redis resumed. A stall is the ticker waking more than 50 ms late.
Needs the Debian package ``redis-server``.

Usage: .venv/bin/python bench/bench_shared_outage.py [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gateway"))
from _team_services import missing_packages, redis_server

from _summary import record

FIXTURE = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "mcp_fixture.py"
STALL_S = 0.05
TICK_S = 0.002
PHASES = ("answering", "stopped", "resumed")


async def measure(
    root: Path,
    url: str,
    seconds: float,
    pause: Callable[[], None],
    resume: Callable[[], None],
) -> dict[str, dict[str, float]]:
    from pi_mcp_adapter import McpAdapter
    from pi_mcp_adapter.hosts import ExportHost
    from pi_mcp_adapter.surface import register_surfaces

    agent, project = root / "agent", root / "project"
    agent.mkdir(parents=True)
    project.mkdir(parents=True)
    config = root / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {"fx": {"command": sys.executable, "args": [str(FIXTURE)]}},
                "settings": {"surface": "toolsearch", "captureStats": True, "sharedState": url},
            }
        )
    )
    host = ExportHost()
    lags: dict[str, list[float]] = {phase: [] for phase in PHASES}
    latencies: dict[str, list[float]] = {phase: [] for phase in PHASES}
    phase = ["warm-up"]
    done = anyio.Event()
    async with McpAdapter(
        config_path=config, agent_dir=agent, project_dir=project, home=root, host=host
    ) as adapter:
        register_surfaces(adapter, host)
        search = host.tools["ToolSearch"]

        async def ticker() -> None:
            while not done.is_set():
                mark = time.perf_counter()
                await anyio.sleep(TICK_S)
                if phase[0] in lags:
                    lags[phase[0]].append(time.perf_counter() - mark - TICK_S)

        async def client() -> None:
            while not done.is_set():
                mark = time.perf_counter()
                await search.execute({"query": "echo the text back"})
                if phase[0] in latencies:
                    latencies[phase[0]].append(time.perf_counter() - mark)
                await anyio.sleep(0.02)

        async with anyio.create_task_group() as group:
            group.start_soon(ticker)
            group.start_soon(client)
            await anyio.sleep(2.0)
            for name in PHASES:
                if name == "stopped":
                    pause()
                elif name == "resumed":
                    resume()
                phase[0] = name
                await anyio.sleep(seconds)
            done.set()
    return {
        name: {
            "longest": max(lags[name]) * 1000,
            "stalls": float(sum(lag > STALL_S for lag in lags[name])),
            "p50": statistics.median(latencies[name]) * 1000,
            "p99": statistics.quantiles(latencies[name], n=100)[98] * 1000,
            "slowest": max(latencies[name]) * 1000,
        }
        for name in PHASES
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=12.0, help="length of each phase")
    options = parser.parse_args()
    missing = missing_packages()
    if missing:
        print(f"needs {', '.join(missing)} (Debian packages): not measured")
        return
    with tempfile.TemporaryDirectory(prefix="pi-mcp-bench-outage-") as scratch:
        root = Path(scratch)
        with redis_server(root / "redis") as redis:
            figures = anyio.run(
                measure, root / "engine", redis.url, options.seconds, redis.pause, redis.resume
            )
    print(
        f"\nEach phase {options.seconds:g} s; a search every 20 ms; "
        "a stall: the loop woke > 50 ms late.\n"
    )
    print("| Redis | longest event-loop stall | stalls | search p50 | search p99 | slowest |")
    print("|---|---|---|---|---|---|")
    for name in PHASES:
        f = figures[name]
        print(
            f"| {name} | {f['longest']:.1f} ms | {f['stalls']:.0f} | {f['p50']:.1f} ms "
            f"| {f['p99']:.1f} ms | {f['slowest']:.1f} ms |"
        )
    base, stopped = figures["answering"], figures["stopped"]
    for key, label in (("longest", "longest event-loop stall"), ("slowest", "slowest search")):
        record(
            "shared state outage",
            f"{label}, Redis stopped",
            stopped[key],
            base[key],
            unit="ms",
            baseline_name="Redis answering",
        )


if __name__ == "__main__":
    main()
