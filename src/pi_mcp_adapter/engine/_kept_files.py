"""The files in which a one-shot command keeps what it read for the next one (the status
facts, the search facts): written whole or not at all, read only when made by this version for
the inputs the caller has now."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pi_mcp_adapter._files import read_regular_file, write_atomically

__all__ = ["read_kept", "write_kept"]

logger = logging.getLogger(__name__)


def write_kept(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole (0600), in an agent dir that exists (a command that
    found none creates none); a file that cannot be written is logged and left alone."""
    if not path.parent.is_dir():
        return
    try:
        write_atomically(path, data)
    except OSError as exc:
        logger.debug("%s not kept: %s", path.name, exc)


def read_kept(
    path: Path, *, version: int, limit_bytes: int, key_of: Callable[[Sequence[str]], str]
) -> dict[str, Any] | None:
    """The JSON object at ``path`` when it is of ``version`` and its ``key`` is ``key_of``
    its ``environ`` (the names of the variables its inputs read); None for a missing,
    damaged or foreign file, or one kept for other inputs."""
    try:
        document = json.loads(read_regular_file(path, limit_bytes=limit_bytes))
        if not isinstance(document, dict) or document["version"] != version:
            return None
        names = document["environ"]
        if not isinstance(names, list) or not all(type(n) is str for n in names):
            return None
        return document if document["key"] == key_of(names) else None
    except (OSError, ValueError, RecursionError, KeyError) as exc:
        logger.debug("%s unreadable: %s", path.name, exc)
        return None
