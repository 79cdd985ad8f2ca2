"""Turning SDK, httpx2 and OS failures into the package's exception tree.

Two boundaries: :func:`connect_error` for anything that goes wrong while a connection is being
established (the SDK reports these as nested exception groups that lose HTTP status codes, so
the transport records what it saw in an :class:`HttpObservation`), and :func:`request_error`
for a request on an established connection. Messages name the server and the next step, and
never carry header values, tokens, environment values or URL queries.
"""

from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx2
import mcp_types as types
from mcp import MCPError
from mcp.client.auth import OAuthFlowError
from pydantic import ValidationError

from pi_mcp_adapter._errors import (
    ConnectionLostError,
    ConnectTimeoutError,
    HttpStatusError,
    McpAdapterError,
    NeedsAuthError,
    NotMcpError,
    RequestTimeoutError,
    ServerReportedError,
    ServerStartError,
    ServerUnavailableError,
)

SSE_FALLBACK_STATUSES = frozenset({404, 405, 406, 415})
"""Streamable HTTP answers that mean "this endpoint speaks something else": try SSE instead."""


def flatten_exceptions(exc: BaseException) -> list[BaseException]:
    """The leaf exceptions of ``exc``, depth first; groups nest, so this recurses."""
    if isinstance(exc, BaseExceptionGroup):
        leaves: list[BaseException] = []
        for inner in exc.exceptions:
            leaves.extend(flatten_exceptions(inner))
        return leaves
    return [exc]


def redact_url(url: str) -> str:
    """``url`` without userinfo, query and fragment, which often carry credentials."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    netloc = parts.hostname or ""
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


@dataclass(slots=True)
class HttpObservation:
    """What the HTTP transport saw while connecting, recorded by a response event hook.

    The SDK turns every HTTP error status into the same JSON-RPC error, so the first failing
    status and the content type of the first non-MCP answer are kept here.
    """

    status: int | None = None
    content_type: str | None = None
    session_expired: bool = False
    """A request that carried a session id got 404: the server forgot the session."""

    def record(self, status: int, content_type: str) -> None:
        if status >= 400 and self.status is None:
            self.status = status
        if self.content_type is None and content_type.lower().startswith("text/html"):
            self.content_type = "text/html"

    @property
    def wants_sse_fallback(self) -> bool:
        return self.status in SSE_FALLBACK_STATUSES


def _describe_leaf(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def connect_error(
    server: str,
    exc: BaseException,
    *,
    target: str,
    observation: HttpObservation | None = None,
    stderr_tail: str = "",
    log_hint: str = "",
    exit_code: int | None = None,
    cwd: str | None = None,
    is_socket: bool = False,
) -> ServerUnavailableError:
    """Translate a failure raised while connecting to ``server`` into our exception tree.

    ``target`` describes what was started or contacted (a command name, a socket path with
    ``is_socket``, or a redacted URL); ``cwd`` is the working directory a command starts in;
    ``observation`` is the HTTP transport's record; ``stderr_tail`` and ``exit_code`` describe
    a stdio server that died. An error that is already ours is returned unchanged.
    """
    leaves = flatten_exceptions(exc)
    ours = [leaf for leaf in leaves if isinstance(leaf, ServerUnavailableError)]
    if ours:
        return ours[0]
    suffix = f" (server log: {log_hint})" if log_hint else ""

    for leaf in leaves:
        if isinstance(leaf, OAuthFlowError):
            return NeedsAuthError(
                server,
                f"server {server!r} at {target}: OAuth authorization failed: "
                f"{_first_line(leaf)[:300]}; run `pi-mcp auth {server}` to try again",
            )

    if observation is not None:
        if observation.status == 401:
            return NeedsAuthError(
                server,
                f"server {server!r} at {target} requires authorization (HTTP 401): "
                f"run `pi-mcp auth {server}`",
            )
        if observation.status is not None:
            return HttpStatusError(
                server,
                f"server {server!r} at {target} answered HTTP {observation.status} while "
                "connecting; check the URL and the server",
                status=observation.status,
            )
        if observation.content_type == "text/html":
            return NotMcpError(
                server,
                f"server {server!r} at {target} answered with an HTML page, not MCP; "
                "check that the URL points at the MCP endpoint (often /mcp or /sse)",
            )

    for leaf in leaves:
        if isinstance(leaf, FileNotFoundError) and is_socket:
            return ServerStartError(
                server,
                f"server {server!r}: socket {target!r} does not exist; is the server that "
                "listens on it running? Check `socket`",
            )
        # A missing working directory raises the same error as a missing command.
        if isinstance(leaf, FileNotFoundError) and cwd is not None and not os.path.isdir(cwd):
            return ServerStartError(
                server,
                f"server {server!r}: working directory {cwd!r} does not exist; check `cwd`",
            )
        if isinstance(leaf, FileNotFoundError):
            return ServerStartError(
                server,
                f"server {server!r}: command {target!r} was not found; check `command` and PATH",
            )
        if isinstance(leaf, PermissionError):
            return ServerStartError(
                server, f"server {server!r}: command {target!r} is not executable{suffix}"
            )
        if isinstance(leaf, NotADirectoryError | IsADirectoryError):
            return ServerStartError(server, f"server {server!r}: cannot start: {leaf}")
        if isinstance(leaf, httpx2.HTTPStatusError):
            status = leaf.response.status_code
            if status == 401:
                return NeedsAuthError(
                    server,
                    f"server {server!r} at {target} requires authorization (HTTP 401): "
                    f"run `pi-mcp auth {server}`",
                )
            return HttpStatusError(
                server,
                f"server {server!r} at {target} answered HTTP {status} while connecting",
                status=status,
            )
        if isinstance(leaf, httpx2.ConnectError | ConnectionRefusedError) or (
            isinstance(leaf, OSError) and leaf.errno == errno.ECONNREFUSED
        ):
            return ServerStartError(
                server,
                f"server {server!r}: cannot connect to {target} (connection refused or host "
                "unreachable); is the server running?",
            )
        if isinstance(leaf, httpx2.TimeoutException):
            return ServerStartError(
                server, f"server {server!r}: the HTTP request to {target} timed out"
            )
        if isinstance(leaf, httpx2.TransportError):
            return ServerStartError(
                server, f"server {server!r}: HTTP transport error talking to {target}: {leaf}"
            )
        if isinstance(leaf, MCPError) and leaf.code == types.CONNECTION_CLOSED:
            how = _how_it_ended(exit_code)
            return ServerStartError(
                server,
                f"server {server!r} {how} during startup{suffix}",
                stderr_tail=stderr_tail,
            )
        if isinstance(leaf, MCPError) and leaf.code == types.INVALID_REQUEST:
            return NotMcpError(
                server, f"server {server!r} at {target} did not answer with MCP: {leaf.message}"
            )

    description = "; ".join(_describe_leaf(leaf) for leaf in leaves[:3])
    return ServerStartError(
        server,
        f"server {server!r} failed while connecting: {description}{suffix}",
        stderr_tail=stderr_tail,
    )


def connect_timeout_error(
    server: str, *, timeout_s: float, stdout_noise: str = "", log_hint: str = ""
) -> ConnectTimeoutError:
    """The handshake of ``server`` did not finish within ``timeout_s`` seconds."""
    message = f"server {server!r} did not finish connecting within {timeout_s:g} s"
    if stdout_noise:
        message += f"; it wrote output that is not MCP to stdout: {stdout_noise!r}"
    if log_hint:
        message += f" (server log: {log_hint})"
    message += "; raise `startupTimeoutMs` if it is just slow"
    return ConnectTimeoutError(server, message, timeout_s=timeout_s)


def request_error(
    server: str, exc: BaseException, *, what: str, timeout_s: float | None = None
) -> McpAdapterError:
    """Translate a failure of the request ``what`` (e.g. "tool 'echo'") on a live connection."""
    leaves = flatten_exceptions(exc)
    ours = [leaf for leaf in leaves if isinstance(leaf, McpAdapterError)]
    if ours:
        return ours[0]
    for leaf in leaves:
        if isinstance(leaf, OAuthFlowError):
            return NeedsAuthError(
                server,
                f"server {server!r}: OAuth authorization for {what} failed: "
                f"{_first_line(leaf)[:300]}; run `pi-mcp auth {server}` to try again",
            )
        if isinstance(leaf, MCPError):
            if leaf.code == types.REQUEST_TIMEOUT:
                limit = f" after {timeout_s:g} s" if timeout_s is not None else ""
                return RequestTimeoutError(
                    server,
                    f"{what} on server {server!r} timed out{limit}; raise `requestTimeoutMs` "
                    "or pass a larger timeout if it is expected to be slow",
                    code=leaf.code,
                )
            if leaf.code == types.CONNECTION_CLOSED:
                return ConnectionLostError(
                    server,
                    f"server {server!r} closed the connection during {what} ({leaf.message}); "
                    "it will be restarted on the next use",
                )
            return ServerReportedError(
                server,
                f"server {server!r} rejected {what}: {leaf.message}",
                code=leaf.code,
                data=leaf.data,
            )
        if isinstance(leaf, ValidationError):
            return ServerReportedError(
                server, f"server {server!r} answered {what} with a malformed result: {leaf}"
            )
        if isinstance(leaf, httpx2.TransportError | OSError):
            return ConnectionLostError(
                server, f"server {server!r} became unreachable during {what}: {leaf}"
            )
    description = "; ".join(_describe_leaf(leaf) for leaf in leaves[:3])
    return ServerReportedError(server, f"{what} on server {server!r} failed: {description}")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _how_it_ended(exit_code: int | None) -> str:
    if exit_code is None:
        return "closed its connection"
    if exit_code < 0:  # asyncio's way of saying a signal ended the process
        try:
            name = signal.Signals(-exit_code).name
        except ValueError:
            name = f"signal {-exit_code}"
        return f"was killed by {name}"
    return f"exited with code {exit_code}"
