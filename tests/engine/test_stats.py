from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import anyio.from_thread
import pytest

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.config._models import CaptureStats
from pi_mcp_adapter.engine._stats import (
    RECENT_LATENCY_SAMPLES,
    CallStats,
    ToolStats,
    read_stats,
)

NOW_S = 1_795_000_000.0


def fixed_clock() -> float:
    return NOW_S


def stats_at(path: Path, **kwargs: int) -> CallStats:
    return CallStats(path, clock=fixed_clock, **kwargs)


def one(stats: list[ToolStats], server: str, tool: str) -> ToolStats:
    [found] = [s for s in stats if (s.server, s.tool) == (server, tool)]
    return found


class ObservedStats(CallStats):
    """CallStats that tells the test when a flush (run by the flusher's thread) is done."""

    def __init__(self, path: Path, flush_delay_ms: int) -> None:
        super().__init__(path, flush_delay_ms=flush_delay_ms, clock=fixed_clock)
        self.flushed = anyio.Event()
        self.flush_count = 0

    def flush(self) -> bool:
        ok = super().flush()
        self.flush_count += 1
        try:
            anyio.from_thread.run_sync(self.flushed.set)
        except anyio.NoEventLoopError:  # called by the test itself, on the loop's thread
            self.flushed.set()
        return ok


def test_calls_are_counted_per_tool(tmp_path: Path) -> None:
    stats = stats_at(tmp_path / "s.json")
    stats.record("github", "search_code", latency_ms=120.0, ok=True, bytes_out=2000)
    stats.record("github", "search_code", latency_ms=80.0, ok=False, bytes_out=100)
    stats.record("time", "get_current_time", latency_ms=5.0, ok=True, bytes_out=50)
    search = one(stats.session_stats(), "github", "search_code")
    assert (search.calls, search.errors, search.bytes_out) == (2, 1, 2100)
    assert (search.total_latency_ms, search.max_latency_ms, search.mean_latency_ms) == (
        200.0,
        120.0,
        100.0,
    )
    assert search.last_called_at_ms == int(NOW_S * 1000)
    assert [(s.server, s.tool) for s in stats.session_stats()] == [
        ("github", "search_code"),
        ("time", "get_current_time"),
    ]


def test_percentiles_are_nearest_rank_over_recent_calls(tmp_path: Path) -> None:
    stats = stats_at(tmp_path / "s.json")
    for latency in range(100, 0, -1):
        stats.record("s", "t", latency_ms=float(latency), ok=True, bytes_out=0)
    [entry] = stats.session_stats()
    assert (entry.p50_latency_ms, entry.p95_latency_ms) == (50.0, 95.0)


def test_only_the_most_recent_latencies_are_kept(tmp_path: Path) -> None:
    stats = stats_at(tmp_path / "s.json")
    for latency in range(RECENT_LATENCY_SAMPLES + 50):
        stats.record("s", "t", latency_ms=float(latency), ok=True, bytes_out=0)
    [entry] = stats.session_stats()
    assert len(entry.recent_latencies_ms) == RECENT_LATENCY_SAMPLES
    assert entry.recent_latencies_ms[0] == 50.0
    assert entry.max_latency_ms == RECENT_LATENCY_SAMPLES + 49
    assert entry.calls == RECENT_LATENCY_SAMPLES + 50


@pytest.mark.parametrize(
    ("latency_ms", "bytes_out"),
    [
        pytest.param(-1.0, 0, id="negative-latency"),
        pytest.param(float("nan"), 0, id="nan-latency"),
        pytest.param(float("inf"), 0, id="infinite-latency"),
        pytest.param(1.0, -5, id="negative-bytes"),
    ],
)
def test_impossible_measurements_are_rejected(
    tmp_path: Path, latency_ms: float, bytes_out: int
) -> None:
    stats = stats_at(tmp_path / "s.json")
    with pytest.raises(UsageError, match="s/t"):
        stats.record("s", "t", latency_ms=latency_ms, ok=True, bytes_out=bytes_out)
    assert stats.session_stats() == []


def test_flush_writes_the_documented_format(tmp_path: Path) -> None:
    path = tmp_path / "agent" / "mcp-stats.json"
    stats = stats_at(path)
    stats.record("github", "search_code", latency_ms=10.0, ok=True, bytes_out=100)
    stats.record("github", "search_code", latency_ms=30.0, ok=False, bytes_out=5, connect_ms=900)
    assert stats.flush()
    document = json.loads(path.read_text(encoding="utf-8"))
    assert document == {
        "version": 1,
        "updatedAtMs": 1_795_000_000_000,
        "servers": {
            "github": {
                "search_code": {
                    "calls": 2,
                    "errors": 1,
                    "totalLatencyMs": 40.0,
                    "maxLatencyMs": 30.0,
                    "meanLatencyMs": 20.0,
                    "p50LatencyMs": 10.0,
                    "p95LatencyMs": 30.0,
                    "bytesOut": 105,
                    "lastCalledAtMs": 1_795_000_000_000,
                    "recentLatenciesMs": [10.0, 30.0],
                    "connects": 1,
                    "totalConnectMs": 900.0,
                    "meanConnectMs": 900.0,
                }
            }
        },
    }
    assert not stats.has_unwritten


def test_flush_with_nothing_new_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mcp-stats.json"
    assert stats_at(path).flush()
    assert not path.exists()


def test_each_call_is_written_once_however_often_flush_runs(tmp_path: Path) -> None:
    path = tmp_path / "mcp-stats.json"
    stats = stats_at(path)
    stats.record("s", "t", latency_ms=1.0, ok=True, bytes_out=1)
    assert stats.flush()
    assert stats.flush()
    stats.record("s", "t", latency_ms=1.0, ok=True, bytes_out=1)
    assert stats.flush()
    assert one(read_stats(path), "s", "t").calls == 2


def test_sessions_add_to_what_the_file_holds(tmp_path: Path) -> None:
    path = tmp_path / "mcp-stats.json"
    first = stats_at(path)
    first.record("s", "t", latency_ms=10.0, ok=True, bytes_out=10)
    first.record("s", "other", latency_ms=1.0, ok=True, bytes_out=1)
    first.flush()
    second = stats_at(path)
    second.record("s", "t", latency_ms=50.0, ok=False, bytes_out=5)
    second.flush()
    merged = one(read_stats(path), "s", "t")
    assert (merged.calls, merged.errors, merged.bytes_out) == (2, 1, 15)
    assert (merged.max_latency_ms, merged.recent_latencies_ms) == (50.0, (10.0, 50.0))
    assert one(read_stats(path), "s", "other").calls == 1
    assert one(second.session_stats(), "s", "t").calls == 1


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("{not json", id="not-json"),
        pytest.param('{"version": 99, "servers": {}}', id="unknown-version"),
        pytest.param('{"version": 1, "servers": {"s": {"t": {"calls": -1}}}}', id="bad-entry"),
        pytest.param("[]", id="not-an-object"),
    ],
)
def test_a_file_that_is_not_a_stats_file_is_moved_aside_not_overwritten(
    tmp_path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "mcp-stats.json"
    path.write_text(content, encoding="utf-8")
    stats = stats_at(path)
    stats.record("s", "t", latency_ms=1.0, ok=True, bytes_out=1)
    with caplog.at_level(logging.WARNING):
        assert stats.flush()
    aside = tmp_path / "mcp-stats.json.corrupt-1795000000000"
    assert aside.read_text(encoding="utf-8") == content
    assert one(read_stats(path), "s", "t").calls == 1
    assert "not a stats file" in caplog.text


def test_a_failed_write_keeps_the_counts_for_the_next_flush(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "agent"
    blocker.write_text("a file where the directory should be")
    path = blocker / "mcp-stats.json"
    stats = stats_at(path)
    stats.record("s", "t", latency_ms=1.0, ok=True, bytes_out=1)
    with caplog.at_level(logging.WARNING):
        assert not stats.flush()
    assert "could not write call statistics" in caplog.text
    assert stats.has_unwritten

    stats.record("s", "t", latency_ms=2.0, ok=True, bytes_out=1)
    blocker.unlink()
    assert stats.flush()
    written = one(read_stats(path), "s", "t")
    assert (written.calls, written.recent_latencies_ms) == (2, (1.0, 2.0))


@pytest.mark.parametrize(
    ("setting", "relative_path", "delay_ms"),
    [
        pytest.param(True, "mcp-stats.json", 500, id="true"),
        pytest.param(CaptureStats(), "mcp-stats.json", 500, id="object-without-path"),
        pytest.param(
            CaptureStats(path="stats/calls.json", flush_delay_ms=50),
            "stats/calls.json",
            50,
            id="relative-path-is-under-the-agent-dir",
        ),
    ],
)
def test_stats_follow_the_capture_stats_setting(
    tmp_path: Path, setting: bool | CaptureStats, relative_path: str, delay_ms: int
) -> None:
    stats = CallStats.from_setting(setting, tmp_path)
    assert stats.path == tmp_path / relative_path
    assert stats.flush_delay_ms == delay_ms


def test_an_absolute_stats_path_is_used_as_given(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "stats.json"
    setting = CaptureStats.model_validate({"path": str(target), "flushDelayMs": 0})
    assert CallStats.from_setting(setting, tmp_path / "agent").path == target


def test_stats_cannot_be_made_from_a_false_setting(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="captureStats is false"):
        CallStats.from_setting(False, tmp_path)


def test_a_negative_flush_delay_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="flush_delay_ms"):
        CallStats(tmp_path / "s.json", flush_delay_ms=-1)


async def test_the_flusher_writes_a_burst_of_calls_once(tmp_path: Path) -> None:
    path = tmp_path / "mcp-stats.json"
    stats = ObservedStats(path, flush_delay_ms=50)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stats.run_flusher)
        for _ in range(3):
            stats.record("s", "t", latency_ms=1.0, ok=True, bytes_out=1)
        with anyio.fail_after(5):
            await stats.flushed.wait()
        assert stats.flush_count == 1
        assert one(read_stats(path), "s", "t").calls == 3

        stats.flushed = anyio.Event()
        stats.record("s", "t", latency_ms=1.0, ok=True, bytes_out=1)
        with anyio.fail_after(5):
            await stats.flushed.wait()
        assert one(read_stats(path), "s", "t").calls == 4
        tg.cancel_scope.cancel()
    assert stats.flush_count == 2


async def test_after_the_flusher_is_cancelled_flush_writes_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "mcp-stats.json"
    stats = ObservedStats(path, flush_delay_ms=60_000)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stats.run_flusher)
        stats.record("s", "t", latency_ms=1.0, ok=True, bytes_out=1)
        tg.cancel_scope.cancel()
    assert not path.exists()
    assert stats.flush()
    assert one(read_stats(path), "s", "t").calls == 1


async def test_only_one_flusher_may_run(tmp_path: Path) -> None:
    stats = ObservedStats(tmp_path / "mcp-stats.json", flush_delay_ms=50)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stats.run_flusher)
        await anyio.wait_all_tasks_blocked()
        with pytest.raises(UsageError, match="already running"):
            await stats.run_flusher()
        tg.cancel_scope.cancel()
    # Once stopped, a new flusher may start.
    async with anyio.create_task_group() as tg:
        tg.start_soon(stats.run_flusher)
        await anyio.wait_all_tasks_blocked()
        tg.cancel_scope.cancel()


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from pi_mcp_adapter.engine._stats import CallStats

    stats = CallStats(Path(sys.argv[1]))
    for round_ in range(int(sys.argv[2])):
        for _ in range(5):
            stats.record("s", "t", latency_ms=1.0, ok=True, bytes_out=1)
        assert stats.flush()
    """
)


@pytest.mark.slow
def test_concurrent_sessions_lose_no_calls(tmp_path: Path) -> None:
    path = tmp_path / "mcp-stats.json"
    writers = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), "20"]) for _ in range(4)]
    for writer in writers:
        assert writer.wait(timeout=60) == 0
    assert one(read_stats(path), "s", "t").calls == 4 * 20 * 5


def test_a_file_without_connect_times_reads_as_none_recorded(tmp_path: Path) -> None:
    path = tmp_path / "mcp-stats.json"
    entry = {
        "calls": 1,
        "errors": 0,
        "totalLatencyMs": 5.0,
        "maxLatencyMs": 5.0,
        "bytesOut": 3,
        "recentLatenciesMs": [5.0],
    }
    path.write_text(json.dumps({"version": 1, "servers": {"s": {"t": entry}}}))
    [stats] = read_stats(path)
    assert (stats.connects, stats.total_connect_ms, stats.mean_connect_ms) == (0, 0.0, 0.0)
