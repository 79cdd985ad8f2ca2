"""The long mode of the chaos reliability test: the same scenario, for as long as you like.

Eight callers call six real and fixture servers through ``McpAdapter`` while a chaos task kills
server processes, stops one, makes one answer 503 and one close its stdout (see
``tests/reliability/_chaos.py``). Prints the summary table and checks the same pass criteria as
the CI test; the exit status is 1 when one fails.

Usage: .venv/bin/python bench/bench_reliability.py [--minutes 10] [--callers 8]
       [--gateway-callers 8] [--seed N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from reliability._chaos import failures, run_chaos  # noqa: E402
from reliability._gateway import has_serve_command  # noqa: E402
from servers._support import HttpFixtures  # noqa: E402


async def main(options: argparse.Namespace) -> int:
    fixtures = HttpFixtures()
    with tempfile.TemporaryDirectory() as tmp:
        agent_dir = Path(tmp)
        fault_file = agent_dir / "flaky-fault"
        try:
            url = fixtures.mcp(
                "streamable-http", "--name", "flaky", "--fault-file", str(fault_file)
            )
            report = await run_chaos(
                agent_dir,
                url,
                fault_file,
                duration_s=options.minutes * 60,
                callers=options.callers,
                gateway_callers=options.gateway_callers if has_serve_command() else 0,
                seed=options.seed,
            )
        finally:
            fixtures.stop_all()
    print(report.table())
    problems = failures(report)
    for problem in problems:
        print(f"FAIL: {problem}")
    print("PASS" if not problems else f"{len(problems)} failures")
    return 1 if problems else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument(
        "--gateway-callers", type=int, default=8, help="through pi-mcp serve, when it exists"
    )
    parser.add_argument("--seed", type=int, default=None)
    sys.exit(anyio.run(main, parser.parse_args()))
