"""Building the SDK transport for one server entry: stdio, Streamable HTTP or SSE.

Each ``open_*`` function returns an async context manager yielding the ``(read, write)`` stream
pair the SDK's ``Client`` accepts as a transport. The read side is wrapped so that end of stream
(a stdio child exiting, an SSE stream ending) is reported at once through ``on_eof``: the SDK's
``Client`` does not leave its context when the peer goes away.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextvars import Context
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import anyio
import httpx2
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from pi_mcp_adapter._errors import ServerStartError
from pi_mcp_adapter._secrets import register_secret
from pi_mcp_adapter.config import ServerEntry

from ._http_extras import (
    HeadersCommandTransport,
    resolve_command_values,
    resolve_one,
    ssl_context_for,
)
from ._log_redaction import install_log_redaction
from ._npx import resolve_npx_command
from ._stderr import StderrCapture
from ._stdio import ProcessRecord, open_stdio_process
from ._translate import HttpObservation

# The SDK logs endpoint URLs, which may carry a password or a token.
install_log_redaction()

HTTP_TIMEOUT_S = 30.0
"""Connect, write and pool timeout of HTTP requests (the SDK's own default)."""

HTTP_STREAM_READ_TIMEOUT_S = 300.0
"""Read timeout: a server may hold a response stream open for a long time between events."""

MCP_SESSION_HEADER = "mcp-session-id"

Streams = tuple[Any, Any]
AuthFactory = Callable[[str], httpx2.Auth | None]
"""Given a server name, the ``httpx2.Auth`` to use for it (e.g. an OAuth provider), or None."""


class _EofWatchingStream:
    """A read stream that calls ``on_eof`` when the underlying stream ends.

    Forwards everything else, including ``last_context``, which the SDK's dispatcher reads to
    run handlers in the sender's context.
    """

    def __init__(self, inner: Any, on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> Context | None:
        context: Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.receive()
        except anyio.EndOfStream:
            self._on_eof()
            raise
        return item

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            item: SessionMessage | Exception = await self._inner.__anext__()
        except StopAsyncIteration:
            self._on_eof()
            raise
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return result


def _is_npx(command: str, args: tuple[str, ...]) -> bool:
    name = os.path.basename(command)
    for suffix in (".cmd", ".exe"):
        name = name.removesuffix(suffix)
    return name == "npx" or (name == "npm" and bool(args) and args[0] == "exec")


def _working_dir(entry: ServerEntry) -> Path | None:
    # expanduser reads only the environment; no filesystem access happens here.
    return Path(entry.cwd).expanduser() if entry.cwd else None


async def stdio_parameters(
    server: str,
    entry: ServerEntry,
    *,
    environ: Mapping[str, str],
    npx_cache_path: Path | None,
    resolve_npx: bool,
) -> StdioServerParameters:
    """The spawn parameters of a stdio ``entry``.

    The child gets the whole parent environment plus ``entry.env`` (the SDK alone would pass
    only a handful of variables, losing API keys and proxy settings). ``npx`` and ``npm exec``
    commands are resolved to the package's own binary when ``resolve_npx`` is set and a cache
    path is known; any doubt keeps the original command.

    Raises:
        ServerStartError: The entry has no command.
    """
    if entry.command is None:
        raise ServerStartError(server, f"server {server!r} has no `command` to start")
    env = {**environ, **await resolve_command_values(server, entry.env, what="env")}
    command, args = entry.command, tuple(entry.args)
    cwd = _working_dir(entry)
    if resolve_npx and npx_cache_path is not None and _is_npx(command, args):
        resolved = await resolve_npx_command(
            command, args, cache_path=npx_cache_path, environ=env, cwd=cwd
        )
        command, args = resolved.command, tuple(resolved.args)
    return StdioServerParameters(command=command, args=list(args), env=env, cwd=cwd)


@contextlib.asynccontextmanager
async def open_stdio(
    params: StdioServerParameters,
    capture: StderrCapture,
    record: ProcessRecord,
    on_eof: Callable[[], None],
) -> AsyncIterator[Streams]:
    """Spawn the server with its stderr captured; yield its streams with EOF watching."""
    async with capture.open_sink() as errlog:
        if sys.platform == "win32":  # pragma: no cover - process groups are POSIX
            async with stdio_client(params, errlog=errlog) as (read, write):  # type: ignore[arg-type]
                capture.release_parent_copy()
                yield _EofWatchingStream(read, on_eof), write
            return
        async with open_stdio_process(
            params.command,
            params.args,
            env=params.env or {},
            cwd=Path(params.cwd) if params.cwd is not None else None,
            errlog=errlog,
            record=record,
            on_eof=on_eof,
        ) as streams:
            # The child holds its own copy now; ours would keep the pipe from reaching EOF.
            capture.release_parent_copy()
            yield streams


async def http_headers(
    server: str, entry: ServerEntry, environ: Mapping[str, str]
) -> dict[str, str]:
    """Configured headers plus ``Authorization: Bearer ...`` from ``bearerToken(Env)``.

    ``!command`` values are run here (at connect time) and their output used.

    Raises:
        ServerStartError: ``bearerTokenEnv`` names a variable that is not set, or a command
            value failed (the message names the variable or field, never a value).
    """
    headers = await resolve_command_values(server, entry.headers, what="header")
    token = entry.bearer_token
    if token is not None:
        token = await resolve_one(server, token, what=f"server {server!r}: bearerToken")
    if token is None and entry.bearer_token_env:
        token = environ.get(entry.bearer_token_env)
        register_secret(token, f"${{{entry.bearer_token_env}}}")
        if not token:
            raise ServerStartError(
                server,
                f"server {server!r}: bearerTokenEnv names {entry.bearer_token_env!r}, "
                "which is not set in the environment",
            )
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


@dataclass(frozen=True, slots=True)
class HttpOptions:
    """How requests to one server are sent, beyond headers and auth."""

    verify: ssl.SSLContext | bool = True
    wrap_transport: Callable[[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport] | None = None


def http_options(server: str, entry: ServerEntry, environ: Mapping[str, str]) -> HttpOptions:
    """TLS trust (``caFile``) and the ``requestHeadersCommand`` of an HTTP entry.

    Raises:
        ServerStartError: the CA bundle cannot be used or the command's timeout is out of range.
    """
    verify = ssl_context_for(server, entry.ca_file)
    command = entry.request_headers_command
    if command is None:
        return HttpOptions(verify=verify)
    HeadersCommandTransport(server, command, httpx2.AsyncBaseTransport(), environ)  # validates

    def wrap(inner: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        return HeadersCommandTransport(server, command, inner, environ)

    return HttpOptions(verify=verify, wrap_transport=wrap)


def _http_client(
    headers: Mapping[str, str],
    auth: httpx2.Auth | None,
    observation: HttpObservation,
    options: HttpOptions | None = None,
) -> httpx2.AsyncClient:
    options = options or HttpOptions()

    async def observe(response: httpx2.Response) -> None:
        observation.record(response.status_code, response.headers.get("content-type", ""))
        if response.status_code == 404 and MCP_SESSION_HEADER in response.request.headers:
            # The spec's signal that the server no longer knows the session (it restarted).
            observation.session_expired = True

    transport: httpx2.AsyncBaseTransport = httpx2.AsyncHTTPTransport(verify=options.verify)
    if options.wrap_transport is not None:
        transport = options.wrap_transport(transport)
    return httpx2.AsyncClient(
        headers=dict(headers),
        auth=auth,
        timeout=httpx2.Timeout(HTTP_TIMEOUT_S, read=HTTP_STREAM_READ_TIMEOUT_S),
        event_hooks={"response": [observe]},
        transport=transport,
    )


@contextlib.asynccontextmanager
async def open_streamable_http(
    url: str,
    *,
    headers: Mapping[str, str],
    auth: httpx2.Auth | None,
    observation: HttpObservation,
    on_eof: Callable[[], None],
    options: HttpOptions | None = None,
) -> AsyncIterator[Streams]:
    """Open a Streamable HTTP transport whose responses are recorded in ``observation``."""
    async with (
        _http_client(headers, auth, observation, options) as client,
        streamable_http_client(url, http_client=client) as (read, write),
    ):
        yield _EofWatchingStream(read, on_eof), write


@contextlib.asynccontextmanager
async def open_sse(
    url: str,
    *,
    headers: Mapping[str, str],
    auth: httpx2.Auth | None,
    observation: HttpObservation,
    on_eof: Callable[[], None],
    options: HttpOptions | None = None,
) -> AsyncIterator[Streams]:
    """Open a legacy SSE transport whose responses are recorded in ``observation``."""

    def client_factory(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return _http_client(headers or {}, auth, observation, options)

    async with sse_client(
        url,
        headers=dict(headers),
        timeout=HTTP_TIMEOUT_S,
        sse_read_timeout=HTTP_STREAM_READ_TIMEOUT_S,
        httpx_client_factory=client_factory,
        auth=auth,
    ) as (read, write):
        yield _EofWatchingStream(read, on_eof), write
