"""A trace of tool calls: one JSON line per call, with metadata only.

Turned on by ``settings.trace`` (``true``, or ``{"enabled": true, "file": "..."}``) or by
``PI_MCP_TRACE=FILE``; a server's own ``trace: false`` leaves its calls out, ``trace: true``
traces it even when the global setting is off. Without a file the trace goes where the
TypeScript adapter writes its own, ``<project>/.pi/mcp-traces/mcp-<time>-<pid>.jsonl``.

Each line is ``{"time", "server", "tool", "durationMs", "bytes", "outcome"}`` plus ``"error"``
(the kind of failure) when there was one. Arguments and results are never written: they hold
what the user and the servers exchange, often secrets. Lines are appended with one ``write``
on a file opened for appending, so that processes sharing a file never interleave a line.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.config._models import TraceSettings

__all__ = ["CallTrace", "open_call_trace"]

logger = logging.getLogger("pi_mcp_adapter.trace")

Outcome = Literal["ok", "error", "failed"]
"""``ok``; ``error``: the tool reported an error; ``failed``: the call never got an answer."""


class CallTrace:
    """Appends call records to ``path``; a failure to write is logged once, never raised."""

    def __init__(self, path: Path, *, everything: bool) -> None:
        self.path = path
        self._everything = everything
        self._lock = threading.Lock()
        self._warned = False

    def traces(self, entry: ServerEntry | None) -> bool:
        """Whether calls to a server with this entry are traced."""
        if entry is not None and entry.trace is not None:
            return entry.trace
        return self._everything

    def record(
        self,
        *,
        server: str,
        tool: str,
        duration_ms: float,
        bytes_out: int,
        outcome: Outcome,
        error: str | None = None,
        client: str | None = None,
    ) -> None:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(time.time(), UTC).isoformat(timespec="milliseconds"),
            "server": server,
            "tool": tool,
            "durationMs": round(duration_ms, 3),
            "bytes": bytes_out,
            "outcome": outcome,
        }
        if error is not None:
            line["error"] = error
        if client is not None:
            # The gateway client's configured name; its token is never known here.
            line["client"] = client
        data = (redact(json.dumps(line, ensure_ascii=False)) + "\n").encode()
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, data)
                finally:
                    os.close(fd)
            except OSError as exc:
                if not self._warned:
                    self._warned = True
                    logger.warning("cannot write the call trace %s: %s", self.path, exc)


def open_call_trace(
    settings: Settings,
    servers: Mapping[str, ServerEntry],
    *,
    project_dir: Path,
    environ: Mapping[str, str],
) -> CallTrace | None:
    """The trace the settings and environment ask for, or None when nothing is traced."""
    configured = settings.trace
    everything = configured is True or (
        isinstance(configured, TraceSettings) and configured.enabled
    )
    file = configured.file if isinstance(configured, TraceSettings) else None
    from_env = environ.get("PI_MCP_TRACE", "").strip()
    if from_env:
        everything, file = True, from_env
    if not everything and not any(entry.trace for entry in servers.values()):
        return None
    if file:
        path = Path(file).expanduser()
        path = path if path.is_absolute() else project_dir / path
    else:
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%S")
        path = project_dir / ".pi" / "mcp-traces" / f"mcp-{stamp}-{os.getpid()}.jsonl"
    return CallTrace(path, everything=everything)
