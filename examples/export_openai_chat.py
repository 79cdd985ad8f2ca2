"""Chat Completions shape: an agent loop over the ``mcp`` proxy tool, with a scripted model.

Run: ``python examples/export_openai_chat.py`` (no API key: the model below is a script that
answers in the Chat Completions message shape; swap in ``client.chat.completions.create``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _setup import example_config

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.hosts import ExportHost, result_shape


def scripted_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Searches with the proxy tool, calls what it found, then answers."""
    # The proxy tool, and mcp_script beside it when the `script` extra is installed.
    assert tools[0]["function"]["name"] == "mcp"
    step = sum(1 for m in messages if m["role"] == "assistant")
    if step == 0:
        arguments: dict[str, Any] = {"search": "current time timezone"}
    elif step == 1:
        found = next(w for w in messages[-1]["content"].split() if "get_current_time" in w)
        arguments = {"tool": found.strip("-*`:"), "args": {"timezone": "Asia/Tokyo"}}
    else:
        now = json.loads(messages[-1]["content"])
        return {"role": "assistant", "content": f"It is {now['datetime']} in Tokyo."}
    call = {"name": "mcp", "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"call_{step}", "type": "function", "function": call}],
    }


async def main() -> None:
    host = ExportHost()
    async with McpAdapter(host=host, **example_config()) as adapter:
        host.attach(adapter)
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Time in Tokyo?"}]
        while True:
            reply = scripted_model(messages, tools=host.tool_definitions("openai-chat"))
            messages.append(reply)
            if not reply.get("tool_calls"):
                break
            for call in reply["tool_calls"]:
                arguments = json.loads(call["function"]["arguments"])
                result = await host.execute(call["function"]["name"], arguments)
                messages.append(result_shape(result, "openai-chat", call_id=call["id"]))
            await host.turn_end()
        print(messages[-1]["content"])


if __name__ == "__main__":
    asyncio.run(main())
