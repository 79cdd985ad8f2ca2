"""Memory and startup time of npm-packaged MCP servers: ``npx -y pkg`` against the resolved command.

Each server is started the way users configure it (``npx -y <pkg>@<version>``) and through the
command :func:`resolve_npx_command` returns (``node <bin>``). For each start the benchmark
connects over stdio, lists the tools, then sums the resident memory of every process the start
created (npm, the shell, node; psutil, children recursive). Both variants use the same
temporary npm cache, warmed before measuring, so neither pays for a download.

Usage: .venv/bin/python bench/bench_npx_memory.py [--rounds N]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import anyio
import psutil
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from pi_mcp_adapter.servers._npx import ResolvedCommand, resolve_npx_command

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

SERVERS = (
    "@modelcontextprotocol/server-memory@2026.8.31",
    "@modelcontextprotocol/server-everything@2026.8.31",
)
# Generous: a first `npx` start on a slow disk takes a few seconds.
_START_TIMEOUT_S = 60.0
_MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Sample:
    startup_s: float
    rss_bytes: int
    processes: int


async def measure_start(params: StdioServerParameters, errlog: TextIO) -> Sample:
    """Start, connect, list tools, and measure the process tree while it serves."""
    me = psutil.Process()
    before = {child.pid for child in me.children(recursive=True)}
    started = time.perf_counter()
    with anyio.fail_after(_START_TIMEOUT_S):
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None) as c:
            listed = await c.list_tools()
            startup_s = time.perf_counter() - started
            if not listed.tools:
                raise RuntimeError(f"{params.command} listed no tools")
            tree = [p for p in me.children(recursive=True) if p.pid not in before]
            rss = 0
            for process in tree:
                with contextlib.suppress(psutil.NoSuchProcess):
                    rss += process.memory_info().rss
    return Sample(startup_s, rss, len(tree))


def median_sample(samples: list[Sample]) -> Sample:
    return Sample(
        statistics.median(s.startup_s for s in samples),
        int(statistics.median(s.rss_bytes for s in samples)),
        max(s.processes for s in samples),
    )


async def run(rounds: int) -> int:
    if shutil.which("npm") is None or shutil.which("node") is None:
        print("npm and node must be on PATH", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-npx-") as tmp:
        workdir = Path(tmp)
        npm_cache = workdir / "npm-cache"
        environ = dict(os.environ, NPM_CONFIG_CACHE=str(npm_cache))
        # Only what the server needs; stdio_client adds HOME, PATH and friends.
        server_env = {
            "NPM_CONFIG_CACHE": str(npm_cache),
            "MEMORY_FILE_PATH": str(workdir / "memory.jsonl"),
        }
        rows: list[tuple[str, str, Sample]] = []
        with open(os.devnull, "w") as errlog:
            for spec in SERVERS:
                npx_args = ["-y", spec]
                print(f"warming the npx cache for {spec} ...", file=sys.stderr)
                warm_started = time.perf_counter()
                resolved = await resolve_npx_command(
                    "npx",
                    npx_args,
                    cache_path=workdir / "agent" / "mcp-npx-cache.json",
                    environ=environ,
                    cwd=workdir,
                )
                print(
                    f"  resolved in {time.perf_counter() - warm_started:.1f} s: "
                    f"{resolved.command} {' '.join(resolved.args)}",
                    file=sys.stderr,
                )
                if not resolved.resolved:
                    print(f"could not resolve {spec}", file=sys.stderr)
                    return 1
                variants: list[tuple[str, ResolvedCommand]] = [
                    ("npx -y", ResolvedCommand("npx", tuple(npx_args), resolved=False)),
                    ("resolved", resolved),
                ]
                # One unmeasured start each, so both run with warm OS file caches.
                for _, command in variants:
                    await measure_start(params_for(command, server_env, workdir), errlog)
                for label, command in variants:
                    samples = [
                        await measure_start(params_for(command, server_env, workdir), errlog)
                        for _ in range(rounds)
                    ]
                    rows.append((spec, label, median_sample(samples)))
        print_table(rows, rounds)
    return 0


def params_for(
    command: ResolvedCommand, env: dict[str, str], workdir: Path
) -> StdioServerParameters:
    return StdioServerParameters(
        command=command.command, args=list(command.args), env=env, cwd=workdir
    )


def print_table(rows: list[tuple[str, str, Sample]], rounds: int) -> None:
    print(f"\nnpx vs resolved command (median of {rounds} starts; RSS summed over the tree)\n")
    header = f"{'server':<50} {'launch':<9} {'procs':>5} {'RSS MiB':>9} {'startup s':>10}"
    print(header)
    print("-" * len(header))
    by_server: dict[str, dict[str, Sample]] = {}
    for spec, label, sample in rows:
        by_server.setdefault(spec, {})[label] = sample
        print(
            f"{spec:<50} {label:<9} {sample.processes:>5} "
            f"{sample.rss_bytes / _MIB:>9.1f} {sample.startup_s:>10.3f}"
        )
    print()
    print(f"{'server':<50} {'RSS resolved/npx':>17} {'startup resolved/npx':>21}")
    for spec, samples in by_server.items():
        base, ours = samples["npx -y"], samples["resolved"]
        print(
            f"{spec:<50} {ours.rss_bytes / base.rss_bytes:>17.2f} "
            f"{ours.startup_s / base.startup_s:>21.2f}"
        )
        name = spec.rsplit("/", 1)[-1]
        record(
            "npx resolution",
            f"RSS of the process tree, {name}",
            ours.rss_bytes / _MIB,
            base.rss_bytes / _MIB,
            unit="MiB",
            baseline_name="npx -y",
        )
        record(
            "npx resolution",
            f"start, {name}",
            ours.startup_s,
            base.startup_s,
            unit="s",
            baseline_name="npx -y",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="measured starts per variant")
    args = parser.parse_args()
    sys.exit(anyio.run(run, args.rounds))


if __name__ == "__main__":
    main()
