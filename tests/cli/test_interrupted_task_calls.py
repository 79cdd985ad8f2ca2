"""Interrupting ``pi-mcp call`` (Ctrl-C) while its server runs the call as a task cancels the
task on the server (``tasks/cancel``) before the command exits, also when the task's handle is
still on its way to the client."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TASKS_SERVER = FIXTURES / "tasks_server.py"
SLOW_LINK = FIXTURES / "slow_link.py"


def _wait_for_file(path: Path, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.02)
    raise AssertionError(f"{path.name} was never written")


def _interrupt_a_task_call(tmp_path: Path, signum: int, link_delay_s: float) -> tuple[str, str]:
    """Start ``pi-mcp call`` of a 120 s task, send ``signum`` to its process group once the
    server has started the task, and return the task's id and the command's stderr."""
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    started_log, cancel_log = tmp_path / "started.log", tmp_path / "cancelled.log"
    server = [str(TASKS_SERVER)]
    if link_delay_s:
        server = [str(SLOW_LINK), str(link_delay_s), sys.executable, *server]
    jobs = {
        "command": sys.executable,
        "args": server,
        "protocolVersion": "auto",
        "env": {"TASKS_START_LOG": str(started_log), "TASKS_CANCEL_LOG": str(cancel_log)},
    }
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": {"jobs": jobs}}))
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "PI_MCP_WARM": "0",
    }
    argv = [sys.executable, "-m", "pi_mcp_adapter", "--project", str(tmp_path / "project")]
    cli = subprocess.Popen(
        [*argv, "call", "slow_report", '{"seconds": 120}'],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        task_id = _wait_for_file(started_log, 60)
        # A terminal's Ctrl-C reaches the whole foreground process group.
        os.killpg(cli.pid, signum)
        _, stderr = cli.communicate(timeout=30)
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()
    assert cli.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[signum], stderr
    assert "Traceback" not in stderr
    return task_id, stderr


@pytest.mark.parametrize(
    "signum",
    [pytest.param(signal.SIGINT, id="Ctrl-C"), pytest.param(signal.SIGTERM, id="SIGTERM")],
)
def test_interrupting_a_call_cancels_its_task_on_the_server(tmp_path: Path, signum: int) -> None:
    task_id, _ = _interrupt_a_task_call(tmp_path, signum, link_delay_s=0)
    cancel_log = tmp_path / "cancelled.log"
    assert cancel_log.exists(), "the task was left running on the server"
    assert task_id in cancel_log.read_text().split()


def test_a_task_whose_handle_is_on_its_way_is_cancelled_too(tmp_path: Path) -> None:
    # The server has started the task and sent its handle; the link delivers it 0.5 s later,
    # after the Ctrl-C. The handle that arrives then still names the task to cancel.
    task_id, _ = _interrupt_a_task_call(tmp_path, signal.SIGINT, link_delay_s=0.5)
    cancel_log = tmp_path / "cancelled.log"
    assert cancel_log.exists(), "the task was left running on the server"
    assert task_id in cancel_log.read_text().split()
