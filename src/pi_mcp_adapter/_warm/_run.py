"""One command line run to its exit code, the same way cold and in a warm process's fork.

Both paths end a command alike: the exit code of ``SystemExit``, 130 after Ctrl-C, and the
output written to its end. What goes wrong with the output itself is the caller's to know in
one line, never a traceback: a reader that closed the pipe early (``| head``) is what the
person asked for (exit 0, quietly, as ``head``'s other writers do); a full disk or a broken
device (``> /dev/full``) is an error (exit 1); text that stdout's encoding cannot hold says
which encoding and how to choose another (exit 1).
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable

OUTPUT_FAILED_EXIT = 1


def run_to_exit_code(run: Callable[[], object]) -> int:
    """Call ``run`` (a click command's ``main``), flush the output, and return the exit code;
    output failures become a one-line message on stderr (see the module docstring)."""
    try:
        code = _exit_code(run)
        sys.stdout.flush()
    except UnicodeEncodeError as exc:
        encoding = getattr(sys.stdout, "encoding", None) or exc.encoding
        _say(
            f"pi-mcp: the output holds characters that {encoding} (stdout's encoding) cannot "
            "show; set PYTHONIOENCODING=utf-8 or a UTF-8 locale (LANG=C.UTF-8)"
        )
        return OUTPUT_FAILED_EXIT
    except OSError as exc:
        if exc.errno == errno.EPIPE:
            _discard_output()
            return 0
        _discard_output()
        _say(f"pi-mcp: cannot write the output: {exc.strerror or exc}")
        return OUTPUT_FAILED_EXIT
    if code != 0 and _pipe_closed_under_click():
        return 0
    return code


def _exit_code(run: Callable[[], object]) -> int:
    try:
        run()
    except SystemExit as exit_:
        if exit_.code is None:
            return 0
        if isinstance(exit_.code, int):
            return exit_.code
        sys.stderr.write(f"{exit_.code}\n")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


def _pipe_closed_under_click() -> bool:
    # click answers a closed pipe by putting this wrapper on stdout and exiting 1; the reader
    # closing early is no failure of the command.
    return type(sys.stdout).__name__ == "PacifyFlushWrapper"


def _discard_output() -> None:
    """Point fd 1 at the null device: what is still buffered for it must not fail again when
    the interpreter flushes at exit (that would print "Exception ignored" and exit 120)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        return
    os.dup2(null, 1)
    os.close(null)


def _say(message: str) -> None:
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # stderr is gone too: the exit code says it
