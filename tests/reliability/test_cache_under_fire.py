"""The metadata cache under fire: many processes write it while another one corrupts it.

Six processes store their server's entry and finish; ten more keep reloading and storing theirs
while a foreign process damages the file forty times without taking the lock. Afterwards no entry
is lost (the early servers' entries were put back by processes that had read them), no process
crashed, and the file is a valid cache. Where this build has OAuth token files, every process
also saves its server's tokens and those of one sign-in they all share, each round: every token
file read during the run is whole, and each ends with its writer's last round.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import MetadataCache
from pi_mcp_adapter.config._models import ServerEntry

HERE = Path(__file__).resolve().parent
WORKER = HERE / "cache_fire_worker.py"
CORRUPTER = HERE / "cache_corrupter.py"
EARLY_WRITERS = 6
STEADY_WRITERS = 10
CORRUPTIONS = 40
DEADLINE_S = 90.0
"""Bound for every wait on a child process; generous for a loaded two-core machine."""


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


def spawn(processes: list[subprocess.Popen[str]], *args: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    processes.append(process)
    return process


def go(process: subprocess.Popen[str]) -> None:
    assert process.stdin is not None
    process.stdin.write("go\n")
    process.stdin.flush()


def wait_for_line(process: subprocess.Popen[str], expected: str) -> None:
    """Read the process's output until ``expected`` (pytest-timeout bounds a silent child)."""
    assert process.stdout is not None
    for line in process.stdout:
        if line == expected:
            return
    raise AssertionError(f"pid {process.pid} ended without printing {expected!r}")


def finish(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = process.communicate(timeout=DEADLINE_S)
    assert process.returncode == 0, err
    assert "Traceback" not in err, err
    summary: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return summary


def check_if_valid(path: Path) -> bool:
    """True when the file is a well-formed cache; damaged files (the corrupter's) are False."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return False
    if not (isinstance(data, dict) and data.get("version") == 1):
        return False
    servers = data.get("servers")
    if not isinstance(servers, dict):
        return False
    # What an adapter wrote is complete: no half entries, whatever the timing.
    for name, entry in servers.items():
        assert isinstance(entry["configHash"], str), name
        assert isinstance(entry["cachedAt"], int), name
        assert len(entry["tools"]) == 20, name
    return True


def check_token_files(agent_dir: Path) -> dict[str, dict[str, Any]]:
    """Every OAuth token file parses as a whole record (they are replaced atomically)."""
    found: dict[str, dict[str, Any]] = {}
    for path in (agent_dir / "mcp-oauth").glob("*/tokens.json"):
        try:
            data = json.loads(path.read_bytes())
        except FileNotFoundError:
            continue
        assert isinstance(data["access_token"], str), path
        found[path.parent.name] = data
    return found


@pytest.mark.slow
def test_sixteen_writers_and_a_corrupter_lose_no_entry_and_leave_a_valid_file(
    tmp_path: Path, processes: list[subprocess.Popen[str]]
) -> None:
    path = tmp_path / "mcp-cache.json"
    stop_file = tmp_path / "stop"
    early = [f"early-{i}" for i in range(EARLY_WRITERS)]
    steady = [f"steady-{i}" for i in range(STEADY_WRITERS)]
    workers: dict[str, subprocess.Popen[str]] = {}
    for name in early:
        workers[name] = spawn(processes, str(WORKER), str(path), name, "2", str(stop_file))
    for name in steady:
        workers[name] = spawn(processes, str(WORKER), str(path), name, "-1", str(stop_file))
    # All sixteen start together (the imports take the time); the early ones write first.
    for name in early:
        go(workers[name])
    summaries = {name: finish(workers[name]) for name in early}
    for name in steady:
        go(workers[name])

    # Every steady writer has read all sixteen entries before the damage starts.
    for name in steady:
        wait_for_line(workers[name], f"saw {EARLY_WRITERS + STEADY_WRITERS}\n")

    corrupter = spawn(processes, str(CORRUPTER), str(path), str(CORRUPTIONS), "7")
    go(corrupter)
    valid_reads = 0
    deadline = time.monotonic() + DEADLINE_S
    while corrupter.poll() is None and time.monotonic() < deadline:
        valid_reads += check_if_valid(path)
        check_token_files(tmp_path)
        time.sleep(0.005)  # sample the file, do not spin on it
    out, err = corrupter.communicate(timeout=DEADLINE_S)
    assert corrupter.returncode == 0, err
    assert out.count("corrupted") == CORRUPTIONS
    stop_file.touch()
    summaries |= {name: finish(workers[name]) for name in steady}

    assert check_if_valid(path)
    cache = MetadataCache(path)
    assert cache.load() == "loaded"
    assert sorted(cache.servers) == sorted(early + steady)
    for name in early + steady:
        metadata = cache.get(name, ServerEntry(command="worker", args=(name,)))
        assert metadata is not None, name
        rounds = summaries[name]["rounds"]
        # Early writers' entries survived the damage; steady writers' last round is kept.
        assert metadata.instructions == f"round {rounds - 1}", name
    # The damage was noticed and handled: files set aside, entries put back, warnings given.
    assert list(tmp_path.glob("mcp-cache.json.corrupt-*"))
    warnings = [w for s in summaries.values() for w in s["warnings"]]
    assert any("was unreadable" in w for w in warnings)
    assert any("restored" in w for w in warnings)
    assert valid_reads > 0
    assert not list(tmp_path.glob(".mcp-cache.json.*.tmp"))
    token_files = check_token_files(tmp_path)
    if token_files:
        for name in early + steady:
            token = token_files[name]["access_token"]
            assert token == f"{name} round {summaries[name]['rounds'] - 1}"
        shared = token_files["shared-sign-in"]["access_token"]
        assert shared.rsplit(" round ", 1)[0] in early + steady
        assert not list((tmp_path / "mcp-oauth").rglob("*.tmp"))
