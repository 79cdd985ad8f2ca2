"""The ``pi-mcp`` entry point: a short command runs in the server pool's warm process when one
serves the agent dir, else here.

Starting Python and importing the CLI, the engine and the MCP SDK costs several times more than
answering a call through the pool. While a pool runs (``pi-mcp serve``), it keeps a process
with all of that imported (``pi_mcp_adapter.cli._warm``); this entry point, which imports
nothing but the standard library, hands it the command line, the working directory, the
environment, the umask and its own stdin, stdout and stderr (passed as file descriptors over
the pool's private socket). The warm process forks; the fork runs the command exactly as this
process would have (same configuration files, same trust decisions, same terminal for questions)
and reports its exit code, which this process exits with. Signals this process receives
(Ctrl-C) are forwarded to the fork.

Anything that keeps the hand-over from happening (no pool, a stale socket, ``PI_MCP_POOL=0``,
a command that is not short) runs the command here as usual.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import socket

WARM_SOCKET_NAME = "cli.sock"
WARM_COMMANDS = frozenset(
    {"call", "status", "tools", "search", "describe", "prompt", "connect", "reconnect", "stats"}
)
"""Commands that end by themselves and only talk to the terminal; ``serve``, ``auth`` (a
browser sign-in), ``init`` and the rest run here."""
_GLOBAL_OPTIONS_WITH_VALUE = ("--config", "--agent-dir", "--project")
_LINE_LIMIT_BYTES = 1 << 16


def main() -> None:
    """Run ``pi-mcp`` with ``sys.argv`` (in the warm process when it can)."""
    code = run_warm(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from pi_mcp_adapter.cli import main as cli_main

    sys.exit(cli_main())


def warm_socket_path(agent_dir: Path) -> Path:
    """Where the warm process of ``agent_dir``'s pool listens."""
    return agent_dir / "pool" / WARM_SOCKET_NAME


def run_warm(args: list[str]) -> int | None:
    """Hand ``args`` to the warm process and return the command's exit code; None when it
    cannot take the command (then nothing has run)."""
    if os.environ.get("PI_MCP_POOL", "1") == "0":
        return None
    agent_dir = _agent_dir_for(args)
    if agent_dir is None:
        return None
    path = warm_socket_path(agent_dir)
    if len(os.fsencode(path)) > 107 or not path.exists():
        return None
    # Only now: --help, --version and every run without a pool pay nothing for these.
    import contextlib
    import json
    import signal
    import socket

    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(os.fspath(path))
    except OSError:
        connection.close()
        return None
    with connection:
        umask = os.umask(0)
        os.umask(umask)
        request = {
            "install": install_identity(),
            "argv": [sys.argv[0], *args],
            "cwd": os.getcwd(),
            "env": dict(os.environ),
            "umask": umask,
        }
        try:
            socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
            started = _read_line(connection)
        except (OSError, ValueError):
            return None  # it went away before taking the command: nothing ran
        pid = started.get("pid")
        if not isinstance(pid, int):
            return None

        def forward(signum: int, _frame: object) -> None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, forward)
        try:
            ended = _read_line(connection)
        except (OSError, ValueError):
            return 1  # the command's process died without saying how
        code = ended.get("exit")
        return code if isinstance(code, int) else 1


def install_identity() -> list[str]:
    """This interpreter and this copy of the package: a warm process of another installation
    (another version, another virtual environment) must not run this command."""
    return [sys.executable, os.path.dirname(os.path.abspath(__file__))]


def _read_line(connection: socket.socket) -> dict[str, object]:
    import json

    data = b""
    while b"\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            raise ValueError("the connection ended")
        data += chunk
        if len(data) > _LINE_LIMIT_BYTES:
            raise ValueError("the answer is too long")
    message = json.loads(data.partition(b"\n")[0])
    if not isinstance(message, dict):
        raise ValueError("the answer is not a JSON object")
    return message


def _agent_dir_for(args: list[str]) -> Path | None:
    """The agent dir the command line names, when its command is one the warm process runs;
    None otherwise (anything unusual: the command runs here and parses it properly)."""
    agent_dir: str | None = None
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in _GLOBAL_OPTIONS_WITH_VALUE:
            if index + 1 >= len(args):
                return None
            if arg == "--agent-dir":
                agent_dir = args[index + 1]
            index += 2
            continue
        name, equals, value = arg.partition("=")
        if equals and name in _GLOBAL_OPTIONS_WITH_VALUE:
            if name == "--agent-dir":
                agent_dir = value
            index += 1
            continue
        if arg == "--exclusive":
            index += 1
            continue
        if arg not in WARM_COMMANDS:
            return None  # --help, --version, another command, or something to report
        break
    else:
        return None
    if agent_dir is None:
        agent_dir = os.environ.get("PI_CODING_AGENT_DIR") or str(Path.home() / ".pi" / "agent")
    return Path(agent_dir).expanduser().resolve()
