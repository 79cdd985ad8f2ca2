"""A hostile server's text cannot drive the person's terminal.

Descriptions, results and stderr tails are server text; on a terminal the CLI shows their
control characters as escapes (colour aside), so a server cannot clear the screen, rewrite an
earlier line, set the window title or plant a link. Output to a pipe keeps the bytes as sent.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parents[1] / "fixtures" / "hostile_text_server.py"
RUN_TIMEOUT_S = 90.0

# What the server sends, raw: any of these on the terminal means it reached the terminal as is.
_RAW_CONTROLS = re.compile(rb"\x1b\[2J|\x1b\[H|\x1b\]|\x07|\rFAKE")


def _home(tmp_path: Path, *args: str) -> dict[str, str]:
    agent = tmp_path / "agent"
    agent.mkdir()
    server = {"command": sys.executable, "args": [str(FIXTURE), *args]}
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"h": server}}))
    (tmp_path / "project").mkdir()
    return {
        **os.environ,
        "HOME": str(tmp_path),
        "PI_CODING_AGENT_DIR": str(agent),
        "PI_MCP_WARM": "0",
        "TERM": "xterm",
    }


def _on_terminal(env: dict[str, str], tmp_path: Path, *args: str) -> tuple[int, bytes]:
    """Run ``pi-mcp ARGS`` with stdin, stdout and stderr on one pty; its exit code and screen."""
    master, slave = pty.openpty()
    argv = [sys.executable, "-m", "pi_mcp_adapter", "--project", str(tmp_path / "project"), *args]
    process = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + RUN_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 1.0)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # every writer closed the terminal
                    break
                if not chunk:
                    break
                shown += chunk
            elif process.poll() is not None:
                break
        return process.wait(timeout=RUN_TIMEOUT_S), bytes(shown)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(master)


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("describe", "h_weather"), id="describe"),
        pytest.param(("search", "weather"), id="search"),
        pytest.param(("call", "h_weather", '{"city": "Oslo"}'), id="call"),
    ],
)
def test_a_servers_description_and_result_cannot_drive_the_terminal(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    env = _home(tmp_path)
    code, shown = _on_terminal(env, tmp_path, *args)
    assert code == 0, shown.decode(errors="replace")
    assert _RAW_CONTROLS.search(shown) is None, shown
    # What the server sent is still shown, as text the person can read.
    assert rb"\x1b[2J" in shown
    assert rb"\x1b]0;pwned\x07" in shown


@pytest.mark.slow
def test_a_failing_servers_stderr_tail_cannot_drive_the_terminal(tmp_path: Path) -> None:
    env = _home(tmp_path, "--fail")
    code, shown = _on_terminal(env, tmp_path, "connect", "h")
    assert code != 0
    assert b"starting" in shown  # the tail is shown...
    assert _RAW_CONTROLS.search(shown) is None, shown  # ...inert


@pytest.mark.slow
def test_a_result_sent_to_a_pipe_keeps_the_bytes_the_server_sent(tmp_path: Path) -> None:
    env = _home(tmp_path)
    argv = [sys.executable, "-m", "pi_mcp_adapter", "--project", str(tmp_path / "project")]
    done = subprocess.run(
        [*argv, "call", "h_weather", '{"city": "Oslo"}'],
        env=env,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert b"sunny in Oslo\x1b[2J" in done.stdout
