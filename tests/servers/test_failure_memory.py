"""Failed connects are remembered across processes and honoured by the backoff."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import pytest

from pi_mcp_adapter._errors import ConnectTimeoutError, ServerBackoffError, ServerStartError
from pi_mcp_adapter.config._models import ServerEntry
from pi_mcp_adapter.servers._failures import (
    MAX_BACKOFF_S,
    FailureMemory,
    backoff_after_s,
)

from ._support import ManagerFactory, fixture_entry

SECRET = "OpenSesameCanary"


class WallClock:
    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


def test_records_count_attempts_mask_secrets_and_follow_the_configuration(tmp_path: Path) -> None:
    clock = WallClock()
    memory = FailureMemory(tmp_path / "mcp-failures.json", clock=clock)
    entry = ServerEntry(url="https://api.example/mcp", bearer_token=SECRET)
    first = memory.record("api", entry, f"refused: https://u:{SECRET}@h/x, Bearer {SECRET}\nmore")
    clock.now += 5
    second = memory.record("api", entry, "refused again")
    assert (first.attempts, second.attempts) == (1, 2)
    assert memory.get("api", entry) == second
    text = (tmp_path / "mcp-failures.json").read_text()
    assert SECRET not in text
    stored = json.loads(text)["servers"]["api"]
    assert set(stored) == {"failedAt", "reason", "attempts", "configHash"}
    assert stored["failedAt"] == int(clock.now * 1000)
    # A changed configuration starts from scratch.
    changed = ServerEntry(url="https://api.example/v2")
    assert memory.get("api", changed) is None
    assert memory.record("api", changed, "no").attempts == 1
    memory.clear("api")
    assert memory.get("api", changed) is None


def test_a_broken_file_reads_as_no_failures(tmp_path: Path) -> None:
    path = tmp_path / "mcp-failures.json"
    path.write_text("{not json")
    memory = FailureMemory(path)
    entry = ServerEntry(command="x")
    assert memory.get("x", entry) is None
    assert memory.record("x", entry, "boom").attempts == 1


def test_backoff_doubles_per_attempt_up_to_ten_minutes() -> None:
    assert [backoff_after_s(60, n) for n in (1, 2, 3, 4)] == [60, 120, 240, 480]
    assert backoff_after_s(60, 30) == MAX_BACKOFF_S
    assert backoff_after_s(60, 0) == 0


@pytest.mark.slow
async def test_a_failure_in_one_manager_makes_the_next_manager_fail_fast(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    memory = FailureMemory(tmp_path / "mcp-failures.json")
    servers = {"broken": fixture_entry("--crash-at-start")}
    async with make_manager(servers, failures=memory) as first:
        with pytest.raises(ServerStartError):
            await first.connect("broken")
    # A new manager, as the next command would create: it does not start the server again.
    async with make_manager(servers, failures=memory) as second:
        assert second.state("broken").status == "failed"
        started = time.monotonic()
        with pytest.raises(ServerBackoffError, match="pi-mcp reconnect broken"):
            await second.connect("broken")
        assert time.monotonic() - started < 0.1
        record = memory.get("broken", servers["broken"])
        assert record is not None
        assert record.attempts == 1
        assert "exited with code 3" in record.reason


@pytest.mark.slow
async def test_a_hanging_server_is_abandoned_at_its_own_start_up_time_and_remembered(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    memory = FailureMemory(tmp_path / "mcp-failures.json")
    # The deadline is the server's whole start-up time: it failed, and every process knows.
    servers = {"hangs": fixture_entry("--hang", startup_timeout_ms=3000), "fine": fixture_entry()}
    async with make_manager(servers, failures=memory) as manager:
        with anyio.fail_after(10):
            results = await manager.connect_many(["hangs", "fine"], deadline_s=3.0)
        assert results["fine"] is None
        assert isinstance(results["hangs"], ConnectTimeoutError)
        assert "3 s start-up deadline" in str(results["hangs"])
        assert manager.state("hangs").status == "failed"
    async with make_manager(servers, failures=memory) as again:
        started = time.monotonic()
        results = await again.connect_many(["hangs"], deadline_s=3.0)
        assert isinstance(results["hangs"], ServerBackoffError)
        assert time.monotonic() - started < 0.1


@pytest.mark.slow
async def test_a_successful_reconnect_forgets_the_failure(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    memory = FailureMemory(tmp_path / "mcp-failures.json")
    flag = tmp_path / "crash-once"
    flag.write_text("")
    servers = {"flaky": fixture_entry("--crash-at-start-file", str(flag))}
    async with make_manager(servers, failures=memory) as manager:
        with pytest.raises(ServerStartError):
            await manager.connect("flaky")
        assert memory.get("flaky", servers["flaky"]) is not None
        await manager.reconnect("flaky")
        assert memory.get("flaky", servers["flaky"]) is None


@pytest.mark.slow
async def test_an_explicit_connect_retries_a_server_that_is_backing_off(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    memory = FailureMemory(tmp_path / "mcp-failures.json")
    flag = tmp_path / "crash-once"
    flag.write_text("")
    servers = {"flaky": fixture_entry("--crash-at-start-file", str(flag))}
    async with make_manager(servers, failures=memory) as manager:
        with pytest.raises(ServerStartError):
            await manager.connect("flaky")
    async with make_manager(servers, failures=memory) as manager:
        with pytest.raises(ServerBackoffError):
            await manager.connect("flaky")
        metadata = await manager.refresh("flaky")
        assert any(tool["name"] == "echo" for tool in metadata.tools)
        assert memory.get("flaky", servers["flaky"]) is None


LOCK_HOLDER = """
import sys, time, filelock
with filelock.FileLock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _hold_lock(path: Path, seconds: float) -> subprocess.Popen[str]:
    """Another process that takes the failures file's lock and keeps it ``seconds``."""
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, f"{path}.lock", str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    return holder


async def test_an_event_loop_does_not_wait_for_another_process_holding_the_lock(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-failures.json"
    entry = ServerEntry(command="broken")
    memory = FailureMemory(path)
    memory.record("api", entry, "refused")
    holder = _hold_lock(path, 8)
    try:
        started = time.monotonic()
        second = memory.record("api", entry, "refused again")
        memory.record("other", entry, "refused")
        memory.clear("other")
        waited_s = time.monotonic() - started
        # Three changes, each of which waited the lock's whole 2 s timeout on the loop (and
        # was then dropped) before; a busy machine still answers well inside 1.5 s.
        assert waited_s < 1.5, waited_s
        assert second.attempts == 2  # counted from the file, so the backoff still grows
        assert json.loads(path.read_text())["servers"]["api"]["attempts"] == 1
    finally:
        holder.kill()
        holder.wait()
    # Written once the lock is free, in order: the record, then its removal.
    for writer in [t for t in threading.enumerate() if t.name == "pi-mcp-failures"]:
        await anyio.to_thread.run_sync(writer.join, 30)
    servers = json.loads(path.read_text())["servers"]
    assert set(servers) == {"api"}
    assert servers["api"]["attempts"] == 2


def test_a_command_that_ends_while_the_lock_is_taken_still_writes_its_failure(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-failures.json"
    holder = _hold_lock(path, 1)
    record_on_a_loop = f"""
import asyncio
from pathlib import Path
from pi_mcp_adapter.config._models import ServerEntry
from pi_mcp_adapter.servers._failures import FailureMemory

async def main():
    FailureMemory(Path({str(path)!r})).record("api", ServerEntry(command="x"), "refused")

asyncio.run(main())
"""
    try:
        subprocess.run([sys.executable, "-c", record_on_a_loop], check=True, timeout=60)
    finally:
        holder.wait()
    assert json.loads(path.read_text())["servers"]["api"]["reason"] == "refused"
