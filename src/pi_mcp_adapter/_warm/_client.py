"""The client side of the warm process: hand one command line to it, or say it cannot.

Standard library only, and little of it before a warm process is found: the entry point
(``pi_mcp_adapter._launch``) imports this before anything else, and a command that runs cold
pays for every import here.

:func:`hand_over` sends the command line, the working directory, the environment, the umask,
how this interpreter would write (each standard stream's encoding and error handler, UTF-8
mode, the file-system encoding) and its own stdin, stdout and stderr (as file descriptors over
the socket). The warm process answers ``{"pid": ...}`` (the fork that runs the command) and
later ``{"exit": code}``, or ``{"refused": ...}`` (then nothing has run and the command runs
here). Signals that end a command (Ctrl-C, SIGTERM, SIGHUP) are forwarded to the fork; a stop
from the terminal (Ctrl-Z, SIGTSTP) stops the fork and then this process, and ``fg``/``bg``
(SIGCONT) resumes both, so job control acts on the command as on a cold run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ._identity import (
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
browser sign-in), ``init`` and the rest run cold."""
_GLOBAL_OPTIONS_WITH_VALUE = ("--config", "--agent-dir", "--project")
_INTERPRETER_ENV = frozenset({"PATH", "HOME", "LANG", "TMPDIR", "VIRTUAL_ENV"})
_LINE_LIMIT_BYTES = 1 << 16


def warm_wanted() -> bool:
    """Whether this command may use a warm process at all: ``PI_MCP_WARM=0`` means none, not
    even one that runs already (every such command pays the cold start), and ``PI_MCP_POOL=0``
    turns off the pool with its warm process."""
    return os.environ.get("PI_MCP_WARM", "") != "0" and os.environ.get("PI_MCP_POOL", "1") != "0"


def warm_start_wanted() -> bool:
    """Whether a short command that found no warm process starts one. ``PI_MCP_WARM`` decides
    when set (``0``: no, anything else: yes); otherwise yes, except in a CI job: a job is one
    run whose end should leave no process behind."""
    from pi_mcp_adapter._environment import in_ci_job

    wanted = os.environ.get("PI_MCP_WARM", "")
    if wanted:
        return wanted != "0"
    return not in_ci_job(os.environ)


def run_warm(args: list[str]) -> int | None:
    """Hand ``args`` to the warm process and return the command's exit code; None when it
    cannot take the command (then nothing has run)."""
    agent_dir = warm_agent_dir(args)
    return None if agent_dir is None else hand_over(agent_dir, args)


def warm_agent_dir(args: list[str]) -> Path | None:
    """The agent dir whose warm process may run ``args``; None when none may."""
    if not warm_wanted():
        return None
    return _agent_dir_for(args)


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
                "import sys; from pi_mcp_adapter._warm._server import serve_warm_on_first_use; "
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


def interpreter_settings() -> dict[str, object]:
    """How this interpreter, started with the caller's environment, writes and reads text: the
    fork takes the streams' encodings and error handlers from here; UTF-8 mode and the
    file-system encoding it cannot change, so a difference there sends the command back."""
    return {
        "streams": [
            [stream.encoding, stream.errors] if stream is not None else None
            for stream in (sys.stdin, sys.stdout, sys.stderr)
        ],
        "utf8_mode": sys.flags.utf8_mode,
        "filesystem": [sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()],
    }


def hand_over(agent_dir: Path, args: list[str]) -> int | None:
    """Hand ``args`` to the warm process of ``agent_dir`` and return the command's exit code;
    None when none takes the command (then nothing has run)."""
    path = warm_socket_path(agent_dir)
    if not socket_path_fits(path) or not path.exists():
        return None
    try:
        cwd = os.getcwd()
    except OSError:
        return None  # a deleted working directory: the cold run says so
    # Only now: --help, --version and every run without a pool pay nothing for these.
    import json
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
            "cwd": cwd,
            "env": dict(os.environ),
            "umask": umask,
            "interpreter": interpreter_settings(),
        }
        try:
            socket.send_fds(connection, [json.dumps(request).encode() + b"\n"], [0, 1, 2])
            started = _read_line(connection)
        except (OSError, ValueError):
            return None  # it went away before taking the command: nothing ran
        pid = started.get("pid")
        if not isinstance(pid, int):
            return None
        _relay_signals_to(pid)
        try:
            ended = _read_line(connection)
        except (OSError, ValueError):
            return 1  # the command's process died without saying how
        code = ended.get("exit")
        return code if isinstance(code, int) else 1


def _relay_signals_to(pid: int) -> None:
    """Make the signals this process gets act on the command running in ``pid``.

    The fork is in the warm process's session, not in the terminal's foreground process group,
    so the terminal's signals reach only this process. Ctrl-C and the ending signals are passed
    on. Ctrl-Z stops the fork with SIGSTOP (its process group is orphaned, where the kernel
    drops SIGTSTP) and then this process, so the shell sees the job stop; SIGCONT (``fg``,
    ``bg``) continues the fork when this process continues.
    """
    import contextlib
    import signal

    from pi_mcp_adapter._signals import STOP_SIGNALS

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)

    def stop_both(_signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
        os.kill(os.getpid(), signal.SIGSTOP)

    def continue_command(_signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)

    for signum in STOP_SIGNALS:
        signal.signal(signum, forward)
    signal.signal(signal.SIGTSTP, stop_both)
    signal.signal(signal.SIGCONT, continue_command)


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
    None otherwise (anything unusual: the command runs cold and parses it properly)."""
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
    try:
        return Path(agent_dir).expanduser().resolve()
    except (OSError, RuntimeError):
        return None  # a relative path from a deleted directory, a symlink loop


__all__ = [
    "WARM_COMMANDS",
    "WARM_IDLE_S",
    "WARM_LOCK_NAME",
    "WARM_SOCKET_NAME",
    "hand_over",
    "run_warm",
    "start_warm_process",
    "warm_agent_dir",
    "warm_start_wanted",
    "warm_wanted",
]
