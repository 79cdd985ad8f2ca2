"""How long `pi-mcp` takes to answer, against the floor of any CLI built on typer and pydantic.

Each round runs, one after the other (so machine load hits all alike): the bare interpreter,
the floor ``python -c "import typer, pydantic"``, a one-command typer app that validates one
pydantic model (what any such CLI pays before doing anything: typer 0.29 coerces every
parameter through pydantic), and ``pi-mcp`` with ``--help``, ``--version`` and the cache-only
commands ``search`` (hybrid ranking when the semantic extra is installed), ``describe``,
``status`` and ``tools`` against a warm metadata cache and tool-vector file (a fixture server
with 200 tools, listed and searched once before timing starts; ``search`` twice: with the
catalog's words, and as a plain request whose words the catalog does not use, which needs the
model's tokenizer). Reports the median wall time
over the rounds and its ratio to the floor, and the median CPU time (user + system) with its
ratio: on a shared machine CPU time is what a command costs, wall time adds waiting for a
core. Targets (wall): search <= 2.5x; status, tools and describe <= 2x; --help <= 1.5x.

The cache-only commands run three ways: with no warm process (``PI_MCP_WARM=0``, which is
also what the first short command in an agent dir costs), as they run by default (the first
command started a warm process, which has the CLI, the engine and the SDK imported and runs each
later command in a fork), and with a background pool running (``pi-mcp serve --background``,
whose warm process does the same). Their CPU column counts only the process you start (the fork
is not its child).

Usage: .venv/bin/python bench/bench_cli_start.py [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
FLOOR = "floor: import typer, pydantic"
TARGETS = {"--help": 1.5, "search": 2.5, "describe": 2.0, "status": 2.0, "tools": 2.0}
TYPER_COMMAND = """
import sys
from typing import Annotated
import typer
from pydantic import BaseModel
class Entry(BaseModel):
    command: str
    args: tuple[str, ...] = ()
app = typer.Typer(add_completion=False, rich_markup_mode=None)
@app.callback()
def options(project: Annotated[str | None, typer.Option("--project")] = None) -> None:
    pass
@app.command()
def show(name: str, limit: Annotated[int, typer.Option(min=1)] = 12) -> None:
    print(Entry(command=name))
app(sys.argv[1:])
"""


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one run (runs are sequential, so the growth
    of this process's reaped-children usage is this run's)."""
    cpu_before = children_cpu_s()
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr.decode(errors='replace')}")
    return wall, children_cpu_s() - cpu_before


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
        env.pop("PI_MCP_WARM", None)
        env.pop("CI", None)  # as on a person's machine: a CI job starts no warm process
        # As an installed package would be: with bytecode caches (pip writes them at install).
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        pi_mcp = [python, "-m", "pi_mcp_adapter", "--project", str(home / "project")]
        cold_env = {**env, "PI_MCP_WARM": "0"}
        # Warm: the server listed into the metadata cache, the tools' vectors written.
        for warm_up in (["tools"], ["search", "x"]):
            subprocess.run([*pi_mcp, *warm_up], env=cold_env, check=True, stdout=subprocess.DEVNULL)
        cases: dict[str, list[str]] = {
            "bare interpreter": [python, "-c", "pass"],
            FLOOR: [python, "-c", "import typer, pydantic"],
            "typer command validating one model": [python, "-c", TYPER_COMMAND, "show", "x"],
            "--help": [*pi_mcp, "--help"],
            "--version": [*pi_mcp, "--version"],
        }
        commands = {
            "search": [*pi_mcp, "search", "echo tool", "--limit", "3"],
            # As people ask: words the catalog's tools never use need the model's tokenizer.
            "search, plain request": [
                *pi_mcp,
                "search",
                "please repeat back exactly what I typed",
                "--limit",
                "3",
            ],
            "describe": [*pi_mcp, "describe", "fx_echo"],
            "status": [*pi_mcp, "status"],
            "tools": [*pi_mcp, "tools"],
        }
        cases |= {f"{name}, no warm process": argv for name, argv in commands.items()}
        walls, cpus = run_rounds(cases, cold_env, options.rounds)
        # As commands run by default: the first one started the warm process.
        subprocess.run([*pi_mcp, "status"], env=env, check=True, stdout=subprocess.DEVNULL)
        wait_for(home / "agent" / "pool" / "cli.sock")
        stop = [*pi_mcp, "serve", "--stop"]
        warm = rounds_beside(", default (warm process)", commands, cases, env, stop, options)
        # The same commands with a background pool running, whose warm process does the same.
        subprocess.run(
            [*pi_mcp, "serve", "--background"], env=cold_env, check=True, capture_output=True
        )
        pooled = rounds_beside(", pool running", commands, cases, cold_env, stop, options)
    report(f"CLI start, median of {options.rounds} rounds", cases, walls, cpus)
    print()
    report(
        f"CLI start as commands run by default (a warm process started by the first), median "
        f"of {options.rounds} rounds",
        *warm,
    )
    print()
    report(
        f"CLI start with a background pool (pi-mcp serve --background), median of "
        f"{options.rounds} rounds",
        *pooled,
    )


def rounds_beside(
    suffix: str,
    commands: dict[str, list[str]],
    cases: dict[str, list[str]],
    env: dict[str, str],
    stop: list[str],
    options: argparse.Namespace,
) -> tuple[dict[str, list[str]], dict[str, list[float]], dict[str, list[float]]]:
    """The commands' rounds (and the floor's, in the same rounds) while a warm process runs;
    ``stop`` ends it afterwards."""
    try:
        named = {FLOOR: cases[FLOOR]} | {name + suffix: argv for name, argv in commands.items()}
        walls, cpus = run_rounds(named, env, options.rounds)
    finally:
        subprocess.run(stop, env={**env, "PI_MCP_WARM": "0"}, capture_output=True)
    return named, walls, cpus


def wait_for(path: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} did not appear within {timeout_s:g} s")
        time.sleep(0.05)


def run_rounds(
    cases: dict[str, list[str]], env: dict[str, str], rounds: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds of every case, ``rounds`` times, the cases taking turns."""
    walls: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for argv in cases.values():  # warm the OS file cache and the bytecode caches
        timed(argv, env)
    for _ in range(rounds):
        for name, argv in cases.items():
            wall, cpu = timed(argv, env)
            walls[name].append(wall)
            cpus[name].append(cpu)
    return walls, cpus


def report(
    title: str,
    cases: dict[str, list[str]],
    walls: dict[str, list[float]],
    cpus: dict[str, list[float]],
) -> None:
    floor = statistics.median(walls[FLOOR])
    floor_cpu = statistics.median(cpus[FLOOR])
    print(f"{title} (ms; ratios to the floor)")
    print(
        f"{'command':<46} {'wall':>7} {'p90':>7} {'ratio':>6} {'cpu':>7} {'ratio':>6}  "
        "target (wall)"
    )
    for name in cases:
        median = statistics.median(walls[name])
        p90 = sorted(walls[name])[int(0.9 * (len(walls[name]) - 1))]
        cpu = statistics.median(cpus[name])
        target = TARGETS.get(name.partition(",")[0])
        verdict = ""
        if target is not None:
            verdict = f"<= {target}x: {'met' if median / floor <= target else 'NOT met'}"
        print(
            f"{name:<46} {median * 1000:7.1f} {p90 * 1000:7.1f} {median / floor:5.2f}x "
            f"{cpu * 1000:7.1f} {cpu / floor_cpu:5.2f}x  {verdict}"
        )
        if name != FLOOR:
            shown = name if target is None else f"{name} (target <= {target}x)"
            record(
                "CLI start",
                shown,
                median * 1000,
                floor * 1000,
                unit="ms",
                baseline_name="python -c 'import typer, pydantic'",
            )


if __name__ == "__main__":
    main()
