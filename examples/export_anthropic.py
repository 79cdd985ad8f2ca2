"""Anthropic Messages shape with ``defer=True``: the provider's own tool search over our catalog.

Every MCP tool is sent with ``defer_loading: true`` next to Anthropic's tool search tool, so
the model loads what it needs server-side. Run: ``python examples/export_anthropic.py`` (no API
key: the model below is a script that stands in for ``client.messages.create`` and does the
provider's search itself).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _setup import example_config

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.hosts import ExportHost, result_shape


def scripted_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Finds a deferred tool as the provider's search would, calls it, then answers."""
    assert tools[0]["type"].startswith("tool_search_tool_")
    results = [
        b
        for m in messages
        if m["role"] == "user" and isinstance(m["content"], list)
        for b in m["content"]
    ]
    if not results:
        deferred = [t for t in tools[1:] if t.get("defer_loading")]
        tool = next(t for t in deferred if "current time" in t["description"].lower())
        use = {
            "type": "tool_use",
            "id": "toolu_1",
            "name": tool["name"],
            "input": {"timezone": "America/Sao_Paulo"},
        }
        return {"role": "assistant", "content": [use], "stop_reason": "tool_use"}
    now = json.loads(results[-1]["content"][0]["text"])
    text = f"It is {now['datetime']} in São Paulo."
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
    }


async def main() -> None:
    host = ExportHost()
    async with McpAdapter(host=host, **example_config(surface="toolsearch")) as adapter:
        host.attach(adapter)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Time in São Paulo?"}]
        while True:
            reply = scripted_model(messages, tools=host.tool_definitions("anthropic", defer=True))
            messages.append({"role": "assistant", "content": reply["content"]})
            if reply["stop_reason"] != "tool_use":
                break
            blocks = []
            for use in (b for b in reply["content"] if b["type"] == "tool_use"):
                result = await host.execute(use["name"], use["input"])
                blocks.append(result_shape(result, "anthropic", call_id=use["id"]))
            messages.append({"role": "user", "content": blocks})
            await host.turn_end()
        print(messages[-1]["content"][0]["text"])


if __name__ == "__main__":
    asyncio.run(main())
