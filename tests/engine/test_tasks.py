"""Tool calls a server turns into durable tasks (the ``io.modelcontextprotocol/tasks``
extension) pass the engine's pipeline like any call: polled to their end, cancelled upstream
when the caller gives up, their questions answered by the adapter's answerers."""

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
TASKS_SERVER = str(FIXTURES / "tasks_server.py")


def tasks_entry(cancel_log: Path | None = None, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "command": sys.executable,
        "args": [TASKS_SERVER],
        "protocolVersion": "auto",
        **fields,
    }
    if cancel_log is not None:
        entry["env"] = {"TASKS_CANCEL_LOG": str(cancel_log)}
    return entry


def _text(outcome: Any) -> str:
    assert outcome.error_kind is None, outcome.message
    return "".join(c.text for c in outcome.result.content if isinstance(c, types.TextContent))


def _adapter(workspace: Workspace, **options: Any) -> McpAdapter:
    return McpAdapter(
        agent_dir=workspace.agent_dir,
        project_dir=workspace.project_dir,
        home=workspace.home,
        connect_eager=False,
        **options,
    )


async def test_a_call_the_server_turns_into_a_task_returns_the_tasks_result(
    workspace: Workspace,
) -> None:
    workspace.write_config({"jobs": tasks_entry()})
    async with _adapter(workspace) as adapter:
        outcome = await adapter.call("slow_report", {"seconds": 0.2})
    assert _text(outcome) == "report ready"


async def test_with_tasks_off_the_same_call_runs_inline(workspace: Workspace) -> None:
    workspace.write_config({"jobs": tasks_entry(tasks=False)})
    async with _adapter(workspace) as adapter:
        outcome = await adapter.call("slow_report", {"seconds": 0.05})
    assert _text(outcome) == "report ready (inline)"


async def test_a_legacy_connection_never_sees_tasks(workspace: Workspace) -> None:
    entry = tasks_entry()
    del entry["protocolVersion"]
    workspace.write_config({"jobs": entry})
    async with _adapter(workspace) as adapter:
        outcome = await adapter.call("slow_report", {"seconds": 0.05})
    assert _text(outcome) == "report ready (inline)"


async def test_a_failed_task_is_an_error_outcome_that_says_why(workspace: Workspace) -> None:
    workspace.write_config({"jobs": tasks_entry()})
    async with _adapter(workspace) as adapter:
        outcome = await adapter.call("doomed", {})
    assert outcome.error_kind is not None
    assert "the job crashed" in outcome.message


async def test_a_tasks_question_reaches_the_elicitation_answerer(workspace: Workspace) -> None:
    workspace.write_config({"jobs": tasks_entry()})
    asked: list[tuple[str, str]] = []

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append((server, params.message))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with _adapter(workspace, elicit=elicit) as adapter:
        outcome = await adapter.call("ask_name", {})
    assert _text(outcome) == "hello Ada (accept)"
    assert asked == [("jobs", "What is your name?")]


async def test_cancelling_the_call_cancels_the_task_on_the_server(
    workspace: Workspace, tmp_path: Path
) -> None:
    cancel_log = tmp_path / "cancelled.txt"
    workspace.write_config({"jobs": tasks_entry(cancel_log)})
    async with _adapter(workspace) as adapter:
        await adapter.connect("jobs")
        with anyio.move_on_after(30) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(adapter.call, "slow_report", {"seconds": 60})
                with anyio.fail_after(10):
                    while not adapter.status().running_tasks:
                        await anyio.sleep(0.02)
                [running] = adapter.status().running_tasks
                assert (running.server, running.tool) == ("jobs", "slow_report")
                tg.cancel_scope.cancel()
        assert not scope.cancelled_caught
        assert cancel_log.read_text().split() == [running.task_id]
        assert not adapter.status().running_tasks


async def test_a_tasks_timeout_covers_the_whole_task_and_cancels_it(
    workspace: Workspace, tmp_path: Path
) -> None:
    cancel_log = tmp_path / "cancelled.txt"
    workspace.write_config({"jobs": tasks_entry(cancel_log, requestTimeoutMs=500)})
    async with _adapter(workspace) as adapter:
        outcome = await adapter.call("slow_report", {"seconds": 60})
    assert outcome.error_kind is not None
    assert "timed out" in outcome.message
    assert len(cancel_log.read_text().split()) == 1


async def test_a_2026_servers_embedded_sampling_reaches_the_sampling_answerer(
    workspace: Workspace,
) -> None:
    workspace.write_config({"jobs": tasks_entry()})
    prompts: list[str] = []

    async def sample(server: str, params: types.CreateMessageRequestParams) -> Any:
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        prompts.append(content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="Tides"), model="m"
        )

    async with _adapter(workspace, sample=sample) as adapter:
        outcome = await adapter.call("title", {"text": "a poem about the sea"})
    assert _text(outcome) == "title: Tides"
    assert prompts == ["a poem about the sea"]
