"""A gateway client's call of a tool whose server runs it as a task: the gateway follows the
task, relays its question to the calling client, and cancels it when the client does."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from .conftest import FIXTURES, GatewayWorkspace, stdio_gateway, text_of

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

TASKS_SERVER = FIXTURES / "tasks_server.py"


def tasks_entry(cancel_log: Path) -> dict[str, Any]:
    return {
        "command": sys.executable,
        "args": [str(TASKS_SERVER)],
        "env": {"TASKS_CANCEL_LOG": str(cancel_log)},
        "protocolVersion": "auto",
        "lifecycle": "eager",
        "directTools": True,
    }


async def test_a_task_and_its_question_reach_the_calling_client(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config({"jobs": tasks_entry(gw_workspace.root / "cancelled.txt")})
    questions: list[str] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        questions.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Grace"})

    async with stdio_gateway(gw_workspace, elicitation_callback=elicitation) as client:
        report = await client.call_tool("jobs_slow_report", {"seconds": 0.2})
        proxied = await client.call_tool(
            "mcp", {"tool": "jobs_slow_report", "args": {"seconds": 0.1}}
        )
        greeting = await client.call_tool("jobs_ask_name", {})
        failed = await client.call_tool("jobs_doomed", {})
    assert text_of(report) == "report ready"
    assert "report ready" in text_of(proxied)
    assert text_of(greeting) == "hello Grace (accept)"
    assert questions == ["What is your name?"]
    assert failed.is_error
    assert "the job crashed" in text_of(failed)


async def _running_tasks(client: Client) -> str:
    status = text_of(await client.call_tool("mcp", {}))
    return status.split("Running tasks", 1)[1] if "Running tasks" in status else ""


async def test_a_client_cancelling_its_call_cancels_the_task_upstream(
    gw_workspace: GatewayWorkspace,
) -> None:
    cancel_log = gw_workspace.root / "cancelled.txt"
    gw_workspace.write_config({"jobs": tasks_entry(cancel_log)})
    async with stdio_gateway(gw_workspace) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(client.call_tool, "jobs_slow_report", {"seconds": 60})
            with anyio.fail_after(20):
                while not (running := await _running_tasks(client)):
                    await anyio.sleep(0.05)
            assert "jobs/slow_report" in running
            assert "working" in running
            tg.cancel_scope.cancel()
        with anyio.fail_after(20):
            while not cancel_log.exists():
                await anyio.sleep(0.05)
        [task_id] = cancel_log.read_text().split()
        assert task_id in running
        with anyio.fail_after(20):
            while await _running_tasks(client):
                await anyio.sleep(0.05)


# resources/subscribe is a handshake-era method; the SDK client warns that 2026-07-28 replaces it.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_client_subscribes_to_a_resource_of_a_2026_server(
    gw_workspace: GatewayWorkspace,
) -> None:
    """The upstream speaks 2026-07-28 (no ``resources/subscribe``): the gateway holds a
    listen stream for the resource while its client is subscribed."""
    gw_workspace.write_config({"jobs": tasks_entry(gw_workspace.root / "cancelled.txt")})
    updated = anyio.Event()
    seen: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            seen.append(str(message.params.uri))
            updated.set()

    async with stdio_gateway(gw_workspace, message_handler=on_message) as client:
        await client.subscribe_resource("jobs://board")
        await client.call_tool("jobs_touch", {"uri": "jobs://board"})
        with anyio.fail_after(10):
            await updated.wait()
        await client.unsubscribe_resource("jobs://board")
        await client.call_tool("jobs_touch", {"uri": "jobs://board"})
        await anyio.sleep(0.5)  # an update after unsubscribing would arrive meanwhile
    assert seen == ["jobs://board"]
