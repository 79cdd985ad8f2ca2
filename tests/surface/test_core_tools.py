"""``alwaysLoadMostUsed``: the most called tools (from the call statistics) are loaded at
session start under ToolSearch, and the choice holds for the whole session."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from pi_mcp_adapter.hosts import ExportHost

from .conftest import Workspace

pytestmark = [pytest.mark.slow]

CHANGING = Path(__file__).resolve().parents[1] / "fixtures" / "changing_server.py"


def stats_entry(calls: int, errors: int = 0) -> dict[str, Any]:
    return {
        "calls": calls,
        "errors": errors,
        "totalLatencyMs": 1.0,
        "maxLatencyMs": 1.0,
        "bytesOut": 10,
    }


def configure(workspace: Workspace, most_used: int) -> None:
    definitions = workspace.root / "tools.json"
    tools = [
        {"name": f"t{i}", "description": f"Tool {i}.", "inputSchema": {"type": "object"}}
        for i in range(8)
    ]
    definitions.write_text(json.dumps(tools))
    entry = {"command": sys.executable, "args": [str(CHANGING), str(definitions)]}
    workspace.write_config(
        {"changing": entry},
        settings={"surface": "toolsearch", "captureStats": True, "alwaysLoadMostUsed": most_used},
    )
    counts = {
        "t4": stats_entry(9),
        "t1": stats_entry(5),
        "t6": stats_entry(3),
        "t7": stats_entry(8, 8),
    }
    (workspace.agent_dir / "mcp-stats.json").write_text(
        json.dumps({"version": 1, "updatedAtMs": 0, "servers": {"changing": counts}})
    )


async def test_the_most_called_tools_are_loaded_from_the_first_request_and_stay_the_same(
    workspace: Workspace,
) -> None:
    configure(workspace, most_used=2)
    host = ExportHost()
    async with workspace.attached(host) as adapter:
        await adapter.ready()
        first = [t["function"]["name"] for t in host.tool_definitions("openai-chat")]
        assert first == ["ToolSearch", "mcp_script", "changing_t4", "changing_t1"]
        # t6 is called a lot during the session; the core set does not move.
        for _ in range(6):
            await host.tools["ToolSearch"].execute({"query": "select:changing_t6"})
            assert not (await host.execute("changing_t6", {})).is_error
        with anyio.fail_after(60):
            await adapter.reconnect("changing")
        later = [t["function"]["name"] for t in host.tool_definitions("openai-chat")]
        assert later == [*first, "changing_t6"]  # loaded by the search, appended


async def test_without_the_setting_nothing_is_loaded_up_front(workspace: Workspace) -> None:
    configure(workspace, most_used=0)
    host = ExportHost()
    async with workspace.attached(host) as adapter:
        await adapter.ready()
        names = [t["function"]["name"] for t in host.tool_definitions("openai-chat")]
        assert names == ["ToolSearch", "mcp_script"]
