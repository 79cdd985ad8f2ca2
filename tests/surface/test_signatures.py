"""Signatures a model can code against: ``describe`` of the ``mcp`` proxy shows each tool as
``name(params) -> result``, for one tool, several, or a whole server at once; the result shape
comes from the tool's ``outputSchema``, else from earlier results (marked observed, recorded
in the metadata cache, never holding values). Real workbench and mcp-server-time servers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pi_mcp_adapter.surface import McpAdapter, ToolResult
from pi_mcp_adapter.surface._proxy import ProxyTool

from .conftest import Workspace, fixture_entry, workbench_entry

pytestmark = [pytest.mark.slow]


async def mcp(adapter: McpAdapter, **params: Any) -> ToolResult:
    return await ProxyTool(adapter).execute(params)


async def test_describe_of_one_tool_ends_with_its_signature_and_result_shape(
    shared_adapter: McpAdapter,
) -> None:
    text = (await mcp(shared_adapter, describe="workbench_add")).text_content
    assert "Server: workbench" in text
    assert text.endswith("Signature:\n  workbench_add(a: int, b: int) -> str")


async def test_describe_of_a_server_gives_one_signature_line_per_tool(
    shared_adapter: McpAdapter,
) -> None:
    result = await mcp(shared_adapter, describe="workbench")
    lines = result.text_content.splitlines()
    assert not result.is_error
    assert lines[0] == "# workbench"
    assert "workbench_add(a: int, b: int) -> str" in lines
    assert "workbench_echo(message: str) -> str" in lines
    flight = next(line for line in lines if line.startswith("workbench_book_flight("))
    assert "origin: str" in flight
    assert "Literal[" in flight
    assert len(lines) == 1 + len(shared_adapter.tools("workbench"))


async def test_describe_of_several_names_groups_signatures_by_server_and_names_misses(
    shared_adapter: McpAdapter,
) -> None:
    for names in (
        "workbench_echo, time_get_current_time,workbench_ecko",
        ["workbench_echo", "time_get_current_time", "workbench_ecko"],
    ):
        result = await mcp(shared_adapter, describe=names)
        text = result.text_content
        assert not result.is_error
        assert "# workbench\nworkbench_echo(message: str) -> str" in text
        assert "# time\ntime_get_current_time(timezone: str) -> " in text
        miss = text.splitlines()[-1]
        assert miss.startswith("# workbench_ecko: ")
        assert "workbench_echo" in miss
        assert result.details["names"] == ["time_get_current_time", "workbench_echo"]


async def test_describe_of_only_unknown_names_is_an_error(shared_adapter: McpAdapter) -> None:
    result = await mcp(shared_adapter, describe=["nothing_here", "nor_here"])
    assert result.is_error
    assert "# nothing_here: " in result.text_content


@pytest.mark.parametrize(
    ("names", "message"),
    [
        pytest.param([1, 2], "list of tool or server names", id="numbers"),
        pytest.param([" ", ""], "names no tool or server", id="blank"),
        pytest.param([f"t{i}" for i in range(101)], "at most 100", id="too-many"),
    ],
)
async def test_describe_of_a_bad_name_list_is_a_clear_error(
    shared_adapter: McpAdapter, names: object, message: str
) -> None:
    result = await mcp(shared_adapter, describe=names)
    assert result.is_error
    assert message in result.text_content


async def test_a_tool_without_a_result_schema_shows_the_shape_its_results_had(
    workspace: Workspace,
) -> None:
    """The fixture server's echo declares no ``outputSchema``; the workbench's records answer
    JSON text under a one-string wrapper schema. After one call each, their signatures show
    the shape of the answer as a call returns it, marked observed, here and in the next
    process; the cache file holds only types and keys, no value of either answer."""
    workspace.write_config({"workbench": workbench_entry(), "fixture": fixture_entry()})
    async with workspace.adapter() as adapter:
        before = (await mcp(adapter, describe="fixture_echo,workbench_records")).text_content
        assert "fixture_echo(message: str) -> str | dict | list" in before
        assert "workbench_records(count?: int) -> str" in before
        echoed = await mcp(adapter, tool="fixture_echo", args={"message": "canary-77"})
        assert "canary-77" in echoed.text_content
        records = await mcp(adapter, tool="workbench_records", args={"count": 3})
        assert "item-2" in records.text_content
        text = (await mcp(adapter, describe="fixture_echo,workbench_records")).text_content
        assert "fixture_echo(message: str) -> str (observed)" in text
        assert (
            'workbench_records(count?: int) -> list[{"id": int, "name": str, "price": float, '
            '"active": bool}] (observed)'
        ) in text
        full = (await mcp(adapter, describe="workbench_records")).text_content
        assert full.endswith("(observed)")
        adapter.cache.flush()
    entries = json.loads((workspace.agent_dir / "mcp-cache.json").read_text())["servers"]
    observed = {name: entry.get("observedResults") for name, entry in entries.items()}
    assert observed == {
        "fixture": {"echo": "str"},
        "workbench": {
            "records": '{"id": int, "name": str, "price": float, "active": bool}'.join(
                ("list[", "]")
            )
        },
    }
    async with workspace.adapter() as again:
        later = (await mcp(again, describe="fixture")).text_content
        assert "fixture_echo(message: str) -> str (observed)" in later


def test_the_script_description_says_a_script_finds_its_tools_and_their_signatures() -> None:
    from pi_mcp_adapter.surface._script import SCRIPT_DESCRIPTION

    assert "search('words') -> [{name, signature: 'name(params) -> result'}]" in (
        SCRIPT_DESCRIPTION
    )
    assert "a wrong argument or key with the right shape" in SCRIPT_DESCRIPTION
