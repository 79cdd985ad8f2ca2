"""The ``mcp`` proxy tool against real stdio servers (the workbench fixture and mcp-server-time)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pi_mcp_adapter.engine import ImagePart
from pi_mcp_adapter.surface import McpAdapter, ToolResult
from pi_mcp_adapter.surface._proxy import PROXY_TOOL_NAME, ProxyTool, parse_args, select_mode
from pi_mcp_adapter.surface._tokens_report import definition_tokens

from .conftest import Workspace, fixture_entry

pytestmark = [pytest.mark.slow]

HOST_TOOLS = ("read", "bash")


async def mcp(adapter: McpAdapter, **params: Any) -> ToolResult:
    return await ProxyTool(adapter, host_tools=HOST_TOOLS).execute(params)


@pytest.mark.parametrize(
    ("params", "mode"),
    [
        pytest.param({}, "status", id="nothing-is-status"),
        pytest.param({"server": "s"}, "list", id="server-alone-lists"),
        pytest.param({"servers": "all"}, "servers", id="servers-alone-lists-servers"),
        pytest.param({"server": "s", "servers": "all"}, "list", id="server-beats-servers"),
        pytest.param({"search": "x", "server": "s"}, "search", id="search-beats-server"),
        pytest.param(
            {"instructions": "s", "search": "x"}, "instructions", id="instructions-beats-search"
        ),
        pytest.param(
            {"describe": "t", "instructions": "s"}, "describe", id="describe-beats-instructions"
        ),
        pytest.param({"connect": "s", "describe": "t"}, "connect", id="connect-beats-describe"),
        pytest.param({"tool": "t", "connect": "s", "search": "x"}, "call", id="tool-beats-all"),
        pytest.param({"tool": "", "search": "x"}, "search", id="empty-tool-is-ignored"),
    ],
)
def test_mode_follows_the_documented_priority(params: dict[str, Any], mode: str) -> None:
    assert select_mode(params) == mode


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(None, {}, id="none"),
        pytest.param({"a": 1}, {"a": 1}, id="object"),
        pytest.param('{"a": [1, 2]}', {"a": [1, 2]}, id="json-string"),
        pytest.param("  ", {}, id="blank-string"),
    ],
)
def test_args_accept_objects_and_json_strings(raw: object, expected: dict[str, Any]) -> None:
    assert parse_args(raw) == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param("[1, 2]", "expected a JSON object, got array", id="json-array"),
        pytest.param("{not json", "not valid JSON", id="broken-json"),
        pytest.param(42, "expected a JSON object, got number", id="number"),
        pytest.param(["a"], "expected a JSON object, got array", id="list"),
    ],
)
def test_args_of_other_types_are_a_clear_error(raw: object, message: str) -> None:
    with pytest.raises(Exception, match=message):
        parse_args(raw)


async def test_proxy_definition_is_small_and_constant(shared_adapter: McpAdapter) -> None:
    definition = ProxyTool(shared_adapter).definition()
    assert definition.name == PROXY_TOOL_NAME
    assert definition_tokens(definition) <= 250
    # It does not grow with the catalog: the same text whatever servers exist.
    assert "workbench" not in definition.description


async def test_status_shows_each_server_with_its_tool_count(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter)
    assert not result.is_error
    text = result.text_content
    # Connected on the first run, served from the cache afterwards.
    assert re.match(r"MCP: [02]/2 servers connected, 10 tools", text)
    assert re.search(r"[✓○] workbench \(8 tools", text)  # 7 tools + the readme resource
    assert re.search(r"[✓○] time \(2 tools", text)


async def test_list_shows_a_servers_tools_and_instructions(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, server="workbench")
    text = result.text_content
    assert "- workbench_echo - Echo a message back" in text
    assert "workbench_read_readme" in text
    assert "Workbench server for tests" in text


async def test_list_of_an_unknown_server_names_the_configured_ones(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, server="nope")
    assert result.is_error
    assert "nope" in result.text_content
    assert "time" in result.text_content


async def test_search_ranks_the_matching_tool_first_with_its_shape(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, search="current time timezone")
    assert not result.is_error
    first = result.details["matches"][0]
    assert first["name"] == "time_get_current_time"
    assert "timezone: string" in result.text_content


async def test_search_without_schemas_lists_names_only(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, search="echo", includeSchemas=False)
    assert "- workbench_echo - " in result.text_content
    assert "message: string" not in result.text_content


async def test_search_pages_with_a_next_offset(shared_adapter: McpAdapter) -> None:
    first = await mcp(shared_adapter, search=".", regex=True, limit=3)
    assert len(first.details["matches"]) == 3
    assert first.details["nextOffset"] == 3
    second = await mcp(shared_adapter, search=".", regex=True, limit=3, offset=3)
    names_first = {m["name"] for m in first.details["matches"]}
    names_second = {m["name"] for m in second.details["matches"]}
    assert names_first.isdisjoint(names_second)


async def test_search_filters_by_server(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, search="time", server="workbench")
    assert all(m["server"] == "workbench" for m in result.details["matches"])


async def test_search_with_a_bad_regex_is_an_error_result(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, search="([", regex=True)
    assert result.is_error


async def test_search_with_no_match_says_so(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, search="zzqx frobnicate quux", server="time")
    assert not result.is_error
    if result.details["matches"]:  # the semantic signal offers the closest tools, marked weak
        assert result.details["confident"] is False
        assert result.text_content.startswith('No strong match; closest tools for "zzqx')
    else:
        assert result.text_content.startswith('No tools matching "zzqx frobnicate quux"')


async def test_a_weak_search_still_shows_the_closest_tools_and_says_so(
    shared_adapter: McpAdapter,
) -> None:
    # "time" is a catalog word, the gardening is not: the closest tool comes back, flagged.
    result = await mcp(
        shared_adapter, search="time to repot succulents with cactus compost and perlite"
    )
    assert result.details["confident"] is False
    assert result.text_content.startswith("No strong match; closest tools for")
    assert any(m["server"] == "time" for m in result.details["matches"])


async def test_search_groups_hits_by_server_and_names_the_matching_servers(
    shared_adapter: McpAdapter,
) -> None:
    # Both servers match ("echo a message": workbench, "current time": time); one hit shows.
    result = await mcp(
        shared_adapter,
        search="echo a message with the current time",
        limit=1,
        includeSchemas=False,
    )
    text = result.text_content
    servers = [m["server"] for m in result.details["servers"]]
    assert len(servers) >= 2, result.details
    shown = result.details["matches"][0]["server"]
    assert f"\n{shown} (" in text
    others = [s for s in servers if s != shown]
    assert "Also matching: " + others[0] in text
    assert "server=<name>" in text


async def test_describe_renders_parameters_with_required_marks_and_enums(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, describe="workbench_book_flight")
    text = result.text_content
    assert not result.is_error
    assert "Server: workbench" in text
    assert "origin" in text
    assert "required" in text
    assert "economy" in text
    assert "business" in text


async def test_describe_accepts_the_original_name_when_unique(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, describe="book_flight")
    assert result.details["name"] == "workbench_book_flight"


async def test_describe_of_a_misspelt_tool_suggests_close_names(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, describe="workbench_ecko")
    assert result.is_error
    assert "workbench_echo" in result.text_content


async def test_instructions_mode_shows_the_servers_instructions(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, instructions="workbench")
    assert "Use echo to check connectivity" in result.text_content


async def test_call_returns_the_tools_text(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, tool="workbench_echo", args={"message": "hi"})
    assert not result.is_error
    assert result.text_content == "Echo: hi"
    assert result.details["server"] == "workbench"


async def test_call_accepts_args_as_a_json_string(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, tool="workbench_add", args='{"a": 2, "b": 40}')
    assert result.text_content == "42"


async def test_call_with_non_object_args_is_a_clear_error(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, tool="workbench_add", args="[1, 2]")
    assert result.is_error
    assert "expected a JSON object, got array" in result.text_content


async def test_call_with_invalid_arguments_returns_the_schema_without_calling(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(
        shared_adapter, tool="workbench_book_flight", args={"origin": "LHR", "passengers": 0}
    )
    assert result.is_error
    assert result.details["error"] == "invalid_arguments"
    text = result.text_content
    assert "destination" in text  # missing required property
    assert "passengers" in text  # below its minimum
    assert "Expected parameters:\n  origin (string) *required*" in text
    assert "Parameters:" not in text.replace("Expected parameters:", "")


async def test_a_tool_error_about_its_arguments_is_passed_through_with_the_parameters_once(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, tool="workbench_fail", args={"message": "bad message"})
    assert result.is_error
    text = result.text_content
    assert text.startswith("Error executing tool fail: bad message\n\nExpected parameters:")
    assert text.count("Expected parameters:") == 1
    assert "Expected parameters:\n  message (string) *required*" in text
    assert "Parameters:" not in text.replace("Expected parameters:", "")
    assert result.details["parameterHint"] is True


async def test_a_tool_error_that_is_not_about_arguments_gets_no_parameter_list(
    shared_adapter: McpAdapter, workspace: Workspace
) -> None:
    result = await mcp(shared_adapter, tool="workbench_fail", args={"message": "disk full"})
    assert result.text_content == "Error executing tool fail: disk full"
    assert "parameterHint" not in result.details
    workspace.write_config({"fixture": fixture_entry()})
    async with workspace.adapter() as adapter:
        result = await mcp(adapter, tool="fixture_fail")
    assert result.is_error
    assert result.text_content == "it failed"


async def test_an_unknown_tool_gets_suggestions(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, tool="workbench_eco", args={})
    assert result.is_error
    assert result.details["error"] == "unknown_tool"
    assert "workbench_echo" in result.details["suggestions"]


async def test_calling_a_host_tool_through_mcp_says_to_call_it_directly(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, tool="bash", args={})
    assert result.is_error
    assert "call it directly" in result.text_content


async def test_a_resource_tool_reads_the_resource(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, tool="workbench_read_readme")
    assert not result.is_error
    assert "hello from a resource" in result.text_content


async def test_images_are_kept_as_data(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, tool="workbench_pixel")
    images = [p for p in result.content if isinstance(p, ImagePart)]
    assert len(images) == 1
    assert images[0].mime_type == "image/png"


async def test_large_output_is_cut_and_saved_in_full(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, tool="workbench_big_output", args={"lines": 5000})
    assert not result.is_error
    assert result.details["truncated"] is True
    full = Path(result.details["fullOutputPath"])
    assert full.read_text().count("\n") == 4999
    shown = result.text_content
    assert len(shown.encode()) < 60 * 1024
    assert str(full) in shown


async def test_json_results_are_toon_encoded_when_shorter(shared_adapter: McpAdapter) -> None:
    from toon_format import decode

    result = await mcp(shared_adapter, tool="workbench_records", args={"count": 10})
    assert result.details.get("toon") is True
    decoded = decode(result.text_content)
    assert decoded == [
        {"id": i, "name": f"item-{i}", "price": i * 1.5, "active": i % 2 == 0} for i in range(10)
    ]


async def test_connect_mode_refreshes_a_server(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, connect="time")
    assert not result.is_error
    assert "Connected to time" in result.text_content
    assert "time_convert_time" in result.text_content


async def test_connect_to_an_unknown_server_is_an_error_result(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, connect="ghost")
    assert result.is_error
    assert "ghost" in result.text_content


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_keys = st.sampled_from(
    [
        "tool",
        "prompt",
        "args",
        "connect",
        "describe",
        "instructions",
        "search",
        "regex",
        "server",
        "includeSchemas",
        "limit",
        "offset",
        "other",
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(params=st.dictionaries(_keys, _json, max_size=4))
async def test_any_parameter_object_yields_a_result_never_an_exception(
    shared_adapter: McpAdapter, params: dict[str, Any]
) -> None:
    if isinstance(params.get("connect"), str):
        params["connect"] = "not-a-server"  # keep real servers out of random reconnects
    result = await ProxyTool(shared_adapter, host_tools=HOST_TOOLS).execute(params)
    assert isinstance(result, ToolResult)
    json.dumps(dict(result.details), default=str)


async def test_list_shows_the_servers_prompts_with_their_arguments(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, server="workbench")
    assert "Prompts (mcp({prompt, args})): 1" in result.text_content
    assert "- workbench_greet - Greet someone by name. (args: name*, style)" in result.text_content


async def test_prompt_mode_renders_the_messages_as_text(shared_adapter: McpAdapter) -> None:
    result = await mcp(
        shared_adapter, prompt="workbench_greet", args={"name": "Ada", "style": "warm"}
    )
    assert not result.is_error
    assert result.text_content == (
        "Prompt workbench_greet (server workbench):\n"
        "Greet someone by name.\n"
        "\n[user]\nPlease greet Ada in a warm style.\n"
        "\n[assistant]\nHello, Ada!"
    )
    assert result.details["messages"] == 2
    # Names resolve as tool names do: the server's own name, another separator.
    same = await mcp(shared_adapter, prompt="greet", args='{"name": "Ada", "style": "warm"}')
    assert same.text_content == result.text_content


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        pytest.param(
            {"prompt": "workbench_greet"},
            "Prompt workbench_greet needs argument(s): name. It takes: name*, style",
            id="missing-argument",
        ),
        pytest.param({"prompt": "workbench_gret"}, "Did you mean: workbench_greet", id="typo"),
    ],
)
async def test_prompt_mode_errors_say_what_to_pass(
    shared_adapter: McpAdapter, params: dict[str, Any], expected: str
) -> None:
    result = await mcp(shared_adapter, **params)
    assert result.is_error
    assert expected in result.text_content


def test_prompt_comes_right_after_tool_in_the_mode_priority() -> None:
    assert select_mode({"tool": "t", "prompt": "p"}) == "call"
    assert select_mode({"prompt": "p", "connect": "s", "search": "x"}) == "prompt"
