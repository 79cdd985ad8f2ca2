"""The manager: dedupe, backoff, idle closing, lifecycle modes, health checks, generations."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import anyio
import pytest

from pi_mcp_adapter import (
    ConnectionLostError,
    ServerBackoffError,
    ServerDisabledError,
    ServerNotConfiguredError,
    ServerStartError,
    UsageError,
)
from pi_mcp_adapter.catalog._metadata import ServerMetadata
from pi_mcp_adapter.config._models import ServerEntry, Settings

from ._support import (
    MCP_FIXTURE,
    FakeClock,
    ManagerFactory,
    fixture_entry,
    live_descendants,
    text_of,
)

pytestmark = pytest.mark.usefixtures("no_leaked_processes")


def _running_fixtures() -> int:
    # The supervisor that starts each stdio server names the server in its command line too.
    return sum(
        1
        for p in live_descendants()
        if str(MCP_FIXTURE) in " ".join(p.cmdline()) and "_reaper.py" not in " ".join(p.cmdline())
    )


# -- without servers ------------------------------------------------------------------------


async def test_unknown_and_disabled_servers_are_refused_with_their_own_errors(
    make_manager: ManagerFactory,
) -> None:
    servers = {"off": ServerEntry(command="true", disabled=True)}
    async with make_manager(servers) as manager:
        assert manager.state("off").status == "disabled"
        with pytest.raises(ServerDisabledError, match="disabled"):
            await manager.connect("off")
        with pytest.raises(ServerNotConfiguredError, match="configured: off"):
            await manager.call_tool("nope", "echo")


async def test_a_manager_must_be_entered_before_use_and_only_once(
    make_manager: ManagerFactory,
) -> None:
    manager = make_manager({"fx": fixture_entry()})
    with pytest.raises(UsageError, match="async with"):
        await manager.connect("fx")
    async with manager:
        pass
    with pytest.raises(UsageError, match="only once"):
        async with manager:
            pass


async def test_an_exception_in_the_managed_block_keeps_its_type(
    make_manager: ManagerFactory,
) -> None:
    with pytest.raises(KeyError):
        async with make_manager({}):
            raise KeyError("mine")


# -- dedupe and generations -----------------------------------------------------------------


@pytest.mark.slow
async def test_concurrent_connects_share_one_attempt_and_one_process(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    entry = fixture_entry("--start-delay", "0.5")
    async with make_manager({"fx": entry}, log_dir=tmp_path / "logs") as manager:
        connections = []

        async def connect() -> None:
            connections.append(await manager.connect("fx"))

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(connect)
        assert len(connections) == 8
        assert all(connection is connections[0] for connection in connections)
        assert _running_fixtures() == 1
        assert await manager.connect("fx") is connections[0]
    log_text = (tmp_path / "logs" / "fx.log").read_text()
    assert log_text.count("starting server 'fx'") == 1


@pytest.mark.slow
async def test_a_reconnect_during_an_older_connect_never_installs_the_older_one(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    delay_file = tmp_path / "delay"
    delay_file.write_text("2")
    entry = fixture_entry("--start-delay-file", str(delay_file))
    async with make_manager({"fx": entry}) as manager:
        early: list[object] = []

        async def early_connect() -> None:
            early.append(await manager.connect("fx"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(early_connect)
            await anyio.wait_all_tasks_blocked()
            assert manager.state("fx").status == "connecting"
            newest = await manager.reconnect("fx")
        # The early caller follows the newer attempt instead of getting a stale connection.
        assert early == [newest]
        assert manager.state("fx").status == "connected"
        pid = int(text_of(await manager.call_tool("fx", "pid")))
        assert newest.metadata.instructions == f"fixture server pid={pid}"
        assert _running_fixtures() == 1


@pytest.mark.slow
async def test_closing_a_server_while_it_connects_fails_the_waiting_callers(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"fx": fixture_entry("--start-delay", "10")}) as manager:
        outcome: list[BaseException] = []

        async def waiting_caller() -> None:
            try:
                await manager.call_tool("fx", "echo", {"message": "x"})
            except ConnectionLostError as exc:
                outcome.append(exc)

        started = time.monotonic()
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiting_caller)
            await anyio.wait_all_tasks_blocked()
            await manager.close("fx")
        assert time.monotonic() - started < 5
        assert len(outcome) == 1
        assert "closed while connecting" in str(outcome[0])
        assert manager.state("fx").status == "closed"


# -- backoff --------------------------------------------------------------------------------


@pytest.mark.slow
async def test_after_a_failed_connect_attempts_fail_fast_until_the_backoff_ends(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    clock = FakeClock()
    crash_file = tmp_path / "crash"
    crash_file.write_text("x")
    entry = fixture_entry("--crash-at-start-file", str(crash_file))
    async with make_manager({"fx": entry}, clock=clock, backoff_s=60) as manager:
        with pytest.raises(ServerStartError):
            await manager.connect("fx")
        failed_at = manager.state("fx").failed_at
        clock.advance(42)
        with pytest.raises(ServerBackoffError) as caught:
            await manager.call_tool("fx", "echo", {"message": "x"})
        assert "server 'fx' not available (last failed 42 s ago: " in str(caught.value)
        assert "exited with code 3" in str(caught.value)
        assert caught.value.retry_in_s == pytest.approx(18)
        assert manager.state("fx").failed_at == failed_at  # no new attempt was made
        clock.advance(18)
        result = await manager.call_tool("fx", "echo", {"message": "back"})
        assert text_of(result) == "Echo: back"
        assert manager.state("fx").error is None


@pytest.mark.slow
async def test_an_explicit_reconnect_clears_the_backoff(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    crash_file = tmp_path / "crash"
    crash_file.write_text("x")
    entry = fixture_entry("--crash-at-start-file", str(crash_file))
    reconnects: list[str] = []
    async with make_manager({"fx": entry}, clock=FakeClock()) as manager:
        manager.on_reconnect(lambda name, metadata: reconnects.append(name))
        with pytest.raises(ServerStartError):
            await manager.connect("fx")
        with pytest.raises(ServerBackoffError):
            await manager.connect("fx")
        connection = await manager.reconnect("fx")
        assert connection.is_alive
        assert manager.state("fx").status == "connected"
    assert reconnects == ["fx"]


# -- idle -----------------------------------------------------------------------------------


@pytest.mark.slow
async def test_a_lazy_server_is_closed_once_idle_but_never_with_a_call_in_flight(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    clock = FakeClock()
    entry = fixture_entry(idle_timeout=1.0)  # minutes
    async with make_manager({"fx": entry}, clock=clock) as manager:
        connection = await manager.connect("fx")
        clock.advance(59)
        await manager.check_health()
        assert connection.is_alive
        assert not manager.is_idle("fx", 60)
        started = tmp_path / "started"
        async with anyio.create_task_group() as tg:
            # A call that lasts until it is cancelled, known to be running on the server: on a
            # busy machine a short one could end before the health check it must outlast.
            arguments = {"seconds": 600, "mark": str(started)}
            tg.start_soon(manager.call_tool, "fx", "slow", arguments)
            with anyio.fail_after(30):
                while not started.exists():
                    await anyio.sleep(0.01)
            assert manager.state("fx").in_flight == 1
            clock.advance(3600)
            await manager.check_health()
            assert connection.is_alive
            assert manager.state("fx").in_flight == 1
            tg.cancel_scope.cancel()
        assert manager.state("fx").in_flight == 0
        clock.advance(61)
        assert manager.is_idle("fx", 60)
        await manager.check_health()
        assert not connection.is_alive
        assert manager.state("fx").status == "closed"


@pytest.mark.parametrize(
    ("lifecycle", "idle_timeout"),
    [
        pytest.param("lazy", 0.0, id="lazy-with-idle-timeout-0"),
        pytest.param("eager", None, id="eager"),
        pytest.param("keep-alive", None, id="keep-alive"),
        pytest.param("lazy-keep-alive", None, id="lazy-keep-alive"),
    ],
)
@pytest.mark.slow
async def test_servers_that_must_stay_up_are_never_idle_closed(
    make_manager: ManagerFactory, lifecycle: str, idle_timeout: float | None
) -> None:
    clock = FakeClock()
    entry = fixture_entry(lifecycle=lifecycle, idle_timeout=idle_timeout)
    settings = Settings(idle_timeout=1.0, health_check_interval_ms=0)
    async with make_manager({"fx": entry}, settings, clock=clock) as manager:
        connection = await manager.connect("fx")
        clock.advance(24 * 3600)
        await manager.check_health()
        assert connection.is_alive


@pytest.mark.slow
async def test_the_health_loop_closes_idle_servers_by_itself(
    make_manager: ManagerFactory,
) -> None:
    settings = Settings(idle_timeout=0.002, health_check_interval_ms=50)  # 0.12 s idle
    async with make_manager({"fx": fixture_entry()}, settings) as manager:
        connection = await manager.connect("fx")
        with anyio.fail_after(5):
            await connection.wait_closed()
        assert manager.state("fx").status == "closed"
        assert text_of(await manager.call_tool("fx", "echo", {"message": "again"})) == "Echo: again"


# -- lifecycle modes ------------------------------------------------------------------------


@pytest.mark.slow
async def test_start_connects_eager_and_keep_alive_servers_in_parallel_and_reports_failures(
    make_manager: ManagerFactory,
) -> None:
    servers = {
        "eager1": fixture_entry("--start-delay", "3", lifecycle="eager"),
        "eager2": fixture_entry("--start-delay", "3", lifecycle="eager"),
        "kept": fixture_entry("--start-delay", "3", lifecycle="keep-alive"),
        "broken": fixture_entry("--crash-at-start", lifecycle="eager"),
        "lazy": fixture_entry(),
    }
    async with make_manager(servers) as manager:
        started = time.monotonic()
        results = await manager.start()
        elapsed = time.monotonic() - started
        assert set(results) == {"eager1", "eager2", "kept", "broken"}
        assert isinstance(results["broken"], ServerStartError)
        assert [name for name, error in results.items() if error is None] == [
            "eager1",
            "eager2",
            "kept",
        ]
        # One after another, the three start delays alone would take 9 s; the margin over 3 s
        # absorbs interpreter start-up on a loaded machine.
        assert elapsed < 3 * 3, f"three 3 s starts took {elapsed:.1f} s"
        assert manager.state("lazy").status == "closed"


@pytest.mark.slow
async def test_start_honours_the_startup_concurrency_limit(
    make_manager: ManagerFactory,
) -> None:
    servers = {f"e{i}": fixture_entry("--start-delay", "1", lifecycle="eager") for i in range(3)}
    settings = Settings(startup_concurrency=1, health_check_interval_ms=0)
    async with make_manager(servers, settings) as manager:
        started = time.monotonic()
        results = await manager.start()
        assert all(error is None for error in results.values())
        assert time.monotonic() - started >= 3


@pytest.mark.slow
async def test_an_eager_server_that_dropped_reconnects_at_the_end_of_the_turn(
    make_manager: ManagerFactory,
) -> None:
    metadata_seen: list[ServerMetadata] = []
    async with make_manager({"fx": fixture_entry(lifecycle="eager")}) as manager:
        manager.on_reconnect(lambda name, metadata: metadata_seen.append(metadata))
        assert await manager.start() == {"fx": None}
        assert await manager.end_turn() == {}
        with pytest.raises(ConnectionLostError):
            await manager.call_tool("fx", "crash")
        assert manager.state("fx").status == "failed"
        assert await manager.end_turn() == {"fx": None}
        assert manager.state("fx").status == "connected"
    assert len(metadata_seen) == 1
    assert metadata_seen[0].tools[0]["name"] == "echo"


@pytest.mark.slow
async def test_a_keep_alive_server_is_retried_on_a_doubling_schedule_then_recovers(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    clock = FakeClock()
    crash_file = tmp_path / "crash"
    entry = fixture_entry("--crash-at-start-file", str(crash_file), lifecycle="keep-alive")
    recovered = anyio.Event()
    async with make_manager({"fx": entry}, clock=clock) as manager:
        manager.on_reconnect(lambda name, metadata: recovered.set())
        crash_file.write_text("x")
        results = await manager.start()
        assert isinstance(results["fx"], ServerStartError)
        first_failure = manager.state("fx").failed_at

        clock.advance(29)
        await manager.check_health()
        assert manager.state("fx").failed_at == first_failure  # not due before 30 s

        crash_file.write_text("x")
        clock.advance(1)
        await manager.check_health()
        second_failure = manager.state("fx").failed_at
        assert second_failure == first_failure + 30

        clock.advance(59)
        await manager.check_health()
        assert manager.state("fx").failed_at == second_failure  # the next wait is 60 s

        clock.advance(1)
        await manager.check_health()
        with anyio.fail_after(5):
            await recovered.wait()
        assert manager.state("fx").status == "connected"

        with pytest.raises(ConnectionLostError):
            await manager.call_tool("fx", "crash")
        await manager.check_health()  # a drop is retried at once
        assert manager.state("fx").status == "connected"


@pytest.mark.slow
async def test_a_lazy_keep_alive_server_starts_on_first_use_then_is_kept_up(
    make_manager: ManagerFactory,
) -> None:
    clock = FakeClock()
    entry = fixture_entry(lifecycle="lazy-keep-alive")
    recovered = anyio.Event()
    async with make_manager({"fx": entry}, clock=clock) as manager:
        manager.on_reconnect(lambda name, metadata: recovered.set())
        assert await manager.start() == {}
        await manager.check_health()
        assert manager.state("fx").status == "closed"  # nothing happens before first use

        assert text_of(await manager.call_tool("fx", "echo", {"message": "hi"})) == "Echo: hi"
        with pytest.raises(ConnectionLostError):
            await manager.call_tool("fx", "crash")
        await manager.check_health()  # from now on a drop is reconnected like keep-alive
        with anyio.fail_after(5):
            await recovered.wait()
        assert manager.state("fx").status == "connected"


async def test_the_health_loop_is_cancelled_when_the_manager_exits(
    make_manager: ManagerFactory,
) -> None:
    settings = Settings(health_check_interval_ms=3_600_000)
    with anyio.fail_after(5):
        async with make_manager({}, settings):
            pass


# -- state ----------------------------------------------------------------------------------


@pytest.mark.slow
async def test_state_reports_transport_times_counts_and_listeners_see_every_catalog_load(
    make_manager: ManagerFactory,
) -> None:
    clock = FakeClock()
    loads: list[str] = []
    async with make_manager({"fx": fixture_entry()}, clock=clock) as manager:
        manager.on_tools_changed(lambda name, metadata: loads.append(name))
        assert manager.state("fx").status == "closed"
        await manager.connect("fx")
        clock.advance(5)
        await manager.call_tool("fx", "echo", {"message": "x"})
        state = manager.state("fx")
        assert (state.status, state.transport, state.in_flight) == ("connected", "stdio", 0)
        assert state.connected_at == 1000.0
        assert state.last_used_at == 1005.0
        assert state.tool_count == 9
        await manager.refresh("fx")
        await manager.close("fx")
        closed = manager.state("fx")
        assert (closed.status, closed.tool_count, closed.connected_at) == ("closed", None, None)
        assert manager.metadata("fx") is None
    assert loads == ["fx", "fx"]


def test_the_fixture_server_path_is_runnable() -> None:
    assert MCP_FIXTURE.exists()
    assert sys.executable


# -- reconfiguring --------------------------------------------------------------------------


@pytest.mark.slow
async def test_set_servers_keeps_unchanged_connections_and_closes_the_rest(
    make_manager: ManagerFactory,
) -> None:
    servers = {"keep": fixture_entry(), "drop": fixture_entry(), "edit": fixture_entry()}
    states: list[tuple[str, str]] = []
    async with make_manager(servers) as manager:
        manager.on_state_changed(lambda state: states.append((state.server, state.status)))
        with anyio.fail_after(30):
            pids = {n: text_of(await manager.call_tool(n, "pid")) for n in servers}
        assert ("keep", "connected") in states
        change = manager.set_servers(
            {
                "keep": fixture_entry(),
                "edit": fixture_entry("--name", "edited"),
                "add": fixture_entry(),
            }
        )
        assert (change.added, change.removed, change.replaced) == (("add",), ("drop",), ("edit",))
        assert manager.server_names == ("keep", "edit", "add")
        with anyio.fail_after(30):
            await manager.close_detached()
        assert _running_fixtures() == 1  # only "keep" still runs
        assert manager.state("edit").status == "closed"
        with pytest.raises(ServerNotConfiguredError):
            manager.state("drop")
        with anyio.fail_after(30):
            assert text_of(await manager.call_tool("keep", "pid")) == pids["keep"]
            assert text_of(await manager.call_tool("edit", "pid")) != pids["edit"]
        assert not manager.set_servers(
            {
                "keep": fixture_entry(),
                "edit": fixture_entry("--name", "edited"),
                "add": fixture_entry(),
            }
        )
