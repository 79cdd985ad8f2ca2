"""Error translation, stderr capture and lifecycle policy, without starting servers."""

from __future__ import annotations

import errno
import io
import logging
from pathlib import Path

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import MCPError

from pi_mcp_adapter import (
    ConnectionLostError,
    ConnectTimeoutError,
    HttpStatusError,
    McpAdapterError,
    NeedsAuthError,
    NotMcpError,
    RequestTimeoutError,
    ServerReportedError,
    ServerStartError,
)
from pi_mcp_adapter.config._models import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerState
from pi_mcp_adapter.servers._lifecycle import (
    connects_at_start,
    idle_timeout_s,
    keep_alive_retry_delay_s,
)
from pi_mcp_adapter.servers._stderr import StderrCapture, safe_file_stem
from pi_mcp_adapter.servers._translate import (
    HttpObservation,
    connect_error,
    connect_timeout_error,
    flatten_exceptions,
    redact_url,
    request_error,
)


def _status_error(status: int) -> httpx2.HTTPStatusError:
    request = httpx2.Request("GET", "http://example.test/sse")
    response = httpx2.Response(status, request=request)
    return httpx2.HTTPStatusError("bad status", request=request, response=response)


def _observed(status: int | None = None, content_type: str = "") -> HttpObservation:
    observation = HttpObservation()
    if status is not None or content_type:
        observation.record(status or 200, content_type)
    return observation


def test_nested_exception_groups_flatten_to_their_leaves() -> None:
    inner = ExceptionGroup("inner", [ValueError("a"), KeyError("b")])
    outer = BaseExceptionGroup("outer", [inner, TypeError("c")])
    leaves = flatten_exceptions(outer)
    assert [type(leaf) for leaf in leaves] == [ValueError, KeyError, TypeError]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param(
            "https://user:pw@host.test:8443/mcp?key=1#x", "https://host.test:8443/mcp", id="all"
        ),
        pytest.param("http://127.0.0.1/sse", "http://127.0.0.1/sse", id="plain"),
        pytest.param("http://[::1", "<unparseable URL>", id="broken"),
    ],
)
def test_urls_lose_credentials_queries_and_fragments_in_messages(url: str, expected: str) -> None:
    assert redact_url(url) == expected


CONNECT_CASES = [
    pytest.param(
        MCPError(code=types.INTERNAL_ERROR, message="x"),
        _observed(401),
        NeedsAuthError,
        "run `pi-mcp auth srv`",
        id="401-recorded",
    ),
    pytest.param(
        MCPError(code=types.INTERNAL_ERROR, message="x"),
        _observed(503),
        HttpStatusError,
        "HTTP 503",
        id="503-recorded",
    ),
    pytest.param(
        MCPError(code=types.INVALID_REQUEST, message="Unexpected content type: text/html"),
        _observed(200, "text/html; charset=utf-8"),
        NotMcpError,
        "HTML page",
        id="html",
    ),
    pytest.param(_status_error(401), None, NeedsAuthError, "HTTP 401", id="sse-401"),
    pytest.param(_status_error(404), None, HttpStatusError, "HTTP 404", id="sse-404"),
    pytest.param(
        ExceptionGroup("g", [ExceptionGroup("h", [httpx2.ConnectError("refused")])]),
        None,
        ServerStartError,
        "connection refused",
        id="refused-nested",
    ),
    pytest.param(
        OSError(errno.ECONNREFUSED, "refused"), None, ServerStartError, "refused", id="oserror"
    ),
    pytest.param(FileNotFoundError("x"), None, ServerStartError, "was not found", id="missing"),
    pytest.param(PermissionError("x"), None, ServerStartError, "not executable", id="noexec"),
    pytest.param(
        httpx2.ReadTimeout("slow"), None, ServerStartError, "timed out", id="http-timeout"
    ),
    pytest.param(
        ExceptionGroup("g", [MCPError(code=types.CONNECTION_CLOSED, message="Connection closed")]),
        None,
        ServerStartError,
        "exited with code 2 during startup",
        id="exited",
    ),
    pytest.param(RuntimeError("odd"), None, ServerStartError, "RuntimeError: odd", id="other"),
]


@pytest.mark.parametrize(("exc", "observation", "expected", "message_part"), CONNECT_CASES)
def test_connect_failures_map_to_errors_the_caller_can_act_on(
    exc: BaseException,
    observation: HttpObservation | None,
    expected: type[McpAdapterError],
    message_part: str,
) -> None:
    error = connect_error(
        "srv", exc, target="http://host/mcp", observation=observation, exit_code=2
    )
    assert type(error) is expected
    assert message_part in str(error)
    assert error.server == "srv"


def test_a_recorded_status_of_an_sse_fallback_candidate_is_remembered() -> None:
    for status in (404, 405, 406, 415):
        assert _observed(status).wants_sse_fallback
    assert not _observed(500).wants_sse_fallback
    assert not _observed().wants_sse_fallback
    first = _observed(405)
    first.record(500, "text/plain")
    assert first.status == 405


def test_a_connect_timeout_mentions_stdout_noise_and_the_setting_to_raise() -> None:
    error = connect_timeout_error("srv", timeout_s=2.5, stdout_noise="banner", log_hint="a.log")
    assert isinstance(error, ConnectTimeoutError)
    assert error.timeout_s == 2.5
    for part in ("within 2.5 s", "'banner'", "a.log", "startupTimeoutMs"):
        assert part in str(error)


REQUEST_CASES = [
    pytest.param(
        MCPError(code=types.REQUEST_TIMEOUT, message="t"),
        RequestTimeoutError,
        "after 3 s",
        id="timeout",
    ),
    pytest.param(
        MCPError(code=types.CONNECTION_CLOSED, message="Connection closed"),
        ConnectionLostError,
        "restarted on the next use",
        id="closed",
    ),
    pytest.param(
        MCPError(code=types.INVALID_PARAMS, message="no such resource"),
        ServerReportedError,
        "no such resource",
        id="reported",
    ),
    pytest.param(httpx2.ConnectError("gone"), ConnectionLostError, "unreachable", id="http-gone"),
    pytest.param(ValueError("weird"), ServerReportedError, "ValueError: weird", id="other"),
]


@pytest.mark.parametrize(("exc", "expected", "message_part"), REQUEST_CASES)
def test_request_failures_map_to_errors_naming_the_server_and_request(
    exc: BaseException, expected: type[McpAdapterError], message_part: str
) -> None:
    error = request_error("srv", exc, what="tool 'echo'", timeout_s=3)
    assert type(error) is expected
    assert message_part in str(error)
    assert "'srv'" in str(error)


def test_a_reported_error_keeps_the_servers_code_and_data() -> None:
    error = request_error("srv", MCPError(code=-32602, message="bad", data={"k": 1}), what="x")
    assert isinstance(error, ServerReportedError)
    assert (error.code, error.data) == (-32602, {"k": 1})


# -- policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failures", "delay_s"),
    [(0, 0), (1, 30), (2, 60), (3, 120), (4, 240), (5, 300), (50, 300)],
)
def test_keep_alive_retries_wait_30_s_doubling_up_to_5_minutes(
    failures: int, delay_s: float
) -> None:
    assert keep_alive_retry_delay_s(failures) == delay_s


@pytest.mark.parametrize(
    ("entry", "global_minutes", "expected_s"),
    [
        pytest.param(ServerEntry(command="x"), 10.0, 600.0, id="lazy-global"),
        pytest.param(ServerEntry(command="x", idle_timeout=2), 10.0, 120.0, id="lazy-own"),
        pytest.param(ServerEntry(command="x", idle_timeout=0), 10.0, 0.0, id="lazy-never"),
        pytest.param(ServerEntry(command="x"), 0.0, 0.0, id="global-never"),
        pytest.param(ServerEntry(command="x", lifecycle="eager"), 10.0, 0.0, id="eager"),
        pytest.param(
            ServerEntry(command="x", lifecycle="keep-alive", idle_timeout=5), 10.0, 0.0, id="kept"
        ),
    ],
)
def test_only_lazy_servers_have_an_idle_timeout(
    entry: ServerEntry, global_minutes: float, expected_s: float
) -> None:
    assert idle_timeout_s(entry, Settings(idle_timeout=global_minutes)) == expected_s


def test_eager_and_keep_alive_servers_connect_at_start_unless_disabled() -> None:
    assert connects_at_start(ServerEntry(command="x", lifecycle="eager"))
    assert connects_at_start(ServerEntry(command="x", lifecycle="keep-alive"))
    assert not connects_at_start(ServerEntry(command="x"))
    assert not connects_at_start(ServerEntry(command="x", lifecycle="eager", disabled=True))


def test_a_server_state_rejects_impossible_values() -> None:
    with pytest.raises(ValueError, match="status"):
        ServerState(server="s", status="sleeping")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="in_flight"):
        ServerState(server="s", status="closed", in_flight=-1)


# -- stderr ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "stem"),
    [("plain", "plain"), ("../etc/passwd", "_etc_passwd"), ("a b/c", "a_b_c"), ("..", "server")],
)
def test_log_file_names_cannot_escape_the_log_directory(server: str, stem: str) -> None:
    assert safe_file_stem(server) == stem


async def test_stderr_capture_logs_echoes_and_keeps_the_last_lines(tmp_path: Path) -> None:
    echo = io.StringIO()
    capture = StderrCapture("srv", tmp_path / "logs", echo=echo)
    async with capture.open_sink() as sink:
        for i in range(30):
            sink.write(f"line {i}\n")
        sink.write("no newline at the end")
        sink.flush()
        capture.release_parent_copy()
    assert capture.tail().splitlines()[-1] == "no newline at the end"
    assert len(capture.tail().splitlines()) == 20
    assert "[srv] line 29" in echo.getvalue()
    logged = (tmp_path / "logs" / "srv.log").read_text()
    assert "line 0\n" in logged
    assert logged.endswith("no newline at the end")


async def test_stderr_capture_survives_an_unwritable_log_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    capture = StderrCapture("srv", blocker / "logs")
    with anyio.fail_after(5):
        async with capture.open_sink() as sink:
            sink.write("still captured\n")
            sink.flush()
            capture.release_parent_copy()
    assert capture.tail() == "still captured"


def test_library_log_records_show_urls_without_password_or_query(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from pi_mcp_adapter.servers._log_redaction import install_log_redaction

    install_log_redaction()
    install_log_redaction()  # idempotent: one filter per logger
    logger = logging.getLogger("mcp.client.streamable_http")
    with caplog.at_level(logging.DEBUG, logger="mcp.client.streamable_http"):
        logger.debug("Connecting to %s", "https://me:s3cret@example.test/mcp?token=t0ken#frag")

    assert caplog.records[-1].getMessage() == "Connecting to https://example.test/mcp"
    assert sum(1 for f in logger.filters if type(f).__name__ == "RedactUrlCredentials") == 1
