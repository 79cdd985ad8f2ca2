"""Per-tool call statistics, kept across sessions in a JSON file.

Turned on by ``settings.captureStats`` (``true``, or ``{"path": ..., "flushDelayMs": ...}``),
they answer which tools are used, how often they fail, how slow they are and how much text
they return: the evidence for choosing direct tools or TOON for a server.

Recording is in memory and cheap. Writing merges this session's new counts into whatever the
file holds (other sessions may write it too, under a file lock) and replaces it atomically.
Writes are debounced: :meth:`CallStats.run_flusher` writes shortly after calls stop coming,
and :meth:`CallStats.flush` writes at once (call it at shutdown). The file format is in
``docs/results.md``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import filelock

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter._files import write_atomically
from pi_mcp_adapter._secrets import redact

if TYPE_CHECKING:
    from pi_mcp_adapter.config._models import CaptureStats

__all__ = [
    "DEFAULT_STATS_FILE",
    "RECENT_LATENCY_SAMPLES",
    "STATS_FORMAT_VERSION",
    "CallStats",
    "ToolStats",
    "most_called",
    "read_stats",
]

logger = logging.getLogger(__name__)

DEFAULT_STATS_FILE = "mcp-stats.json"
STATS_FORMAT_VERSION = 1
RECENT_LATENCY_SAMPLES = 200
"""Latencies kept per tool for percentiles: enough for a stable p95, small in the file."""

_DEFAULT_FLUSH_DELAY_MS = 500
# Another session holds the lock only for a read and a write; waiting longer means it hangs.
_LOCK_TIMEOUT_S = 5.0
_SHARED_TABLE = "stats"
# After a failed write, try again later rather than at every call.
_RETRY_DELAY_S = 30.0


@dataclass(frozen=True, slots=True)
class ToolStats:
    """Counts for one tool of one server. Percentiles come from the recent latencies."""

    server: str
    tool: str
    calls: int = 0
    errors: int = 0
    total_latency_ms: float = 0.0
    max_latency_ms: float = 0.0
    bytes_out: int = 0
    recent_latencies_ms: tuple[float, ...] = ()
    """Newest last, at most :data:`RECENT_LATENCY_SAMPLES`."""
    last_called_at_ms: int | None = None
    """Unix time in milliseconds."""
    connects: int = 0
    """Calls that had to start (connect) the server first; that time is not in the latency."""
    total_connect_ms: float = 0.0

    @property
    def mean_latency_ms(self) -> float:
        return self.total_latency_ms / self.calls if self.calls else 0.0

    @property
    def mean_connect_ms(self) -> float:
        """Mean time to connect, over the calls that connected."""
        return self.total_connect_ms / self.connects if self.connects else 0.0

    @property
    def p50_latency_ms(self) -> float | None:
        return _percentile(self.recent_latencies_ms, 50)

    @property
    def p95_latency_ms(self) -> float | None:
        return _percentile(self.recent_latencies_ms, 95)

    def merged(self, newer: ToolStats) -> ToolStats:
        """These counts plus ``newer``'s (whose latencies are the more recent ones)."""
        last_times = [t for t in (self.last_called_at_ms, newer.last_called_at_ms) if t]
        return replace(
            self,
            calls=self.calls + newer.calls,
            errors=self.errors + newer.errors,
            total_latency_ms=self.total_latency_ms + newer.total_latency_ms,
            max_latency_ms=max(self.max_latency_ms, newer.max_latency_ms),
            bytes_out=self.bytes_out + newer.bytes_out,
            recent_latencies_ms=(self.recent_latencies_ms + newer.recent_latencies_ms)[
                -RECENT_LATENCY_SAMPLES:
            ],
            last_called_at_ms=max(last_times) if last_times else None,
            connects=self.connects + newer.connects,
            total_connect_ms=self.total_connect_ms + newer.total_connect_ms,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "errors": self.errors,
            "totalLatencyMs": round(self.total_latency_ms, 3),
            "maxLatencyMs": round(self.max_latency_ms, 3),
            "meanLatencyMs": round(self.mean_latency_ms, 3),
            "p50LatencyMs": _rounded(self.p50_latency_ms),
            "p95LatencyMs": _rounded(self.p95_latency_ms),
            "bytesOut": self.bytes_out,
            "lastCalledAtMs": self.last_called_at_ms,
            "recentLatenciesMs": [round(v, 3) for v in self.recent_latencies_ms],
            "connects": self.connects,
            "totalConnectMs": round(self.total_connect_ms, 3),
            "meanConnectMs": round(self.mean_connect_ms, 3),
        }

    @classmethod
    def from_json(cls, server: str, tool: str, data: Mapping[str, Any]) -> ToolStats:
        """Read one entry; derived fields (mean, percentiles) are recomputed, not trusted.

        Raises:
            ValueError: a field is missing or has the wrong type.
        """
        try:
            recent = tuple(float(v) for v in data.get("recentLatenciesMs", ()))
            last = data.get("lastCalledAtMs")
            return cls(
                server=server,
                tool=tool,
                calls=_count(data["calls"]),
                errors=_count(data["errors"]),
                total_latency_ms=float(data["totalLatencyMs"]),
                max_latency_ms=float(data["maxLatencyMs"]),
                bytes_out=_count(data["bytesOut"]),
                recent_latencies_ms=recent[-RECENT_LATENCY_SAMPLES:],
                last_called_at_ms=None if last is None else _count(last),
                # Files written before connect times were kept have neither field.
                connects=_count(data.get("connects", 0)),
                total_connect_ms=float(data.get("totalConnectMs", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"bad stats entry for {server}/{tool}: {exc!r}") from None


class CallStats:
    """Collects call statistics in memory and writes them to ``path``, merged with its content.

    Resource handling: :meth:`run_flusher` is a task for the owner's task group, which cancels
    it and then calls :meth:`flush` once; no task or thread outlives those two calls. Without a
    flusher, nothing is written until :meth:`flush` is called.

    :meth:`record` must be called from the event loop's thread while a flusher runs (it wakes
    the flusher); :meth:`flush` may be called from any thread.
    """

    def __init__(
        self,
        path: Path,
        *,
        flush_delay_ms: int = _DEFAULT_FLUSH_DELAY_MS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock`` gives Unix time in seconds; tests pass a fixed one.

        Raises:
            UsageError: ``flush_delay_ms`` is negative.
        """
        if flush_delay_ms < 0:
            raise UsageError(f"flush_delay_ms must not be negative, got {flush_delay_ms}")
        self.path = path
        self.flush_delay_ms = flush_delay_ms
        self._clock = clock
        self._lock = threading.Lock()
        self._session: dict[tuple[str, str], ToolStats] = {}
        self._pending: dict[tuple[str, str], ToolStats] = {}
        self._unshared: dict[tuple[str, str], ToolStats] = {}
        """Counts written to the file but not yet to the shared state (Redis was away)."""
        self._wakeup: anyio.Event | None = None
        self._written: anyio.Event | None = None
        self._writes_in_progress = 0

    @classmethod
    def from_setting(cls, setting: bool | CaptureStats, agent_dir: Path) -> CallStats:
        """Stats as ``settings.captureStats`` asks: ``true`` writes ``<agent dir>/mcp-stats.json``.

        A relative ``path`` is relative to the agent dir; ``~`` is expanded.

        Raises:
            UsageError: ``setting`` is false (stats are off) or its delay is negative.
        """
        if setting is False:
            raise UsageError("call statistics are turned off (settings.captureStats is false)")
        if setting is True:
            return cls(agent_dir / DEFAULT_STATS_FILE)
        path = agent_dir / DEFAULT_STATS_FILE
        if setting.path:
            path = agent_dir / Path(setting.path).expanduser()
        return cls(path, flush_delay_ms=setting.flush_delay_ms)

    def record(
        self,
        server: str,
        tool: str,
        *,
        latency_ms: float,
        ok: bool,
        bytes_out: int,
        connect_ms: float = 0.0,
    ) -> None:
        """Count one call of ``server``'s ``tool`` (its original name).

        ``latency_ms`` is the server's answer time; ``connect_ms`` the time spent starting the
        server first (0 when it was connected), counted apart so a cold start does not read
        as a slow tool.

        Raises:
            UsageError: a time is negative or not finite, or ``bytes_out`` is negative.
        """
        times_ok = all(math.isfinite(v) and v >= 0 for v in (latency_ms, connect_ms))
        if not times_ok or bytes_out < 0:
            raise UsageError(
                f"bad call statistics for {server}/{tool}: latency_ms={latency_ms}, "
                f"connect_ms={connect_ms}, bytes_out={bytes_out}"
            )
        one = ToolStats(
            server=server,
            tool=tool,
            calls=1,
            errors=0 if ok else 1,
            total_latency_ms=latency_ms,
            max_latency_ms=latency_ms,
            bytes_out=bytes_out,
            recent_latencies_ms=(latency_ms,),
            last_called_at_ms=int(self._clock() * 1000),
            connects=1 if connect_ms > 0 else 0,
            total_connect_ms=connect_ms,
        )
        key = (server, tool)
        with self._lock:
            for table in (self._session, self._pending):
                table[key] = table[key].merged(one) if key in table else one
        if self._wakeup is not None:
            self._wakeup.set()

    def session_stats(self) -> list[ToolStats]:
        """This session's counts (not the file's), by server and tool."""
        with self._lock:
            return [self._session[key] for key in sorted(self._session)]

    @property
    def has_unwritten(self) -> bool:
        with self._lock:
            return bool(self._pending)

    def flush(self) -> bool:
        """Merge the calls recorded since the last write into the file, now.

        Returns True when the file is up to date (also when there was nothing to write), False
        when the write failed; then the counts are kept for the next flush and a warning is
        logged. A file that is not a stats file is moved aside (``<name>.corrupt-<ms>``), not
        overwritten. Never raises for I/O problems.
        """
        with self._lock:
            pending, self._pending = self._pending, {}
            if not pending:
                return True
            self._writes_in_progress += 1
        try:
            self._write_merged(pending)
            self._share(pending)
        except (OSError, filelock.Timeout) as exc:
            logger.warning("could not write call statistics to %s: %s", self.path, exc)
            with self._lock:
                for key, newer in self._pending.items():
                    pending[key] = pending[key].merged(newer) if key in pending else newer
                self._pending = pending
            return False
        finally:
            with self._lock:
                self._writes_in_progress -= 1
        return True

    async def run_flusher(self) -> None:
        """Write ``flush_delay_ms`` after the first unwritten call, until cancelled.

        Run it in the owner's task group; on shutdown, cancel it, then call :meth:`flush`. A
        write in progress finishes before the cancellation takes effect.
        """
        if self._wakeup is not None:
            raise UsageError("a flusher is already running for these call statistics")
        self._wakeup = anyio.Event()
        self._written = anyio.Event()
        try:
            while True:
                if not self.has_unwritten:
                    await self._wakeup.wait()
                await anyio.sleep(self.flush_delay_ms / 1000)
                self._wakeup = anyio.Event()
                if not await anyio.to_thread.run_sync(self.flush):
                    await anyio.sleep(_RETRY_DELAY_S)
                    continue
                written, self._written = self._written, anyio.Event()
                written.set()
        finally:
            self._wakeup = None
            if self._written is not None:
                self._written.set()  # nobody waits for a flusher that is gone
                self._written = None

    async def wait_until_written(self) -> None:
        """Return once the flusher has written every call recorded so far.

        Returns at once when nothing is unwritten or no flusher runs.
        """
        while self._written is not None and (self.has_unwritten or self._writes_in_progress):
            await self._written.wait()

    def _share(self, pending: Mapping[tuple[str, str], ToolStats]) -> None:
        """Add ``pending`` to the counts every replica shares (``settings.sharedState``);
        what Redis does not take now is added at a later flush."""
        shared = shared_state.active()
        if shared is None:
            return
        with self._lock:
            unshared, self._unshared = self._unshared, {}
        for key, newer in pending.items():
            unshared[key] = unshared[key].merged(newer) if key in unshared else newer
        for (server, tool), newer in list(unshared.items()):

            def combine(current: Any, server: str = server, tool: str = tool) -> Any:
                newer = unshared[(server, tool)]
                try:
                    stored = ToolStats.from_json(server, tool, current)
                except (AttributeError, TypeError, ValueError):
                    return newer.to_json()  # nothing, or not a stats entry: start again
                return stored.merged(newer).to_json()

            if not shared.merge(_SHARED_TABLE, shared_stats_key(server, tool), combine):
                break
            del unshared[(server, tool)]
        if unshared:
            with self._lock:
                for key, newer in self._unshared.items():
                    unshared[key] = unshared[key].merged(newer) if key in unshared else newer
                self._unshared = unshared

    def _write_merged(self, pending: Mapping[tuple[str, str], ToolStats]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(f"{self.path}.lock", timeout=_LOCK_TIMEOUT_S):
            stored = {(s.server, s.tool): s for s in self._read_or_set_aside()}
            for key, newer in pending.items():
                stored[key] = stored[key].merged(newer) if key in stored else newer
            _write_atomically(self.path, _document(stored.values(), self._clock()))

    def _read_or_set_aside(self) -> list[ToolStats]:
        try:
            return read_stats(self.path)
        except ValueError as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(self._clock() * 1000)}")
            os.replace(self.path, aside)
            logger.warning("%s is not a stats file (%s); moved it to %s", self.path, exc, aside)
            return []


def shared_stats_key(server: str, tool: str) -> str:
    return json.dumps([server, tool], ensure_ascii=False)


def read_shared_stats() -> list[ToolStats] | None:
    """Every replica's statistics from the shared state; None without one, or when Redis does
    not answer."""
    shared = shared_state.active()
    table = shared.table(_SHARED_TABLE) if shared is not None else None
    if table is None:
        return None
    entries = []
    for key, data in table.items():
        try:
            server, tool = json.loads(key)
            entries.append(ToolStats.from_json(str(server), str(tool), data))
        except (ValueError, TypeError, KeyError):
            continue
    return entries


def most_called(stats: CallStats, count: int) -> tuple[tuple[str, str], ...]:
    """The ``count`` tools called most successfully, as ``(server, tool)`` (the server's own
    tool name), best first: the team's counts when a shared state is configured, else this
    agent dir's file. Empty when ``count`` is 0 or nothing can be read (a core set is a
    convenience: a damaged stats file costs it, never the session)."""
    if count <= 0:
        return ()
    entries = read_shared_stats()
    if entries is None:
        try:
            entries = read_stats(stats.path)
        except (OSError, ValueError) as exc:
            logger.warning("call statistics not read from %s: %s", stats.path, exc)
            return ()
    for entry in stats.session_stats():
        entries.append(entry)
    totals: dict[tuple[str, str], ToolStats] = {}
    for entry in entries:
        key = (entry.server, entry.tool)
        totals[key] = totals[key].merged(entry) if key in totals else entry
    ranked = sorted(
        (s for s in totals.values() if s.calls > s.errors),
        key=lambda s: (-(s.calls - s.errors), -(s.last_called_at_ms or 0), s.server, s.tool),
    )
    return tuple((s.server, s.tool) for s in ranked[:count])


def read_stats(path: Path) -> list[ToolStats]:
    """The statistics stored in ``path``, by server and tool; empty if the file does not exist.

    Raises:
        ValueError: the file is not a stats file of a known version.
        OSError: the file exists but cannot be read.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("version") != STATS_FORMAT_VERSION:
        raise ValueError(f"expected a version {STATS_FORMAT_VERSION} stats object")
    servers = document.get("servers")
    if not isinstance(servers, dict):
        raise ValueError("'servers' is not an object")
    found: list[ToolStats] = []
    for server, tools in servers.items():
        if not isinstance(tools, dict):
            raise ValueError(f"servers.{server} is not an object")
        for tool, entry in tools.items():
            if not isinstance(entry, dict):
                raise ValueError(f"servers.{server}.{tool} is not an object")
            found.append(ToolStats.from_json(server, tool, entry))
    return sorted(found, key=lambda s: (s.server, s.tool))


def _document(stats: Iterable[ToolStats], now_s: float) -> dict[str, Any]:
    servers: dict[str, dict[str, Any]] = {}
    for entry in sorted(stats, key=lambda s: (s.server, s.tool)):
        servers.setdefault(entry.server, {})[entry.tool] = entry.to_json()
    return {"version": STATS_FORMAT_VERSION, "updatedAtMs": int(now_s * 1000), "servers": servers}


def _render(document: Mapping[str, Any]) -> str:
    """Indented JSON with one line per tool, so the file reads (and diffs) as a table."""
    lines = ["{"]
    lines.append(f'  "version": {json.dumps(document["version"])},')
    lines.append(f'  "updatedAtMs": {json.dumps(document["updatedAtMs"])},')
    servers: Mapping[str, Mapping[str, Any]] = document["servers"]
    if not servers:
        lines.append('  "servers": {}')
    else:
        lines.append('  "servers": {')
        for i, (server, tools) in enumerate(servers.items()):
            lines.append(f"    {json.dumps(server, ensure_ascii=False)}: {{")
            for j, (tool, entry) in enumerate(tools.items()):
                comma = "," if j < len(tools) - 1 else ""
                body = json.dumps(entry, ensure_ascii=False)
                lines.append(f"      {json.dumps(tool, ensure_ascii=False)}: {body}{comma}")
            lines.append("    }" + ("," if i < len(servers) - 1 else ""))
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _write_atomically(path: Path, document: Mapping[str, Any]) -> None:
    write_atomically(path, redact(_render(document)).encode("utf-8"))


def _percentile(samples: tuple[float, ...], percent: int) -> float | None:
    """Nearest-rank percentile: a latency that was actually observed."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = math.ceil(percent / 100 * len(ordered))
    return ordered[max(rank, 1) - 1]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{value!r} is not a count")
    return value
