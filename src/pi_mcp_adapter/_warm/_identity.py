"""Where the warm process of an agent dir is found and how it is recognised.

Shared by the client that hands it commands (``_client``), the warm process itself
(``_server``), ``status`` and ``serve --stop``, and the pool client (the same socket-path
limit). Standard library only: the entry point imports it before anything else.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TYPE_CHECKING = False  # not typing's: the entry point imports this module first
if TYPE_CHECKING:
    import hashlib

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
    """This interpreter, this copy of the package, its version, the state of its files and
    the distributions installed beside it: a warm process of another installation (another
    virtual environment, another path), or one that imported the package before it or a
    library it uses was upgraded or edited, must not run this command.

    The files count by size, inode, modification and change time: an edit that puts the
    modification time back (``touch -r``, a tool that keeps it) still changes the change time,
    which no user can set, and a replacement by rename changes the inode. One ``stat`` per
    file, no read: this runs before every command. A distribution counts by its metadata
    folder (``pydantic-2.9.2.dist-info``: name and version), which an install or an upgrade
    replaces (a reinstall of the same version is not seen).
    """
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    import hashlib

    digest = hashlib.sha256()
    _hash_files(package, digest)
    _hash_distributions(digest)
    # The interpreter by what it is (``python`` and ``python3`` of one environment are the same)
    # and the environment it runs in (two virtual environments share one interpreter).
    interpreter = [os.path.realpath(sys.executable), sys.prefix]
    return [*interpreter, package, _package_version(), digest.hexdigest()]


def _package_version() -> str:
    from pi_mcp_adapter import __version__

    return __version__


_DISTRIBUTION_SUFFIXES = (".dist-info", ".egg-info")


def _hash_distributions(digest: hashlib._Hash) -> None:
    """The names of the distributions' metadata folders in this environment's library folders
    (not ``sys.path``, whose first folder depends on how the process was started): one
    listing per folder, no ``stat``."""
    import sysconfig

    paths = sysconfig.get_paths()
    for directory in dict.fromkeys([paths["purelib"], paths["platlib"]]):
        try:
            with os.scandir(directory) as scanned:
                names = sorted(
                    entry.name for entry in scanned if entry.name.endswith(_DISTRIBUTION_SUFFIXES)
                )
        except OSError:  # a folder missing or unreadable: nothing installed there
            names = []
        digest.update(f"{directory}\0{chr(0).join(names)}\0".encode("utf-8", "surrogatepass"))


def _hash_files(directory: str, digest: hashlib._Hash) -> None:
    with os.scandir(directory) as scanned:
        entries = sorted(scanned, key=lambda entry: entry.name)
    for entry in entries:
        if entry.name.endswith(".py"):
            info = entry.stat()
            facts = (entry.path, info.st_size, info.st_ino, info.st_mtime_ns, info.st_ctime_ns)
            digest.update(repr(facts).encode())
        elif entry.is_dir() and entry.name != "__pycache__":
            _hash_files(entry.path, digest)
