"""Servers' elicitation requests in the CLI: ``pi-mcp call`` shows the form on a real pty."""

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

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    config: dict[str, Any] = {
        "mcpServers": {
            "q": {"command": sys.executable, "args": [str(FIXTURES / "questions_server.py")]},
            "conf": {
                "command": sys.executable,
                "args": [str(FIXTURES / "conformance_everything.py")],
            },
        }
    }
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    return tmp_path


def _content(stdout: str) -> Any:
    return json.loads(stdout.split("content=", 1)[1])


def test_the_form_shows_each_field_and_returns_the_answers(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "book_table", "{}")
    result, shown = run_on_terminal(
        argv,
        env,
        [
            (b"Answer? [Y/n]: ", b"\n"),
            (b"name (required): ", b"\n"),  # required, no default: asked again
            (b"a value is required", b"Ada\n"),
            (b"party (whole number) [2]: ", b"many\n"),
            (b"enter a whole number", b"4\n"),
            (b"seating [inside]: ", b"2\n"),
            (b"highchair (y/n) [n]: ", b"y\n"),
        ],
    )
    assert b"MCP server 'q' asks:\r\n  Book a table at Chez Fixture" in shown
    assert b"Name: Who the table is for" in shown
    assert b"1) inside" in shown
    assert b"2) terrace" in shown
    assert result.returncode == 0, shown
    assert result.stdout.startswith("action=accept")
    assert _content(result.stdout) == {
        "name": "Ada",
        "party": 4,
        "seating": "terrace",
        "highchair": True,
    }


def test_enter_takes_every_sep1034_default(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "test_elicitation_sep1034_defaults", "{}")
    result, shown = run_on_terminal(argv, env, [], answer_rest=b"\n")
    for default in (b"[John Doe]", b"[30]", b"[95.5]", b"[active]", b"[y]"):
        assert default in shown
    assert result.returncode == 0, shown
    assert _content(result.stdout) == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }


def test_no_at_the_first_prompt_declines(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "book_table", "{}")
    result, _ = run_on_terminal(argv, env, [(b"Answer? [Y/n]: ", b"n\n")])
    assert result.stdout.strip() == "action=decline content=null"


def test_end_of_input_cancels(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "book_table", "{}")
    result, _ = run_on_terminal(argv, env, [(b"Answer? [Y/n]: ", b"\n"), (b"name", b"\x04")])
    assert result.stdout.strip() == "action=cancel content=null"


def test_url_mode_shows_the_url_and_asks_for_consent(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "open_payment", "{}")
    result, shown = run_on_terminal(argv, env, [(b"Will you open it? [Y/n]: ", b"y\n")])
    assert b"URL: https://pay.example/checkout/42" in shown
    assert b"Pay the deposit" in shown
    assert result.stdout.strip() == "action=accept"


def test_without_a_terminal_the_question_is_declined_with_a_message(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "book_table", "{}")
    result = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=90
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "action=decline content=null"
    assert (
        "MCP server 'q' asked for input (Book a table at Chez Fixture); declined: run the "
        "command at a terminal to answer"
    ) in result.stderr


def test_the_cli_does_not_offer_sampling(home: Path) -> None:
    argv, env = pi_mcp(home, "call", "can_sample", "{}")
    result = subprocess.run(
        argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=90
    )
    assert result.stdout.strip() == "no"
