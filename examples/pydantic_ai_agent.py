"""pydantic-ai: the adapter as a capability, with a scripted FunctionModel.

Run: ``python examples/pydantic_ai_agent.py`` (no API key; use ``Agent("openai:gpt-5", ...)``
or any other model for real work).
"""

from __future__ import annotations

import asyncio
import json

from _setup import example_config
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pi_mcp_adapter.hosts.pydantic_ai import McpCapability


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Loads a tool with ToolSearch, calls it once it is offered, then answers."""
    offered = [t.name for t in info.function_tools]
    returns = [
        p
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("ToolSearch", {"query": "current time"})])
    if len(returns) == 1:
        assert "time_get_current_time" in offered, offered
        call = ToolCallPart("time_get_current_time", {"timezone": "Africa/Nairobi"})
        return ModelResponse(parts=[call])
    now = json.loads(str(returns[-1].content))
    return ModelResponse(parts=[TextPart(f"It is {now['datetime']} in Nairobi.")])


async def main() -> None:
    async with McpCapability.open(**example_config(surface="toolsearch")) as mcp:
        agent = Agent(FunctionModel(scripted_model), capabilities=[mcp])
        result = await agent.run("What time is it in Nairobi?")
        print(result.output)
        print(await mcp.command("mcp", "status"))


if __name__ == "__main__":
    asyncio.run(main())
