"""How long `pi-mcp` takes to answer, against the floor of any CLI built on typer and pydantic.

Each round runs, one after the other (so machine load hits all alike): the bare interpreter,
the floor ``python -c "import typer, pydantic"``, and ``pi-mcp`` with ``--help``, ``--version``
and the cache-only commands ``search``, ``describe``, ``status`` and ``tools`` against a warm
metadata cache (a fixture server with 200 tools, listed once before timing starts). Reports the
median wall time over the rounds and the ratio to the floor; targets: search <= 2.5x,
--help <= 1.5x.

Usage: .venv/bin/python bench/bench_cli_start.py [--rounds N]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
TARGETS = {"--help": 1.5, "search": 2.5}


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    options = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "agent").mkdir()
        (home / "project").mkdir()
        config = {
            "mcpServers": {"fx": {"command": python, "args": [str(FIXTURE), "--tools", "200"]}}
        }
        (home / "agent" / "mcp.json").write_text(json.dumps(config))
        env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
        # As an installed package would be: with bytecode caches (pip writes them at install).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        pi_mcp = [python, "-m", "pi_mcp_adapter", "--project", str(home / "project")]
        subprocess.run([*pi_mcp, "tools"], env=env, check=True, stdout=subprocess.DEVNULL)
        cases: dict[str, list[str]] = {
            "bare interpreter": [python, "-c", "pass"],
            "floor: import typer, pydantic": [python, "-c", "import typer, pydantic"],
            "--help": [*pi_mcp, "--help"],
            "--version": [*pi_mcp, "--version"],
            "search": [*pi_mcp, "search", "echo tool", "--limit", "3"],
            "describe": [*pi_mcp, "describe", "fx_echo"],
            "status": [*pi_mcp, "status"],
            "tools": [*pi_mcp, "tools"],
        }
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for argv in cases.values():  # warm the OS file cache and the bytecode caches
            timed(argv, env)
        for _ in range(options.rounds):
            for name, argv in cases.items():
                samples[name].append(timed(argv, env))

    floor = statistics.median(samples["floor: import typer, pydantic"])
    print(f"CLI start, median of {options.rounds} rounds (wall time, ms)")
    print(f"{'command':<32} {'median':>8} {'p90':>8} {'vs floor':>9}  target")
    for name, values in samples.items():
        median = statistics.median(values)
        p90 = sorted(values)[int(0.9 * (len(values) - 1))]
        target = TARGETS.get(name)
        verdict = ""
        if target is not None:
            verdict = f"<= {target}x: {'met' if median / floor <= target else 'NOT met'}"
        print(
            f"{name:<32} {median * 1000:8.1f} {p90 * 1000:8.1f} {median / floor:8.2f}x  {verdict}"
        )
        if not name.startswith("floor"):
            record(
                "CLI start",
                name,
                median * 1000,
                floor * 1000,
                unit="ms",
                baseline_name="python -c 'import typer, pydantic'",
            )


if __name__ == "__main__":
    main()
