"""The pi-python extension in a real AgentHarness, with a scripted model.

With ``pip install 'pi-mcp-adapter[pi]'`` the harness finds the extension by itself
(``auto_discover_extensions=True``, as pi-python's ACP CLI runs); here it is passed explicitly.
Run: ``python examples/pi_python_extension.py`` (no API key: the model is a plain async stream
function, as pi-python takes).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from _setup import example_config
from pi_agent_core.event_stream import AssistantMessageEventStream
from pi_agent_core.messages import AssistantMessage, ToolResultMessage
from pi_agent_core.types import DoneEvent, LlmContext, Model, StartEvent
from pi_agent_harness import AgentHarness, MemorySessionStorage, Session

from pi_mcp_adapter.hosts.pi_python import activate


async def scripted_model(model: Model, context: LlmContext, options: Any = None) -> Any:
    """Loads a tool with ToolSearch, calls it on the next request, then answers."""
    offered = [t.name for t in context.tools or []]
    results = [m for m in context.messages if isinstance(m, ToolResultMessage)]
    if not results:
        content: list[Any] = [
            {
                "type": "toolCall",
                "id": "c1",
                "name": "ToolSearch",
                "arguments": {"query": "current time"},
            }
        ]
    elif len(results) == 1:
        assert "time_get_current_time" in offered, offered
        content = [
            {
                "type": "toolCall",
                "id": "c2",
                "name": "time_get_current_time",
                "arguments": {"timezone": "Australia/Sydney"},
            }
        ]
    else:
        now = json.loads(results[-1].content[0]["text"])
        content = [{"type": "text", "text": f"It is {now['datetime']} in Sydney."}]
    reason = "toolUse" if content[0]["type"] == "toolCall" else "stop"
    message = AssistantMessage(content=content, stopReason=reason)
    stream = AssistantMessageEventStream()
    stream.push(StartEvent(partial=message))
    stream.push(DoneEvent(partial=message, reason=reason))
    stream.set_final_message(message)
    stream.end()
    return stream


async def main() -> None:
    config = example_config(surface="toolsearch")
    os.environ["PI_MCP_CONFIG"] = str(config["config_path"])  # one exclusive config file
    os.environ["PI_CODING_AGENT_DIR"] = str(config["agent_dir"])  # where the cache lives
    harness = AgentHarness(
        session=Session(await MemorySessionStorage.create()),
        model=Model(provider="scripted", model_id="scripted"),
        stream_fn=scripted_model,
        extensions=[activate],
    )
    try:
        status = await harness.prompt("/mcp")  # answered by the extension, no model turn
        print(status.content[0]["text"])
        reply = await harness.prompt("What time is it in Sydney?")
        print(reply.content[0]["text"])
    finally:
        await harness.close()  # closes every MCP server


if __name__ == "__main__":
    asyncio.run(main())
