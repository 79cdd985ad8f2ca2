"""No orphan, ever: a signalled (or killed) ``pi-mcp`` leaves none of its servers' processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = [pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_fixture.py"


def _wait_for(condition: object, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.add(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "agent").mkdir()
    (tmp_path / "project").mkdir()
    config = {
        "mcpServers": {
            "fx": {"command": sys.executable, "args": [str(FIXTURE), "--spawn-child"]},
        }
    }
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    return tmp_path


def _start_call(home: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pi_mcp_adapter",
            "--project",
            str(home / "project"),
            "call",
            "fx_slow",
            '{"seconds": 60}',
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # so that SIGINT below reaches only pi-mcp, as kill(1) would
    )


def _server_tree(cli: subprocess.Popen[str]) -> set[int]:
    """Every process under ``pi-mcp`` once the server and its grandchild are running."""
    found: set[int] = set()

    def running() -> bool:
        found.clear()
        try:
            children = psutil.Process(cli.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return False
        found.update(p.pid for p in children)
        sleepers = [p for p in children if "time.sleep(3600)" in " ".join(p.cmdline())]
        servers = [p for p in children if str(FIXTURE) in " ".join(p.cmdline())]
        return bool(sleepers) and bool(servers)

    _wait_for(running, 30, "the server and its child to start")
    return set(found)


@pytest.mark.parametrize(
    ("signum", "exit_code"),
    [
        pytest.param(signal.SIGTERM, 143, id="SIGTERM"),
        pytest.param(signal.SIGHUP, 129, id="SIGHUP"),
        pytest.param(signal.SIGINT, 130, id="SIGINT"),
    ],
)
def test_a_signal_during_a_call_closes_every_server_and_exits_with_its_code(
    home: Path, signum: int, exit_code: int
) -> None:
    cli = _start_call(home)
    try:
        tree = _server_tree(cli)
        # The call is in flight once the slow tool has been sent; give it a moment to arrive.
        time.sleep(0.3)
        cli.send_signal(signum)
        _, stderr = cli.communicate(timeout=15)
        assert cli.returncode == exit_code, stderr
        assert "Traceback" not in stderr
        _wait_for(lambda: not _alive(tree), 5, f"processes {sorted(_alive(tree))} to exit")
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_sigkill_of_pi_mcp_still_takes_the_server_tree_down(home: Path) -> None:
    cli = _start_call(home)
    try:
        tree = _server_tree(cli)
        time.sleep(0.3)
        cli.kill()
        cli.wait(timeout=10)
        _wait_for(lambda: not _alive(tree), 5, f"processes {sorted(_alive(tree))} to exit")
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
