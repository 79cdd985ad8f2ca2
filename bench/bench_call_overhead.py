"""Per-call overhead of the server manager against a bare SDK client on the same server.

The same ``echo`` tool is called sequentially through ``ServerManager.call_tool`` and through a
bare ``mcp.Client`` (no response cache) connected to its own copy of the same server, both in
this process and run, both in the protocol era ``--protocol`` chooses (``legacy``, the default,
or ``auto``: 2026-07-28 where the server offers it, where calls may become tasks). Reports
p50/p99 latency per call and the ratio.

Usage: .venv/bin/python bench/bench_call_overhead.py [--calls N] [--server fixture|everything]
       [--protocol legacy|auto]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from pi_mcp_adapter.config._models import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerManager

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
WARMUP_CALLS = 50


def server_command(kind: str) -> tuple[str, tuple[str, ...]]:
    if kind == "everything":
        if not EVERYTHING.exists() or shutil.which("node") is None:
            sys.exit("server-everything is not installed: run `make npm` or use --server fixture")
        return "node", (str(EVERYTHING),)
    return sys.executable, (str(FIXTURE),)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    index = min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))
    return ordered[index]


async def through_manager(
    command: str, args: tuple[str, ...], calls: int, protocol: str
) -> list[float]:
    entry = ServerEntry(command=command, args=args, protocol_version=protocol)
    with tempfile.TemporaryDirectory() as logs:
        settings = Settings(health_check_interval_ms=0)
        async with ServerManager(
            {"bench": entry}, settings, log_dir=Path(logs), resolve_npx=False
        ) as manager:
            await manager.connect("bench")
            for _ in range(WARMUP_CALLS):
                await manager.call_tool("bench", "echo", {"message": "warm"})
            samples = []
            for i in range(calls):
                started = time.perf_counter()
                await manager.call_tool("bench", "echo", {"message": f"m{i}"})
                samples.append(time.perf_counter() - started)
            return samples


async def through_bare_client(
    command: str, args: tuple[str, ...], calls: int, protocol: str
) -> list[float]:
    params = StdioServerParameters(command=command, args=list(args))
    with open("/dev/null", "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=protocol, cache=None) as c:
            for _ in range(WARMUP_CALLS):
                await c.call_tool("echo", {"message": "warm"})
            samples = []
            for i in range(calls):
                started = time.perf_counter()
                await c.call_tool("echo", {"message": f"m{i}"})
                samples.append(time.perf_counter() - started)
            return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--server", choices=["fixture", "everything"], default="fixture")
    parser.add_argument("--protocol", choices=["legacy", "auto"], default="legacy")
    options = parser.parse_args()
    command, args = server_command(options.server)
    bare = await through_bare_client(command, args, options.calls, options.protocol)
    ours = await through_manager(command, args, options.calls, options.protocol)
    rows = [("bare SDK Client", bare), ("ServerManager", ours)]
    era = "" if options.protocol == "legacy" else f", protocolVersion {options.protocol}"
    print(f"echo over stdio ({options.server} server{era}), {options.calls} sequential calls")
    print(f"{'path':<18}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for label, samples in rows:
        print(
            f"{label:<18}{percentile(samples, 0.5) * 1e3:>10.3f}"
            f"{percentile(samples, 0.99) * 1e3:>10.3f}{statistics.fmean(samples) * 1e3:>10.3f}"
        )
    p50_ratio = percentile(ours, 0.5) / percentile(bare, 0.5)
    p99_ratio = percentile(ours, 0.99) / percentile(bare, 0.99)
    print(f"{'ratio (ours/bare)':<18}{p50_ratio:>10.2f}{p99_ratio:>10.2f}")
    for label, share in (("p50", 0.5), ("p99", 0.99)):
        record(
            "call overhead",
            f"echo {label}, {options.server} server over stdio{era}",
            percentile(ours, share) * 1e3,
            percentile(bare, share) * 1e3,
            unit="ms",
            baseline_name="bare SDK client",
        )


if __name__ == "__main__":
    anyio.run(main)
