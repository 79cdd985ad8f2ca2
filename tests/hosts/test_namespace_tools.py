"""``mcp__<server>`` namespace tools in every host: the model is offered ``mcp__time`` next to
``mcp``, and a call ``{tool, args}`` reaches the real time server.

The metadata cache is filled first (``pi-mcp connect``), so every host registers the wrapper
from the cache at start, as it would on any start after the first.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import Workspace, time_entry

pytestmark = [pytest.mark.slow]

PI_MCP = Path(sys.executable).parent / "pi-mcp"
CALL = {"tool": "get_current_time", "args": {"timezone": "UTC"}}


@pytest.fixture
def cached_workspace(workspace: Workspace) -> Workspace:
    workspace.write_config({"time": time_entry()}, settings={"namespaceProxyTools": True})
    subprocess.run(
        [*cli(workspace), "connect", "time"], check=True, capture_output=True, timeout=60
    )
    return workspace


def cli(ws: Workspace) -> list[str]:
    return [str(PI_MCP), "--agent-dir", str(ws.agent_dir), "--project", str(ws.project_dir)]


def assert_utc(text: str) -> None:
    assert json.loads(text)["timezone"] == "UTC", text


def test_cli_export_offers_the_wrapper(cached_workspace: Workspace) -> None:
    done = subprocess.run(
        [*cli(cached_workspace), "export", "--format", "anthropic"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    tools = {t["name"]: t for t in json.loads(done.stdout)}
    assert set(tools) == {"mcp", "mcp_script", "mcp__time"}
    assert tools["mcp__time"]["input_schema"]["required"] == ["tool"]


async def test_the_gateway_lists_and_calls_the_wrapper(cached_workspace: Workspace) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    ws = cached_workspace
    params = StdioServerParameters(
        command=str(PI_MCP),
        args=[*cli(ws)[1:], "serve"],
        env={"PI_CODING_AGENT_DIR": str(ws.agent_dir), "HOME": os.environ["HOME"]},
        cwd=ws.project_dir,
    )
    with (ws.root / "gateway.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:  # type: ignore[arg-type]
            listed = await client.list_tools()
            assert {t.name for t in listed.tools} == {"mcp", "mcp_script", "mcp__time"}
            result = await client.call_tool("mcp__time", CALL)
            assert not result.is_error
            assert_utc("".join(getattr(c, "text", "") for c in result.content))


async def test_export_host_offers_and_runs_the_wrapper(cached_workspace: Workspace) -> None:
    from pi_mcp_adapter import McpAdapter
    from pi_mcp_adapter.hosts import ExportHost

    host = ExportHost()
    async with McpAdapter(**cached_workspace.adapter_kwargs()) as adapter:
        host.attach(adapter)
        names = [d["function"]["name"] for d in host.tool_definitions("openai-chat")]
        assert names == ["mcp", "mcp_script", "mcp__time"]
        result = await host.execute("mcp__time", CALL)
        assert not result.is_error
        assert_utc(result.text_content)


async def test_pydantic_ai_offers_and_runs_the_wrapper(cached_workspace: Workspace) -> None:
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

    offered: list[list[str]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append(sorted(t.name for t in info.function_tools))
        if len(offered) == 1:
            return ModelResponse(parts=[ToolCallPart("mcp__time", CALL, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("done")])

    async with McpCapability.open(**cached_workspace.adapter_kwargs()) as mcp:
        result = await Agent(FunctionModel(model), capabilities=[mcp]).run("time?")
    assert offered[0] == ["mcp", "mcp__time", "mcp_script"]
    (returned,) = [
        part
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
    assert returned.outcome == "success"
    assert_utc(str(returned.content))


async def test_openai_agents_offers_and_runs_the_wrapper(cached_workspace: Workspace) -> None:
    from agents import Agent, FunctionTool, Runner, ToolCallOutputItem, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from pi_mcp_adapter.hosts.openai_agents import McpTools

    set_tracing_disabled(True)
    model = ScriptedModel(
        [[function_call("mcp__time", CALL, call_id="call_1")], [assistant_message("done")]]
    )
    async with McpTools.open(**cached_workspace.adapter_kwargs()) as mcp:
        result = await Runner.run(Agent(name="a", model=model, tools=mcp.tools), "time?")
    first = sorted(t.name for t in model.calls[0].tools if isinstance(t, FunctionTool))
    assert first == ["mcp", "mcp__time", "mcp_script"]
    (output,) = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert_utc(str(output))


async def test_pi_offers_and_runs_the_wrapper(cached_workspace: Workspace) -> None:
    from pi_mcp_adapter.hosts.pi_python import activate

    from .pi_support import ScriptedStream, last_tool_result, make_harness, result_text

    results: list[Any] = []
    stream = ScriptedStream(
        [
            lambda ctx: ("mcp__time", CALL),
            lambda ctx: results.append(last_tool_result(ctx)) or "done",
        ]
    )
    harness = await make_harness(stream, extensions=[activate], env=None)
    try:
        await harness.prompt("time?")
    finally:
        await harness.close()
    assert "mcp__time" in stream.offered[0]
    assert "mcp" in stream.offered[0]
    (result,) = results
    assert not result.isError
    assert_utc(result_text(result))
