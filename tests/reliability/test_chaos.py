"""Chaos under load: the adapter keeps its promises while servers are killed, hung and broken.

Eight callers call six servers through ``McpAdapter`` (and, where this build has the gateway,
eight more through ``pi-mcp serve`` over HTTP) for a minute (``PI_MCP_CHAOS_MINUTES``
makes it longer; ``bench/bench_reliability.py`` runs the long mode) while a chaos task kills
server processes, stops one, makes one answer 503 and one close its stdout. The scenario lives
in ``_chaos``; this test states the pass criteria.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from servers._support import HttpFixtures, needs_npm

from ._chaos import (
    FD_GROWTH_BOUND,
    GATEWAY_PREFIX,
    HEALTHY,
    RSS_GROWTH_BOUND_BYTES,
    TIME_SERVER,
    chaos_minutes_from_env,
    failures,
    run_chaos,
)
from ._gateway import has_serve_command

CI_DURATION_S = 60.0

pytestmark = [
    pytest.mark.slow,
    needs_npm,
    pytest.mark.skipif(not TIME_SERVER.exists(), reason="mcp-server-time is not installed"),
]


@pytest.mark.timeout(0)
async def test_eight_callers_keep_getting_answers_while_servers_fail(
    tmp_path: Path, http_fixtures: HttpFixtures, capsys: pytest.CaptureFixture[str]
) -> None:
    fault_file = tmp_path / "flaky-fault"
    flaky_url = http_fixtures.mcp(
        "streamable-http", "--name", "flaky", "--fault-file", str(fault_file)
    )
    duration_s = chaos_minutes_from_env(CI_DURATION_S)

    gateway_callers = 8 if has_serve_command() else 0

    report = await run_chaos(
        tmp_path, flaky_url, fault_file, duration_s=duration_s, gateway_callers=gateway_callers
    )

    with capsys.disabled():
        print("\n" + report.table())
    # Every call returned in time with a right answer or an error naming its server.
    assert report.violations == []
    # The run did something: every kind of fault happened and the servers took real load.
    assert {f.action for f in report.faults} == {"kill", "hang", "503", "close-stdout"}
    assert len(report.calls) > 10 * duration_s
    # The healthy control never failed, directly or through the gateway.
    for server in HEALTHY:
        failed = [c for c in report.calls_to(server) if c.kind != "ok"]
        failed += [c for c in report.calls_to(GATEWAY_PREFIX + server) if c.kind != "ok"]
        assert failed == [], failed[:5]
    if gateway_callers:
        assert len(report.calls_to(GATEWAY_PREFIX + "memory")) > 0
        assert report.gateway_exit_code in (0, 143)
    # Killed servers came back (checked per kill in the run) and restarted for real.
    for server in ("time", "everything"):
        kills = [f for f in report.faults if f.server == server and f.action == "kill"]
        assert all(f.recovered_after_s is not None for f in kills)
        assert report.restarts(server) >= len(kills)
    # Memory and descriptors did not grow, and nothing was left running.
    assert report.rss_at_end - report.rss_after_warmup <= RSS_GROWTH_BOUND_BYTES
    assert report.fds_at_end - report.fds_after_warmup <= FD_GROWTH_BOUND
    assert report.leftover_processes == []
    assert failures(report) == []
