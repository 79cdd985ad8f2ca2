"""Reaching the machine's warm server pool instead of starting a server process.

A running gateway (``pi-mcp serve``, or ``pi-mcp serve --background``) offers the stdio servers
of its agent dir to every other process of the same user through one Unix socket,
``<agent dir>/pool/pool.sock`` (the socket 0600, its directory 0700). A connection starts with
one JSON line from the client, the hello, and one JSON line back:

- ``{"pool": 1, "server": NAME, "fingerprint": HEX, "context": HEX}`` asks for ``NAME``'s MCP
  session. The pool answers ``{"ok": true}`` only when its own entry for ``NAME`` has the same
  fingerprint (what would run, and where), the client's process runs in the pool's execution
  context (namespaces, cgroup, credentials, limits, scheduling: read by the pool from the
  client's process, see :mod:`pi_mcp_adapter._execution_context`; ``context`` must agree with
  it), and the server is connected; from then on the connection carries MCP as
  newline-delimited JSON-RPC (stdio framing), served by the pool from its one connection to the
  server. Otherwise it answers ``{"ok": false, "reason": ...}`` and closes.
- ``{"pool": 1, "status": true}`` answers what the pool holds; ``{"pool": 1, "stop": true}``
  stops the process that serves the pool (asked from the pool's own user and pid namespaces
  only: from where the client could signal it itself).

Only the transport is shared: the client still runs its own engine (lookup, argument checks,
trust, approvals, statistics, the trace, secret redaction) on its own configuration, and its
manager never asks the pool for a server its configuration would not run (disabled or untrusted
servers fail before any transport is chosen). Whatever goes wrong before the pool said yes
(no pool, a stale socket, a different configuration) sends the client back to starting the
server itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from pi_mcp_adapter._execution_context import (
    context_differences,
    context_fingerprint,
    execution_context,
    peer_execution_context,
)
from pi_mcp_adapter._warm import socket_path_fits
from pi_mcp_adapter.config import ServerEntry

__all__ = [
    "POOL_DIR_NAME",
    "POOL_PROTOCOL",
    "PoolAccess",
    "PoolRefusedError",
    "pool_is_offered",
    "pool_socket_path",
    "query_pool",
    "read_hello_line",
    "server_fingerprint",
]

POOL_PROTOCOL = 1
POOL_DIR_NAME = "pool"
SOCKET_NAME = "pool.sock"
HELLO_LIMIT_BYTES = 64 * 1024
"""A hello or its answer is one short JSON line; more is not a pool speaking."""
HELLO_ANSWER_TIMEOUT_S = 120.0
"""The pool answers once the server is connected, which may include starting it: bounded by
the server's own start-up timeout on the pool's side; this only guards against a pool that
accepted the connection and hangs."""


class PoolRefusedError(Exception):
    """The pool cannot serve this server to this client (the reason says why)."""


@dataclass(frozen=True, slots=True)
class PoolAccess:
    """Where a client looks for the pool, and the directory its own servers would start in."""

    agent_dir: Path
    cwd: Path

    def offers(self, entry: ServerEntry) -> bool:
        """Whether to ask the pool for ``entry`` first: a stdio server, and a pool socket.

        Only stdio servers are pooled: they are the ones that cost a process and a start-up
        per session; an HTTP server is already shared, and its sign-in (OAuth in a browser)
        belongs to the process that asked.
        """
        return entry.command is not None and pool_is_offered(self.agent_dir)


def pool_socket_path(agent_dir: Path) -> Path:
    """The pool's socket for ``agent_dir``."""
    return agent_dir / POOL_DIR_NAME / SOCKET_NAME


def server_fingerprint(entry: ServerEntry, *, cwd: Path | str | None = None) -> str:
    """What decides whether a pooled server is the process ``entry`` would start here.

    The resolved command, arguments, environment values (after ``${VAR}`` interpolation) and
    working directory, or, when the entry names none, the directory the process would start
    in: two processes with the same entry but different working directories would not run the
    same server (a git or filesystem server works on its working directory). Fields that only
    change how a client uses the server (timeouts, lifecycle, filters, prefixes, approvals,
    direct tools) are left out: each client applies its own.
    """
    start_dir = entry.cwd
    if start_dir is None:
        start_dir = str(cwd if cwd is not None else Path.cwd())
    process = {
        "command": entry.command,
        "args": list(entry.args),
        "env": dict(entry.env),
        "cwd": start_dir,
    }
    text = json.dumps([POOL_PROTOCOL, process], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def pool_is_offered(agent_dir: Path) -> bool:
    """Whether a pool socket exists for ``agent_dir`` (one stat; it may still be stale)."""
    path = pool_socket_path(agent_dir)
    return socket_path_fits(path) and path.exists()


async def read_hello_line(stream: anyio.abc.ByteStream) -> tuple[dict[str, Any], bytes]:
    """The first JSON line of ``stream`` and the bytes received after it.

    Raises:
        ValueError: the line is not a JSON object, too long, or the stream ended first.
    """
    buffer = bytearray()
    while (newline := buffer.find(b"\n")) < 0:
        if len(buffer) > HELLO_LIMIT_BYTES:
            raise ValueError("the hello line is too long")
        try:
            buffer.extend(await stream.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError) as exc:
            raise ValueError("the connection ended before the hello line") from exc
    line, rest = bytes(buffer[:newline]), bytes(buffer[newline + 1 :])
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("the hello line is not a JSON object")
    return message, rest


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


@contextlib.asynccontextmanager
async def open_pooled_session(
    access: PoolAccess, server: str, entry: ServerEntry, on_eof: Callable[[], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's ``(read, write)`` streams of ``server``'s session held by the pool.

    Raises:
        PoolRefusedError: no pool answers on the socket, or it refused (another
            configuration, a server it does not hold or could not start).
    """
    from pi_mcp_adapter.servers._http_extras import open_line_streams

    path = pool_socket_path(access.agent_dir)
    try:
        stream = await anyio.connect_unix(path)
    except OSError as exc:
        raise PoolRefusedError(f"no pool answers on {path} ({exc.strerror or exc})") from exc
    async with stream:
        # A pooled server runs with the pool's namespaces, cgroup, limits and scheduling: only
        # a client whose own are the same may use it (the pool checks again on its side).
        own_context = execution_context()
        differences = context_differences(own_context, _peer_context_of(stream))
        if own_context is None or differences:
            raise PoolRefusedError(
                "the pool runs in another execution context (" + ", ".join(differences) + ")"
            )
        hello = {"pool": POOL_PROTOCOL, "server": server}
        hello["fingerprint"] = server_fingerprint(entry, cwd=access.cwd)
        hello["context"] = context_fingerprint(own_context)
        try:
            await stream.send(_line(hello))
            with anyio.fail_after(HELLO_ANSWER_TIMEOUT_S):
                answer, received = await read_hello_line(stream)
        except (OSError, ValueError, TimeoutError, anyio.BrokenResourceError) as exc:
            raise PoolRefusedError(f"the pool did not answer ({exc})") from exc
        if answer.get("ok") is not True:
            raise PoolRefusedError(str(answer.get("reason") or "the pool refused"))
        async with open_line_streams(stream, on_eof, received=received) as streams:
            yield streams


def _peer_context_of(stream: anyio.abc.SocketStream) -> dict[str, str] | None:
    """The execution context of the pool's process, at the other end of ``stream``."""
    return peer_execution_context(stream.extra(anyio.abc.SocketAttribute.raw_socket))


def query_pool(agent_dir: Path, request: str, *, timeout_s: float = 5.0) -> dict[str, Any] | None:
    """Ask the pool for ``status`` or to ``stop``, without an event loop (for the CLI).

    Returns the pool's answer, or None when no pool answers (no socket, a stale one).
    """
    path = pool_socket_path(agent_dir)
    if not pool_is_offered(agent_dir):
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        try:
            sock.connect(os.fspath(path))
            sock.sendall(_line({"pool": POOL_PROTOCOL, request: True}))
            data = b""
            while b"\n" not in data and len(data) <= HELLO_LIMIT_BYTES * 16:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        except OSError:
            return None
    try:
        answer = json.loads(data.partition(b"\n")[0])
    except ValueError:
        return None
    return answer if isinstance(answer, dict) else None
