"""Call statistics written by the engine while it runs, against real servers."""

from __future__ import annotations

import json

import anyio
import pytest

from .conftest import Workspace, workbench_entry

pytestmark = [pytest.mark.slow]


async def test_statistics_are_written_while_running_with_connect_time_apart(
    workspace: Workspace,
) -> None:
    workspace.write_config(
        {"workbench": workbench_entry()},
        settings={"captureStats": {"path": "calls.json", "flushDelayMs": 20}},
    )
    path = workspace.agent_dir / "calls.json"
    async with workspace.adapter():
        pass  # the first run fills the metadata cache, so the next starts nothing
    async with workspace.adapter(connect_missing=False) as adapter:
        stats = adapter.stats
        assert stats is not None
        with anyio.fail_after(30):
            first = await adapter.call("workbench_echo", {"message": "cold"})
            await stats.wait_until_written()
        # Written by the flusher while the adapter still runs, not at stop.
        entry = json.loads(path.read_text())["servers"]["workbench"]["echo"]
        assert first.error_kind is None
        assert first.connect_ms > 0
        assert (entry["calls"], entry["connects"]) == (1, 1)
        assert entry["totalLatencyMs"] == round(first.latency_ms, 3)
        assert entry["totalConnectMs"] == round(first.connect_ms, 3)
        with anyio.fail_after(30):
            second = await adapter.call("workbench_echo", {"message": "warm"})
            await stats.wait_until_written()
        entry = json.loads(path.read_text())["servers"]["workbench"]["echo"]
        assert second.connect_ms == 0
        assert (entry["calls"], entry["connects"]) == (2, 1)
        assert entry["totalConnectMs"] == round(first.connect_ms, 3)
