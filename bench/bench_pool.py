"""What the server pool saves: `pi-mcp call` of an echo tool with and without a running pool,
against the floor of any CLI built on typer and pydantic.

Each round runs, one after the other (so machine load hits all alike): the floor
``python -c "import typer, pydantic"``, ``pi-mcp call fx_echo`` with no pool (the command starts
the fixture server itself, as every command did before the pool), and the same call while
``pi-mcp serve --background`` holds the server. Then N concurrent sessions (Python adapters)
call through the pool, and the server processes are counted. Reports median wall times and
ratios to the floor; target: a pooled call at most 2x the floor, one process per server.

Usage: .venv/bin/python bench/bench_pool.py [--rounds N] [--sessions N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
TARGET_VS_FLOOR = 2.0


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        argv, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    return time.perf_counter() - started


def fixture_processes(under: int) -> int:
    try:
        children = psutil.Process(under).children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    count = 0
    for child in children:
        try:
            cmdline = child.cmdline()
        except psutil.NoSuchProcess:
            continue
        # Each stdio server runs under a small supervisor that shares its command line.
        if str(FIXTURE) in cmdline and not any(p.endswith("_reaper.py") for p in cmdline):
            count += 1
    return count


async def sessions_through_pool(agent_dir: Path, project: Path, sessions: int) -> set[int]:
    from pi_mcp_adapter import McpAdapter

    pids: set[int] = set()

    async def one() -> None:
        adapter = McpAdapter(agent_dir=agent_dir, project_dir=project, connect_missing=False)
        async with adapter:
            outcome = await adapter.call("fx_pid")
            assert outcome.result is not None, outcome.message
            pids.add(int(outcome.result.content[0].text))  # type: ignore[union-attr]

    async with anyio.create_task_group() as tg:
        for _ in range(sessions):
            tg.start_soon(one)
    return pids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sessions", type=int, default=8)
    options = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        agent_dir, project = home / "agent", home / "project"
        agent_dir.mkdir()
        project.mkdir()
        config = {"mcpServers": {"fx": {"command": python, "args": [str(FIXTURE)]}}}
        (agent_dir / "mcp.json").write_text(json.dumps(config))
        env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(agent_dir)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: with bytecode caches
        pi_mcp = [python, "-m", "pi_mcp_adapter", "--project", str(project)]
        call = [*pi_mcp, "call", "fx_echo", '{"message": "hi"}']
        floor_argv = [python, "-c", "import typer, pydantic"]
        timed(call, env, project)  # lists the server once: the cache is warm from here on
        subprocess.run([*pi_mcp, "serve", "--background"], env=env, cwd=project, check=True)
        pool = json.loads(
            subprocess.run(
                [*pi_mcp, "status", "--json"], env=env, cwd=project, capture_output=True
            ).stdout
        )["pool"]
        try:
            samples: dict[str, list[float]] = {"floor": [], "no pool": [], "pool": []}
            no_pool_env = {**env, "PI_MCP_POOL": "0"}
            for argv, run_env in ((floor_argv, env), (call, no_pool_env), (call, env)):
                timed(argv, run_env, project)  # warm the file and bytecode caches
            for _ in range(options.rounds):
                samples["floor"].append(timed(floor_argv, env, project))
                samples["no pool"].append(timed(call, no_pool_env, project))
                samples["pool"].append(timed(call, env, project))
            os.chdir(project)  # pooled servers without `cwd` are shared within one directory
            os.environ["PI_CODING_AGENT_DIR"] = str(agent_dir)
            started = time.perf_counter()
            pids = anyio.run(sessions_through_pool, agent_dir, project, options.sessions)
            sessions_s = time.perf_counter() - started
            processes = fixture_processes(int(pool["pid"]))
        finally:
            subprocess.run([*pi_mcp, "serve", "--stop"], env=env, cwd=project, check=True)

    floor = statistics.median(samples["floor"])
    print(f"Server pool, median of {options.rounds} rounds (wall time, ms)")
    print(f"{'case':<40} {'median':>8} {'vs floor':>9}")
    labels = {
        "floor": "floor: import typer, pydantic",
        "no pool": "pi-mcp call fx_echo, no pool",
        "pool": f"pi-mcp call fx_echo, pool running (target <= {TARGET_VS_FLOOR}x)",
    }
    for key, values in samples.items():
        median = statistics.median(values)
        print(f"{labels[key]:<40} {median * 1000:8.1f} {median / floor:8.2f}x")
    pooled = statistics.median(samples["pool"])
    verdict = "met" if pooled / floor <= TARGET_VS_FLOOR else "NOT met"
    print(f"target: pooled call <= {TARGET_VS_FLOOR}x the floor: {verdict}")
    print(
        f"{options.sessions} concurrent sessions through the pool: {len(pids)} server "
        f"process(es) answered, {processes} fixture process(es) running, {sessions_s:.2f} s"
    )
    for key in ("no pool", "pool"):
        record(
            "Server pool",
            labels[key],
            statistics.median(samples[key]) * 1000,
            floor * 1000,
            unit="ms",
            baseline_name="python -c 'import typer, pydantic'",
        )
    record(
        "Server pool",
        f"server processes for {options.sessions} sessions",
        float(processes),
        float(options.sessions),
        unit="processes",
        baseline_name="one per session (no pool)",
    )


if __name__ == "__main__":
    main()
