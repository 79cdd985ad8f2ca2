"""Capturing a stdio server's stderr: a per-server log file, an optional terminal echo, a tail.

The child writes into a pipe; a pump task copies each line to ``<log dir>/<server>.log``, echoes
it to the terminal (prefixed with the server name) when the server has ``debug: true``, and keeps
the last lines in memory so that a failed start can show them.

A server may print its environment or its arguments, which hold the secrets we gave it and
the ones it inherited: every line is redacted (:mod:`pi_mcp_adapter._secrets`) whole, before it
is stored or cut to :data:`MAX_LINE_CHARS`, one line behind (a
:class:`~pi_mcp_adapter._secrets.LineRedactor`), so that a secret wrapped across a line end and
a private key printed over many lines are masked too. The log file and the tail get those
lines; the ``debug: true`` echo is immediate and redacts each line on its own. The log files
are private (0600 in a 0700 directory), as the cache, failure and stats files are.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, TextIO

import anyio

from pi_mcp_adapter._secrets import LineRedactor, redact

TAIL_LINES = 20
"""Lines of stderr kept for error messages; enough for a Python traceback's last frames."""

MAX_LINE_CHARS = 500
"""A server may print one enormous line (a JSON dump); keep error messages readable."""

ROTATE_AT_BYTES = 5 * 1024 * 1024
"""A log file above this size is moved to ``<name>.log.1`` when the next connection starts."""

DRAIN_TIMEOUT_S = 1.0
"""After the child exits, how long to wait for the pipe to reach EOF. Only a descendant that
escaped the process-group kill while holding the pipe can make this run out."""

_READ_CHUNK = 65536


def safe_file_stem(server: str) -> str:
    """A file name for ``server`` that cannot escape the log directory."""
    cleaned = "".join(c if c.isalnum() or c in "-_." else "_" for c in server).strip(".")
    return cleaned or "server"


class StderrCapture:
    """One stdio server's stderr for one connection attempt.

    Use :meth:`open_sink` around the spawn: it yields the file object to hand to the process as
    stderr and, on exit, drains what is left (bounded by :data:`DRAIN_TIMEOUT_S`) and closes
    everything. :meth:`tail` is valid at any time and complete after ``open_sink`` exits.
    """

    def __init__(self, server: str, log_dir: Path, *, echo: TextIO | None = None) -> None:
        self.server = server
        self.log_path = log_dir / f"{safe_file_stem(server)}.log"
        self._echo = echo
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)
        self._partial = ""
        self._log_file: IO[bytes] | None = None
        self._redactor = LineRedactor()

    def tail(self) -> str:
        """The last lines the server wrote to stderr during this attempt."""
        lines = list(self._lines)
        held = self._redactor.held()
        if held is not None:
            lines.append(held.rstrip("\r")[:MAX_LINE_CHARS])
        if self._partial:
            lines.append(redact(self._partial)[:MAX_LINE_CHARS])
        return "\n".join(lines[-TAIL_LINES:])

    @contextlib.asynccontextmanager
    async def open_sink(self) -> AsyncIterator[IO[str]]:
        """Yield the write end of a pipe for the child's stderr while a pump copies it out.

        The caller must call :meth:`release_parent_copy` once the child is spawned, so that the
        pipe reaches EOF when the child (and its descendants) exit.
        """
        log_file = self._log_file = self._open_log()
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self._write_end: IO[str] | None = os.fdopen(write_fd, "w")
        eof = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._pump, read_fd, eof)
                try:
                    yield self._write_end
                finally:
                    self.release_parent_copy()
                    with anyio.CancelScope(shield=True), anyio.move_on_after(DRAIN_TIMEOUT_S):
                        await eof.wait()
                    tg.cancel_scope.cancel()
        finally:
            os.close(read_fd)
            self._flush_partial(log_file)
            self._log_file = None
            if log_file is not None:
                log_file.close()

    def release_parent_copy(self) -> None:
        """Close this process's copy of the pipe's write end (idempotent)."""
        write_end = getattr(self, "_write_end", None)
        if write_end is not None:
            self._write_end = None
            write_end.close()

    def _open_log(self) -> IO[bytes] | None:
        try:
            log_dir = self.log_path.parent
            log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            # Directories made by earlier versions were 0755 and files 0644.
            with contextlib.suppress(OSError):
                os.chmod(log_dir, 0o700)
            with contextlib.suppress(FileNotFoundError):
                if self.log_path.stat().st_size > ROTATE_AT_BYTES:
                    self.log_path.replace(self.log_path.with_name(self.log_path.name + ".1"))
            fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.fchmod(fd, 0o600)
            log_file = os.fdopen(fd, "ab")
        except OSError:
            # A read-only or missing log directory must not stop the server from starting;
            # the tail still reaches error messages.
            return None
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log_file.write(f"--- {stamp} starting server {self.server!r} ---\n".encode())
        log_file.flush()
        return log_file

    async def _pump(self, read_fd: int, eof: anyio.Event) -> None:
        try:
            while True:
                await anyio.wait_readable(read_fd)
                try:
                    chunk = os.read(read_fd, _READ_CHUNK)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                self._take_lines(chunk.decode("utf-8", errors="replace"))
        except OSError:
            return
        finally:
            eof.set()

    def _take_lines(self, text: str) -> None:
        pieces = (self._partial + text).split("\n")
        self._partial = pieces.pop()
        for whole in pieces:
            self._record(whole, newline=True)
        if len(self._partial) > 16 * MAX_LINE_CHARS:
            partial, self._partial = self._partial, ""
            self._record(partial, newline=False)

    def _record(self, text: str, *, newline: bool) -> None:
        """One line (or a run without a newline) as the server wrote it: echoed at once,
        redacted alone; logged and kept in the tail one line later, redacted with the line
        that follows (a secret split between two reads or two lines would escape redaction)."""
        if self._echo is not None:
            self._echo.write(f"[{self.server}] {redact(text).rstrip(chr(13))[:MAX_LINE_CHARS]}\n")
            self._echo.flush()
        ready = self._redactor.push(text)
        if ready is not None:
            self._keep(ready)
        if not newline:
            # A run cut without a newline is not a line of its own: nothing follows it here.
            self._keep_held(newline=False)

    def _keep(self, redacted: str, *, newline: bool = True) -> None:
        if self._log_file is not None:
            ending = b"\n" if newline else b""
            self._log_file.write(redacted.encode("utf-8", errors="replace") + ending)
            self._log_file.flush()
        self._lines.append(redacted.rstrip("\r")[:MAX_LINE_CHARS])

    def _keep_held(self, *, newline: bool) -> None:
        held = self._redactor.flush()
        if held is not None:
            self._keep(held, newline=newline)

    def _flush_partial(self, log_file: IO[bytes] | None) -> None:
        if self._partial:
            partial, self._partial = self._partial, ""
            self._record(partial, newline=False)
        self._keep_held(newline=True)
        if log_file is not None:
            log_file.flush()


def terminal() -> TextIO:
    """Where ``debug: true`` servers echo their stderr."""
    return sys.stderr
