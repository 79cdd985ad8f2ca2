"""Faulty servers: what the caller sees, how long it takes, and that nothing else suffers."""

from __future__ import annotations

import time

import anyio
import pytest

from pi_mcp_adapter import (
    ConnectionLostError,
    ConnectTimeoutError,
    HttpStatusError,
    NeedsAuthError,
    NotMcpError,
    ServerStartError,
    ServerUnavailableError,
)
from pi_mcp_adapter.config._models import ServerEntry
from pi_mcp_adapter.servers._stdio import EXIT_GRACE_S

from ._support import HttpFixtures, ManagerFactory, fixture_entry, pid_is_running, text_of

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaked_processes")]


async def _expect_failure_beside_healthy(
    make_manager: ManagerFactory,
    broken: ServerEntry,
    expected: type[ServerUnavailableError],
    message_part: str,
    max_seconds: float,
) -> ServerUnavailableError:
    servers = {"broken": broken, "healthy": fixture_entry()}
    async with make_manager(servers) as manager:
        async with anyio.create_task_group() as tg:
            # The healthy server starts at the same time and must not wait for the broken one.
            healthy_ready = anyio.Event()

            async def start_healthy() -> None:
                await manager.connect("healthy")
                healthy_ready.set()

            tg.start_soon(start_healthy)
            started = time.monotonic()
            with pytest.raises(expected) as caught:
                await manager.connect("broken")
            elapsed = time.monotonic() - started
            with anyio.fail_after(20):
                await healthy_ready.wait()
        assert elapsed < max_seconds, f"failing took {elapsed:.1f} s"
        assert message_part in str(caught.value)
        assert caught.value.server == "broken"
        state = manager.state("broken")
        assert state.status in ("failed", "needs-auth")
        assert state.error is not None
        assert message_part in state.error
        result = await manager.call_tool("healthy", "echo", {"message": "still here"})
        assert text_of(result) == "Echo: still here"
        return caught.value


@pytest.mark.parametrize(
    ("args", "startup_ms", "expected", "message_part", "max_seconds"),
    [
        pytest.param(
            ("--crash-at-start", "--stderr-lines", "3"),
            10_000,
            ServerStartError,
            "exited with code 3 during startup",
            8.0,
            id="crash-at-start",
        ),
        pytest.param(("--hang",), 1_000, ConnectTimeoutError, "within 1 s", 8.0, id="hang"),
        pytest.param(
            ("--garbage",), 1_000, ConnectTimeoutError, "this is not JSON-RPC", 8.0, id="garbage"
        ),
        pytest.param(
            ("--start-delay", "30"), 1_500, ConnectTimeoutError, "within 1.5 s", 8.0, id="slow"
        ),
    ],
)
async def test_a_stdio_server_that_fails_to_start_reports_why_in_bounded_time(
    make_manager: ManagerFactory,
    args: tuple[str, ...],
    startup_ms: int,
    expected: type[ServerUnavailableError],
    message_part: str,
    max_seconds: float,
) -> None:
    broken = fixture_entry(*args, startup_timeout_ms=startup_ms)
    await _expect_failure_beside_healthy(make_manager, broken, expected, message_part, max_seconds)


async def test_a_server_that_never_answered_is_not_given_the_exit_grace(
    make_manager: ManagerFactory,
) -> None:
    # It never began the protocol, so nothing is lost by signalling it soon after its stdin
    # closes; the caller no longer waits the grace a session gets to end cleanly.
    broken = fixture_entry("--hang", startup_timeout_ms=1_000)
    bound = 1.0 + EXIT_GRACE_S - 0.3
    await _expect_failure_beside_healthy(
        make_manager, broken, ConnectTimeoutError, "within 1 s", bound
    )


async def test_a_crash_at_start_carries_the_last_stderr_lines(
    make_manager: ManagerFactory,
) -> None:
    broken = fixture_entry("--crash-at-start", "--stderr-lines", "2")
    error = await _expect_failure_beside_healthy(
        make_manager, broken, ServerStartError, "during startup", 8.0
    )
    assert isinstance(error, ServerStartError)
    assert error.stderr_tail.splitlines() == [
        "fixture stderr line 0",
        "fixture stderr line 1",
        "fixture: fatal: cannot start (simulated)",
    ]
    assert "fatal: cannot start" in str(error)


async def test_a_missing_command_is_reported_at_once(make_manager: ManagerFactory) -> None:
    broken = ServerEntry(command="pi-mcp-no-such-command-4711")
    await _expect_failure_beside_healthy(
        make_manager, broken, ServerStartError, "was not found", 2.0
    )


@pytest.mark.parametrize(
    ("args", "expected", "message_part"),
    [
        pytest.param(("--status", "401"), NeedsAuthError, "pi-mcp auth broken", id="401"),
        pytest.param(("--status", "403"), HttpStatusError, "HTTP 403", id="403"),
        pytest.param(("--status", "500"), HttpStatusError, "HTTP 500", id="500"),
        pytest.param(("--status", "503"), HttpStatusError, "HTTP 503", id="503"),
        pytest.param(("--html",), NotMcpError, "HTML page", id="html"),
    ],
)
async def test_an_http_endpoint_that_is_not_usable_is_reported_by_status(
    make_manager: ManagerFactory,
    http_fixtures: HttpFixtures,
    args: tuple[str, ...],
    expected: type[ServerUnavailableError],
    message_part: str,
) -> None:
    url = http_fixtures.faults(*args)
    error = await _expect_failure_beside_healthy(
        make_manager, ServerEntry(url=url), expected, message_part, 8.0
    )
    if isinstance(error, HttpStatusError):
        assert str(error.status) in message_part


async def test_a_needs_auth_failure_sets_the_needs_auth_status(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.faults("--status", "401")
    async with make_manager({"remote": ServerEntry(url=url)}) as manager:
        with pytest.raises(NeedsAuthError):
            await manager.connect("remote")
        assert manager.state("remote").status == "needs-auth"


async def test_a_refused_connection_is_reported_without_waiting_for_the_deadline(
    make_manager: ManagerFactory,
) -> None:
    # Port 9 (discard) is essentially never listening on loopback.
    broken = ServerEntry(url="http://127.0.0.1:9/mcp?token=secret-value")
    error = await _expect_failure_beside_healthy(
        make_manager, broken, ServerStartError, "connection refused", 5.0
    )
    assert "secret-value" not in str(error)


async def test_a_server_crashing_mid_call_fails_that_call_and_restarts_on_next_use(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"crashy": fixture_entry(), "healthy": fixture_entry()}) as manager:
        await manager.connect("healthy")
        first_pid = int(text_of(await manager.call_tool("crashy", "pid")))
        started = time.monotonic()
        with pytest.raises(ConnectionLostError, match="closed the connection"):
            await manager.call_tool("crashy", "crash")
        assert time.monotonic() - started < 5
        state = manager.state("crashy")
        assert state.status == "failed"
        assert state.error is not None
        assert "connection lost" in state.error
        assert text_of(await manager.call_tool("healthy", "echo", {"message": "ok"})) == "Echo: ok"
        second_pid = int(text_of(await manager.call_tool("crashy", "pid")))
        assert second_pid != first_pid
        assert manager.state("crashy").status == "connected"


async def test_a_server_exiting_after_some_calls_is_noticed_at_once_and_restarted(
    make_manager: ManagerFactory,
) -> None:
    async with make_manager({"short": fixture_entry("--exit-after-calls", "2")}) as manager:
        connection = await manager.connect("short")
        first_pid = int(text_of(await manager.call_tool("short", "pid")))
        assert text_of(await manager.call_tool("short", "echo", {"message": "2"})) == "Echo: 2"
        with anyio.fail_after(5):
            await connection.wait_closed()
        assert manager.state("short").status == "failed"
        assert not pid_is_running(first_pid)
        assert int(text_of(await manager.call_tool("short", "pid"))) != first_pid


async def test_a_dead_http_server_fails_the_next_call_instead_of_hanging(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    url = http_fixtures.mcp("streamable-http")
    async with make_manager({"remote": ServerEntry(url=url)}) as manager:
        assert text_of(await manager.call_tool("remote", "echo", {"message": "a"})) == "Echo: a"
        http_fixtures.stop_all()
        started = time.monotonic()
        with pytest.raises(ConnectionLostError):
            await manager.call_tool("remote", "echo", {"message": "b"})
        assert time.monotonic() - started < 10
        assert manager.state("remote").status == "failed"


async def test_a_server_killed_by_a_signal_at_start_is_reported_as_killed(
    make_manager: ManagerFactory,
) -> None:
    # The supervisor every stdio server runs under must end the way its server ended: by the
    # same signal, even one that cannot be handled, and without a word of its own on stderr.
    broken = ServerEntry(command="sh", args=["-c", "echo about to go >&2; kill -KILL $$"])
    error = await _expect_failure_beside_healthy(
        make_manager, broken, ServerStartError, "was killed by SIGKILL during startup", 8.0
    )
    assert isinstance(error, ServerStartError)
    assert error.stderr_tail.splitlines() == ["about to go"]
