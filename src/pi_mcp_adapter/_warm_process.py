"""Where the warm process of an agent dir is found and how it is recognised.

Shared by the entry point that hands it commands (``pi_mcp_adapter._launch``), the warm
process itself (``pi_mcp_adapter.cli._warm``), ``status`` and ``serve --stop``, and the pool
client (the same socket-path limit). Standard library only: the entry point imports it before
anything else.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

WARM_SOCKET_NAME = "cli.sock"
WARM_LOCK_NAME = "warm.lock"
"""Held (flock) by a warm process started on first use for its whole life; holds its pid and
its idle timeout in seconds."""
WARM_IDLE_S = 600.0
"""How long a warm process started on first use waits for a command before it exits
(``PI_MCP_WARM_IDLE_S`` overrides it)."""
SUN_PATH_LIMIT = 107
"""The longest socket path ``bind`` and ``connect`` take on Linux (108 bytes with the final
NUL)."""


def warm_socket_path(agent_dir: Path) -> Path:
    """Where the warm process of ``agent_dir``'s pool listens."""
    return agent_dir / "pool" / WARM_SOCKET_NAME


def running_warm_process(pool_dir: Path) -> tuple[int, float] | None:
    """The pid and idle timeout of the warm process started on first use for ``pool_dir``
    (pid -1 when its lock holds none yet), None when none runs (its lock is free)."""
    import fcntl

    try:
        descriptor = os.open(pool_dir / WARM_LOCK_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            fields = os.read(descriptor, 64).decode(errors="replace").split()
            pid = int(fields[0]) if fields and fields[0].isdigit() else -1
            try:
                idle_s = float(fields[1])
            except (IndexError, ValueError):
                idle_s = WARM_IDLE_S
            return pid, idle_s
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


def socket_path_fits(path: Path) -> bool:
    """Whether a Unix socket can be bound or reached at ``path`` (its length)."""
    return len(os.fsencode(path)) <= SUN_PATH_LIMIT


def install_identity() -> list[str]:
    """This interpreter, this copy of the package and the age of its newest file: a warm process
    of another installation (another virtual environment), or one that imported the package
    before it was upgraded or edited, must not run this command."""
    package = os.path.dirname(os.path.abspath(__file__))
    return [sys.executable, package, str(_newest_mtime_ns(package))]


def _newest_mtime_ns(directory: str) -> int:
    newest = 0
    with os.scandir(directory) as entries:
        for entry in entries:
            if entry.name.endswith(".py"):
                newest = max(newest, entry.stat().st_mtime_ns)
            elif entry.is_dir() and entry.name != "__pycache__":
                newest = max(newest, _newest_mtime_ns(entry.path))
    return newest
