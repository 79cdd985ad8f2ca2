"""Responses API shape: ToolSearch loads a tool that is offered on the next request.

Run: ``python examples/export_openai_responses.py`` (no API key: the model below is a script
that answers with Responses API output items; swap in ``client.responses.create``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _setup import example_config

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.hosts import ExportHost, result_shape


def scripted_model(
    items: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Loads a tool with ToolSearch, calls it once it is offered, then answers."""
    offered = [t["name"] for t in tools]
    outputs = [i for i in items if i.get("type") == "function_call_output"]
    if not outputs:
        call = ("ToolSearch", {"query": "convert time between timezones"})
    elif len(outputs) == 1:
        assert "time_convert_time" in offered, offered  # loaded by the search, offered now
        args = {"source_timezone": "UTC", "time": "09:30", "target_timezone": "Europe/Paris"}
        call = ("time_convert_time", args)
    else:
        converted = json.loads(outputs[-1]["output"])
        text = f"09:30 UTC is {converted['target']['datetime']} in Paris."
        return [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            }
        ]
    name, arguments = call
    call_id = f"call_{len(outputs)}"
    return [
        {
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": json.dumps(arguments),
        }
    ]


async def main() -> None:
    host = ExportHost()
    async with McpAdapter(host=host, **example_config(surface="toolsearch")) as adapter:
        host.attach(adapter)
        items: list[dict[str, Any]] = [{"role": "user", "content": "09:30 UTC in Paris?"}]
        while True:
            output = scripted_model(items, tools=host.tool_definitions("openai-responses"))
            items += output
            calls = [o for o in output if o["type"] == "function_call"]
            if not calls:
                break
            for call in calls:
                result = await host.execute(call["name"], json.loads(call["arguments"]))
                items.append(result_shape(result, "openai-responses", call_id=call["call_id"]))
            await host.turn_end()
        print(items[-1]["content"][0]["text"])


if __name__ == "__main__":
    asyncio.run(main())
