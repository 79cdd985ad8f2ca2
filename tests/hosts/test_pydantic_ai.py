"""The pydantic-ai capability, end to end in a real Agent with a scripted FunctionModel."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryImage,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.engine import ImagePart, ToolResult
from pi_mcp_adapter.engine import TextPart as McpTextPart
from pi_mcp_adapter.hosts.pydantic_ai import McpCapability, to_pydantic_ai_content

from .conftest import (
    Workspace,
    assert_no_canary,
    everything_entry,
    needs_npm,
    secret_servers,
    time_entry,
)

Reply = str | tuple[str, dict[str, Any]]
TOKYO = "Asia/Tokyo"
PIXEL_PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5Erk"
    "Jggg=="
)


class Script:
    """A FunctionModel body: one reply per model request; records what each request offered."""

    def __init__(self, steps: list[Callable[[list[ModelMessage]], Reply]]) -> None:
        self.steps = steps
        self.offered: list[list[str]] = []
        self.seen: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.offered.append(sorted(t.name for t in info.function_tools))
        self.seen.append(repr(info.function_tools) + repr(messages))
        reply = self.steps.pop(0)(messages)
        if isinstance(reply, str):
            return ModelResponse(parts=[TextPart(reply)])
        name, args = reply
        return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{len(self.seen)}")])


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]


def last_return(messages: list[ModelMessage]) -> ToolReturnPart:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    return part
    raise AssertionError("no tool return in the history")


@pytest.mark.slow
async def test_proxy_surface_search_then_call_in_one_run(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()})
    script = Script(
        [
            lambda m: ("mcp", {"search": "current time timezone"}),
            lambda m: ("mcp", {"tool": "time_get_current_time", "args": {"timezone": TOKYO}}),
            lambda m: "done",
        ]
    )
    async with McpCapability.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(FunctionModel(script), capabilities=[mcp])
        result = await agent.run("What time is it in Tokyo?")
    returns = tool_returns(result.all_messages())
    search, call = returns
    assert "time_get_current_time" in str(search.content)
    assert call.outcome == "success"
    assert json.loads(str(call.content))["timezone"] == "Asia/Tokyo"
    assert script.offered == [["mcp", "mcp_script"]] * 3


@pytest.mark.slow
@pytest.mark.npm
@needs_npm
async def test_toolsearch_offers_the_activated_tool_on_the_next_request(
    workspace: Workspace,
) -> None:
    workspace.write_config(
        {"time": time_entry(), "everything": everything_entry()},
        settings={"surface": "toolsearch"},
    )
    script = Script(
        [
            lambda m: ("ToolSearch", {"query": "add two numbers sum"}),
            lambda m: ("everything_get-sum", {"a": 2, "b": 40}),
            lambda m: ("ToolSearch", {"query": "select:time_convert_time"}),
            lambda m: (
                "time_convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            ),
            lambda m: "done",
        ]
    )
    async with McpCapability.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(FunctionModel(script), capabilities=[mcp])
        result = await agent.run("add, then convert")
    first, second, _, fourth, _ = script.offered
    assert first == ["ToolSearch", "mcp_script"]
    assert "everything_get-sum" in second
    assert "time_convert_time" not in second
    assert "time_convert_time" in fourth
    returns = tool_returns(result.all_messages())
    assert "42" in str(returns[1].content)
    converted = returns[3].content
    assert returns[3].outcome == "success"
    assert json.loads(str(converted))["target"]["timezone"] == "Asia/Tokyo"


@pytest.mark.slow
async def test_an_error_result_is_a_failed_tool_call_the_run_survives(
    workspace: Workspace,
) -> None:
    workspace.write_config({"time": time_entry()})
    failures: list[ToolReturnPart] = []
    script = Script(
        [
            lambda m: ("mcp", {"tool": "time_get_current_time", "args": {"timezone": 7}}),
            lambda m: failures.append(last_return(m)) or "recovered",
        ]
    )
    async with McpCapability.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(FunctionModel(script), capabilities=[mcp])
        result = await agent.run("time?")
    assert result.output == "recovered"
    (failure,) = failures
    assert failure.outcome == "failed"
    assert "Invalid arguments for time_get_current_time" in str(failure.content)


@pytest.mark.slow
async def test_capability_over_an_adapter_the_caller_owns_and_its_commands(
    workspace: Workspace,
) -> None:
    workspace.write_config({"time": time_entry()})
    async with McpAdapter(**workspace.adapter_kwargs()) as adapter:
        mcp = McpCapability(adapter, builtin_tools=["shell"])
        status = await mcp.command("mcp", "status")
        auth = await mcp.command("mcp-auth", "time")
        mcp.close()
    assert "time" in status
    assert "needs no sign-in" in auth


def test_images_stay_images_and_text_stays_text() -> None:
    pixel = PIXEL_PNG
    content = to_pydantic_ai_content(
        ToolResult((McpTextPart("a pixel:"), ImagePart(pixel, "image/png")))
    )
    assert isinstance(content, list)
    text, image = content
    assert text == "a pixel:"
    assert isinstance(image, BinaryImage)
    assert image.media_type == "image/png"
    assert image.data.startswith(b"\x89PNG")
    assert to_pydantic_ai_content(ToolResult.text("plain")) == "plain"


@pytest.mark.slow
async def test_secrets_never_reach_the_model(workspace: Workspace) -> None:
    workspace.write_config(secret_servers())
    script = Script(
        [
            lambda m: ("mcp", {}),
            lambda m: ("mcp", {"connect": "remote"}),
            lambda m: ("mcp", {"connect": "broken"}),
            lambda m: ("mcp", {"tool": "remote_anything", "args": {}}),
            lambda m: ("mcp", {"tool": "time_get_current_time", "args": {"timezone": "UTC"}}),
            lambda m: "done",
        ]
    )
    notices: list[str] = []
    async with McpCapability.open(
        on_notify=lambda text, level: notices.append(text), **workspace.adapter_kwargs()
    ) as mcp:
        agent = Agent(FunctionModel(script), capabilities=[mcp])
        result = await agent.run("look around")
        status = await mcp.command("mcp", "status")
    failed = [p for p in tool_returns(result.all_messages()) if p.outcome == "failed"]
    assert len(failed) == 3  # connect remote, connect broken, call a tool of remote
    assert_no_canary(*script.seen, result.all_messages(), status, notices)


@pytest.mark.slow
async def test_direct_tools_are_plain_tools_next_to_the_proxy(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry(directTools=["get_current_time"])})
    script = Script(
        [
            lambda m: ("time_get_current_time", {"timezone": "Europe/Berlin"}),
            lambda m: "done",
        ]
    )
    async with McpCapability.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(FunctionModel(script), capabilities=[mcp])
        result = await agent.run("time in Berlin")
    assert script.offered[0] == ["mcp", "mcp_script", "time_get_current_time"]
    (called,) = tool_returns(result.all_messages())
    assert json.loads(str(called.content))["timezone"] == "Europe/Berlin"


@pytest.mark.slow
@pytest.mark.npm
@needs_npm
async def test_an_image_from_a_server_reaches_the_model_as_an_image(workspace: Workspace) -> None:
    workspace.write_config({"everything": everything_entry()})
    script = Script([lambda m: ("mcp", {"tool": "everything_get-tiny-image"}), lambda m: "seen"])
    async with McpCapability.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(FunctionModel(script), capabilities=[mcp])
        result = await agent.run("show me")
    (returned,) = tool_returns(result.all_messages())
    assert returned.outcome == "success"
    images = [
        item
        for message in result.all_messages()
        if isinstance(message, ModelRequest)
        for part in message.parts
        for item in (part.content if isinstance(part.content, list) else [part.content])
        if isinstance(item, BinaryImage)
    ]
    assert len(images) == 1
    assert images[0].media_type == "image/png"
    assert images[0].data.startswith(b"\x89PNG")
