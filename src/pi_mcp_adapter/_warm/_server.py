"""The warm process: runs short ``pi-mcp`` commands in forks of a process that has the CLI, the
engine and the MCP SDK imported already (the client side is ``_client``, beside this module).

It listens on ``<agent dir>/pool/cli.sock`` (0600, in the pool's 0700 directory: only the user
reaches it). Each connection carries one command: a JSON line with ``argv``, ``cwd``, ``env``
and ``umask``, and the client's stdin, stdout and stderr as file descriptors. The process runs
it only for a client in its own execution context (namespaces, cgroup, credentials, limits,
scheduling: read from the client's process by its ``SO_PEERCRED`` pid, see
``pi_mcp_adapter._execution_context``) and answers ``{"refused": ...}`` to any other, which then
runs the command itself. It forks; the fork takes the client's working directory, environment
(``TZ`` and the locale included: ``time.tzset()``, ``setlocale``), umask and standard streams
with the encodings and error handlers the client's own interpreter chose for them, answers
``{"pid": ...}``, runs the command as ``pi-mcp`` would, and answers ``{"exit": code}``. What a
fork cannot take (another UTF-8 mode or file-system encoding, fixed when the interpreter
started) is refused, and the client runs the command itself.

A command from another installation (another interpreter or path, another version, or package
files that changed since this process imported them: see ``_identity.install_identity``)
replaces a warm process started on first use: it gives up its socket and lock, answers
``{"refused": "another installation"}`` and exits, and the client starts a warm process of its
own installation. A warm process beside a pool only refuses: it lives as long as its pool.

Requests are read without blocking, each bounded by ``REQUEST_TIMEOUT_S``: a client that
connects and sends nothing delays nobody else.

Safety of the fork: this process runs no event loop and no thread (it only imports, accepts and
forks), so a fork holds no lock another thread had taken. Nothing of a command survives it: the
fork starts from the imported modules alone, reads its configuration, trust and cache files as
the client would have, and exits.

Resource handling: :func:`running_warm_cli` starts the process beside a pool and stops it with
the pool (SIGTERM, then SIGKILL after a grace period). Without a pool, the first short command
starts one (``_client.start_warm_process``, then :func:`serve_warm_on_first_use`) that ends
after an idle spell or on SIGTERM (``pi-mcp serve --stop``). Commands still running finish on
their own.
"""

from __future__ import annotations

import contextlib
import io
import json
import locale
import os
import selectors
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

from ._identity import WARM_LOCK_NAME, WARM_SOCKET_NAME, install_identity
from ._run import run_to_exit_code

STOP_GRACE_S = 5.0
PARENT_CHECK_INTERVAL_S = 2.0
REQUEST_TIMEOUT_S = 10.0
"""A client writes its request as soon as it connects; one that has not within this is
dropped (others are served meanwhile)."""
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
    "pi_mcp_adapter.cli._status_output",
    "jsonschema",
    # The search index's modules and the hybrid search's libraries (their model is loaded by
    # the command that searches; numpy.ma is what the first fusion of two rankings imports,
    # cp437 what reading the tool-vector archive's member names does; regex a --regex search).
    "pi_mcp_adapter.catalog._search",
    "numpy",
    "numpy.ma",
    "encodings.cp437",
    "regex",
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


def preload() -> Any:
    """Import what commands need (:data:`_PRELOADED`), read the search model's tokenizer, and
    return the click command behind ``pi-mcp``: what a fork starts from.

    All of it is then moved out of the garbage collector's view (``gc.freeze``): a fork's full
    collection wrote into the header of every object it inherited, so each fork that ran one
    copied 34 MB of the pages it shares with this process (and took 10 ms more for a status).
    Everything imported lives as long as this process anyway."""
    import gc
    import importlib

    for module in _PRELOADED:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)
    from pi_mcp_adapter.catalog import preload_default_embedder
    from pi_mcp_adapter.cli import build_command

    with contextlib.suppress(Exception):
        # Best effort: a damaged model (the tokenizer library raises plain Exceptions) is the
        # search's to report, when a command searches.
        preload_default_embedder()
    command = build_command()
    gc.freeze()
    return command


def serve_warm(
    pool_dir: str, idle_s: float | None = None, lock_descriptor: int | None = None
) -> None:
    """Import what commands need, then fork one process per command until SIGTERM.

    Beside a pool (``idle_s`` None) it also ends when the pool does. Started on first use
    (``idle_s`` given, by :func:`serve_warm_on_first_use`, which holds
    ``lock_descriptor``: ``warm.lock``) it ends after ``idle_s`` without a command. Either
    ends when its socket is taken over (a pool started since) or removed.
    """
    global _command, _identity, _lock_descriptor

    _lock_descriptor = lock_descriptor
    directory = Path(pool_dir)
    path = directory / WARM_SOCKET_NAME
    # Before most imports: code that changes while they run makes this process refuse commands
    # (they run cold) rather than run what it did not import.
    _identity = install_identity()
    _command = preload()
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
    listener.setblocking(False)
    parent = os.getppid()
    last_command = time.monotonic()
    # Forks are reaped by the kernel: nothing here waits for them.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_quietly)
    pending: dict[socket.socket, _PendingRequest] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    try:
        while _socket_inode(path) == bound:
            if idle_s is None and os.getppid() != parent:
                break
            if idle_s is not None and not pending and time.monotonic() - last_command > idle_s:
                break
            # Woken now and then to notice a pool that died without stopping this process, an
            # idle spell that has lasted, a socket that is not this process's any more, or a
            # client too slow with its request.
            for key, _events in selector.select(PARENT_CHECK_INTERVAL_S):
                if key.fileobj is listener:
                    with contextlib.suppress(BlockingIOError, InterruptedError):
                        connection, _address = listener.accept()
                        connection.setblocking(False)
                        pending[connection] = _PendingRequest()
                        selector.register(connection, selectors.EVENT_READ)
                    continue
                connection = key.fileobj  # type: ignore[assignment]
                request = pending[connection]
                if not request.receive(connection):
                    continue  # more to come
                del pending[connection]
                selector.unregister(connection)
                last_command = time.monotonic()
                try:
                    replaced = _take(connection, listener, request, path, bound, idle_s)
                except Exception:  # one broken request must not stop the others
                    replaced = False
                    traceback.print_exc()
                finally:
                    request.close_fds()
                    connection.close()
                if replaced:
                    return  # a warm process of the client's installation takes over
            now = time.monotonic()
            for connection, request in list(pending.items()):
                if now - request.started > REQUEST_TIMEOUT_S:
                    del pending[connection]
                    selector.unregister(connection)
                    request.close_fds()
                    connection.close()
    finally:
        for connection, request in pending.items():
            request.close_fds()
            connection.close()
        selector.close()
        listener.close()
        if _socket_inode(path) == bound:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


class _PendingRequest:
    """A client's request line and descriptors, read as they arrive."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.data = b""
        self.fds: list[int] = []
        self.ended = False

    def receive(self, connection: socket.socket) -> bool:
        """Read what has arrived; True once the line is complete, the client stopped sending,
        or it sent too much (the request then says which)."""
        try:
            message, fds, _flags, _address = socket.recv_fds(connection, 1 << 16, 3)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            self.ended = True
            return True
        self.fds.extend(fds)
        self.data += message
        if not message:
            self.ended = True
        return self.ended or b"\n" in self.data or len(self.data) > _REQUEST_LIMIT_BYTES

    def parsed(self) -> dict[str, Any] | None:
        if b"\n" not in self.data or len(self.fds) != 3:
            return None
        try:
            request = json.loads(self.data.partition(b"\n")[0])
        except ValueError:
            return None
        return request if isinstance(request, dict) else None

    def close_fds(self) -> None:
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = []


def _socket_inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def _exit_quietly(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def _take(
    connection: socket.socket,
    listener: socket.socket,
    pending: _PendingRequest,
    path: Path,
    bound: int,
    idle_s: float | None,
) -> bool:
    """Run one command in a fork; True when this process gave way to another installation
    (it refused the command and must exit now)."""
    connection.setblocking(True)
    connection.settimeout(REQUEST_TIMEOUT_S)
    request = pending.parsed()
    if request is None:
        return False
    install = request.get("install")
    if install != _identity:
        replaced = idle_s is not None and isinstance(install, list)
        if replaced:
            # Give up the socket and the lock before answering: the client starts a warm
            # process of its own installation as soon as it reads the refusal.
            _release(path, bound)
        # Another installation's command, or this one's after an upgrade or an edit: the client
        # runs it itself.
        connection.sendall(b'{"refused": "another installation"}\n')
        return replaced
    differences = _context_differences(connection, request.get("context"))
    if differences:
        # A fork would run with this process's namespaces, limits and scheduling, not the
        # caller's: the client runs the command itself, inside whatever confines it.
        refusal = {"refused": "another execution context", "differences": differences}
        connection.sendall(json.dumps(refusal).encode() + b"\n")
        return False
    interpreter = _interpreter_differences(request.get("interpreter"))
    if interpreter:
        # Fixed when this interpreter started: a fork cannot take the caller's.
        refusal = {"refused": "another interpreter setting", "differences": interpreter}
        connection.sendall(json.dumps(refusal).encode() + b"\n")
        return False
    fds = pending.fds
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


def _release(path: Path, bound: int) -> None:
    """Stop being the agent dir's warm process: remove the socket (when still this one's) and
    free ``warm.lock``."""
    global _lock_descriptor

    if _socket_inode(path) == bound:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    if _lock_descriptor is not None:
        os.close(_lock_descriptor)
        _lock_descriptor = None


def _interpreter_differences(claimed: object) -> list[str]:
    """What of the client's interpreter settings a fork cannot take (empty: none)."""
    if not isinstance(claimed, dict):
        return ["unknown"]
    differences = []
    if claimed.get("utf8_mode") != sys.flags.utf8_mode:
        differences.append("UTF-8 mode")
    filesystem = [sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()]
    if claimed.get("filesystem") != filesystem:
        differences.append("file-system encoding")
    if _stream_settings(claimed) is None:
        differences.append("stream encodings")
    return differences


def _stream_settings(claimed: dict[str, Any]) -> list[tuple[str, str]] | None:
    """The client's ``(encoding, errors)`` for stdin, stdout and stderr, each one Python knows;
    None when they cannot be used."""
    import codecs

    streams = claimed.get("streams")
    if not isinstance(streams, list) or len(streams) != 3:
        return None
    settings = []
    for stream in streams:
        if stream is None:
            stream = ["utf-8", "strict"]  # a closed stream: nothing is written to it
        if not isinstance(stream, list) or len(stream) != 2:
            return None
        encoding, errors = stream
        if not isinstance(encoding, str) or not isinstance(errors, str):
            return None
        try:
            codecs.lookup(encoding)
            codecs.lookup_error(errors)
        except LookupError:
            return None
        settings.append((encoding, errors))
    return settings


def _context_differences(connection: socket.socket, claimed: object) -> list[str]:
    """How the client's execution context differs from this process's (empty: none), read
    from the client's process itself; what the client claims only has to agree with that."""
    caller = peer_execution_context(connection)
    differences = context_differences(execution_context(), caller)
    if not differences and caller is not None and claimed != context_fingerprint(caller):
        differences = ["the context the client sent"]
    return differences


def _run_in_fork(connection: socket.socket, request: dict[str, Any], fds: list[int]) -> None:
    code = 1
    try:
        for signum in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.chdir(str(request["cwd"]))
        environ = request["env"]
        assert isinstance(environ, dict)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in environ.items()})
        _take_the_callers_locale_and_time_zone()
        settings = _stream_settings(request["interpreter"])
        assert settings is not None  # checked before the fork
        _rebind_standard_streams(settings)
        umask = request.get("umask")
        if isinstance(umask, int):
            os.umask(umask)
        argv = [str(a) for a in request["argv"]]
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


def _take_the_callers_locale_and_time_zone() -> None:
    """What the interpreter read from its environment when it started, read again from the
    caller's: the time zone (``TZ``) and the locale categories Python sets at start-up."""
    time.tzset()
    with contextlib.suppress(locale.Error):
        # As the interpreter does at start-up (LC_CTYPE), for the caller's LANG and LC_*.
        locale.setlocale(locale.LC_CTYPE, "")


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

    def run() -> None:
        _quiet_library_logs()
        _command.main(args=args, prog_name="pi-mcp")

    return run_to_exit_code(run)


def _rebind_standard_streams(settings: list[tuple[str, str]]) -> None:
    """New ``sys`` streams over the client's descriptors, with the encodings and error handlers
    the client's interpreter chose for them, buffered as Python would have made them for those
    files (a terminal's stdout is line-buffered, so a question shows before its answer is
    read)."""
    (in_encoding, in_errors), (out_encoding, out_errors), (err_encoding, err_errors) = settings
    sys.stdin = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "r", closefd=False)),
        encoding=in_encoding,
        errors=in_errors,
    )
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "w", closefd=False)),
        encoding=out_encoding,
        errors=out_errors,
        line_buffering=os.isatty(1),
    )
    sys.stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "w", closefd=False)),
        encoding=err_encoding,
        errors=err_errors,
        line_buffering=True,
    )


@contextlib.asynccontextmanager
async def running_warm_cli(pool_dir: Path) -> AsyncIterator[None]:
    """Run the warm process for the pool in ``pool_dir`` while the block runs."""
    import anyio

    command = [
        sys.executable,
        "-c",
        "import sys; from pi_mcp_adapter._warm._server import serve_warm; serve_warm(sys.argv[1])",
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
    serve_warm(pool_dir, idle_s=idle_s, lock_descriptor=descriptor)


def _answers(path: str) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True
