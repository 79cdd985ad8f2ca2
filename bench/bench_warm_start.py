"""Warm start from the metadata cache against a cold start that lists every server.

With N lazy servers (mcp-server-time under N names) whose tools are in the metadata cache, an
adapter starts and answers a search without starting anything. The baseline is what a client
without the cache pays for the same answer: start every server and list its tools. Reports the
time to the first search result and the number of processes each start spawned (ours must be 0).

Usage: .venv/bin/python bench/bench_warm_start.py [--servers N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record


def write_config(root: Path, count: int) -> tuple[Path, Path]:
    agent = root / "agent"
    project = root / "project"
    agent.mkdir(parents=True)
    project.mkdir()
    servers = {
        f"time{i:02d}": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
        for i in range(count)
    }
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return agent, project


def descendants() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


async def start_and_search(agent: Path, project: Path, *, cold: bool) -> tuple[float, int]:
    """Seconds from constructing the adapter to a search answer, and processes spawned."""
    config = load_config(agent_dir=agent, project_dir=project, home=agent.parent, environ={})
    before = descendants()
    spawned: set[int] = set()
    started = time.perf_counter()
    adapter = McpAdapter(
        config=config,
        agent_dir=agent,
        project_dir=project,
        resolve_npx=False,
        connect_missing=False,
    )
    async with adapter:
        if cold:
            # The baseline: every server started and listed, as a client without a cache does.
            async with anyio.create_task_group() as tg:
                for name in adapter.enabled_servers():
                    tg.start_soon(adapter.connect, name)
        spawned |= descendants() - before
        results = adapter.search("current time in a timezone", limit=5)
        elapsed = time.perf_counter() - started
        assert results.page.hits, "the catalog should answer from the cache"
    return elapsed, len(spawned)


async def main_async(count: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="pi-mcp-warm-") as tmp:
        agent, project = write_config(Path(tmp), count)
        warm: list[float] = []
        cold: list[float] = []
        warm_spawned = cold_spawned = 0
        cache = agent / "mcp-cache.json"
        for _ in range(rounds):
            cache.unlink(missing_ok=True)
            seconds, cold_spawned = await start_and_search(agent, project, cold=True)
            cold.append(seconds)
            seconds, warm_spawned = await start_and_search(agent, project, cold=False)
            warm.append(seconds)
    warm_s, cold_s = statistics.median(warm), statistics.median(cold)
    print(f"{count} lazy servers, median of {rounds} rounds")
    print(f"{'start':<34}{'to first search':>16}{'processes spawned':>20}")
    print(f"{'warm, from the metadata cache':<34}{warm_s * 1000:>13.1f} ms{warm_spawned:>20}")
    print(f"{'cold, every server listed':<34}{cold_s * 1000:>13.1f} ms{cold_spawned:>20}")
    print(f"ratio: {warm_s / cold_s:.3f}x ({cold_s / warm_s:.0f}x faster)")
    record(
        "warm start",
        f"{count} lazy servers to a searchable catalog",
        warm_s * 1000,
        cold_s * 1000,
        unit="ms",
        baseline_name="start and list every server",
    )
    record(
        "warm start",
        "processes spawned",
        float(warm_spawned),
        float(cold_spawned),
        unit="processes",
        baseline_name="start and list every server",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    anyio.run(main_async, args.servers, args.rounds)


if __name__ == "__main__":
    main()
