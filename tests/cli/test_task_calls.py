"""``pi-mcp call`` of a tool its server runs as a task: the CLI waits for the task's result,
and the task's question is asked at the terminal like any elicitation."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .terminal import pi_mcp, run_on_terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX"),
]

TASKS_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "tasks_server.py"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    config: dict[str, Any] = {
        "mcpServers": {
            "jobs": {
                "command": sys.executable,
                "args": [str(TASKS_SERVER)],
                "protocolVersion": "auto",
            }
        }
    }
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    return tmp_path


def test_call_waits_for_the_tasks_result(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "slow_report", '{"seconds": 0.3}')
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "report ready"


def test_a_failed_task_fails_the_command_with_its_reason(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "doomed")
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "the job crashed" in result.stdout + result.stderr


def test_the_tasks_question_is_asked_at_the_terminal(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "ask_name", "{}")
    result, shown = run_on_terminal(
        argv, env, [(b"Answer? [Y/n]: ", b"\n"), (b"name (required): ", b"Lin\n")]
    )
    assert b"What is your name?" in shown
    assert result.returncode == 0, shown
    assert result.stdout.strip() == "hello Lin (accept)"
