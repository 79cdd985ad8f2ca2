"""The pool's warm process: runs short ``pi-mcp`` commands in forks of a process that has the
CLI, the engine and the MCP SDK imported already (the client side is ``pi_mcp_adapter._launch``).

It listens on ``<agent dir>/pool/cli.sock`` (0600, in the pool's 0700 directory: only the user
reaches it). Each connection carries one command: a JSON line with ``argv``, ``cwd``, ``env``
and ``umask``, and the client's stdin, stdout and stderr as file descriptors. The process runs
it only for a client in its own execution context (namespaces, cgroup, credentials, limits,
scheduling: read from the client's process by its ``SO_PEERCRED`` pid, see
``pi_mcp_adapter._execution_context``) and answers ``{"refused": ...}`` to any other, which then
runs the command itself. It forks; the fork takes the client's working directory, environment,
umask and standard streams, answers ``{"pid": ...}``, runs the command as ``pi-mcp`` would, and
answers ``{"exit": code}``.

Safety of the fork: this process runs no event loop and no thread (it only imports, accepts and
forks), so a fork holds no lock another thread had taken. Nothing of a command survives it: the
fork starts from the imported modules alone, reads its configuration, trust and cache files as
the client would have, and exits.

Resource handling: :func:`running_warm_cli` starts the process beside a pool and stops it with
the pool (SIGTERM, then SIGKILL after a grace period). Without a pool, the first short command
starts one (``pi_mcp_adapter._launch.start_warm_process``) that ends after an idle spell or on
SIGTERM (``pi-mcp serve --stop``). Commands still running finish on their own.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pi_mcp_adapter._execution_context import (
    context_differences,
    context_fingerprint,
    execution_context,
    peer_execution_context,
)
from pi_mcp_adapter._warm_process import WARM_SOCKET_NAME, install_identity

STOP_GRACE_S = 5.0
PARENT_CHECK_INTERVAL_S = 2.0
_REQUEST_LIMIT_BYTES = 4 << 20
"""The environment travels in the request; a few MiB is far beyond any real one."""
_PRELOADED = (
    "pi_mcp_adapter.cli",
    "pi_mcp_adapter.engine",
    "pi_mcp_adapter.surface",
    "pi_mcp_adapter.surface._calls",
    "pi_mcp_adapter.surface._content",
    "pi_mcp_adapter.surface._guard",
    "pi_mcp_adapter.surface._render",
    "pi_mcp_adapter.servers._connection",
    "pi_mcp_adapter.servers._oauth",
    "pi_mcp_adapter.engine._stats",
    "pi_mcp_adapter.engine._validate",
    "pi_mcp_adapter.cli._elicit",
    "pi_mcp_adapter.cli._pool_cmds",
    "pi_mcp_adapter.cli._project_trust",
    "pi_mcp_adapter.cli._ask",
    "anyio._backends._asyncio",
    "anyio.streams.stapled",
    "typer._adapters",
    "typer._click.decorators",
    "jsonschema",
    # The hybrid search's libraries (their model is loaded by the command that searches).
    "numpy",
    "tokenizers",
    "safetensors",
)
"""What a command would import on its way (the SDK through the connection and OAuth modules)."""

_identity: list[str] = []
"""This process's :func:`install_identity`, taken before it imported the package."""
_lock_descriptor: int | None = None
"""``warm.lock``, held for the life of a warm process started on first use (closed in forks)."""
_command: Any = None
"""The click command behind ``pi-mcp``, built once: typer builds it from the command functions'
signatures, which costs more than answering a call through the pool."""


def serve_warm(
    pool_dir: str, idle_s: float | None = None, lock_descriptor: int | None = None
) -> None:
    """Import what commands need, then fork one process per command until SIGTERM.

    Beside a pool (``idle_s`` None) it also ends when the pool does. Started on first use
    (``idle_s`` given, by ``pi_mcp_adapter._launch.serve_warm_on_first_use``, which holds
    ``lock_descriptor``: ``warm.lock``) it ends after ``idle_s`` without a command. Either
    ends when its socket is taken over (a pool started since) or removed.
    """
    import importlib

    global _command, _identity, _lock_descriptor

    _lock_descriptor = lock_descriptor
    directory = Path(pool_dir)
    path = directory / WARM_SOCKET_NAME
    # Before most imports: code that changes while they run makes this process refuse commands
    # (they run cold) rather than run what it did not import.
    _identity = install_identity()
    for module in _PRELOADED:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    from pi_mcp_adapter.catalog import preload_default_embedder
    from pi_mcp_adapter.cli import build_command

    with contextlib.suppress(Exception):
        # Best effort: a damaged model (the tokenizer library raises plain Exceptions) is the
        # search's to report, when a command searches.
        preload_default_embedder()
    _command = build_command()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        listener.bind(os.fspath(path))
    finally:
        os.umask(previous)
    bound = os.stat(path).st_ino
    listener.listen(64)
    # Woken now and then to notice a pool that died without stopping this process, an idle
    # spell that has lasted, or a socket that is not this process's any more.
    listener.settimeout(PARENT_CHECK_INTERVAL_S)
    parent = os.getppid()
    last_command = time.monotonic()
    # Forks are reaped by the kernel: nothing here waits for them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_quietly)
    try:
        while _socket_inode(path) == bound:
            if idle_s is None and os.getppid() != parent:
                break
            if idle_s is not None and time.monotonic() - last_command > idle_s:
                break
            try:
                connection, _address = listener.accept()
            except TimeoutError:
                continue
            last_command = time.monotonic()
            try:
                outdated = _take(connection, listener)
            except Exception:  # one broken request must not stop the others
                outdated = False
                traceback.print_exc()
            finally:
                connection.close()
            if outdated and idle_s is not None:
                break  # the next command starts a warm process with the package as it is now
    finally:
        listener.close()
        if _socket_inode(path) == bound:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def _socket_inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _exit_quietly(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def _take(connection: socket.socket, listener: socket.socket) -> bool:
    """Run one command in a fork; True when the client's copy of the package is newer than the
    one this process imported (its command was refused)."""
    connection.settimeout(10)
    message, fds, _flags, _address = socket.recv_fds(connection, 1 << 16, 3)
    data = message
    try:
        while b"\n" not in data:
            chunk = connection.recv(1 << 16)
            if not chunk or len(data) > _REQUEST_LIMIT_BYTES:
                return False
            data += chunk
        request = json.loads(data.partition(b"\n")[0])
        if len(fds) != 3 or not isinstance(request, dict):
            return False
        install = request.get("install")
        if install != _identity:
            # Another installation's command, or this one's after an upgrade or an edit: the
            # client runs it itself.
            connection.sendall(b'{"refused": "another installation"}\n')
            return isinstance(install, list) and install[:2] == _identity[:2]
        differences = _context_differences(connection, request.get("context"))
        if differences:
            # A fork would run with this process's namespaces, limits and scheduling, not the
            # caller's: the client runs the command itself, inside whatever confines it.
            refusal = {"refused": "another execution context", "differences": differences}
            connection.sendall(json.dumps(refusal).encode() + b"\n")
            return False
        pid = os.fork()
        if pid == 0:
            listener.close()
            if _lock_descriptor is not None:
                # A long command must not keep the next warm process from starting.
                os.close(_lock_descriptor)
            try:
                _run_in_fork(connection, request, fds)  # never returns
            finally:
                # Not even a second Ctrl-C during its last steps may bring the fork back to
                # the serving loop.
                os._exit(1)
        return False
    finally:
        for fd in fds:
            os.close(fd)


def _context_differences(connection: socket.socket, claimed: object) -> list[str]:
    """How the client's execution context differs from this process's (empty: none), read
    from the client's process itself; what the client claims only has to agree with that."""
    caller = peer_execution_context(connection)
    differences = context_differences(execution_context(), caller)
    if not differences and caller is not None and claimed != context_fingerprint(caller):
        differences = ["the context the client sent"]
    return differences


def _run_in_fork(connection: socket.socket, request: dict[str, object], fds: list[int]) -> None:
    code = 1
    try:
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        _rebind_standard_streams()
        os.chdir(str(request["cwd"]))
        environ = request["env"]
        assert isinstance(environ, dict)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in environ.items()})
        umask = request.get("umask")
        if isinstance(umask, int):
            os.umask(umask)
        argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
        sys.argv = argv
        connection.settimeout(None)
        connection.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
        threading.Thread(target=_end_with_the_client, args=(connection,), daemon=True).start()
        code = _run_command(argv[1:])
    except BaseException:  # whatever happens, the client gets an exit code
        traceback.print_exc()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command is over
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        with contextlib.suppress(OSError):
            connection.sendall(json.dumps({"exit": code}).encode() + b"\n")
        os._exit(code)


def _end_with_the_client(connection: socket.socket) -> None:
    """End the command when its client is gone.

    The client waits for the exit code and sends nothing more, so the connection ends early
    only when the client died: killed with SIGKILL, the one signal it cannot pass on. The
    command then stops as on Ctrl-C (its calls cancelled, its servers stopped), and is killed
    if that takes longer than ``STOP_GRACE_S``; a server's supervisor ends with it.
    """
    with contextlib.suppress(OSError):
        while connection.recv(1):
            pass
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(STOP_GRACE_S)
    os.kill(os.getpid(), signal.SIGKILL)


def _run_command(args: list[str]) -> int:
    from pi_mcp_adapter.cli import _quiet_library_logs

    try:
        _quiet_library_logs()
        _command.main(args=args, prog_name="pi-mcp")
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


def _rebind_standard_streams() -> None:
    """New ``sys`` streams over the client's descriptors, buffered as Python would have made
    them for those files (a terminal's stdout is line-buffered, so a question shows before its
    answer is read)."""
    encoding = sys.stdout.encoding or "utf-8"
    sys.stdin = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)), encoding=sys.stdin.encoding
    )
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
        encoding=encoding,
        errors=sys.stdout.errors,
        line_buffering=os.isatty(1),
    )
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding=encoding,
        errors="backslashreplace",
        line_buffering=True,
    )


@contextlib.asynccontextmanager
async def running_warm_cli(pool_dir: Path) -> AsyncIterator[None]:
    """Run the warm process for the pool in ``pool_dir`` while the block runs."""
    import anyio

    command = [
        sys.executable,
        "-c",
        "import sys; from pi_mcp_adapter.cli._warm import serve_warm; serve_warm(sys.argv[1])",
        str(pool_dir),
    ]
    process = await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None
    )
    try:
        yield
    finally:
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with anyio.move_on_after(STOP_GRACE_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
            await process.aclose()
