"""The time a person takes to answer a server's question never counts against the call's
``requestTimeoutMs``, whichever protocol era the connection speaks."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from pi_mcp_adapter import McpAdapter

from .conftest import Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUESTIONS = [str(FIXTURES / "questions_server.py")]
TASKS = [str(FIXTURES / "tasks_server.py")]

ANSWER_AFTER_S = 4.0
"""Twice the request timeout below: the call would fail if the person's time counted."""


def _text(outcome: Any) -> str:
    assert outcome.error_kind is None, outcome.message
    return "".join(c.text for c in outcome.result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize(
    ("args", "protocol", "tool", "answered"),
    [
        pytest.param(QUESTIONS, "legacy", "book_table", "action=accept", id="2025-request"),
        pytest.param(TASKS, "auto", "ask_name", "hello Ada", id="2026-task-question"),
    ],
)
async def test_an_elicitation_answered_after_the_request_timeout_still_completes_the_call(
    workspace: Workspace, args: list[str], protocol: str, tool: str, answered: str
) -> None:
    entry: dict[str, Any] = {
        "command": sys.executable,
        "args": args,
        "protocolVersion": protocol,
        "requestTimeoutMs": 2000,
    }
    workspace.write_config({"q": entry})

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep(ANSWER_AFTER_S)  # the person reads the form and types
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with McpAdapter(
        agent_dir=workspace.agent_dir,
        project_dir=workspace.project_dir,
        home=workspace.home,
        connect_eager=False,
        elicit=elicit,
    ) as adapter:
        with anyio.fail_after(60):
            outcome = await adapter.call(tool, {})
    assert _text(outcome).startswith(answered)
