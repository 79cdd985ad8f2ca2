"""Writing the adapter's own files: whole or not at all; reading files others wrote, bounded.

Every state file (metadata cache, failure memory, trust records, approvals, statistics) is
written to a temporary file in the same directory, flushed to disk and moved into place with
``os.replace``: a reader sees the old file or the new one, never half of one, and a crash
mid-write leaves the old file intact. ``mkstemp`` creates the file 0600, so what the adapter
writes is private to the user.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

CONFIG_FILE_LIMIT_BYTES = 8 * 1024 * 1024
"""The largest configuration file read. A repository can link its ``.mcp.json`` to
``/dev/zero`` or any other endless source; no real configuration comes near this size."""


class NotARegularFileError(OSError):
    """The path names a device, a pipe or a socket (or is larger than the limit): reading it
    could block forever or never end."""


def read_regular_file(path: Path, *, limit_bytes: int = CONFIG_FILE_LIMIT_BYTES) -> bytes:
    """The bytes of the regular file at ``path`` (links followed), at most ``limit_bytes``.

    Opened without blocking, so a named pipe with no writer cannot hold the reader, and
    checked to be a regular file before a byte is read.

    Raises:
        NotARegularFileError: a device, a pipe, a socket, or a file over the limit.
        OSError: the file does not exist or cannot be read (``FileNotFoundError``,
            ``IsADirectoryError``, ``PermissionError``...).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise NotARegularFileError(f"{path} is not a regular file (a device, pipe or socket)")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 16):
            size += len(chunk)
            if size > limit_bytes:
                raise NotARegularFileError(f"{path} is larger than {limit_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, temp_prefix: str | None = None) -> None:
    """Replace ``path`` with ``data`` in one step (see the module docstring).

    Raises:
        OSError: the directory is not writable (the old file, if any, is untouched).
    """
    write_atomically_in_chunks(path, (data,), temp_prefix=temp_prefix)


def write_atomically_in_chunks(
    path: Path, chunks: Iterable[bytes], *, temp_prefix: str | None = None
) -> None:
    """Replace ``path`` with the concatenation of ``chunks`` in one step, never holding the
    whole file in memory (see the module docstring). An exception raised by ``chunks``
    leaves the old file untouched and propagates.

    Raises:
        OSError: the directory is not writable (the old file, if any, is untouched).
    """
    fd, temp_name = tempfile.mkstemp(
        prefix=temp_prefix or f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "wb") as temp:
            for chunk in chunks:
                temp.write(chunk)
            temp.flush()
            # Without fsync a power loss after the rename can leave an empty file.
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
