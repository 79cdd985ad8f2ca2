"""What the engine tells the user through the host: notices and the status line."""

from __future__ import annotations

import anyio
import pytest

from .conftest import HttpFixtures, RecordingHost, Workspace, fixture_entry, workbench_entry

pytestmark = [pytest.mark.slow]


async def test_a_server_that_fails_to_start_and_comes_back_is_announced_once_each(
    workspace: Workspace,
) -> None:
    crash_marker = workspace.root / "crash-once"
    crash_marker.write_text("x")
    workspace.write_config({"flaky": fixture_entry("--crash-at-start-file", str(crash_marker))})
    host = RecordingHost()
    async with workspace.adapter(host=host, status_debounce_s=0.01) as adapter:
        await host.wait_for(lambda: bool(host.notices_with("is unavailable")))
        [(level, message)] = host.notices_with("flaky")
        assert level == "error"
        assert "exited with code 3 during startup" in message
        await host.wait_for(lambda: host.status_line == "MCP: 0/1 servers, 0 tools")
        # Calls in backoff fail again, but the user was told already.
        outcome = await adapter.call("flaky_echo", {"message": "x"})
        assert outcome.error_kind == "unknown_tool"
        with anyio.fail_after(30):
            errors = await adapter.reconnect("flaky")
        assert errors == {"flaky": None}
        await host.wait_for(lambda: bool(host.notices_with("is back")))
        assert [level for level, _ in host.notices_with("flaky")] == ["error", "info"]
        await host.wait_for(lambda: host.status_line == "MCP: 1/1 servers, 10 tools")
    assert host.status_line is None  # cleared when the engine stops
    assert all(a != b for a, b in zip(host.statuses, host.statuses[1:], strict=False))


async def test_a_server_that_needs_authentication_says_how_to_sign_in(
    workspace: Workspace, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.mcp(
        "streamable-http", "--require-bearer-env", "EXPECTED", env={"EXPECTED": "right"}
    )
    workspace.write_config({"remote": {"url": url}})
    host = RecordingHost()
    async with workspace.adapter(host=host):
        await host.wait_for(lambda: bool(host.notices_with("needs authentication")))
    [(level, message)] = host.notices_with("remote")
    assert level == "warning"
    assert "/mcp-auth remote" in message


async def test_a_tool_renamed_for_a_name_collision_is_announced(workspace: Workspace) -> None:
    workspace.write_config(
        {
            "workbench": workbench_entry(toolPrefix="none"),
            "fixture": fixture_entry(toolPrefix="none"),
        }
    )
    host = RecordingHost()
    async with workspace.adapter(host=host) as adapter:
        renamed = {c.original_name: c.assigned_name for c in adapter.catalog.collisions}
        assert set(renamed) == {"echo", "fail"}
        for tool, assigned in renamed.items():
            [(level, message)] = host.notices_with(f"MCP tool {tool!r} of server 'fixture'")
            assert level == "warning"
            assert f"is called {assigned!r}" in message
            assert "taken by server 'workbench'" in message


async def test_a_burst_of_changes_waits_for_the_debounce_before_updating_the_status(
    workspace: Workspace,
) -> None:
    workspace.write_config(
        {"one": workbench_entry(lifecycle="eager"), "two": workbench_entry(lifecycle="eager")}
    )
    host = RecordingHost()
    async with workspace.adapter(host=host, status_debounce_s=3600) as adapter:
        # Both servers connected, each a handful of state changes and catalog rebuilds.
        assert adapter.status().connected == 2
        assert host.statuses == []
    host = RecordingHost()
    async with workspace.adapter(host=host, status_debounce_s=0.01):
        await host.wait_for(lambda: host.status_line == "MCP: 2/2 servers, 16 tools")
