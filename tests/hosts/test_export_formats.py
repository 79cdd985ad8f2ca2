"""Provider-shaped export: exact tool shapes, result shapes, and provider-side deferral."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from mcp.types import CallToolResult, Tool
from openai.types.chat import ChatCompletionToolMessageParam, ChatCompletionToolParam
from openai.types.responses import FunctionToolParam, ToolSearchToolParam
from openai.types.responses.response_input_item_param import FunctionCallOutput
from pydantic import TypeAdapter

from pi_mcp_adapter import McpAdapter, UsageError
from pi_mcp_adapter.engine import ImagePart, TextPart, ToolDefinition, ToolResult
from pi_mcp_adapter.hosts import (
    TOOL_FORMATS,
    ExportHost,
    provider_search_tool,
    result_shape,
    tool_shape,
)

from .conftest import Workspace, assert_no_canary, secret_servers, time_entry

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


async def _never(arguments: Any) -> ToolResult:
    raise AssertionError("not called")


WEATHER = ToolDefinition("weather", "Weather for a city", SCHEMA, _never)


def test_openai_chat_shape_is_a_chat_completions_tool() -> None:
    shape = tool_shape(WEATHER, "openai-chat")
    assert shape == {
        "type": "function",
        "function": {"name": "weather", "description": "Weather for a city", "parameters": SCHEMA},
    }
    TypeAdapter(ChatCompletionToolParam).validate_python(shape)


def test_openai_responses_shape_is_a_responses_function_tool() -> None:
    shape = tool_shape(WEATHER, "openai-responses", deferred=True)
    assert shape == {
        "type": "function",
        "name": "weather",
        "description": "Weather for a city",
        "parameters": SCHEMA,
        "strict": False,
        "defer_loading": True,
    }
    TypeAdapter(FunctionToolParam).validate_python(shape)
    TypeAdapter(ToolSearchToolParam).validate_python(provider_search_tool("openai-responses"))


def test_anthropic_shape_is_a_messages_api_tool() -> None:
    assert tool_shape(WEATHER, "anthropic") == {
        "name": "weather",
        "description": "Weather for a city",
        "input_schema": SCHEMA,
    }
    assert tool_shape(WEATHER, "anthropic", deferred=True)["defer_loading"] is True
    assert provider_search_tool("anthropic") == {
        "type": "tool_search_tool_bm25_20251119",
        "name": "tool_search_tool_bm25",
    }


def test_mcp_shape_is_an_mcp_tool() -> None:
    shape = tool_shape(WEATHER, "mcp")
    tool = Tool.model_validate(shape)
    assert tool.input_schema == SCHEMA
    assert shape == {"name": "weather", "description": "Weather for a city", "inputSchema": SCHEMA}


@pytest.mark.parametrize("format", ["openai-chat", "mcp"])
def test_deferral_is_refused_where_the_provider_has_none(format: Any) -> None:
    with pytest.raises(UsageError, match="no deferred loading"):
        tool_shape(WEATHER, format, deferred=True)
    with pytest.raises(UsageError, match="no provider-side tool search"):
        provider_search_tool(format)


PIXEL = ImagePart("iVBORw0KGgo=", "image/png")


def test_results_take_each_apis_shape() -> None:
    mixed = ToolResult((TextPart("sunny"), PIXEL))
    chat = result_shape(mixed, "openai-chat", call_id="c1")
    TypeAdapter(ChatCompletionToolMessageParam).validate_python(chat)
    assert chat["tool_call_id"] == "c1"
    assert chat["content"].startswith("sunny\n[image content: image/png")

    responses = result_shape(mixed, "openai-responses", call_id="c2")
    TypeAdapter(FunctionCallOutput).validate_python(responses)
    assert responses["output"] == [
        {"type": "input_text", "text": "sunny"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo="},
    ]

    anthropic = result_shape(ToolResult.text("boom", is_error=True), "anthropic", call_id="c3")
    assert anthropic == {
        "type": "tool_result",
        "tool_use_id": "c3",
        "content": [{"type": "text", "text": "boom"}],
        "is_error": True,
    }
    image_block = result_shape(mixed, "anthropic", call_id="c4")["content"][1]
    assert image_block["source"] == {
        "type": "base64",
        "media_type": "image/png",
        "data": "iVBORw0KGgo=",
    }

    mcp = CallToolResult.model_validate(result_shape(mixed, "mcp", call_id="ignored"))
    assert mcp.is_error is False
    assert [c.type for c in mcp.content] == ["text", "image"]


def test_an_error_output_says_so_where_the_api_has_no_flag() -> None:
    failed = result_shape(ToolResult.text("boom", is_error=True), "openai-responses", call_id="c")
    assert failed["output"] == "Error: boom"


def test_unknown_format_names_the_known_ones() -> None:
    host = ExportHost()
    with pytest.raises(UsageError) as caught:
        host.tool_definitions("gemini")  # type: ignore[arg-type]
    for known in TOOL_FORMATS:
        assert known in str(caught.value)


@pytest.mark.slow
async def test_toolsearch_deferral_hands_search_to_the_provider(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()}, settings={"surface": "toolsearch"})
    host = ExportHost(builtin_tools=["shell"])
    async with McpAdapter(host=host, **workspace.adapter_kwargs()) as adapter:
        host.attach(adapter)
        plain = host.tool_definitions("anthropic")
        assert [t["name"] for t in plain] == ["ToolSearch", "mcp_script"]
        # Before the provider searches, a deferred tool is refused and says how to load it.
        refused = await host.execute("time_get_current_time", {"timezone": "UTC"})
        assert refused.is_error
        assert "ToolSearch" in refused.text_content

        deferred = host.tool_definitions("anthropic", defer=True)
        assert deferred[0] == provider_search_tool("anthropic")
        names = [t["name"] for t in deferred[1:]]
        assert "ToolSearch" not in names
        assert names[0] == "mcp_script"  # active: offered as it is, not deferred
        assert "defer_loading" not in deferred[1]
        assert set(names[1:]) == {"time_get_current_time", "time_convert_time"}
        assert all(t["defer_loading"] is True for t in deferred[2:])

        # The provider loaded the tool and the model called it: it runs, and is active now.
        ran = await host.execute("time_get_current_time", {"timezone": "UTC"})
        assert not ran.is_error
        assert json.loads(ran.text_content)["timezone"] == "UTC"
        # The list stays byte-identical: the provider keeps what it loaded in the conversation,
        # so loading a tool never rewrites the cached tool list.
        assert host.tool_definitions("anthropic", defer=True) == deferred
        # The old export keeps working.
        assert [t["function"]["name"] for t in host.export("openai")] == [
            "ToolSearch",
            "mcp_script",
            "time_get_current_time",
        ]
        assert host.export("anthropic")[1]["input_schema"]["type"] == "object"


@pytest.mark.slow
async def test_every_format_describes_the_proxy_tool(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()})
    host = ExportHost()
    async with McpAdapter(host=host, **workspace.adapter_kwargs()) as adapter:
        host.attach(adapter)
        shapes = {format: host.tool_definitions(format) for format in TOOL_FORMATS}
    TypeAdapter(list[ChatCompletionToolParam]).validate_python(shapes["openai-chat"])
    TypeAdapter(list[FunctionToolParam]).validate_python(shapes["openai-responses"])
    Tool.model_validate(shapes["mcp"][0])
    assert shapes["anthropic"][0]["name"] == "mcp"


def _imported_runtimes(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    return done.stdout.strip() + done.stderr.strip()


@pytest.mark.slow
def test_the_hosts_package_imports_no_agent_runtime() -> None:
    code = (
        "import sys, pi_mcp_adapter, pi_mcp_adapter.hosts\n"
        "print(sorted(m for m in ('pydantic_ai', 'agents', 'pi_agent_core', 'pi_agent_harness')"
        " if m in sys.modules))"
    )
    assert _imported_runtimes(code) == "[]"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("binding", "runtime", "extra"),
    [
        pytest.param("pi_python", "pi_agent_core", "pi", id="pi"),
        pytest.param("pydantic_ai", "pydantic_ai", "pydantic-ai", id="pydantic-ai"),
        pytest.param("openai_agents", "agents", "openai-agents", id="openai-agents"),
    ],
)
def test_a_missing_runtime_names_the_extra_to_install(
    binding: str, runtime: str, extra: str
) -> None:
    # ``sys.modules[name] = None`` makes ``import name`` fail as if it were not installed.
    code = (
        f"import sys; sys.modules[{runtime!r}] = None\n"
        "try:\n"
        f"    import pi_mcp_adapter.hosts.{binding}\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    assert f"pip install 'pi-mcp-adapter[{extra}]'" in _imported_runtimes(code)


@pytest.mark.slow
async def test_secrets_never_reach_exported_definitions_or_results(workspace: Workspace) -> None:
    workspace.write_config(secret_servers())
    host = ExportHost()
    async with McpAdapter(host=host, **workspace.adapter_kwargs()) as adapter:
        host.attach(adapter)
        definitions = {format: host.tool_definitions(format) for format in TOOL_FORMATS}
        results = [
            await host.execute("mcp", arguments)
            for arguments in (
                {},
                {"connect": "remote"},
                {"connect": "broken"},
                {"tool": "remote_anything"},
                {"describe": "time_get_current_time"},
            )
        ]
        status = await host.run_command("mcp", "status")
    assert sum(r.is_error for r in results) == 3
    shaped = [result_shape(r, f, call_id="c") for r in results for f in TOOL_FORMATS]
    assert_no_canary(definitions, shaped, status, host.notices)
