"""No exception escapes a tool execution; unsendable arguments never reach a server."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio
import pytest

from pi_mcp_adapter.engine import ToolResult
from pi_mcp_adapter.engine._arguments import MAX_ARGUMENT_DEPTH, argument_problems
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.surface import register_surfaces
from pi_mcp_adapter.surface._guard import guard_execute

from .conftest import Workspace, workbench_entry


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


async def test_an_unexpected_exception_becomes_an_error_result() -> None:
    async def broken(params: Mapping[str, Any]) -> ToolResult:
        raise ValueError("output limits must be at least 1")

    result = await guard_execute("mcp", broken)({})
    assert result.is_error
    assert "ValueError: output limits must be at least 1" in result.text_content
    assert result.details["error"] == "internal_error"


async def test_a_recursion_error_becomes_an_error_result() -> None:
    async def recurse(params: Mapping[str, Any]) -> ToolResult:
        raise RecursionError("maximum recursion depth exceeded")

    result = await guard_execute("t", recurse)({})
    assert result.is_error
    assert "RecursionError" in result.text_content


async def test_cancellation_is_not_swallowed() -> None:
    async def slow(params: Mapping[str, Any]) -> ToolResult:
        await anyio.sleep(10)
        raise AssertionError("not reached")

    with anyio.move_on_after(0.05) as scope:
        await guard_execute("t", slow)({})
    assert scope.cancelled_caught


def test_argument_problems_name_where_and_what() -> None:
    assert argument_problems({"a": [1, {"b": "fine"}]}) == []
    assert argument_problems({"a": nested(MAX_ARGUMENT_DEPTH - 2)}) == []
    (deep,) = argument_problems({"a": nested(50_000)})
    assert deep.startswith("a")
    assert f"nested more than {MAX_ARGUMENT_DEPTH} levels deep" in deep
    (lone,) = argument_problems({"items": ["ok", "bad \ud800"]})
    assert lone.startswith("items[1]: text contains a lone surrogate")
    assert argument_problems({"\udc00": 1}) == ["arguments: a key contains a lone surrogate"]


@pytest.mark.slow
async def test_every_surface_returns_errors_as_results(workspace: Workspace) -> None:
    # outputLimitBytes 0 used to raise after the tool had run; now it means "no limit".
    workspace.write_config(
        {"wb": workbench_entry(directTools=["echo"])},
        settings={"outputLimitBytes": 0, "outputLimitLines": 0},
    )
    host = ExportHost()
    async with workspace.adapter(host=host) as adapter:
        register_surfaces(adapter, host)
        await adapter.connect("wb")
        echo = await host.execute("mcp", {"tool": "wb_echo", "args": {"message": "x" * 60_000}})
        assert not echo.is_error
        assert echo.text_content == "Echo: " + "x" * 60_000
        deep = await host.execute("mcp", {"tool": "wb_echo", "args": {"message": nested(50_000)}})
        assert deep.is_error
        assert deep.details["error"] == "invalid_arguments"
        lone = await host.execute("wb_echo", {"message": "\ud800"})
        assert lone.is_error
        assert "lone surrogate" in lone.text_content
        # The connection is intact: nothing was sent.
        ok = await host.execute("wb_echo", {"message": "still here"})
        assert ok.text_content == "Echo: still here"
        bad = await host.execute("mcp", {"tool": "wb_echo", "args": "[" * 50_000})
        assert bad.is_error
        assert "nested too deeply" in bad.text_content
