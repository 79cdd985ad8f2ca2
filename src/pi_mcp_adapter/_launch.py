"""The ``pi-mcp`` entry point: a short command runs in a warm process of the agent dir when one
serves it, else here.

Starting Python and importing the CLI, the engine and the MCP SDK costs several times more than
answering a call through the pool. A warm process (``pi_mcp_adapter.cli._warm``, started by the
first short command or beside a pool) has all of that imported; this entry point, which imports
nothing but the standard library, hands it the command line, the working directory, the
environment, the umask and its own stdin, stdout and stderr (passed as file descriptors over a
private socket). The warm process forks; the fork runs the command exactly as this process
would have (same configuration files, same trust decisions, same terminal for questions) and
reports its exit code, which this process exits with. Signals this process receives (Ctrl-C)
are forwarded to the fork.

Anything that keeps the hand-over from happening (no warm process, a stale socket,
``PI_MCP_POOL=0``, a command that is not short, a warm process in another execution context:
other namespaces, cgroup, limits or scheduling, see ``pi_mcp_adapter._execution_context``)
runs the command here as usual. A short command
that finds no warm process also starts one, detached, that holds nothing but imported code (no
server, no configuration, no secret: each command brings its own) and exits after
``WARM_IDLE_S`` without a command; ``PI_MCP_WARM=0`` keeps it from starting, and in a CI job
only ``PI_MCP_WARM=1`` starts it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from pi_mcp_adapter._environment import in_ci_job
from pi_mcp_adapter._warm_process import (
    WARM_IDLE_S,
    WARM_LOCK_NAME,
    WARM_SOCKET_NAME,
    install_identity,
    running_warm_process,
    socket_path_fits,
    warm_socket_path,
)

TYPE_CHECKING = False  # not typing's: importing typing costs more than the hand-over needs
if TYPE_CHECKING:
    import socket

WARM_COMMANDS = frozenset(
    {"call", "status", "tools", "search", "describe", "prompt", "connect", "reconnect", "stats"}
)
"""Commands that end by themselves and only talk to the terminal; ``serve``, ``auth`` (a
browser sign-in), ``init`` and the rest run here."""
_GLOBAL_OPTIONS_WITH_VALUE = ("--config", "--agent-dir", "--project")
_INTERPRETER_ENV = frozenset({"PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV"})
_LINE_LIMIT_BYTES = 1 << 16


def main() -> None:
    """Run ``pi-mcp`` with ``sys.argv`` (in the warm process when it can)."""
    args = sys.argv[1:]
    agent_dir = _warm_agent_dir(args)
    if agent_dir is not None:
        code = hand_over(agent_dir, args)
        if code is not None:
            sys.exit(code)
        if _warm_start_wanted():
            start_warm_process(agent_dir)
    from pi_mcp_adapter.cli import main as cli_main

    sys.exit(cli_main())


def _warm_start_wanted() -> bool:
    """Whether a short command that found no warm process starts one. ``PI_MCP_WARM`` decides
    when set (``0``: no, anything else: yes); otherwise yes, except in a CI job: a job is one
    run whose end should leave no process behind."""
    wanted = os.environ.get("PI_MCP_WARM", "")
    if wanted:
        return wanted != "0"
    return not in_ci_job(os.environ)


def run_warm(args: list[str]) -> int | None:
    """Hand ``args`` to the warm process and return the command's exit code; None when it
    cannot take the command (then nothing has run)."""
    agent_dir = _warm_agent_dir(args)
    return None if agent_dir is None else hand_over(agent_dir, args)


def start_warm_process(agent_dir: Path) -> None:
    """Start, detached from this process and its terminal, a warm process for ``agent_dir``
    that exits after ``WARM_IDLE_S`` without a command; nothing when one runs or is starting
    (it holds the lock from its first instant), or when the agent dir does not exist yet."""
    pool_dir = agent_dir / "pool"
    if not socket_path_fits(warm_socket_path(agent_dir)) or not agent_dir.is_dir():
        return  # no socket could be bound there
    if running_warm_process(pool_dir) is not None:
        return
    import contextlib
    import subprocess

    idle_s = os.environ.get("PI_MCP_WARM_IDLE_S", "") or str(WARM_IDLE_S)
    # It only imports, so it needs only what shapes the interpreter: no secret of this
    # command's environment lives on in it (each command sends its own).
    environ = {
        name: value
        for name, value in os.environ.items()
        if name in _INTERPRETER_ENV or name.startswith(("LC_", "PYTHON"))
    }
    with contextlib.suppress(OSError):  # the command runs here all the same
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from pi_mcp_adapter._launch import serve_warm_on_first_use; "
                "serve_warm_on_first_use(sys.argv[1], float(sys.argv[2]))",
                os.fspath(pool_dir),
                idle_s,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env=environ,
            start_new_session=True,  # neither the terminal's signals nor its closing reach it
            close_fds=True,  # a caller reading this command's pipes to their end never waits
        )


def serve_warm_on_first_use(pool_dir: str, idle_s: float) -> None:
    """Be the warm process a short command started: hold ``warm.lock`` for life (one per agent
    dir), then serve until ``idle_s`` pass without a command. Nothing when another holds the
    lock or a warm process answers already; both are checked before the CLI is imported, so a
    process started in vain costs little."""
    import fcntl

    os.makedirs(pool_dir, mode=0o700, exist_ok=True)
    descriptor = os.open(os.path.join(pool_dir, WARM_LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return
    os.ftruncate(descriptor, 0)
    os.write(descriptor, f"{os.getpid()} {idle_s:g}\n".encode())
    if _answers(os.path.join(pool_dir, WARM_SOCKET_NAME)):
        return  # a pool's warm process
    from pi_mcp_adapter.cli._warm import serve_warm

    serve_warm(pool_dir, idle_s=idle_s, lock_descriptor=descriptor)


def _answers(path: str) -> bool:
    import socket

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def hand_over(agent_dir: Path, args: list[str]) -> int | None:
    """Hand ``args`` to the warm process of ``agent_dir`` and return the command's exit code;
    None when none takes the command (then nothing has run)."""
    path = warm_socket_path(agent_dir)
    if not socket_path_fits(path) or not path.exists():
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
        from pi_mcp_adapter._execution_context import (
            context_differences,
            context_fingerprint,
            execution_context,
            peer_execution_context,
        )

        # The command would run with the warm process's namespaces, cgroup, limits and
        # scheduling: only where they are this process's (it checks again on its side), and
        # before this process's environment and terminal are handed to it.
        own_context = execution_context()
        if own_context is None or context_differences(
            own_context, peer_execution_context(connection)
        ):
            return None
        umask = os.umask(0)
        os.umask(umask)
        request = {
            "install": install_identity(),
            "context": context_fingerprint(own_context),
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


def _warm_agent_dir(args: list[str]) -> Path | None:
    """The agent dir whose warm process may run ``args``; None when none may."""
    if os.environ.get("PI_MCP_POOL", "1") == "0":
        return None
    return _agent_dir_for(args)


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
