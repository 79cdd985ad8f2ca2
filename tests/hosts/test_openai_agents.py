"""The OpenAI Agents SDK tools, end to end through the real Runner with a ScriptedModel."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import (
    Agent,
    FunctionTool,
    Runner,
    ToolOutputImage,
    ToolOutputText,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ToolCallOutputItem
from agents.result import RunResult
from agents.testing import ScriptedModel, assistant_message, function_call

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.engine import ImagePart, TextPart, ToolResult
from pi_mcp_adapter.hosts.openai_agents import McpTools, to_agents_output

from .conftest import (
    Workspace,
    assert_no_canary,
    everything_entry,
    needs_npm,
    secret_servers,
    time_entry,
)

# The SDK would export traces of these runs to OpenAI; nothing leaves this machine.
set_tracing_disabled(True)


def call(name: str, arguments: dict[str, Any], n: int) -> Any:
    return [function_call(name, arguments, call_id=f"call_{n}")]


def offered(model: ScriptedModel) -> list[list[str]]:
    return [sorted(t.name for t in c.tools if isinstance(t, FunctionTool)) for c in model.calls]


def outputs(result: RunResult) -> list[Any]:
    return [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]


@pytest.mark.slow
async def test_proxy_surface_search_then_call_through_the_runner(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()})
    model = ScriptedModel(
        [
            call("mcp", {"search": "current time timezone"}, 1),
            call("mcp", {"tool": "time_get_current_time", "args": {"timezone": "UTC"}}, 2),
            [assistant_message("done")],
        ]
    )
    async with McpTools.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(name="assistant", model=model, tools=mcp.tools)
        result = await Runner.run(agent, "What time is it in UTC?")
    model.assert_complete()
    search, now = outputs(result)
    assert "time_get_current_time" in search
    assert json.loads(now)["timezone"] == "UTC"
    assert offered(model) == [["mcp", "mcp_script"]] * 3
    assert result.final_output == "done"


@pytest.mark.slow
@pytest.mark.npm
@needs_npm
async def test_toolsearch_enables_the_tool_for_the_next_model_call(workspace: Workspace) -> None:
    workspace.write_config(
        {"time": time_entry(), "everything": everything_entry()},
        settings={"surface": "toolsearch"},
    )
    model = ScriptedModel(
        [
            call("ToolSearch", {"query": "echo a message back"}, 1),
            call("everything_echo", {"message": "hi agents"}, 2),
            call("ToolSearch", {"query": "select:time_get_current_time"}, 3),
            call("time_get_current_time", {"timezone": "America/New_York"}, 4),
            [assistant_message("done")],
        ]
    )

    @function_tool
    def shell(command: str) -> str:
        """Run a shell command (the caller's own tool)."""
        return "ok"

    async with McpTools.open(own_tools=[shell], **workspace.adapter_kwargs()) as mcp:
        assert mcp.host.host_tool_names() == ["shell"]
        agent = Agent(name="assistant", model=model, tools=mcp.tools)
        result = await Runner.run(agent, "echo, then time")
    first, second, _, fourth, _ = offered(model)
    assert first == ["ToolSearch", "mcp_script", "shell"]
    assert "everything_echo" in second
    assert "time_get_current_time" not in second
    assert "time_get_current_time" in fourth
    _, echo, _, now = outputs(result)
    assert echo == "Echo: hi agents"
    assert json.loads(now)["timezone"] == "America/New_York"


@pytest.mark.slow
async def test_an_error_result_is_text_the_model_reads(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()})
    model = ScriptedModel(
        [
            call("mcp", {"tool": "time_get_current_time", "args": {"timezone": 5}}, 1),
            call("mcp", {"tool": "no_such_tool"}, 2),
            [assistant_message("recovered")],
        ]
    )
    async with McpAdapter(**workspace.adapter_kwargs()) as adapter:
        mcp = McpTools(adapter)
        agent = Agent(name="assistant", model=model, tools=mcp.tools)
        result = await Runner.run(agent, "time?")
        status = await mcp.command("mcp", "status")
        await mcp.turn_end()
        mcp.close()
    invalid, unknown = outputs(result)
    assert invalid.startswith("Error: Invalid arguments for time_get_current_time")
    assert unknown.startswith("Error: ")
    assert "no_such_tool" in unknown
    assert result.final_output == "recovered"
    assert "time" in status


def test_images_become_image_outputs() -> None:
    result = ToolResult((TextPart("a pixel"), ImagePart("iVBORw0KGgo=", "image/png")))
    text, image = to_agents_output(result)
    assert isinstance(text, ToolOutputText)
    assert text.text == "a pixel"
    assert isinstance(image, ToolOutputImage)
    assert image.image_url == "data:image/png;base64,iVBORw0KGgo="


@pytest.mark.slow
async def test_secrets_never_reach_the_model(workspace: Workspace) -> None:
    workspace.write_config(secret_servers())
    model = ScriptedModel(
        [
            call("mcp", {}, 1),
            call("mcp", {"connect": "remote"}, 2),
            call("mcp", {"connect": "broken"}, 3),
            call("mcp", {"tool": "remote_anything", "args": {}}, 4),
            call("mcp", {"tool": "time_get_current_time", "args": {"timezone": "UTC"}}, 5),
            [assistant_message("done")],
        ]
    )
    notices: list[str] = []
    async with McpTools.open(
        on_notify=lambda text, level: notices.append(text), **workspace.adapter_kwargs()
    ) as mcp:
        agent = Agent(name="assistant", model=model, tools=mcp.tools)
        result = await Runner.run(agent, "look around")
        status = await mcp.command("mcp", "status")
    errors = [o for o in outputs(result) if str(o).startswith("Error: ")]
    assert len(errors) == 3
    descriptions = [(t.name, t.description, t.params_json_schema) for t in mcp.tools]
    assert_no_canary(descriptions, [c.input for c in model.calls], outputs(result), status, notices)


@pytest.mark.slow
@pytest.mark.npm
@needs_npm
async def test_an_image_from_a_server_reaches_the_model_as_an_image(workspace: Workspace) -> None:
    workspace.write_config({"everything": everything_entry()})
    model = ScriptedModel(
        [call("mcp", {"tool": "everything_get-tiny-image"}, 1), [assistant_message("seen")]]
    )
    async with McpTools.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(name="assistant", model=model, tools=mcp.tools)
        await Runner.run(agent, "show me")
    sent = json.dumps(model.calls[1].input, default=str)
    assert '"type": "input_image"' in sent
    assert "data:image/png;base64,iVBOR" in sent
