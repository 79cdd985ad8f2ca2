"""The server pool from the command line: ``serve --background``, ``serve --stop``, and the pool
line of ``status``.

A background pool is ``pi-mcp serve --pool-only`` detached from the terminal (its own session,
output in ``<agent dir>/pool/pool.log``); ``--background`` returns once it answers on its socket.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_mcp_adapter._warm import running_warm_process, warm_socket_path

from ._app import CliContext, fail

if TYPE_CHECKING:
    from pi_mcp_adapter.servers import TaskState

START_TIMEOUT_S = 60.0
"""How long ``--background`` waits for the pool to answer (it lists never-seen servers first)."""
STOP_TIMEOUT_S = 15.0
"""The pool closes every server on stop (each within a few seconds, in parallel)."""
_POLL_S = 0.05
LOG_NAME = "pool.log"


def pool_log_path(agent_dir: Path) -> Path:
    from pi_mcp_adapter.servers import pool_socket_path

    return pool_socket_path(agent_dir).parent / LOG_NAME


def current_pool(agent_dir: Path) -> dict[str, Any] | None:
    """The running pool's status, or None when no pool answers for ``agent_dir``."""
    from pi_mcp_adapter.servers import query_pool

    answer = query_pool(agent_dir, "status")
    return answer if answer is not None and answer.get("ok") is True else None


def start_background(context: CliContext, serve_args: list[str]) -> dict[str, Any]:
    """Start a detached ``pi-mcp serve`` with ``serve_args`` that serves the pool; return its
    status once it answers.

    Raises:
        typer.Exit: it exited or did not answer in time (its log's end is printed).
    """
    running = current_pool(context.agent_dir)
    if running is not None:
        return running
    args = [sys.executable, "-c", "import sys; from pi_mcp_adapter.cli import main; main()"]
    if context.config_path is not None:
        args += ["--config", str(context.config_path)]
    if context.exclusive:
        args.append("--exclusive")
    args += ["--agent-dir", str(context.agent_dir), "--project", str(context.project_dir)]
    args += ["serve", *serve_args]
    log_path = pool_log_path(context.agent_dir)
    log_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(log_path.parent, 0o700)
    descriptor = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            args,
            stdin=subprocess.DEVNULL,
            stdout=descriptor,
            stderr=descriptor,
            start_new_session=True,  # not stopped by the terminal's signals, nor its closing
            close_fds=True,
        )
    finally:
        os.close(descriptor)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        status = current_pool(context.agent_dir)
        if status is not None and warm_socket_path(context.agent_dir).exists():
            return status  # the pool, and its warm process for short commands, are ready
        if child.poll() is not None:
            raise fail(
                f"the server pool exited with code {child.returncode} before it listened"
                f"{_log_tail(log_path)}"
            )
        time.sleep(_POLL_S)
    raise fail(
        f"the server pool (pid {child.pid}) did not listen within {START_TIMEOUT_S:g} s"
        f"{_log_tail(log_path)}"
    )


def stop_pool(agent_dir: Path) -> int | None:
    """Ask the pool of ``agent_dir`` to stop and wait until it is gone; its pid, or None when
    none ran.

    Raises:
        typer.Exit: it did not stop in time.
    """
    from pi_mcp_adapter.servers import pool_socket_path, query_pool

    answer = query_pool(agent_dir, "stop")
    if answer is None or answer.get("ok") is not True:
        return None
    pid = answer.get("pid")
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not pool_socket_path(agent_dir).exists() and not _alive(pid):
            return pid if isinstance(pid, int) else None
        time.sleep(_POLL_S)
    raise fail(f"the server pool (pid {pid}) did not stop within {STOP_TIMEOUT_S:g} s")


def warm_process(agent_dir: Path) -> dict[str, Any] | None:
    """The warm process started on first use for ``agent_dir`` (``status --json``'s
    ``warmProcess``), None when none runs."""
    socket_path = warm_socket_path(agent_dir)
    running = running_warm_process(socket_path.parent)
    if running is None:
        return None
    pid, idle_s = running
    return {"pid": pid, "socket": str(socket_path), "idleExitS": idle_s}


def describe_warm_process(warm: dict[str, Any]) -> str:
    """One line about the warm process for ``pi-mcp status``."""
    return (
        f"warm process: pid {warm['pid']} (short commands start in it; it holds no server and "
        f"exits after {warm['idleExitS']:g} s without one; PI_MCP_WARM=0 keeps it from starting)"
    )


def stop_warm_process(agent_dir: Path) -> int | None:
    """Stop the warm process started on first use for ``agent_dir`` and wait until it is gone;
    its pid, or None when none ran.

    Raises:
        typer.Exit: it did not stop in time.
    """
    pool_dir = warm_socket_path(agent_dir).parent
    running = running_warm_process(pool_dir)
    if running is None or running[0] <= 0:
        return None
    pid = running[0]
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if running_warm_process(pool_dir) is None:
            return pid
        time.sleep(_POLL_S)
    raise fail(f"the warm process (pid {pid}) did not stop within {STOP_TIMEOUT_S:g} s")


def _alive(pid: object) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A stopped child of ours stays a zombie until reaped: not alive for this purpose.
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def _log_tail(path: Path, lines: int = 10) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    tail = "\n".join(text.splitlines()[-lines:])
    return f"; its log ({path}) ends with:\n{tail}" if tail else f"; see {path}"


def describe_pool(status: dict[str, Any]) -> str:
    """One line about a running pool for ``pi-mcp status``."""
    servers = status.get("servers") or {}
    held = [
        f"{name} (pid {info.get('pid')}, {info.get('sessions', 0)} sessions)"
        for name, info in servers.items()
        if isinstance(info, dict) and info.get("pid")
    ]
    holding = ", ".join(held) if held else "no server running yet"
    return f"server pool: pid {status.get('pid')}, {status.get('socket')}; {holding}"


def pool_tasks(status: dict[str, Any] | None) -> tuple[TaskState, ...]:
    """The tasks the running pool's calls are following (its ``runningTasks``)."""
    from pi_mcp_adapter.servers import TaskState

    tasks: list[TaskState] = []
    for item in (status or {}).get("runningTasks") or ():
        try:
            tasks.append(
                TaskState(
                    server=str(item["server"]),
                    tool=str(item["tool"]),
                    task_id=str(item["taskId"]),
                    status=str(item["status"]),
                    age_s=float(item["ageS"]),
                )
            )
        except (KeyError, TypeError, ValueError):
            continue  # a pool of another version: its status line still shows
    return tuple(tasks)


def pool_json(status: dict[str, Any] | None) -> dict[str, Any] | None:
    """The pool in ``status --json``: None when no pool runs."""
    if status is None:
        return None
    return {key: value for key, value in status.items() if key != "ok"}
