"""The metadata cache shared by several processes: no lost entries, never a broken file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config._models import ServerEntry

WORKER = Path(__file__).with_name("cache_worker.py")
WRITERS = 16
ROUNDS = 12
# Bounds for processes that should finish quickly; generous for a loaded two-core CI machine.
WORKER_DEADLINE_S = 90


def start_worker(
    path: Path, server: str, rounds: int, payload_kb: int, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(path), server, str(rounds), str(payload_kb), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_cache(path: Path) -> dict[str, object]:
    data = json.loads(path.read_bytes())
    assert data["version"] == 1
    assert isinstance(data["servers"], dict)
    servers: dict[str, object] = data["servers"]
    return servers


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.slow
def test_sixteen_processes_writing_at_once_lose_no_entry(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    path = tmp_path / "mcp-cache.json"
    servers = [f"server-{i:02d}" for i in range(WRITERS)]
    for server in servers:
        processes.append(start_worker(path, server, ROUNDS, 5))
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()

    parsed_while_running = 0
    while any(p.poll() is None for p in processes):
        if path.exists():
            read_cache(path)
            parsed_while_running += 1
    for process in processes:
        _out, err = process.communicate(timeout=WORKER_DEADLINE_S)
        assert process.returncode == 0, err

    final = read_cache(path)
    assert sorted(final) == servers
    cache = MetadataCache(path)
    for server in servers:
        metadata = cache.get(server, ServerEntry(command="worker", args=(server,)))
        assert metadata is not None
        assert metadata.instructions == f"round {ROUNDS - 1}"
    assert parsed_while_running > 0
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.slow
def test_a_process_killed_inside_a_write_leaves_the_previous_file(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    path = tmp_path / "mcp-cache.json"
    keeper = MetadataCache(path)
    keeper_entry = ServerEntry(command="keeper")
    keeper.store("keeper", keeper_entry, ServerMetadata(tools=({"name": "kept"},)))
    before = path.read_bytes()

    writer = start_worker(path, "victim", 1, 2000, "--freeze-in-write")
    processes.append(writer)
    assert writer.stdin is not None
    assert writer.stdout is not None
    writer.stdin.write("go\n")
    writer.stdin.flush()
    assert writer.stdout.readline() == "writing 0\n"
    assert writer.stdout.readline() == "frozen\n"
    assert list(tmp_path.glob("*.tmp")), "the temporary file should hold the new data"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=WORKER_DEADLINE_S)

    assert path.read_bytes() == before
    assert sorted(read_cache(path)) == ["keeper"]
    # The dead writer's lock is gone with it, and its temporary file is cleaned up.
    keeper.store("keeper", keeper_entry, ServerMetadata(tools=({"name": "still_kept"},)))
    assert not list(tmp_path.glob("*.tmp"))
    assert keeper.warnings == ()


@pytest.mark.slow
@pytest.mark.parametrize("kill_after_writes", [1, 2, 3, 5, 8])
def test_a_process_killed_at_any_point_of_large_writes_leaves_a_valid_file(
    tmp_path: Path, processes: list[subprocess.Popen[str]], kill_after_writes: int
) -> None:
    path = tmp_path / "mcp-cache.json"
    keeper = MetadataCache(path)
    keeper.store("keeper", ServerEntry(command="keeper"), ServerMetadata(tools=({"name": "k"},)))

    writer = start_worker(path, "victim", -1, 3000)
    processes.append(writer)
    assert writer.stdin is not None
    assert writer.stdout is not None
    writer.stdin.write("go\n")
    writer.stdin.flush()
    for expected in range(kill_after_writes + 1):
        assert writer.stdout.readline() == f"writing {expected}\n"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=WORKER_DEADLINE_S)

    servers = read_cache(path)
    assert "keeper" in servers
    assert "victim" in servers
    reader = MetadataCache(path)
    assert reader.load() == "loaded"
    assert reader.get("keeper", ServerEntry(command="keeper")) is not None


BURST_WRITERS = 4
BURST_SERVERS = 60


@pytest.mark.slow
def test_processes_storing_bursts_of_servers_lose_none_of_them(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    # Each process stores its servers one right after the other, as a listing pass does: most
    # stores reach the file in a later, coalesced write, and the last ones when it exits.
    path = tmp_path / "mcp-cache.json"
    writers = [f"writer-{i}" for i in range(BURST_WRITERS)]
    for writer in writers:
        processes.append(start_worker(path, writer, 2, 3, f"--burst={BURST_SERVERS}"))
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    while any(p.poll() is None for p in processes):
        if path.exists():
            read_cache(path)
    for process in processes:
        _out, err = process.communicate(timeout=WORKER_DEADLINE_S)
        assert process.returncode == 0, err

    expected = sorted(f"{w}-{i}" for w in writers for i in range(BURST_SERVERS))
    assert sorted(read_cache(path)) == expected
    cache = MetadataCache(path)
    for name in expected:
        metadata = cache.get(name, ServerEntry(command="worker", args=(name,)))
        assert metadata is not None
        assert metadata.instructions == "round 1"
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.slow
def test_a_process_killed_inside_a_coalesced_write_leaves_the_last_complete_file(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    path = tmp_path / "mcp-cache.json"
    keeper = MetadataCache(path)
    keeper_entry = ServerEntry(command="keeper")
    keeper.store("keeper", keeper_entry, ServerMetadata(tools=({"name": "kept"},)))

    # The first store is written at once; the other 29 wait for the second, background write,
    # which freezes with its temporary file complete, and is killed there.
    writer = start_worker(path, "victim", 1, 20, "--burst=30", "--freeze-in-write=2")
    processes.append(writer)
    assert writer.stdin is not None
    assert writer.stdout is not None
    writer.stdin.write("go\n")
    writer.stdin.flush()
    assert writer.stdout.readline() == "writing 0\n"
    assert writer.stdout.readline() == "frozen\n"
    after_first_write = path.read_bytes()
    assert sorted(read_cache(path)) == ["keeper", "victim-0"]
    assert list(tmp_path.glob("*.tmp")), "the temporary file should hold the coalesced stores"
    writer.send_signal(signal.SIGKILL)
    writer.wait(timeout=WORKER_DEADLINE_S)

    assert path.read_bytes() == after_first_write
    keeper.store("keeper", keeper_entry, ServerMetadata(tools=({"name": "still_kept"},)))
    keeper.flush()
    # The stores coalesced into the frozen write were committed to mcp-cache.db before its
    # export froze (those still pending died with the process): the next export carries the
    # committed ones, each whole.
    servers = read_cache(path)
    assert {"keeper", "victim-0"} <= set(servers)
    assert set(servers) <= {"keeper", *(f"victim-{i}" for i in range(30))}
    for name in set(servers) - {"keeper"}:
        metadata = keeper.get(name, ServerEntry(command="worker", args=(name,)))
        assert metadata is not None
        assert len(metadata.tools) == 20
    assert not list(tmp_path.glob("*.tmp"))
    assert keeper.warnings == ()


FORK_SCRIPT = """
import os, sys, time
from pathlib import Path
from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config._models import ServerEntry

path = Path(sys.argv[1])
cache = MetadataCache(path)
meta = ServerMetadata(tools=({"name": "t"},))
cache.store("a", ServerEntry(command="a"), meta)
cache.store("b", ServerEntry(command="b"), meta)  # pending, its write not done yet
cache._write_lock.acquire()  # as if a background write held it at the fork
child = os.fork()
if child == 0:
    cache.store("c", ServerEntry(command="c"), meta)
    cache.flush()
    os._exit(0)
cache._write_lock.release()
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    done, status = os.waitpid(child, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    os.kill(child, 9)
    sys.exit("the forked child hung on a lock its parent held")
cache.flush()
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_writes_with_fresh_locks_and_both_keep_their_stores(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-cache.json"
    done = subprocess.run(
        [sys.executable, "-c", FORK_SCRIPT, str(path)],
        capture_output=True,
        text=True,
        timeout=WORKER_DEADLINE_S,
    )
    assert done.returncode == 0, done.stderr
    assert sorted(read_cache(path)) == ["a", "b", "c"]
