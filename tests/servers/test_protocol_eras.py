"""Connections in the 2026-07-28 protocol era (``protocolVersion: auto``): what the legacy
era delivers by pushed notifications and server requests still reaches the caller."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from pi_mcp_adapter import NotMcpError
from pi_mcp_adapter.catalog._metadata import ServerMetadata
from pi_mcp_adapter.config._models import ServerEntry
from pi_mcp_adapter.servers import CallRelay, relay_calls

from ._support import (
    EVERYTHING_JS,
    FIXTURES_DIR,
    HttpFixtures,
    ManagerFactory,
    needs_npm,
    text_of,
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaked_processes")]

TASKS_SERVER = FIXTURES_DIR / "tasks_server.py"


def tasks_entry(**fields: Any) -> ServerEntry:
    return ServerEntry(
        command=sys.executable, args=(str(TASKS_SERVER),), protocol_version="auto", **fields
    )


async def test_a_tool_added_at_runtime_arrives_through_the_listen_stream(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"jobs": tasks_entry()}) as manager:
        connection = await manager.connect("jobs")
        assert connection.protocol_era == "2026-07-28"
        assert connection.follows_tasks
        seen = anyio.Event()

        async def on_change(server: str, metadata: ServerMetadata) -> None:
            if any(tool["name"] == "fresh" for tool in metadata.tools):
                seen.set()

        manager.on_tools_changed(on_change)
        assert text_of(await manager.call_tool("jobs", "add_tool", {"name": "fresh"})) == (
            "added fresh"
        )
        with anyio.fail_after(10):
            await seen.wait()
        assert text_of(await manager.call_tool("jobs", "fresh")) == "I am fresh"


async def test_a_resource_subscription_is_a_listen_stream_until_unsubscribed(
    make_manager: ManagerFactory,
) -> None:
    """2026-07-28 has no ``resources/subscribe``: subscribing opens a listen stream for the
    resource, so its updates still reach the manager's listeners, and unsubscribing ends it."""
    updates: list[tuple[str, str]] = []
    updated = anyio.Event()

    async def on_update(server: str, uri: str) -> None:
        updates.append((server, uri))
        updated.set()

    async with make_manager({"jobs": tasks_entry()}) as manager:
        manager.on_resource_updated(on_update)
        await manager.connect("jobs")
        await manager.subscribe_resource("jobs", "jobs://board")
        await manager.subscribe_resource("jobs", "jobs://board")  # twice is once
        await manager.call_tool("jobs", "touch", {"uri": "jobs://other"})
        await manager.call_tool("jobs", "touch", {"uri": "jobs://board"})
        with anyio.fail_after(10):
            await updated.wait()
        await manager.subscribe_resource("jobs", "jobs://board", subscribe=False)
        await manager.call_tool("jobs", "touch", {"uri": "jobs://board"})
        await anyio.sleep(0.5)  # an update that arrived after unsubscribing would show here
    assert updates == [("jobs", "jobs://board")]


async def test_progress_and_logs_reach_the_callers_relay(make_manager: ManagerFactory) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    relay = CallRelay(caller=object(), progress=on_progress, log=on_log)
    async with make_manager({"jobs": tasks_entry()}, relay_requests=True) as manager:
        with relay_calls(relay):
            result = await manager.call_tool("jobs", "busy")
    assert text_of(result) == "done"
    assert progress == [(1, 2, "halfway")]
    assert logs == ["busy working"]


async def test_a_question_embedded_in_a_result_is_answered_by_the_callers_relay(
    make_manager: ManagerFactory,
) -> None:
    asked: list[str] = []

    async def elicit(params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"sure": True})

    relay = CallRelay(caller=object(), elicitation=elicit)
    async with make_manager({"jobs": tasks_entry()}, relay_requests=True) as manager:
        with relay_calls(relay):
            result = await manager.call_tool("jobs", "confirm")
    assert text_of(result) == 'confirmed accept {"sure": true}'
    assert asked == ["Go on?"]


async def test_an_embedded_question_nobody_can_answer_is_an_error(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"jobs": tasks_entry()}) as manager:
        with pytest.raises(Exception, match="cannot ask its user"):
            await manager.call_tool("jobs", "confirm")


async def test_the_health_check_works_without_ping(make_manager: ManagerFactory) -> None:
    async with make_manager({"jobs": tasks_entry(tasks=False)}) as manager:
        connection = await manager.connect("jobs")
        assert connection.protocol_era == "2026-07-28"
        assert not connection.follows_tasks
        await connection.ping(timeout_s=5)


async def test_a_2026_server_without_the_extension_answers_inline(
    make_manager: ManagerFactory,
) -> None:
    entry = ServerEntry(
        command=sys.executable, args=("-m", "mcp_server_time"), protocol_version="auto"
    )
    async with make_manager({"time": entry}) as manager:
        connection = await manager.connect("time")
        assert connection.protocol_era == "2026-07-28"
        assert not connection.follows_tasks
        result = await manager.call_tool("time", "get_current_time", {"timezone": "UTC"})
        assert "UTC" in text_of(result)


@pytest.mark.npm
@needs_npm
async def test_a_legacy_only_server_stays_legacy_under_auto(
    make_manager: ManagerFactory,
) -> None:
    entry = ServerEntry(command="node", args=(str(EVERYTHING_JS),), protocol_version="auto")
    async with make_manager({"everything": entry}) as manager:
        connection = await manager.connect("everything")
        assert connection.protocol_era == "legacy"
        assert not connection.follows_tasks
        result = await manager.call_tool("everything", "echo", {"message": "hi"})
        assert text_of(result) == "Echo: hi"
        await connection.ping(timeout_s=5)


async def test_a_task_over_streamable_http_is_followed_and_cancelled(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures, tmp_path: Path
) -> None:
    cancel_log = tmp_path / "cancelled.txt"
    port = http_fixtures.start(TASKS_SERVER, "--http", env={"TASKS_CANCEL_LOG": str(cancel_log)})
    entry = ServerEntry(url=f"http://127.0.0.1:{port}/mcp", protocol_version="2026-07-28")
    async with make_manager({"jobs": entry}) as manager:
        connection = await manager.connect("jobs")
        assert connection.transport == "streamable-http"
        assert connection.follows_tasks
        result = await manager.call_tool("jobs", "slow_report", {"seconds": 0.1})
        assert text_of(result) == "report ready"
        async with anyio.create_task_group() as tg:
            tg.start_soon(manager.call_tool, "jobs", "slow_report", {"seconds": 60})
            with anyio.fail_after(10):
                while not manager.running_tasks():
                    await anyio.sleep(0.02)
            [running] = manager.running_tasks()
            tg.cancel_scope.cancel()
        assert cancel_log.read_text().split() == [running.task_id]
        assert not manager.running_tasks()


@pytest.mark.npm
@needs_npm
async def test_a_pinned_era_fails_on_a_server_that_does_not_speak_it(
    make_manager: ManagerFactory,
) -> None:
    entry = ServerEntry(command="node", args=(str(EVERYTHING_JS),), protocol_version="2026-07-28")
    async with make_manager({"everything": entry}) as manager:
        with pytest.raises(NotMcpError, match="does not speak the 2026-07-28 protocol"):
            await manager.connect("everything")
