"""The stdio transport on POSIX: a server process in its own process group.

The SDK's ``stdio_client`` signals the process group only when the server outlives the grace
period after its stdin closes; a server that exits promptly leaves its own children running.
This transport always clears the group on close, reports the exit status, and notices a dead
server even when a descendant still holds its stdout open.

Shutdown (shielded, every wait bounded): close stdin, wait up to
:data:`EXIT_GRACE_S` (:data:`SILENT_EXIT_GRACE_S` for a server that never wrote a byte to
stdout); SIGTERM to the group, wait up to :data:`TERM_GRACE_S`; SIGKILL to the
group. The same TERM/KILL sequence then runs for whatever is left in the group.

On Linux the server runs under a small supervisor (``_reaper.py``) that leads the group and
kills all of it when this process dies, even by SIGKILL, when nothing here can clean up.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.abc
import mcp_types as types
from mcp.shared.message import SessionMessage

EXIT_GRACE_S = 2.0
"""Time for the server to exit on its own once its stdin is closed (the MCP spec's sequence)."""

SILENT_EXIT_GRACE_S = 0.2
"""The same wait for a server that never wrote to stdout: it never began the protocol (it hangs,
or is still installing when its start deadline passes), so it has no session to end cleanly,
and waiting the full grace would only add to the time a caller waits for a server given up
on."""

TERM_GRACE_S = 2.0
"""Time between SIGTERM and SIGKILL for the process group."""

DESCENDANT_GRACE_S = 0.2
"""When the server exited by itself, how long its leftover descendants get between SIGTERM and
SIGKILL. Their exit cannot be awaited (they are not our children), so this is a fixed wait,
paid only when something was left behind."""

EXIT_POLL_S = 0.01
"""Polling interval while waiting for an exit; asyncio's ``wait()`` would also wait for the
pipes, which a surviving descendant can hold open forever."""

EXIT_WATCH_POLL_S = 0.1
"""How often an idle connection checks whether its server process is still alive."""

REAPER_SCRIPT = Path(__file__).with_name("_reaper.py")
USE_REAPER = sys.platform == "linux"
"""Where ``PR_SET_PDEATHSIG`` exists; elsewhere the server is started directly."""

EOF_AFTER_EXIT_S = 0.5
"""After the server exits, how long stdout may stay open (held by a descendant) before the
connection is declared lost anyway; output already written still arrives in this window."""


@dataclass(slots=True)
class ProcessRecord:
    """What the transport learned about the process: filled in as it happens."""

    pid: int | None = None
    returncode: int | None = None


def _parse_line(line: str) -> SessionMessage | Exception:
    try:
        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError as exc:
        # Returned, not raised: the session skips the line and its handler can record it.
        return exc
    return SessionMessage(message)


def _signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; False when the group is gone."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:
        # A member changed its credentials (setuid helper); the rest were signalled.
        return True
    return True


async def _wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    with anyio.move_on_after(timeout_s):
        # Polled: an exit status has no event to wait on (see EXIT_POLL_S).
        while not condition():  # noqa: ASYNC110
            await anyio.sleep(EXIT_POLL_S)
    return condition()


async def _stop(process: anyio.abc.Process, record: ProcessRecord, *, spoke: bool) -> None:
    pgid = process.pid  # a new session makes the server its process group's leader

    def exited() -> bool:
        return process.returncode is not None

    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        if process.stdin is not None:
            await process.stdin.aclose()
    exited_by_itself = await _wait_until(exited, EXIT_GRACE_S if spoke else SILENT_EXIT_GRACE_S)
    # Anyone left in the group: the server itself if it ignored its stdin closing, or the
    # descendants it leaves behind even when it exited (they would be orphaned otherwise).
    if _signal_group(pgid, signal.SIGTERM):
        if exited_by_itself:
            await anyio.sleep(DESCENDANT_GRACE_S)
        else:
            await _wait_until(exited, TERM_GRACE_S)
        _signal_group(pgid, signal.SIGKILL)
        await _wait_until(exited, TERM_GRACE_S)
    record.returncode = process.returncode


@contextlib.asynccontextmanager
async def open_stdio_process(
    command: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    errlog: IO[str],
    record: ProcessRecord,
    on_eof: Callable[[], None],
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn ``command`` in a new session and yield the SDK's ``(read, write)`` streams.

    ``on_eof`` is called once the server's stdout ends or the process has exited.

    Raises:
        OSError: the command cannot be spawned (FileNotFoundError when it does not exist).
    """
    argv = [command, *args]
    if USE_REAPER:
        found = shutil.which(command, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
        # -I -S: the supervisor needs only the standard library, and starts in milliseconds.
        argv = [sys.executable, "-I", "-S", str(REAPER_SCRIPT), str(os.getpid()), found, *args]
    # Shielded: a cancellation that lands while the child is being spawned would leave it
    # running with no one holding its handle; once spawned, the blocks below stop it.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            argv,
            env=dict(env),
            cwd=cwd,
            stderr=errlog,
            start_new_session=True,
        )
    record.pid = process.pid
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    stdout_ended = anyio.Event()
    spoke = False

    async def read_stdout() -> None:
        nonlocal spoke
        assert process.stdout is not None
        buffer = b""
        try:
            async with read_send:
                async for chunk in process.stdout:
                    spoke = True
                    lines = (buffer + chunk).split(b"\n")
                    buffer = lines.pop()
                    for line in lines:
                        text = line.decode("utf-8", errors="replace").strip()
                        if text:
                            await read_send.send(_parse_line(text))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            stdout_ended.set()
            on_eof()

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_receive:
                async for message in write_receive:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send(data.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server stopped reading: end the read side so requests fail instead of hang.
            await read_send.aclose()

    async def watch_exit() -> None:
        while process.returncode is None:  # noqa: ASYNC110 - no event for an exit status
            await anyio.sleep(EXIT_WATCH_POLL_S)
        record.returncode = process.returncode
        with anyio.move_on_after(EOF_AFTER_EXIT_S):
            await stdout_ended.wait()
        on_eof()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            tg.start_soon(write_stdin)
            tg.start_soon(watch_exit)
            try:
                yield read_receive, write_send
            finally:
                with anyio.CancelScope(shield=True):
                    write_send.close()
                    read_receive.close()
                    await _stop(process, record, spoke=spoke)
                tg.cancel_scope.cancel()
    finally:
        # Bounded: asyncio waits for the pipes too, which an escaped daemon could hold open.
        with anyio.CancelScope(shield=True), anyio.move_on_after(TERM_GRACE_S):
            await process.aclose()
