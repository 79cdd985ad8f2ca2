"""One connection: transports, catalog listing, calls, notifications, logs and clean closing."""

from __future__ import annotations

import io
import time
from pathlib import Path

import anyio
import pytest

from pi_mcp_adapter import NeedsAuthError, RequestTimeoutError, ServerReportedError
from pi_mcp_adapter.catalog._metadata import ServerMetadata
from pi_mcp_adapter.config._models import ServerEntry
from pi_mcp_adapter.servers import ServerConnection

from ._support import HttpFixtures, ManagerFactory, fixture_entry, pid_is_running, text_of

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaked_processes")]


async def test_a_stdio_server_lists_tools_resources_prompts_and_instructions(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"fx": fixture_entry("--instructions", "use echo")}) as manager:
        connection = await manager.connect("fx")
        assert connection.transport == "stdio"
        metadata = connection.metadata
        names = [tool["name"] for tool in metadata.tools]
        assert names[:3] == ["echo", "slow", "crash"]
        assert metadata.tools[0]["inputSchema"]["required"] == ["message"]
        assert [r["uri"] for r in metadata.resources] == ["fixture://greeting"]
        assert [p["name"] for p in metadata.prompts] == ["greet"]
        assert metadata.instructions == "use echo"
        assert manager.metadata("fx") == metadata
        assert manager.state("fx").tool_count == len(names)


async def test_a_server_without_resources_or_prompts_connects_with_empty_lists(
    make_manager: ManagerFactory,
) -> None:
    entry = fixture_entry("--no-resources", "--no-prompts")
    async with make_manager({"fx": entry}) as manager:
        metadata = (await manager.connect("fx")).metadata
        assert metadata.tools
        assert metadata.resources == ()
        assert metadata.prompts == ()


async def test_a_paginated_catalog_of_5000_tools_is_listed_completely(
    make_manager: ManagerFactory,
) -> None:
    entry = fixture_entry("--tools", "5000", "--page-size", "100")
    async with make_manager({"big": entry}) as manager:
        started = time.monotonic()
        metadata = (await manager.connect("big")).metadata
        names = [tool["name"] for tool in metadata.tools]
        assert len(names) == 9 + 5000
        assert len(set(names)) == len(names)
        assert names[-1] == "tool_04999"
        assert time.monotonic() - started < 30
        assert text_of(await manager.call_tool("big", "tool_04321")) == "tool_04321"


async def test_results_pass_through_even_when_they_break_their_output_schema(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"fx": fixture_entry()}) as manager:
        result = await manager.call_tool("fx", "structured")
        assert result.structured_content == {"count": "many"}
        failed = await manager.call_tool("fx", "fail")
        assert failed.is_error is True
        assert text_of(failed) == "it failed"


async def test_many_calls_run_concurrently_on_one_connection(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"fx": fixture_entry()}) as manager:
        await manager.connect("fx")
        in_flight_seen: list[int] = []

        async def slow_call() -> None:
            in_flight_seen.append(manager.state("fx").in_flight)
            await manager.call_tool("fx", "slow", {"seconds": 1.0})

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(slow_call)
        elapsed = time.monotonic() - started
        # Serialised, ten 1 s calls would take 10 s.
        assert elapsed < 4, f"10 concurrent 1 s calls took {elapsed:.1f} s"
        assert max(in_flight_seen) >= 2
        assert manager.state("fx").in_flight == 0


async def test_a_request_timeout_fails_the_call_but_keeps_the_connection(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"fx": fixture_entry(request_timeout_ms=300)}) as manager:
        connection = await manager.connect("fx")
        started = time.monotonic()
        with pytest.raises(RequestTimeoutError, match=r"timed out after 0\.3 s"):
            await manager.call_tool("fx", "slow", {"seconds": 5})
        assert time.monotonic() - started < 3
        assert connection.is_alive
        result = await manager.call_tool("fx", "echo", {"message": "after"})
        assert text_of(result) == "Echo: after"
        with pytest.raises(RequestTimeoutError):
            await manager.call_tool("fx", "slow", {"seconds": 5}, timeout_s=0.2)


async def test_reading_a_resource_returns_its_contents_and_unknown_ones_are_reported(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"fx": fixture_entry()}) as manager:
        result = await manager.read_resource("fx", "fixture://greeting")
        assert result.contents[0].text == "hello from fixture"  # type: ignore[union-attr]
        with pytest.raises(ServerReportedError) as caught:
            await manager.read_resource("fx", "fixture://missing")
        assert caught.value.server == "fx"


async def test_a_tools_list_changed_notification_refreshes_the_catalog_and_tells_listeners(
    make_manager: ManagerFactory,
) -> None:
    changes: list[tuple[str, ServerMetadata]] = []
    refreshed = anyio.Event()

    async def listener(server: str, metadata: ServerMetadata) -> None:
        changes.append((server, metadata))
        if any(tool["name"] == "brand_new" for tool in metadata.tools):
            refreshed.set()

    async with make_manager({"fx": fixture_entry()}) as manager:
        manager.on_tools_changed(listener)
        await manager.connect("fx")
        await manager.call_tool("fx", "add_tool", {"name": "brand_new"})
        with anyio.fail_after(5):
            await refreshed.wait()
        metadata = manager.metadata("fx")
        assert metadata is not None
        assert "brand_new" in [tool["name"] for tool in metadata.tools]
        assert [server for server, _ in changes] == ["fx", "fx"]


async def test_the_child_gets_the_parent_environment_plus_its_own_env(
    make_manager: ManagerFactory,
) -> None:
    environ = {"PATH": "/usr/bin:/bin", "FROM_PARENT": "parent-value"}
    entry = fixture_entry(env={"FROM_ENTRY": "entry-value"})
    async with make_manager({"fx": entry}, environ=environ) as manager:
        parent = await manager.call_tool("fx", "env", {"name": "FROM_PARENT"})
        own = await manager.call_tool("fx", "env", {"name": "FROM_ENTRY"})
        assert (text_of(parent), text_of(own)) == ("parent-value", "entry-value")


async def test_stderr_goes_to_the_server_log_file(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    log_dir = tmp_path / "agent" / "logs"
    entry = fixture_entry("--stderr-lines", "3", env={"SECRET_TOKEN": "do-not-log"})
    async with make_manager({"my/server": entry}, log_dir=log_dir) as manager:
        connection = await manager.connect("my/server")
        assert connection.log_path == log_dir / "my_server.log"
        await manager.close("my/server")
    log_text = (log_dir / "my_server.log").read_text()
    assert "starting server 'my/server'" in log_text
    assert "fixture stderr line 2" in log_text
    assert "do-not-log" not in log_text


async def test_a_debug_server_also_echoes_its_stderr_to_the_terminal(
    make_manager: ManagerFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    terminal = io.StringIO()
    monkeypatch.setattr("pi_mcp_adapter.servers._connection.terminal", lambda: terminal)
    entry = fixture_entry("--stderr-lines", "1", debug=True)
    async with make_manager({"loud": entry}) as manager:
        await manager.connect("loud")
        await manager.close("loud")
    assert "[loud] fixture stderr line 0" in terminal.getvalue()


async def test_closing_kills_the_servers_whole_process_group(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"parent": fixture_entry("--spawn-child")}) as manager:
        server_pid = int(text_of(await manager.call_tool("parent", "pid")))
        child_pid = int(text_of(await manager.call_tool("parent", "child_pid")))
        assert pid_is_running(child_pid)
        started = time.monotonic()
        await manager.close("parent")
        assert time.monotonic() - started < 8
        assert manager.state("parent").status == "closed"
    assert not pid_is_running(server_pid)
    assert not pid_is_running(child_pid)


async def test_leaving_the_manager_closes_every_server(make_manager: ManagerFactory) -> None:
    servers = {f"s{i}": fixture_entry() for i in range(3)}
    pids = []
    async with make_manager(servers) as manager:
        for name in servers:
            pids.append(int(text_of(await manager.call_tool(name, "pid"))))
    assert not [pid for pid in pids if pid_is_running(pid)]


async def test_a_connection_can_be_owned_by_any_task_group(tmp_path: Path) -> None:
    async with anyio.create_task_group() as tg:
        connection = ServerConnection("fx", fixture_entry(), log_dir=tmp_path)
        assert await tg.start(connection.run) is connection
        result = await connection.call_tool("echo", {"message": "direct"}, timeout_s=5)
        assert text_of(result) == "Echo: direct"
        await connection.close()
        assert not connection.is_alive


# -- HTTP transports ------------------------------------------------------------------------


async def test_a_streamable_http_server_is_used_over_streamable_http(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.mcp("streamable-http")
    async with make_manager({"remote": ServerEntry(url=url)}) as manager:
        result = await manager.call_tool("remote", "echo", {"message": "over http"})
        assert text_of(result) == "Echo: over http"
        assert manager.state("remote").transport == "streamable-http"


async def test_an_sse_only_server_is_reached_through_the_sse_fallback(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.mcp("sse")
    async with make_manager({"legacy": ServerEntry(url=url)}) as manager:
        result = await manager.call_tool("legacy", "echo", {"message": "over sse"})
        assert text_of(result) == "Echo: over sse"
        state = manager.state("legacy")
        assert (state.status, state.transport) == ("connected", "sse")


@pytest.mark.parametrize(
    "auth_fields",
    [
        pytest.param({"bearer_token": "s3cret"}, id="bearerToken"),
        pytest.param({"bearer_token_env": "FIXTURE_TOKEN"}, id="bearerTokenEnv"),
        pytest.param({"headers": {"Authorization": "Bearer s3cret"}}, id="headers"),
    ],
)
async def test_bearer_credentials_are_sent_as_an_authorization_header(
    make_manager: ManagerFactory,
    http_fixtures: HttpFixtures,
    auth_fields: dict[str, object],
) -> None:
    url = http_fixtures.mcp(
        "streamable-http",
        "--require-bearer-env",
        "EXPECTED",
        env={"EXPECTED": "s3cret"},
    )
    entry = ServerEntry(url=url, **auth_fields)  # type: ignore[arg-type]
    async with make_manager({"remote": entry}, environ={"FIXTURE_TOKEN": "s3cret"}) as manager:
        result = await manager.call_tool("remote", "echo", {"message": "authorized"})
        assert text_of(result) == "Echo: authorized"


async def test_a_wrong_bearer_token_means_needs_auth_and_is_never_shown(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.mcp(
        "streamable-http", "--require-bearer-env", "EXPECTED", env={"EXPECTED": "right"}
    )
    entry = ServerEntry(url=url, bearer_token="wrong-token-value")
    async with make_manager({"remote": entry}) as manager:
        with pytest.raises(NeedsAuthError) as caught:
            await manager.connect("remote")
        state = manager.state("remote")
    assert state.status == "needs-auth"
    assert "wrong-token-value" not in str(caught.value)
    assert "wrong-token-value" not in repr(state)


async def test_a_missing_bearer_token_variable_is_named_in_the_error(
    make_manager: ManagerFactory,
) -> None:
    entry = ServerEntry(url="http://127.0.0.1:9/mcp", bearer_token_env="NOT_SET_ANYWHERE")
    async with make_manager({"remote": entry}, environ={}) as manager:
        with pytest.raises(Exception, match="NOT_SET_ANYWHERE"):
            await manager.connect("remote")
