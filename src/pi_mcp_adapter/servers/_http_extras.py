"""What an HTTP server entry may add to its requests: command values, a request-headers
command, a custom CA bundle; and the unix-socket transport.

- ``!command`` values in ``headers``, ``env`` and ``bearerToken`` are run when the server
  connects (see :mod:`pi_mcp_adapter.config._command_values`), in a worker thread so that the
  event loop keeps serving the other servers.
- ``requestHeadersCommand`` runs a trusted command before every HTTP request, as the TypeScript
  adapter does: the request is described on its stdin as one JSON object
  ``{"version": 1, "method", "url", "bodyBase64"}`` and it prints a JSON object of header names
  to string values, which are added to (or replace) the request's headers. Running it per
  request lets it sign each request (a body digest, a short-lived token it caches itself);
  when the server still answers 401 the command is run once more and the request retried.
- ``caFile`` is a PEM bundle trusted for the server's certificate, in addition to none: it
  replaces the system store for that server, as Node's ``ca`` option does.
- ``socket`` speaks newline-delimited JSON-RPC over a unix domain socket (the framing of stdio),
  which is what the TypeScript adapter's socket transport speaks (rmcp-mux and similar
  multiplexers that share one server process between sessions).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import ssl
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
import httpx2
import mcp_types as types
from mcp.shared.message import SessionMessage

from pi_mcp_adapter._errors import ConfigError, ServerStartError
from pi_mcp_adapter._secrets import register_secret
from pi_mcp_adapter.config._command_values import resolve_command_value
from pi_mcp_adapter.config._models import RequestHeadersCommand

__all__ = [
    "HeadersCommandTransport",
    "open_line_streams",
    "open_unix_socket",
    "resolve_command_values",
    "ssl_context_for",
]

HEADERS_COMMAND_DEFAULT_TIMEOUT_MS = 10_000
HEADERS_COMMAND_MAX_TIMEOUT_MS = 60_000
HEADERS_COMMAND_OUTPUT_LIMIT_BYTES = 64 * 1024
"""A few headers fit in far less; more means the command printed something else."""

_BAD_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")

SOCKET_LINE_LIMIT_BYTES = 32 * 1024 * 1024
"""One JSON-RPC message per line; a line beyond this is a broken peer, not a big result."""


async def resolve_command_values(
    server: str, values: Mapping[str, str], *, what: str
) -> dict[str, str]:
    """``values`` with every ``!command`` replaced by its output and ``!!`` unescaped.

    Raises:
        ServerStartError: a command failed; the message names the field, never a value.
    """
    resolved: dict[str, str] = {}
    for key, value in values.items():
        label = f"server {server!r}: {what} {key!r}"
        resolved[key] = await resolve_one(server, value, what=label)
        if what == "header" and value != resolved[key] and _BAD_HEADER_VALUE.search(resolved[key]):
            # httpx would quote the value in its error; it is a secret.
            raise ServerStartError(
                server, f"{label}: the command printed a value that is not a valid header value"
            )
    return resolved


async def resolve_one(server: str, value: str, *, what: str) -> str:
    if not value.startswith("!"):
        return value
    try:
        return await anyio.to_thread.run_sync(
            lambda: resolve_command_value(value, what=what), abandon_on_cancel=True
        )
    except ConfigError as exc:
        raise ServerStartError(server, exc.message) from exc


def ssl_context_for(server: str, ca_file: str | None) -> ssl.SSLContext | bool:
    """The TLS verification to use: the system store, or only the bundle in ``ca_file``.

    Raises:
        ServerStartError: the bundle cannot be read or holds no certificate.
    """
    if ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ServerStartError(
            server, f"server {server!r}: caFile {ca_file!r} cannot be used: {reason}"
        ) from exc


class HeadersCommandTransport(httpx2.AsyncBaseTransport):
    """Adds the headers a ``requestHeadersCommand`` prints to every request it sends."""

    def __init__(
        self,
        server: str,
        command: RequestHeadersCommand,
        inner: httpx2.AsyncBaseTransport,
        environ: Mapping[str, str],
    ) -> None:
        timeout_ms = command.timeout_ms or HEADERS_COMMAND_DEFAULT_TIMEOUT_MS
        if not 0 < timeout_ms <= HEADERS_COMMAND_MAX_TIMEOUT_MS:
            raise ServerStartError(
                server,
                f"server {server!r}: requestHeadersCommand.timeoutMs must be between 1 and "
                f"{HEADERS_COMMAND_MAX_TIMEOUT_MS}",
            )
        self._server = server
        self._argv = [command.command, *(command.args or ())]
        self._env = {**environ, **(command.env or {})}
        self._timeout_s = timeout_ms / 1000
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        response = await self._send_with_headers(request, body)
        if response.status_code != 401:
            return response
        # The command may hold a credential that just expired: ask once more, then give up.
        await response.aclose()
        return await self._send_with_headers(request, body)

    async def _send_with_headers(self, request: httpx2.Request, body: bytes) -> httpx2.Response:
        for name, value in (await self._headers_for(request, body)).items():
            request.headers[name] = value
        return await self._inner.handle_async_request(request)

    async def _headers_for(self, request: httpx2.Request, body: bytes) -> dict[str, str]:
        envelope = {
            "version": 1,
            "method": request.method.upper(),
            "url": str(request.url),
            "bodyBase64": base64.b64encode(body).decode("ascii"),
        }
        failure = f"server {self._server!r}: requestHeadersCommand"
        try:
            with anyio.fail_after(self._timeout_s):
                completed = await anyio.run_process(
                    self._argv,
                    input=json.dumps(envelope).encode(),
                    env=self._env,
                    check=False,
                    stderr=None if os.environ.get("PI_MCP_DEBUG") else -3,  # DEVNULL
                )
        except TimeoutError as exc:
            raise httpx2.RequestError(
                f"{failure} timed out after {self._timeout_s:g} s", request=request
            ) from exc
        except OSError as exc:
            raise httpx2.RequestError(
                f"{failure} failed to start ({exc.strerror or type(exc).__name__})",
                request=request,
            ) from exc
        if completed.returncode != 0:
            raise httpx2.RequestError(
                f"{failure} exited with code {completed.returncode}", request=request
            )
        if len(completed.stdout) > HEADERS_COMMAND_OUTPUT_LIMIT_BYTES:
            raise httpx2.RequestError(f"{failure} printed more than 64 KiB", request=request)
        try:
            parsed = json.loads(completed.stdout)
        except ValueError as exc:
            raise httpx2.RequestError(f"{failure} printed invalid JSON", request=request) from exc
        if not isinstance(parsed, dict) or not all(isinstance(v, str) for v in parsed.values()):
            raise httpx2.RequestError(
                f"{failure} must print a JSON object of string values", request=request
            )
        if any(_BAD_HEADER_VALUE.search(str(k) + v) for k, v in parsed.items()):
            raise httpx2.RequestError(f"{failure} printed an invalid header", request=request)
        for value in parsed.values():
            register_secret(value)  # the command's output is a credential, whatever the name
        return {str(k): v for k, v in parsed.items()}

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def open_unix_socket(path: str, on_eof: Callable[[], None]) -> AsyncIterator[tuple[Any, Any]]:
    """Connect to ``path`` and yield the SDK's ``(read, write)`` streams over it.

    End of stream from the peer is reported through ``on_eof``.
    """
    stream = await anyio.connect_unix(path)
    async with stream, open_line_streams(stream, on_eof) as streams:
        yield streams


@contextlib.asynccontextmanager
async def open_line_streams(
    stream: anyio.abc.ByteStream, on_eof: Callable[[], None], *, received: bytes = b""
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``(read, write)`` streams over newline-delimited JSON-RPC on ``stream``.

    One task reads lines into the read stream, one writes the write stream's messages as lines;
    both end with the socket, and end of stream from the peer calls ``on_eof``. ``received``
    holds bytes already read from ``stream`` (after a line that came before the protocol).
    The caller owns ``stream`` and closes it.
    """
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](64)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](64)

    async def reader() -> None:
        buffer = bytearray(received)
        async with read_send:
            try:
                while True:
                    while (newline := buffer.find(b"\n")) >= 0:
                        line = bytes(buffer[:newline]).strip()
                        del buffer[: newline + 1]
                        if line:
                            await read_send.send(_parse(line))
                    if len(buffer) > SOCKET_LINE_LIMIT_BYTES:
                        raise ValueError("a message line is longer than 32 MiB")
                    buffer.extend(await stream.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            except ValueError as exc:
                await read_send.send(exc)
        on_eof()

    async def writer() -> None:
        async with write_receive:
            async for message in write_receive:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stream.send(data.encode() + b"\n")
        # Our side is done (the SDK closed its writer): say so, as closing a child's stdin
        # does, so the peer ends the session and the read side ends at once.
        if isinstance(stream, anyio.abc.SocketStream):
            with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await stream.send_eof()

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield read_receive, write_send
        finally:
            tg.cancel_scope.cancel()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:
        return exc
