"""Writing the adapter's own files: whole or not at all.

Every state file (metadata cache, failure memory, trust records, approvals, statistics) is
written to a temporary file in the same directory, flushed to disk and moved into place with
``os.replace``: a reader sees the old file or the new one, never half of one, and a crash
mid-write leaves the old file intact. ``mkstemp`` creates the file 0600, so what the adapter
writes is private to the user.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: Path, data: bytes, *, temp_prefix: str | None = None) -> None:
    """Replace ``path`` with ``data`` in one step (see the module docstring).

    Raises:
        OSError: the directory is not writable (the old file, if any, is untouched).
    """
    fd, temp_name = tempfile.mkstemp(
        prefix=temp_prefix or f".{path.name}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "wb") as temp:
            temp.write(data)
            temp.flush()
            # Without fsync a power loss after the rename can leave an empty file.
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        Path(temp_name).unlink(missing_ok=True)
        raise
