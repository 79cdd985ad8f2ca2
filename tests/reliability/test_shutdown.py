"""Shutdown with calls in flight: SIGINT, SIGTERM and SIGKILL of ``pi-mcp`` and ``pi-mcp serve``.

The command (or the gateway, with three clients calling through it) runs as a real process with
two real servers (our stdio fixture, which also starts a child process of its own, and
``mcp-server-time``). Once a slow call is in flight, the test sends the signal. Where a signal can
be handled (SIGINT, SIGTERM) the process exits promptly with no traceback, and takes every server
process, and the servers' own children, with it. SIGKILL cannot be handled, yet the servers'
process trees still die with ``pi-mcp`` (the CLI's children die with their parent). For the
gateway, killed outright, a server's own children are that server's business, so its SIGKILL case
runs the fixture without one. In every case the metadata cache is intact; a process killed
outright loses only the stores it had not yet written, so that case waits for them first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import anyio.to_thread
import psutil
import pytest
from mcp import Client

from pi_mcp_adapter.catalog import MetadataCache
from servers._support import MCP_FIXTURE

from ._chaos import TIME_SERVER
from ._gateway import gateway_call, has_serve_command, start_gateway

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not TIME_SERVER.exists(), reason="mcp-server-time is not installed"),
]

READY_DEADLINE_S = 60.0
EXIT_DEADLINE_S = 20.0
"""Handled signals: closing two stdio servers takes well under a second, plus interpreter exit
on a loaded machine."""
ORPHAN_DEADLINE_S = 15.0

HANDLED = {signal.SIGINT: 130, signal.SIGTERM: 143}


def write_config(agent_dir: Path, call_log: Path, *, server_child: bool) -> None:
    fixture_args = [str(MCP_FIXTURE), "--name", "slowpoke", "--call-log", str(call_log)]
    if server_child:
        fixture_args.append("--spawn-child")
    config = {
        "mcpServers": {
            "slowpoke": {"command": sys.executable, "args": fixture_args},
            "time": {"command": str(TIME_SERVER), "args": ["--local-timezone", "UTC"]},
        }
    }
    agent_dir.mkdir(parents=True)
    (agent_dir / "mcp.json").write_text(json.dumps(config))


def wait_for_call(process: subprocess.Popen[str], call_log: Path) -> None:
    """Until the fixture logged the start of the slow call (bounded; polls a file)."""
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"pi-mcp exited early: {process.communicate()}")
        if call_log.exists() and " slow" in call_log.read_text():
            return
        time.sleep(0.05)
    raise AssertionError("the slow call never started")


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


async def wait_for_cached(agent_dir: Path, servers: set[str]) -> None:
    """Until the cache file holds ``servers``: stores that follow one another are written a
    moment later, together, and a process killed before then loses them (by design)."""
    with anyio.fail_after(READY_DEADLINE_S):
        while True:
            cache = MetadataCache(agent_dir / "mcp-cache.json")
            if cache.load() == "loaded" and servers <= set(cache.servers):
                return
            await anyio.sleep(0.05)


def assert_cache_intact(agent_dir: Path, servers: set[str]) -> None:
    cache = MetadataCache(agent_dir / "mcp-cache.json")
    assert cache.load() == "loaded"
    assert servers <= set(cache.servers)
    assert not list(agent_dir.glob("mcp-cache.json.corrupt-*"))


@pytest.mark.parametrize(
    "signum",
    [
        pytest.param(signal.SIGINT, id="SIGINT"),
        pytest.param(signal.SIGTERM, id="SIGTERM"),
        pytest.param(signal.SIGKILL, id="SIGKILL"),
    ],
)
def test_pi_mcp_call_stopped_by_a_signal_leaves_no_process_and_an_intact_cache(
    tmp_path: Path, signum: int
) -> None:
    agent_dir, call_log = tmp_path / "agent", tmp_path / "calls.log"
    handled = signum in HANDLED
    write_config(agent_dir, call_log, server_child=True)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pi_mcp_adapter",
            "--agent-dir",
            str(agent_dir),
            "--project",
            str(tmp_path),
            "call",
            "slowpoke_slow",
            '{"seconds": 120}',
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(tmp_path)},
        # Its own session, as in a terminal: the signal goes to pi-mcp alone.
        start_new_session=True,
    )
    try:
        wait_for_call(process, call_log)
        children = descendants(process.pid)
        # `call` connects the tool's server alone; with it the fixture's own child.
        assert len(children) >= 2
        process.send_signal(signum)
        _out, err = process.communicate(timeout=EXIT_DEADLINE_S)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    if handled:
        assert process.returncode == HANDLED[signum], err
        assert "Traceback" not in err
    else:
        assert process.returncode == -signal.SIGKILL
    _gone, alive = psutil.wait_procs(children, timeout=ORPHAN_DEADLINE_S)
    for leftover in alive:
        leftover.kill()
    assert alive == []
    assert_cache_intact(agent_dir, {"slowpoke"})


SERVE_EXIT_CODES = {signal.SIGINT: (0, 130), signal.SIGTERM: (0, 143)}
"""A server stopped on purpose may report success or the conventional 128 + signal."""
GATEWAY_CLIENTS = 3


@pytest.mark.skipif(not has_serve_command(), reason="this build has no `pi-mcp serve`")
@pytest.mark.parametrize(
    "signum",
    [
        pytest.param(signal.SIGINT, id="SIGINT"),
        pytest.param(signal.SIGTERM, id="SIGTERM"),
        pytest.param(signal.SIGKILL, id="SIGKILL"),
    ],
)
async def test_pi_mcp_serve_stopped_by_a_signal_with_calls_in_flight_leaves_no_process(
    tmp_path: Path, signum: int
) -> None:
    agent_dir, call_log = tmp_path / "agent", tmp_path / "calls.log"
    handled = signum in SERVE_EXIT_CODES
    write_config(agent_dir, call_log, server_child=handled)
    gateway = start_gateway(agent_dir, tmp_path)
    outcomes: list[str] = []

    async def slow_call(client_number: int) -> None:
        try:
            async with Client(gateway.url) as client:
                # The gateway listens before the first run has listed every server.
                await gateway_call(client, {"connect": "slowpoke"})
                await gateway_call(client, {"connect": "time"})
                result = await gateway_call(
                    client, {"tool": "slowpoke_slow", "args": {"seconds": 120}}
                )
                outcomes.append(f"result is_error={result.is_error}")
        except Exception as exc:  # the gateway went away under the call: that is the point
            outcomes.append(f"error {type(exc).__name__}")

    try:
        async with anyio.create_task_group() as tg:
            for number in range(GATEWAY_CLIENTS):
                tg.start_soon(slow_call, number)
            with anyio.fail_after(READY_DEADLINE_S):
                while not (call_log.exists() and call_log.read_text().count(" slow") >= 1):
                    await anyio.sleep(0.05)
            children = descendants(gateway.process.pid)
            assert len(children) >= 2 + handled
            if not handled:  # SIGKILL: nothing stored can be written after it
                await wait_for_cached(agent_dir, {"slowpoke", "time"})
            gateway.process.send_signal(signum)
            with anyio.fail_after(EXIT_DEADLINE_S):
                returncode = await anyio.to_thread.run_sync(gateway.process.wait)
            # Every client's call ended (with an error) instead of hanging on a dead gateway.
            with anyio.fail_after(EXIT_DEADLINE_S):
                while len(outcomes) < GATEWAY_CLIENTS:
                    await anyio.sleep(0.05)
    finally:
        gateway.stop()

    if handled:
        assert returncode in SERVE_EXIT_CODES[signum], gateway.log[-2000:]
        assert "Traceback" not in gateway.log, gateway.log[-3000:]
    else:
        assert returncode == -signal.SIGKILL
    _gone, alive = await anyio.to_thread.run_sync(
        lambda: psutil.wait_procs(children, timeout=ORPHAN_DEADLINE_S)
    )
    for leftover in alive:
        leftover.kill()
    assert alive == []
    assert_cache_intact(agent_dir, {"slowpoke", "time"})
