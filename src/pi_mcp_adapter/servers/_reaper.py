"""Runs a stdio server so that its whole process tree dies with the adapter, even on SIGKILL.

A parent killed with SIGKILL cannot clean up: its stdio servers (and the node processes that
``npx`` starts under them) would run on as orphans. So on Linux every stdio server is started
through this small supervisor, run as a script with only the standard library::

    python -I -S _reaper.py <adapter pid> <command> [args...]

It leads the new session (the adapter starts it with ``start_new_session``), asks the kernel
for SIGTERM when the adapter dies (``PR_SET_PDEATHSIG``), forks the server into its own process
group, and then only waits. The server inherits stdin, stdout and stderr directly (the
supervisor closes its own copies), so nothing is relayed and end-of-stream works as without
it. When the server exits, the supervisor exits with the same status (a signal is re-raised),
so exit codes read as the server's own.

On SIGTERM it checks whether the adapter is still its parent: if so, the signal is the
adapter's normal shutdown of the group, and the server handles it itself; if not, the adapter
is gone and the supervisor kills the whole group (server and descendants, npx's node included)
with SIGKILL. Where ``prctl`` is not available the supervisor polls for its parent instead.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time

PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 0.2
"""Without prctl, how often the supervisor checks that the adapter is still alive."""


def _ask_for_death_signal() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def _kill_tree() -> None:
    # The supervisor leads the session's process group: everyone started under it is in it,
    # unless they made their own session on purpose.
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    except OSError:
        os._exit(137)


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum not in (signal.SIGKILL, signal.SIGSTOP):  # neither can have a handler
            signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)
    os._exit(os.waitstatus_to_exitcode(status))


def main(argv: list[str]) -> None:
    adapter_pid = int(argv[0])
    command = argv[1:]
    watched_by_kernel = _ask_for_death_signal()
    if os.getppid() != adapter_pid:  # the adapter died before the request took effect
        os._exit(137)

    def on_term(signum: int, frame: object) -> None:
        if os.getppid() != adapter_pid:
            _kill_tree()
        # Otherwise the adapter is stopping the group; the server got the signal as well.

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child = os.fork()
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]}: {exc.strerror or exc}\n")
        os._exit(127)
    if child == 0:
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(signum, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            sys.stderr.write(f"cannot start {command[0]}: {exc.strerror or exc}\n")
            os._exit(127)
    # The server holds the pipes; the supervisor must not keep them open after it exits.
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):
        os.dup2(devnull, fd)
    while True:
        try:
            if watched_by_kernel:
                _, status = os.waitpid(child, 0)
            else:
                pid, status = os.waitpid(child, os.WNOHANG)
                if pid == 0:
                    if os.getppid() != adapter_pid:
                        _kill_tree()
                    time.sleep(PARENT_POLL_S)
                    continue
        except ChildProcessError:
            os._exit(0)
        except InterruptedError:
            continue
        _exit_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
