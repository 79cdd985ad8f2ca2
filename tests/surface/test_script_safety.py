"""Escapes and runaways: each fails cleanly within its limit and leaves the host as it was.

A script that tries to reach the host (files, ``os``, ``subprocess``, ``socket``, the
environment) is refused by the sandbox; one that runs away (a loop, an allocation, a
recursion, a print) is ended by a budget. After all of them this process has its descriptors
and (within a bound) its memory back, no sandbox worker is left running, and the next script
runs.
"""

from __future__ import annotations

import gc
import os
import time
from collections.abc import AsyncIterator

import anyio
import psutil
import pytest

from pi_mcp_adapter.surface import McpAdapter
from pi_mcp_adapter.surface._sandbox import ScriptLimits
from pi_mcp_adapter.surface._script import ScriptTool

from .conftest import Workspace

pytestmark = [pytest.mark.slow]

LIMITS = ScriptLimits(timeout_s=2.0, max_memory_bytes=64 * 1024 * 1024, max_output_bytes=64 * 1024)
DEADLINE_S = LIMITS.timeout_s + 3.0
"""A runaway must end within its limit plus the time to kill and replace a worker."""

RSS_GROWTH_BOUND_BYTES = 32 * 1024 * 1024
"""The sandbox's heap lives in the worker; this process only holds what the scripts returned
and the client's buffers."""

ESCAPES = [
    pytest.param('open("/etc/passwd").read()', "PermissionError", id="open-a-file"),
    pytest.param('import os\nos.listdir("/")', "PermissionError", id="list-a-directory"),
    pytest.param(
        'from pathlib import Path\nPath("/etc/hostname").read_text()',
        "PermissionError",
        id="read-through-pathlib",
    ),
    pytest.param(
        'import os\nos.system("touch /tmp/pwned")',
        "AttributeError",
        id="os-system",
    ),
    pytest.param(
        'import subprocess\nsubprocess.run(["id"])', "No module named 'subprocess'", id="subprocess"
    ),
    pytest.param(
        'import socket\nsocket.create_connection(("127.0.0.1", 22))',
        "No module named 'socket'",
        id="socket",
    ),
    pytest.param("import os\nos.environ", "'os.environ' is not supported", id="environ"),
    pytest.param('import os\nos.getenv("HOME")', "'os.getenv' is not supported", id="getenv"),
    pytest.param('__import__("os")', "NameError", id="dunder-import"),
    pytest.param("(1).__class__.__subclasses__()", "AttributeError", id="class-walk"),
    pytest.param("while True:\n    pass", "time budget of 2 s", id="loop-forever"),
    pytest.param(
        "chunks = []\nwhile True:\n    chunks.append('x' * 1000000)",
        "memory budget of 64 MiB",
        id="allocate-without-bound",
    ),
    pytest.param(
        "def down(n):\n    return down(n + 1)\ndown(0)",
        "RecursionError",
        id="recurse-deeply",
    ),
    pytest.param(
        "while True:\n    print('y' * 100)", "output budget of 64 KiB printed", id="print-forever"
    ),
]


@pytest.fixture
async def adapter(workspace: Workspace) -> AsyncIterator[McpAdapter]:
    async with workspace.adapter() as adapter:
        yield adapter


@pytest.mark.parametrize(("code", "expected"), ESCAPES)
async def test_an_escape_or_runaway_fails_cleanly_within_its_limit(
    adapter: McpAdapter, code: str, expected: str
) -> None:
    tool = ScriptTool(adapter, limits=LIMITS)
    started = time.monotonic()
    with anyio.fail_after(DEADLINE_S):
        result = await tool.execute({"code": code})
    assert result.is_error
    assert expected in result.text_content
    assert result.text_content.count("Script ") == 1  # one clear message, not a traceback
    assert time.monotonic() - started < DEADLINE_S
    assert not os.path.exists("/tmp/pwned")


def _workers() -> list[psutil.Process]:
    return [
        child
        for child in psutil.Process().children(recursive=True)
        if child.is_running() and "monty" in child.name()
    ]


async def test_after_every_escape_the_host_is_as_it_was_and_the_next_script_runs(
    adapter: McpAdapter,
) -> None:
    tool = ScriptTool(adapter, limits=LIMITS)
    me = psutil.Process()
    # Warm up: the first run loads the sandbox client and its threads.
    assert (await tool.execute({"code": "1 + 1"})).text_content == "2"
    gc.collect()
    fds, rss = me.num_fds(), me.memory_info().rss
    for escape in ESCAPES:
        code = escape.values[0]
        with anyio.fail_after(DEADLINE_S):
            assert (await tool.execute({"code": code})).is_error
    gc.collect()
    with anyio.fail_after(5):
        while _workers():  # a killed worker is reaped by the pool's own thread
            await anyio.sleep(0.05)
    assert me.num_fds() <= fds
    assert me.memory_info().rss - rss < RSS_GROWTH_BOUND_BYTES
    result = await tool.execute({"code": "sum(range(10))"})
    assert result.text_content == "45"
    assert not _workers()


async def test_cancelling_a_running_script_kills_its_worker(adapter: McpAdapter) -> None:
    tool = ScriptTool(adapter)
    with anyio.move_on_after(0.5):
        await tool.execute({"code": "while True:\n    pass"})
    with anyio.fail_after(5):
        while _workers():
            await anyio.sleep(0.05)
    assert (await tool.execute({"code": "'still here'"})).text_content == "still here"


async def test_a_sandbox_that_cannot_start_is_a_clear_error(
    adapter: McpAdapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONTY_BIN", "/nonexistent/monty")
    result = await ScriptTool(adapter).execute({"code": "1 + 1"})
    assert result.is_error
    assert result.text_content.startswith("the sandbox could not start (")
    assert "reinstall pi-mcp-adapter[script]" in result.text_content
