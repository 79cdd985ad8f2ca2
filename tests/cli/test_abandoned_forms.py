"""A question left open at the terminal after its call ended is closed, not left to the shell."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .terminal import pi_mcp, run_on_terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX"),
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_form_the_server_withdrew_is_closed_on_the_terminal(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    questions = {"command": sys.executable, "args": [str(FIXTURES / "questions_server.py")]}
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": {"q": questions}}))
    argv, env = pi_mcp(tmp_path, "call", "q_book_table_within", '{"seconds": 3}')
    env["PI_MCP_WARM"] = "0"

    # Nobody answers: the server gives up on its question and the call ends.
    result, shown = run_on_terminal(argv, env, [])

    assert b"Answer? [Y/n]: " in shown
    assert b"closed: the call this question belonged to has ended" in shown
    assert result.stdout.strip() == "no answer"
    assert result.returncode == 0
