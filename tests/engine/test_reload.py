"""``McpAdapter.reload``: follow a changed configuration without restarting what did not change."""

from __future__ import annotations

import dataclasses
import sys
import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest

from pi_mcp_adapter.config import LoadedConfig, load_config
from pi_mcp_adapter.config._models import ServerEntry
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.surface import register_surfaces

from .conftest import RecordingHost, Workspace, fixture_entry, pid_is_running, workbench_entry

FIXTURE = fixture_entry()["args"][0]

pytestmark = [pytest.mark.slow]


async def text(adapter: McpAdapter, tool: str, args: dict[str, Any] | None = None) -> str:
    with anyio.fail_after(30):
        outcome = await adapter.call(tool, args or {})
    assert outcome.error_kind is None, outcome.message
    assert outcome.result is not None
    return str(outcome.result.content[0].text)  # type: ignore[union-attr]


async def test_reload_closes_removed_restarts_changed_and_keeps_unchanged_servers(
    workspace: Workspace,
) -> None:
    workspace.write_config(
        {"keep": fixture_entry(), "gone": fixture_entry(), "change": fixture_entry()}
    )
    host = RecordingHost(builtin_tools=["read"])
    async with workspace.adapter(host=host) as adapter:
        register_surfaces(adapter, host)
        pids = {name: await text(adapter, f"{name}_pid") for name in ("keep", "gone", "change")}

        workspace.write_config(
            {
                "keep": fixture_entry(),
                "change": fixture_entry(env={"MARK": "v2"}),
                "new": workbench_entry(directTools=["echo"]),
            }
        )
        with anyio.fail_after(60):
            report = await adapter.reload()

        assert (report.added, report.removed, report.changed, report.unchanged) == (
            ("new",),
            ("gone",),
            ("change",),
            ("keep",),
        )
        assert not pid_is_running(int(pids["gone"]))
        assert await text(adapter, "keep_pid") == pids["keep"]
        assert await text(adapter, "change_pid") != pids["change"]
        # Short: an env value of six characters or more is a secret, masked in results.
        assert await text(adapter, "change_env", {"name": "MARK"}) == "v2"
        assert not any(t.server == "gone" for t in adapter.tools())
        # The surfaces followed: the new server's direct tool is registered and active.
        assert "new_echo" in host.get_active_tools()
        await host.wait_for(lambda: host.status_line == "MCP: 3/3 servers, 28 tools")
        assert await text(adapter, "new_echo", {"message": "hi"}) == "Echo: hi"


async def test_a_session_start_event_reloads(workspace: Workspace) -> None:
    workspace.write_config({"one": fixture_entry()})
    host = RecordingHost()
    async with workspace.adapter(host=host) as adapter:
        workspace.write_config({"one": fixture_entry(), "two": fixture_entry()})
        with anyio.fail_after(60):
            await host.emit("session_start")
        assert adapter.server_status("two").status == "connected"  # not cached: connected
        assert "two_echo" in {t.name for t in adapter.tools()}


async def test_an_older_reload_that_finishes_last_installs_nothing(workspace: Workspace) -> None:
    workspace.write_config({"first": fixture_entry()})
    async with workspace.adapter(connect_missing=False) as adapter:
        read_config = adapter._load_config
        first_read = threading.Event()
        release_first = threading.Event()

        def slow_first_read() -> LoadedConfig:
            # Wraps the real loader: the first reload reads the files, then waits.
            config = read_config()
            if not first_read.is_set():
                first_read.set()
                release_first.wait(30)
            return config

        adapter._load_config = slow_first_read  # type: ignore[method-assign]
        workspace.write_config({"older": fixture_entry()})
        results: dict[str, Any] = {}

        async def older() -> None:
            results["older"] = await adapter.reload()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(older)
                await anyio.to_thread.run_sync(first_read.wait, 30)
                workspace.write_config({"newer": fixture_entry()})
                results["newer"] = await adapter.reload()
                release_first.set()
        assert results["older"].superseded
        assert results["newer"].added == ("newer",)
        assert list(adapter.servers) == ["newer"]


async def test_a_configuration_given_in_code_is_kept_by_reload(workspace: Workspace) -> None:
    workspace.write_config({"given": fixture_entry()})
    config = load_config(
        agent_dir=workspace.agent_dir, project_dir=workspace.project_dir, home=workspace.home
    )
    workspace.write_config({"from-file": fixture_entry()})
    adapter = McpAdapter(
        config=config,
        agent_dir=workspace.agent_dir,
        project_dir=workspace.project_dir,
        connect_missing=False,
    )
    async with adapter:
        report = await adapter.reload()
    assert report.unchanged == ("given",)
    assert list(adapter.servers) == ["given"]


async def test_a_config_loader_is_what_reload_reads(workspace: Workspace) -> None:
    workspace.write_config({"from-file": fixture_entry()})
    extra = ServerEntry(command=sys.executable, args=[str(FIXTURE)])

    def files_plus_one() -> LoadedConfig:
        config = load_config(
            agent_dir=workspace.agent_dir, project_dir=workspace.project_dir, home=workspace.home
        )
        return dataclasses.replace(config, servers={**config.servers, "added-in-code": extra})

    adapter = McpAdapter(
        config=files_plus_one(),
        config_loader=files_plus_one,
        agent_dir=workspace.agent_dir,
        project_dir=workspace.project_dir,
        connect_missing=False,
    )
    async with adapter:
        workspace.write_config({"second-file": fixture_entry()})
        report = await adapter.reload()
    assert (report.added, report.removed, report.unchanged) == (
        ("second-file",),
        ("from-file",),
        ("added-in-code",),
    )


async def test_a_broken_edit_keeps_the_last_good_config_and_says_which_file(
    workspace: Workspace,
) -> None:
    workspace.write_config({"keep": fixture_entry()})
    host = RecordingHost()
    async with workspace.adapter(host=host) as adapter:
        register_surfaces(adapter, host)
        before = await text(adapter, "keep_pid")
        workspace.config_file.write_text('{"mcpServers": {"keep": ')  # saved half-way
        with anyio.fail_after(30):
            report = await adapter.reload()
        assert report.kept_last_good
        assert list(adapter.servers) == ["keep"]
        assert await text(adapter, "keep_pid") == before  # still the same connection
        (notice,) = host.notices_with("not reloaded")
        assert notice[0] == "error"
        assert str(workspace.config_file) in notice[1]


async def test_watch_config_follows_an_edit_without_being_asked(workspace: Workspace) -> None:
    workspace.write_config({"keep": fixture_entry()})
    host = RecordingHost()
    async with workspace.adapter(host=host) as adapter, anyio.create_task_group() as tg:
        register_surfaces(adapter, host)
        tg.start_soon(lambda: adapter.watch_config(interval_s=0.05))
        workspace.write_config({"keep": fixture_entry(), "added": fixture_entry()})
        await host.wait_for(lambda: "added" in adapter.servers)
        assert await text(adapter, "added_pid")
        await host.wait_for(lambda: bool(host.notices_with("reloaded: added added")))
        tg.cancel_scope.cancel()
