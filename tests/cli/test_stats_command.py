"""``pi-mcp stats`` over statistics that real calls recorded."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .test_engine_commands import WORKBENCH, pi_mcp

pytestmark = [pytest.mark.slow]


def test_stats_lists_calls_errors_latency_and_bytes_most_used_first(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    config = {
        "settings": {"captureStats": True},
        "mcpServers": {"workbench": {"command": sys.executable, "args": [str(WORKBENCH)]}},
    }
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    empty = pi_mcp(tmp_path, "stats").stdout
    assert empty.startswith("No calls recorded in ")
    for message in ("a", "bb", "ccc"):
        pi_mcp(tmp_path, "call", "workbench_echo", json.dumps({"message": message}))
    pi_mcp(tmp_path, "call", "workbench_fail", '{"message": "x"}', check=False)

    report = json.loads(pi_mcp(tmp_path, "stats", "--json").stdout)
    assert report["path"] == str(tmp_path / "agent" / "mcp-stats.json")
    rows = [(r["tool"], r["calls"], r["errors"]) for r in report["tools"]]
    assert rows == [("echo", 3, 0), ("fail", 1, 1)]
    echo = report["tools"][0]
    assert echo["bytesOut"] == len("Echo: a") + len("Echo: bb") + len("Echo: ccc")
    assert 0 < echo["p50LatencyMs"] <= echo["p95LatencyMs"]
    # The first run connects at start to fill the cache; the next two start the server for
    # the call, and that time is counted apart from the latency.
    assert echo["connects"] == 2
    assert echo["meanConnectMs"] > 0

    text = pi_mcp(tmp_path, "stats").stdout
    lines = text.splitlines()
    assert lines[0].split() == [
        "tool",
        "calls",
        "errors",
        "p50",
        "ms",
        "p95",
        "ms",
        "bytes",
        "connect",
        "ms",
    ]
    assert lines[1].split()[:3] == ["workbench/echo", "3", "0"]
    assert lines[2].split()[:3] == ["workbench/fail", "1", "1"]
