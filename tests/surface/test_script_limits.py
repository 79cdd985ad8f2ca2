"""Honest limits: what a script is told when a limit cuts it short, and where it is told.

A sleep sleeps as long as it asks, or ends the script naming the time budget; a syntax error
reads once as what it is, on the script's own line; the sandbox worker writes nothing on the
host's stderr, and a memory refusal by the system is named as such.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pi_mcp_adapter.surface._sandbox import ScriptLimits, run_sandboxed

pytestmark = [pytest.mark.slow]


async def test_a_sleep_within_the_time_budget_sleeps_its_whole_time() -> None:
    # The sandbox cut every sleep to ten seconds and returned as if it had slept.
    run = await run_sandboxed(
        "import time\ntime.sleep(10.5)\n'woke'", {}, limits=ScriptLimits(timeout_s=40)
    )
    assert run.ok, run.error
    assert run.value == "woke"
    assert run.duration_ms >= 10_500


async def test_a_sleep_past_the_time_budget_ends_the_script_at_once_naming_it() -> None:
    run = await run_sandboxed(
        "import asyncio\nawait asyncio.sleep(1)\nawait asyncio.sleep(30)\n'woke'",
        {},
        limits=ScriptLimits(timeout_s=20),
    )
    assert run.error_kind == "budget"
    assert run.budget == "time"
    assert run.error == (
        "the script went over its time budget of 20 s: its sleeps would add up to 31 s"
    )
    assert run.duration_ms < 15_000  # it did not wait for the budget to run out


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param("x = (", "SyntaxError: '(' was never closed (line 1: x = ()", id="unclosed"),
        pytest.param(
            "x = 1\ny = )\n", "SyntaxError: Expected an expression (line 2: y = ))", id="line-2"
        ),
        pytest.param(
            "for i in range(3):\nprint(i)",
            "SyntaxError: Expected an indented block after `for` statement (line 2: print(i))",
            id="indentation",
        ),
    ],
)
async def test_a_syntax_error_names_its_kind_once_and_the_scripts_own_line(
    code: str, expected: str
) -> None:
    run = await run_sandboxed(code, {})
    assert run.error_kind == "syntax"
    assert run.error == expected
    assert "pass" not in run.error  # not the line the host adds to keep the value measured


HOST = """
import resource, sys, anyio
from pi_mcp_adapter.surface._sandbox import ScriptLimits, run_sandboxed

def address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise SystemExit("no VmSize")

async def main() -> None:
    for code in sys.argv[1:]:
        if code == "LIMIT":
            # A machine short of memory, as the worker (which inherits the limit) sees it.
            await run_sandboxed("1", {})
            limit = address_space() + 512 * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, resource.RLIM_INFINITY))
            continue
        limits = ScriptLimits(timeout_s=20, max_memory_bytes=4 * 1024**3)
        run = await run_sandboxed(code, {}, limits=limits)
        print(run.budget, run.error, flush=True)

anyio.run(main)
"""


def test_the_worker_writes_nothing_on_the_hosts_stderr_and_a_memory_refusal_is_named() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(HOST),
            "chunks = []\nwhile len(chunks) < 20:\n    chunks.append('x' * 10**6)\nlen(chunks)",
            "LIMIT",
            "x = 'x' * 10**9\nlen(x)",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The worker printed "monty worker: allocation of 1000000000 bytes failed" here.
    assert done.stderr == ""
    assert done.stdout.splitlines() == [
        "None ",
        "memory the system refused the script 953.674 MiB of memory, within its memory "
        "budget of 4096 MiB",
    ]
