"""The warm process runs each command as its caller: the caller's encodings, job control,
installation and choice (``PI_MCP_WARM=0``); a client that connects and says nothing delays no
one; output that cannot be written ends in one line, warm or cold.

Real ``pi-mcp`` commands, a real warm process started on first use, the fixture server, and a
copy of the package installed at another path.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import psutil
import pytest

from gateway.conftest import CANARY, PI_MCP, fixture_entry, make_mark, wait_for_mark
from gateway.test_pool import (
    ended_after,
    start_slow_call,
    wait_until_gone,
    warm,
    write_config,
)
from security.test_sandboxed_caller import warm_process_of

SRC = Path(__file__).resolve().parents[2] / "src" / "pi_mcp_adapter"
STATE_BOUND_S = 30.0
"""How long a process may take to show a signal's effect on a machine busy with other runs."""


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config with the fixture server, and commands that start a warm process on first use."""
    write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    (tmp_path / "agent").mkdir()
    monkeypatch.delenv("PI_MCP_WARM")
    monkeypatch.delenv("CI", raising=False)
    return tmp_path


def started_warm_process(root: Path, env: dict[str, str] | None = None) -> Iterator[psutil.Process]:
    """A warm process a first command started that takes this test's commands (the package's
    files may change while it starts, in a shared checkout: then the next command starts
    another)."""
    for _attempt in range(5):
        first = subprocess.run(
            [str(PI_MCP), "--config", "mcp.json", "--agent-dir", str(root / "agent"), "tools"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=root,
            env={**os.environ, **(env or {})},
        )
        assert first.returncode == 0, first.stderr
        with ended_after(warm_process_of(root)) as process:
            if warm(root, "status")[0] == 0:
                yield process
                return
            psutil.wait_procs([process], timeout=30)
    pytest.fail("no warm process took a command")


@pytest.fixture
def warm_process(workspace: Path) -> Iterator[psutil.Process]:
    yield from started_warm_process(workspace)


def globals_of(root: Path) -> list[str]:
    return [str(PI_MCP), "--config", "mcp.json", "--agent-dir", str(root / "agent")]


def wait_for_status(process: psutil.Process, wanted: bool) -> None:
    """Wait until ``process`` is stopped (``wanted``) or running again."""
    deadline = time.monotonic() + STATE_BOUND_S
    while (process.status() == psutil.STATUS_STOPPED) != wanted:
        assert time.monotonic() < deadline, f"{process.pid} is {process.status()}"
        time.sleep(0.05)


# -- the caller's encodings ----------------------------------------------------------------------


@pytest.mark.slow
def test_a_warm_process_started_with_ascii_output_writes_a_utf8_callers_text(
    workspace: Path,
) -> None:
    for process in started_warm_process(workspace, env={"PYTHONIOENCODING": "ascii"}):
        code, output = warm(workspace, "call", "fx_echo", '{"message": "héllo ✓"}')
        assert (code, output) == (0, "Echo: héllo ✓\n")
        assert process.is_running()


@pytest.mark.slow
@pytest.mark.usefixtures("warm_process")
def test_an_ascii_caller_gets_one_line_about_its_encoding_warm_or_cold(workspace: Path) -> None:
    for warm_wanted in ("1", "0"):
        done = subprocess.run(
            [*globals_of(workspace), "call", "fx_echo", '{"message": "héllo"}'],
            capture_output=True,
            timeout=120,
            cwd=workspace,
            env={**os.environ, "PYTHONIOENCODING": "ascii", "PI_MCP_WARM": warm_wanted},
        )
        assert done.returncode == 1
        assert b"Traceback" not in done.stderr
        assert b"cannot show; set PYTHONIOENCODING=utf-8" in done.stderr


# -- job control -------------------------------------------------------------------------------


@pytest.mark.slow
def test_ctrl_z_stops_the_command_in_the_warm_process_and_fg_continues_it(
    workspace: Path, warm_process: psutil.Process
) -> None:
    mark = make_mark(workspace, "slow-started")
    caller = start_slow_call(workspace, mark)
    try:
        anyio.run(wait_for_mark, mark)
        (command,) = warm_process.children()
        caller.send_signal(signal.SIGTSTP)
        wait_for_status(command, wanted=True)
        wait_for_status(psutil.Process(caller.pid), wanted=True)
        caller.send_signal(signal.SIGCONT)
        wait_for_status(command, wanted=False)
        assert command.is_running()
    finally:
        caller.kill()
        caller.wait()


# -- which process runs the command ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("warm_process")
def test_pi_mcp_warm_0_runs_the_command_cold_although_a_warm_process_runs(
    workspace: Path,
) -> None:
    assert warm(workspace, "status", env={"PI_MCP_WARM": "0"})[0] is None
    assert warm(workspace, "status")[0] == 0


def install_copy(root: Path) -> Path:
    """The package installed again, at another path (what ``pip install --target`` makes)."""
    site = root / "site"
    shutil.copytree(SRC, site / "pi_mcp_adapter", ignore=shutil.ignore_patterns("__pycache__"))
    return site


@pytest.mark.slow
def test_a_new_install_at_another_path_replaces_the_warm_process(
    workspace: Path, warm_process: psutil.Process
) -> None:
    site = install_copy(workspace)
    copy_env = {"PYTHONPATH": str(site)}
    options = globals_of(workspace)[1:]
    # A command of the copy: the old process gives way, the copy starts its own.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pi_mcp_adapter._launch import main; main()",
            *options,
            "status",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=workspace,
        env={**os.environ, **copy_env},
    )
    assert done.returncode == 0, done.stderr
    wait_until_gone(warm_process)
    with ended_after(warm_process_of(workspace)) as replacement:
        assert replacement.pid != warm_process.pid
        assert warm(workspace, "status", env=copy_env)[0] == 0
        # An edit that keeps the file's modification time is still another installation.
        edited = site / "pi_mcp_adapter" / "_errors.py"
        times = edited.stat()
        edited.write_text(edited.read_text() + "\n# edited\n")
        os.utime(edited, ns=(times.st_atime_ns, times.st_mtime_ns))
        assert warm(workspace, "status", env=copy_env)[0] is None
        wait_until_gone(replacement)


# -- a client that says nothing --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("warm_process")
def test_a_client_that_connects_and_sends_nothing_delays_no_other_command(
    workspace: Path,
) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.connect(os.fspath(workspace / "agent" / "pool" / "cli.sock"))
        assert warm(workspace, "status")[0] == 0
        # Served while the silent client was still waiting for its turn, not after it.
        silent.setblocking(False)
        with pytest.raises(BlockingIOError):
            silent.recv(1)


# -- output that cannot be written -----------------------------------------------------------


def status_into(root: Path, stdout: int, warm_wanted: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [str(PI_MCP), "--config", "mcp.json", "--agent-dir", str(root / "agent"), "status"],
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=120,
        cwd=root,
        env={**os.environ, "PI_MCP_WARM": warm_wanted},
    )


@pytest.mark.slow
@pytest.mark.usefixtures("warm_process")
@pytest.mark.parametrize("warm_wanted", ["1", "0"], ids=["warm", "cold"])
def test_status_into_a_full_device_fails_in_one_line(workspace: Path, warm_wanted: str) -> None:
    with open("/dev/full", "wb") as full:
        done = status_into(workspace, full.fileno(), warm_wanted)
    assert done.returncode == 1
    assert done.stderr.decode() == "pi-mcp: cannot write the output: No space left on device\n"


@pytest.mark.slow
@pytest.mark.usefixtures("warm_process")
@pytest.mark.parametrize("warm_wanted", ["1", "0"], ids=["warm", "cold"])
def test_status_into_a_closed_pipe_ends_quietly_like_head(
    workspace: Path, warm_wanted: str
) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = status_into(workspace, write_end, warm_wanted)
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, b"")


def test_a_cold_run_from_a_deleted_directory_says_so_in_one_line(tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    done = subprocess.run(
        ["bash", "-c", 'cd "$1" && rmdir "$1" && exec "$2" status', "sh", str(gone), str(PI_MCP)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PI_CODING_AGENT_DIR": str(tmp_path / "agent")},
    )
    assert done.returncode == 1
    assert done.stderr == (
        "pi-mcp: the current directory no longer exists; cd to an existing directory\n"
    )
    assert CANARY not in done.stdout
