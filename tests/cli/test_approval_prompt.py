"""Tool approval in the CLI: ``pi-mcp call`` asks on a real pseudo-terminal.

The command runs as a subprocess whose stdin and stderr are the slave side of a pty; the test
reads the question from the master side and types the answer, as a person would.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX"),
]

ROOT = Path(__file__).resolve().parents[2]
WORKBENCH = ROOT / "tests" / "surface" / "workbench_server.py"
PROMPT = b"Choose 1-4: "


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    config: dict[str, Any] = {
        "mcpServers": {
            "workbench": {
                "command": sys.executable,
                "args": [str(WORKBENCH)],
                "approveTools": ["echo"],
            }
        }
    }
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    return tmp_path


def _command(home: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    argv = [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args]
    return argv, env


def _read_until(fd: int, marker: bytes, timeout_s: float = 60) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout_s
    while marker not in seen:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"no {marker!r} on the terminal; saw {seen[-500:]!r}"
        ready, _, _ = select.select([fd], [], [], remaining)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the slave side closed: the program ended
                break
            if not chunk:
                break
            seen += chunk
    return seen


def _read_rest(fd: int) -> bytes:
    seen = b""
    while select.select([fd], [], [], 0.5)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the slave side closed: the program ended
            break
        if not chunk:
            break
        seen += chunk
    return seen


def call_on_terminal(home: Path, answer: bytes) -> tuple[subprocess.CompletedProcess[str], bytes]:
    """Run ``pi-mcp call workbench_echo`` on a pty, answer the question, return the result."""
    master, slave = pty.openpty()
    argv, env = _command(home, "call", "workbench_echo", '{"message": "on a tty"}')
    process = subprocess.Popen(
        argv, stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=env, text=True
    )
    os.close(slave)
    try:
        shown = _read_until(master, PROMPT)
        os.write(master, answer)
        stdout, _ = process.communicate(timeout=60)
        shown += _read_rest(master)  # what came after the answer, failures included (stderr)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        os.close(master)
    return subprocess.CompletedProcess(argv, process.returncode, stdout, ""), shown


def call_without_terminal(home: Path) -> subprocess.CompletedProcess[str]:
    argv, env = _command(home, "call", "workbench_echo", '{"message": "no tty"}')
    return subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=90
    )


def test_the_question_shows_the_tool_and_its_arguments_and_allow_once_runs_it(
    home: Path,
) -> None:
    result, shown = call_on_terminal(home, b"1\n")
    assert b"Allow the MCP tool workbench_echo (server workbench)?" in shown
    assert b'"message": "on a tty"' in shown
    assert b"3) Always allow" in shown
    assert result.returncode == 0
    assert result.stdout == "Echo: on a tty\n"
    # Allowed once only: the next run without a terminal is refused.
    refused = call_without_terminal(home)
    assert refused.returncode == 1
    assert "mcpServers.workbench.approveTools" in refused.stderr


def test_deny_refuses_the_call(home: Path) -> None:
    result, shown = call_on_terminal(home, b"deny\n")
    assert result.returncode == 1
    assert b"denied" in shown  # failures go to stderr, here the terminal
    assert result.stdout == ""


def test_always_allow_is_remembered_in_the_agent_dir(home: Path) -> None:
    result, _ = call_on_terminal(home, b"3\n")
    assert result.stdout == "Echo: on a tty\n"
    saved = json.loads((home / "agent" / "mcp-approvals.json").read_text())
    assert set(saved["always"]["workbench"]) == {"echo"}
    assert "on a tty" not in json.dumps(saved)  # arguments are never written
    again = call_without_terminal(home)
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout == "Echo: no tty\n"


def test_without_a_terminal_the_call_fails_closed_naming_the_setting(home: Path) -> None:
    refused = call_without_terminal(home)
    assert refused.returncode == 1
    assert "needs the user's approval (mcpServers.workbench.approveTools)" in refused.stderr
    assert refused.stdout == ""
