"""Running the gateway over stdio or Streamable HTTP, with its security checks and signals.

Resource handling: :func:`serve_gateway` opens the adapter (every upstream connection), serves
until the client goes away (stdio: end of input) or SIGINT, SIGTERM or SIGHUP arrives, then
closes every upstream connection; stdio children get the manager's bounded shutdown (close
stdin, SIGTERM to the process group, SIGKILL), so none outlive the gateway.

Security: HTTP binds loopback by default, where the SDK's DNS-rebinding protection checks Host
and Origin. Binding anything else requires a bearer token; with a token every HTTP request
without ``Authorization: Bearer <token>`` gets 401. The token is compared in constant time and
never printed or logged.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import math
import os
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
    suppress,
)
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, TextIO, cast

import anyio
import anyio.abc
import uvicorn
from mcp.server.stdio import stdio_server
from mcp_types import INVALID_REQUEST, PARSE_ERROR, jsonrpc_message_adapter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter._shared_state import EPOCH_CHECK_S
from pi_mcp_adapter._signals import stop_on_signal
from pi_mcp_adapter.config import LoadedConfig, ServerEntry
from pi_mcp_adapter.config._models import GatewayClient, GatewayJwt
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.engine._replays import ServedRequest, serving
from pi_mcp_adapter.surface import SurfaceKind

from ._gateway import McpGateway

logger = logging.getLogger("pi_mcp_adapter.gateway")
_CLOSING = "closing every upstream server"
"""Logged when a stop signal ends the gateway."""

GatewayTransport = Literal["stdio", "http"]
TOKEN_ENV = "PI_MCP_GATEWAY_TOKEN"
HTTP_GRACE_S = 2.0
"""After a signal, how long open HTTP streams (SSE) get to finish before they are cut: a
client's GET stream never ends by itself, and the upstream servers must close within a few
seconds of the signal."""
_READ_CHUNK_BYTES = 1 << 16


@dataclass(frozen=True, slots=True)
class GatewayOptions:
    """How to serve. ``port`` 0 picks a free port (it is printed)."""

    transport: GatewayTransport = "stdio"
    host: str = "127.0.0.1"
    port: int = 8765
    path: str = "/mcp"
    surface: SurfaceKind | None = None
    stateless: bool = False
    auth_token: str | None = None
    clients: tuple[GatewayClient, ...] = ()
    """``settings.gatewayClients``: per-client tokens (HTTP), checked by the SDK's auth."""
    jwt: GatewayJwt | None = None
    """``settings.gatewayJwt``: bearer JWTs from an issuer name one of ``clients``."""

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port must be between 0 and 65535, got {self.port}")
        if not self.path.startswith("/"):
            raise UsageError(f"--path must start with '/', got {self.path!r}")
        if self.auth_token is not None and not self.auth_token.strip():
            raise UsageError("the gateway token is empty")
        if (
            self.transport == "http"
            and not is_loopback(self.host)
            and not self.auth_token
            and not self.clients
        ):
            raise UsageError(
                f"refusing to serve on {self.host!r} without a token: anyone who can reach it "
                f"could use every configured server. Set --auth-token or {TOKEN_ENV}, or bind "
                "127.0.0.1."
            )


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerTokenGuard:
    """ASGI middleware: HTTP requests must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token_digest = hashlib.sha256(token.encode()).digest()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="pi-mcp-gateway"'),
                    ],
                }
            )
            await send(
                {
                    "type": "http.response.body",
                    "body": b'{"error": "unauthorized", "error_description": '
                    b'"missing or wrong bearer token"}',
                }
            )
            return
        await self._app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        supplied = b""
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                scheme, _, credentials = bytes(value).partition(b" ")
                if scheme.lower() == b"bearer":
                    supplied = credentials.strip()
                break
        # Digests of equal length: compare_digest then takes the same time wherever the first
        # difference is and whatever the supplied token's length, so timing reveals neither.
        return hmac.compare_digest(hashlib.sha256(supplied).digest(), self._token_digest)


def create_http_app(gateway: McpGateway, options: GatewayOptions) -> ASGIApp:
    """The gateway's Starlette app (Streamable HTTP at ``options.path``), guarded by a token
    when one is set, or by the SDK's bearer auth over the configured clients' tokens."""
    if options.clients:
        from mcp.server.auth.settings import AuthSettings

        from ._gateway_clients import ClientTokenVerifier, ExplainSignInRefusals

        authenticated = gateway.server.streamable_http_app(
            streamable_http_path=options.path,
            stateless_http=options.stateless,
            host=options.host,
            # A resource server of its own tokens: no authorization server, no metadata route
            # (the issuer is required by the model and never advertised without one).
            auth=AuthSettings.model_validate(
                {"issuer_url": "http://127.0.0.1", "resource_server_url": None}
            ),
            token_verifier=ClientTokenVerifier(gateway.client_config, options.auth_token),
        )
        return _observed(ExplainSignInRefusals(authenticated), gateway, options)
    app: ASGIApp = gateway.server.streamable_http_app(
        streamable_http_path=options.path,
        stateless_http=options.stateless,
        host=options.host,
    )
    if options.auth_token:
        app = BearerTokenGuard(app, options.auth_token)
    return _observed(app, gateway, options)


def _observed(app: ASGIApp, gateway: McpGateway, options: GatewayOptions) -> ASGIApp:
    """``/metrics`` and the status page beside the MCP endpoint, with their own check of who
    may read them (hosts/_gateway_telemetry.py), when telemetry is on."""
    from ._gateway_telemetry import with_observability

    return with_observability(
        app,
        gateway.adapter,
        auth_token=options.auth_token,
        has_clients=bool(options.clients),
        client_names=gateway.client_names,
        mcp_path=options.path,
    )


SHUTDOWN_ERROR_CODE = -32000
"""The JSON-RPC error code a request still running at shutdown is answered with (the SDK's
"connection closed" code: the client may retry against another gateway)."""


class _CutAtShutdown:
    """Ends a request cleanly when uvicorn cancels it at shutdown.

    uvicorn cancels the requests still running when its grace period is over (a client's call
    in flight, an SSE stream). Left alone, a cut request is logged as an application error and
    its client reads a truncated response. A request cut because the gateway was told to stop
    is no error: it is completed here, a call in flight with a JSON-RPC error saying so.
    """

    def __init__(self, app: ASGIApp, stopping: Callable[[], bool]) -> None:
        self.app = app
        self._stopping = stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body: list[bytes] = []
        response: dict[str, bool] = {"started": False, "sse": False, "complete": False}

        async def receive_body() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                body.append(message.get("body", b""))
            return message

        async def send_tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", ()))
                response["sse"] = headers.get(b"content-type", b"").startswith(b"text/event-stream")
                response["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                response["complete"] = True
            await send(message)

        try:
            await self.app(scope, receive_body, send_tracked)
        except asyncio.CancelledError:
            if not self._stopping():
                raise
            if response["complete"]:
                return
            request_id = _request_id(b"".join(body))
            if not response["started"]:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 503,
                        "headers": [(b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": _shutdown_reply(request_id)})
            elif response["sse"] and request_id is not None:
                event = b"event: message\ndata: " + _shutdown_reply(request_id) + b"\n\n"
                await send({"type": "http.response.body", "body": event})
            else:
                await send({"type": "http.response.body", "body": b""})


class _ReplayableRequests:
    """Lets a load balancer replay a POST on another replica when this one dies mid-call, and
    lets that replica recognise the replay (engine/_replays.py).

    - Each request's identity (credentials digest, MCP session id, the proxy's
      ``X-Request-Id``, body) is made known to the calls made while answering it. The body is
      recorded as the app reads it: the SDK reads a POST's body whole before any handler
      runs, and its handlers run in a copy of this task's context, which holds the (mutable)
      identity.
    - A streamed (SSE) answer's headers are held back until its first event (a progress
      notification, or the result). The SDK starts the stream the moment a request arrives;
      once a balancer has passed headers on it can no longer retry, so a replica killed
      during the call would leave its client with a broken stream instead of a replay.
      Keep-alive comments (``: ping``) are dropped while the headers wait.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        headers = {bytes(k).lower(): bytes(v) for k, v in scope.get("headers", ())}
        request = ServedRequest(
            client=hashlib.sha256(headers.get(b"authorization", b"")).hexdigest(),
            session=headers.get(b"mcp-session-id", b"").decode("latin-1") or None,
            proxy_request_id=headers.get(b"x-request-id", b"").decode("latin-1") or None,
        )

        async def receive_body() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                request.body.extend(message.get("body", b""))
            return message

        held: list[Message] = []

        async def send_when_answering(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", ()))
                if headers.get(b"content-type", b"").startswith(b"text/event-stream"):
                    held.append(message)
                    return
            elif held and message["type"] == "http.response.body":
                body = bytes(message.get("body", b""))
                if message.get("more_body") and _only_sse_comments(body):
                    return
                await send(held.pop())
            await send(message)

        with serving(request):
            await self.app(scope, receive_body, send_when_answering)


def _only_sse_comments(body: bytes) -> bool:
    """Whether an SSE chunk carries no event: empty, or comment lines only (keep-alives)."""
    return all(not line or line.startswith(b":") for line in body.splitlines())


async def _keep_shared_state_published(
    adapter: McpAdapter,
    *,
    task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Every few seconds, let the shared state notice a Redis that came back empty and publish
    this replica's records again (an idle replica would otherwise never look)."""
    task_status.started()
    while True:
        await anyio.sleep(EPOCH_CHECK_S)
        shared = adapter.shared_state
        if shared is not None:
            await anyio.to_thread.run_sync(shared.refresh, abandon_on_cancel=True)


def _request_id(request_body: bytes) -> str | int | None:
    """The id of the one JSON-RPC request in ``request_body``; None for a notification, a
    response, a batch or anything else."""
    try:
        request = json.loads(request_body)
    except ValueError:
        return None
    if not isinstance(request, dict) or "method" not in request:
        return None
    request_id = request.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    return request_id


def _shutdown_reply(request_id: str | int | None) -> bytes:
    error = {"code": SHUTDOWN_ERROR_CODE, "message": "the gateway is shutting down"}
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: the gateway handles the stop signals itself."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_gateway(
    adapter: McpAdapter,
    options: GatewayOptions,
    *,
    announce: Callable[[str], None] | None = None,
    alongside: Callable[[McpAdapter], AbstractAsyncContextManager[object]] | None = None,
) -> signal.Signals | None:
    """Open ``adapter``, serve it as an MCP gateway until the end, close it.

    ``announce`` receives the URL an HTTP gateway listens on (default: printed to stdout).
    ``alongside(adapter)`` is entered once the adapter is open and left before it closes
    (the server pool).

    Returns:
        The signal (SIGINT, SIGTERM or SIGHUP) that stopped the gateway; None when the client
        went away (stdio: end of input).

    Raises:
        UsageError: the options are unsafe, or the address cannot be listened on (the port
            is taken, the host does not resolve); nothing has been started then.
    """
    # Bound before any upstream server starts: a taken port fails at once, starting nothing.
    sock = _bind(options.host, options.port) if options.transport == "http" else None
    received: list[signal.Signals] = []
    try:
        async with (
            adapter,
            alongside(adapter) if alongside is not None else nullcontext(),
            McpGateway(
                adapter,
                surface=options.surface,
                stateless=options.stateless,
                clients=options.clients if options.transport == "http" else (),
                jwt=options.jwt if options.transport == "http" else None,
            ).running() as gateway,
        ):
            if sock is None:
                await _serve_stdio(gateway, received)
            else:
                await _serve_http(gateway, options, sock, announce or _print_url, received)
    finally:
        if sock is not None:
            sock.close()
    return received[0] if received else None


async def _serve_stdio(gateway: McpGateway, received: list[signal.Signals]) -> None:
    server = gateway.server
    with _claim_stdio() as (stdin_fd, stdout_fd):
        writer = _NonBlockingWriter(stdout_fd)
        lines = _AnswerUnparsable(_NonBlockingLines(stdin_fd), writer)
        async with anyio.create_task_group() as tg:
            await tg.start(stop_on_signal, tg.cancel_scope.cancel, received, logger, _CLOSING)
            async with stdio_server(
                stdin=cast("anyio.AsyncFile[str]", lines),
                stdout=cast("anyio.AsyncFile[str]", writer),
            ) as (read, write):
                await server.run(read, write, server.create_initialization_options())
            tg.cancel_scope.cancel()


@contextmanager
def _claim_stdio() -> Iterator[tuple[int, int]]:
    """Private copies of fd 0 and 1 for the protocol; fd 0 reads the null device and fd 1
    writes to stderr meanwhile, so nothing else (a library's print) can reach the wire."""
    stdin_fd = os.dup(0)
    stdout_fd = os.dup(1)
    blocking = (os.get_blocking(stdin_fd), os.get_blocking(stdout_fd))
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    os.dup2(2, 1)
    try:
        yield stdin_fd, stdout_fd
    finally:
        # The flags belong to the open file, which the client's terminal may share.
        with suppress(OSError):
            os.set_blocking(stdin_fd, blocking[0])
            os.set_blocking(stdout_fd, blocking[1])
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        os.close(stdin_fd)
        os.close(stdout_fd)


class _NonBlockingWriter:
    """Writes protocol lines to a pipe from the event loop.

    The SDK writes stdout through a worker thread, two thread hand-offs per message; on the
    gateway's hot path (every response) writing directly is measurably faster.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        # Two tasks write (the SDK's writer, the parse-error answers of _AnswerUnparsable):
        # a line that blocks half-written must not be interleaved with another.
        self._lock = anyio.Lock()
        os.set_blocking(fd, False)

    async def write(self, text: str) -> None:
        data = memoryview(text.encode("utf-8"))
        async with self._lock:
            while data:
                try:
                    written = os.write(self._fd, data)
                except BlockingIOError:
                    await anyio.wait_writable(self._fd)
                    continue
                data = data[written:]

    async def flush(self) -> None:
        """Nothing is buffered."""


class _NonBlockingLines:
    """Lines from a pipe read without a worker thread.

    The SDK reads stdin in a thread, which a signal cannot interrupt: a gateway told to stop
    would wait for the client's next message before it could close its upstream servers.
    Waiting for readability in the event loop is cancellable at once.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False
        # A regular file (input redirected from one) never blocks, and epoll refuses it.
        self._pollable = not stat.S_ISREG(os.fstat(fd).st_mode)
        os.set_blocking(fd, False)

    def __aiter__(self) -> _NonBlockingLines:
        return self

    async def __anext__(self) -> str:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                line, self._buffer = self._buffer[: end + 1], self._buffer[end + 1 :]
                return line.decode("utf-8", errors="replace")
            if self._eof:
                if self._buffer:
                    line, self._buffer = self._buffer, b""
                    return line.decode("utf-8", errors="replace")
                raise StopAsyncIteration
            if self._pollable:
                await anyio.wait_readable(self._fd)
            try:
                chunk = os.read(self._fd, _READ_CHUNK_BYTES)
            except BlockingIOError:
                continue
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True


class _AnswerUnparsable:
    """Lines for the SDK's stdio reader, minus those it cannot parse, which get a JSON-RPC
    error here.

    The SDK drops a line it cannot parse (not JSON, not a JSON-RPC message, or a lone surrogate
    escape such as ``"\\ud800"``: valid JSON, but no Unicode text) without an answer, so a
    client waits forever for the reply to that request. JSON-RPC 2.0 answers such input with
    an error (-32700 or -32600), with the request's id when it can be read. Each line is
    parsed here as the SDK will parse it (microseconds, next to a tool call's milliseconds).
    """

    def __init__(self, lines: _NonBlockingLines, writer: _NonBlockingWriter) -> None:
        self._lines = lines
        self._writer = writer

    def __aiter__(self) -> _AnswerUnparsable:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._lines.__anext__()
            if not line.strip():
                continue  # a blank line is no message, and needs no answer
            try:
                jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                await self._writer.write(json.dumps(_unparsable_reply(line)) + "\n")
                continue
            return line


def _unparsable_reply(line: str) -> dict[str, object]:
    """The JSON-RPC error answering ``line``, which the SDK cannot parse."""
    try:
        message = json.loads(line)
    except ValueError:
        return _error_reply(None, PARSE_ERROR, "Parse error: the line is not JSON")
    request_id = message.get("id") if isinstance(message, dict) else None
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        request_id = None
    # Python's json accepts "\ud800"; the text it yields cannot be encoded.
    if not _is_unicode(json.dumps(message, ensure_ascii=False)):
        if isinstance(request_id, str) and not _is_unicode(request_id):
            request_id = None  # an id the client could not read back either
        return _error_reply(
            request_id,
            PARSE_ERROR,
            "Parse error: a string holds a lone surrogate escape (\\ud800-\\udfff), which "
            "is not Unicode text",
        )
    return _error_reply(request_id, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _error_reply(request_id: str | int | None, code: int, message: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def _serve_http(
    gateway: McpGateway,
    options: GatewayOptions,
    sock: socket.socket,
    announce: Callable[[str], None],
    received: list[signal.Signals],
) -> None:
    bound_port = sock.getsockname()[1]
    server: _Uvicorn | None = None
    config = uvicorn.Config(
        _CutAtShutdown(
            _ReplayableRequests(create_http_app(gateway, options)),
            lambda: server is not None and server.should_exit,
        ),
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(HTTP_GRACE_S),
    )
    server = _Uvicorn(config)
    logging.getLogger("uvicorn.error").addFilter(_not_the_shutdown_cut)

    def stop() -> None:
        server.should_exit = True

    host = f"[{options.host}]" if ":" in options.host else options.host
    async with anyio.create_task_group() as tg:
        # Handlers first: whoever reads the address may signal at once.
        await tg.start(stop_on_signal, stop, received, logger, _CLOSING)
        await tg.start(_keep_shared_state_published, gateway.adapter)
        # The socket already listens: clients that connect now wait in its backlog until
        # uvicorn has started, so the address can be announced before serving begins.
        announce(f"http://{host}:{bound_port}{options.path}")
        await server.serve(sockets=[sock])
        tg.cancel_scope.cancel()


def _not_the_shutdown_cut(record: logging.LogRecord) -> bool:
    # uvicorn logs cutting requests at the end of its grace period as an error; the gateway
    # answers each of them (``_CutAtShutdown``), so a stop with calls in flight is no error.
    return "timeout graceful shutdown exceeded" not in record.getMessage()


def _print_url(url: str) -> None:
    sys.stdout.write(f"pi-mcp gateway listening on {url}\n")
    sys.stdout.flush()


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not the default 0: asyncio sets TCP_NODELAY only on accepted sockets whose
    # ``proto`` says TCP, and an accepted socket inherits the listener's. Without it Nagle holds
    # a response's body segment until the client ACKs the header segment, and a client on a
    # kept-alive connection (every 2026-07-28 request) delays that ACK by ~40 ms per request.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except socket.gaierror as exc:
        sock.close()
        raise UsageError(f"cannot listen on --host {host!r}: {exc.strerror or exc}") from exc
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.setblocking(False)
    return sock


def without_gateway_itself(config: LoadedConfig) -> tuple[LoadedConfig, list[str]]:
    """``config`` minus servers that would start this gateway again, and their names.

    A client config that runs ``pi-mcp serve`` is exactly what ``pi-mcp init`` imports from
    that client: serving it would start a gateway that starts a gateway, without end.
    """
    skipped = [name for name, entry in config.servers.items() if _runs_the_gateway(entry)]
    if not skipped:
        return config, []
    servers = {n: e for n, e in config.servers.items() if n not in skipped}
    return replace(config, servers=servers), skipped


def _runs_the_gateway(entry: ServerEntry) -> bool:
    if entry.command is None:
        return False
    words = [Path(entry.command).name, *entry.args]
    launches = any(w in ("pi-mcp", "pi_mcp_adapter", "pi_mcp_adapter.cli") for w in words)
    return launches and "serve" in entry.args


def configure_logging(stream: TextIO | None = None, *, verbose: bool = False) -> None:
    """Log to stderr only: in stdio mode stdout carries nothing but the protocol."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter("pi-mcp: %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)


@asynccontextmanager
async def open_gateway(
    adapter: McpAdapter, *, surface: SurfaceKind | None = None, stateless: bool = False
) -> AsyncIterator[McpGateway]:
    """A running gateway over an adapter the caller has opened (for in-process use)."""
    async with McpGateway(adapter, surface=surface, stateless=stateless).running() as gateway:
        yield gateway
