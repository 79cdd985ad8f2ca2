"""OpenAI Agents SDK: the adapter's tools in an Agent, with the SDK's ScriptedModel.

Run: ``python examples/openai_agents_agent.py`` (no API key; use ``model="gpt-5"`` or any
other model for real work).
"""

from __future__ import annotations

import asyncio

from _setup import example_config
from agents import Agent, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

from pi_mcp_adapter.hosts.openai_agents import McpTools

model = ScriptedModel(
    [
        [function_call("mcp", {"search": "convert time"}, call_id="c1")],
        [
            function_call(
                "mcp",
                {
                    "tool": "time_convert_time",
                    "args": {
                        "source_timezone": "UTC",
                        "time": "15:00",
                        "target_timezone": "Asia/Seoul",
                    },
                },
                call_id="c2",
            )
        ],
        [assistant_message("15:00 UTC is midnight in Seoul.")],
    ]
)


async def main() -> None:
    set_tracing_disabled(True)  # nothing leaves this machine
    async with McpTools.open(**example_config()) as mcp:
        agent = Agent(name="assistant", model=model, tools=mcp.tools)
        result = await Runner.run(agent, "15:00 UTC in Seoul?")
        print(result.new_items[-2].output)  # what the time server answered
        print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
