"""Parallel start of several real servers against the sum of starting each one alone.

Each server is first started alone (``ServerManager.connect`` on a manager holding only it:
spawn, handshake, listing of tools, resources and prompts), then all of them are started
together with ``ServerManager.start()`` as eager servers. Reports the sum of the single
starts, the wall time of the parallel start and the speed-up.

Usage: .venv/bin/python bench/bench_parallel_startup.py [--servers N]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import anyio

from pi_mcp_adapter.config._models import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerManager

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


def build_servers(count: int) -> dict[str, ServerEntry]:
    """Alternate Python servers (the fixture, mcp-server-time) and node's server-everything."""
    kinds: list[tuple[str, str, tuple[str, ...]]] = [
        ("fixture", sys.executable, (str(FIXTURE),)),
        ("time", sys.executable, ("-m", "mcp_server_time")),
    ]
    if EVERYTHING.exists() and shutil.which("node") is not None:
        kinds.append(("everything", "node", (str(EVERYTHING),)))
    servers = {}
    for i in range(count):
        label, command, args = kinds[i % len(kinds)]
        servers[f"{label}-{i}"] = ServerEntry(command=command, args=args, lifecycle="eager")
    return servers


def settings() -> Settings:
    return Settings(health_check_interval_ms=0)


async def start_alone(name: str, entry: ServerEntry, logs: Path) -> float:
    async with ServerManager({name: entry}, settings(), log_dir=logs, resolve_npx=False) as m:
        started = time.perf_counter()
        await m.connect(name)
        return time.perf_counter() - started


async def start_together(servers: dict[str, ServerEntry], logs: Path) -> float:
    async with ServerManager(servers, settings(), log_dir=logs, resolve_npx=False) as m:
        started = time.perf_counter()
        results = await m.start()
        elapsed = time.perf_counter() - started
        failed = {name: str(error) for name, error in results.items() if error is not None}
        if failed:
            raise SystemExit(f"servers failed to start: {failed}")
        return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=6)
    options = parser.parse_args()
    servers = build_servers(options.servers)
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp)
        singles = {name: await start_alone(name, entry, logs) for name, entry in servers.items()}
        together = await start_together(servers, logs)
    print(f"{len(servers)} real stdio servers")
    print(f"{'server':<16}{'alone s':>10}")
    for name, seconds in singles.items():
        print(f"{name:<16}{seconds:>10.3f}")
    total = sum(singles.values())
    print(f"{'sum of singles':<16}{total:>10.3f}")
    print(f"{'parallel start':<16}{together:>10.3f}")
    print(f"{'speed-up':<16}{total / together:>10.2f}x")
    record(
        "parallel startup",
        f"{len(servers)} real stdio servers",
        together,
        total,
        unit="s",
        baseline_name="one after another",
    )


if __name__ == "__main__":
    anyio.run(main)
