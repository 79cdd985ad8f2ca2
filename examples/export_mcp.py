"""MCP shape: ``Tool`` objects and ``CallToolResult`` payloads, as an MCP-speaking loop takes.

Run: ``python examples/export_mcp.py`` (no API key: the model below is a script that picks a
tool from MCP ``tools/list``-shaped definitions and answers with ``tools/call`` parameters).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _setup import example_config

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.hosts import ExportHost, result_shape


def scripted_model(history: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Returns ``{"name", "arguments"}`` to call a tool, or ``{"text"}`` to answer."""
    assert "inputSchema" in tools[0]
    if not history:
        return {"name": "mcp", "arguments": {"describe": "time_convert_time"}}
    if len(history) == 1:
        args = {"source_timezone": "Asia/Kolkata", "time": "18:00", "target_timezone": "UTC"}
        return {"name": "mcp", "arguments": {"tool": "time_convert_time", "args": args}}
    converted = json.loads(history[-1]["content"][0]["text"])
    return {"text": f"18:00 in Kolkata is {converted['target']['datetime']} UTC."}


async def main() -> None:
    host = ExportHost()
    async with McpAdapter(host=host, **example_config()) as adapter:
        host.attach(adapter)
        history: list[dict[str, Any]] = []
        while "text" not in (step := scripted_model(history, tools=host.tool_definitions("mcp"))):
            result = await host.execute(step["name"], step["arguments"])
            history.append(result_shape(result, "mcp", call_id=""))
            await host.turn_end()
        print(step["text"])


if __name__ == "__main__":
    asyncio.run(main())
