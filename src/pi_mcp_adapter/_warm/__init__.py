"""The warm process, one room: a process per agent dir that has the CLI, the engine and the MCP
SDK imported, and runs each short ``pi-mcp`` command in a fork, as its caller.

- ``_identity`` where it is found (``<agent dir>/pool/cli.sock``, ``warm.lock``) and how an
                installation is recognised; standard library only.
- ``_client``   the caller's side, run by the ``pi-mcp`` entry point before anything else is
                imported: hand the command over, relay signals (job control included), start
                a warm process on first use; standard library only.
- ``_server``   the process itself: accept, check, fork, run the command as its caller.
- ``_run``      one command line to its exit code, the same cold and warm (output errors).

The rule "a command runs as its caller" lives here: the caller's execution context (see
:mod:`pi_mcp_adapter._execution_context`), installation, environment, locale, encodings, time
zone, umask, working directory, standard streams and terminal signals go with the command, and
whatever a fork cannot take sends the command back to run cold in the caller's own process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._client import hand_over, run_warm, start_warm_process, warm_wanted
from ._identity import (
    WARM_IDLE_S,
    WARM_LOCK_NAME,
    WARM_SOCKET_NAME,
    install_identity,
    running_warm_process,
    socket_path_fits,
    warm_socket_path,
)

if TYPE_CHECKING:
    from ._server import running_warm_cli, serve_warm


def __getattr__(name: str) -> Any:
    # The process's side imports threading and the execution-context reader: the entry point
    # must not pay for it on every command.
    if name in ("running_warm_cli", "serve_warm"):
        from . import _server

        return getattr(_server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "WARM_IDLE_S",
    "WARM_LOCK_NAME",
    "WARM_SOCKET_NAME",
    "hand_over",
    "install_identity",
    "run_warm",
    "running_warm_cli",
    "running_warm_process",
    "serve_warm",
    "socket_path_fits",
    "start_warm_process",
    "warm_socket_path",
    "warm_wanted",
]
