"""``mcp__<server>`` namespace tools: names as the TypeScript adapter writes them, which servers
get one, and calls through the same pipeline as every call (real servers)."""

from __future__ import annotations

import json

import pytest

from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.surface._namespace import NAMESPACE_PARAMETERS, namespace_tool_name
from pi_mcp_adapter.surface._tokens_report import definition_tokens, measure_tokens

from .conftest import Workspace, time_entry, workbench_entry

# Expected names computed with the TypeScript adapter 2.36's own formatServerNamespace.
NAMES = [
    ("time", "mcp__time"),
    ("my-server", "mcp__my_server"),
    ("git_hub", "mcp__git_hub"),
    ("A-B_c", "mcp__A_B_c"),
    ("a__b", "mcp__a__b"),
    ("a.b", "mcp___mcpns_a_2e_b"),
    ("a b", "mcp___mcpns_a_20_b"),
    ("_mcpns_x", "mcp___mcpns___mcpns__x"),
    ("café", "mcp___mcpns_caf_e9_"),
    ("日本", "mcp___mcpns__65e5__672c_"),
    ("😀-x", "mcp___mcpns__1f600___x"),
    ("x" * 60, "mcp___mcpns__h_" + "x" * 32 + "_42f2d97335669f86"),
    (
        "long-name.with.dots-" * 4,
        "mcp___mcpns__h_long__name_2e_with_2e_dots__long_0c8887d24df86149",
    ),
]


@pytest.mark.parametrize(("server", "name"), [pytest.param(s, n, id=n) for s, n in NAMES])
def test_namespace_names_match_the_typescript_adapter(server: str, name: str) -> None:
    assert namespace_tool_name(server) == name
    assert len(name) <= 64


def test_namespace_tools_are_off_unless_the_setting_is_on() -> None:
    from pi_mcp_adapter.config._models import Settings

    assert Settings().namespace_proxy_tools is False


@pytest.mark.slow
async def test_each_server_gets_one_wrapper_that_calls_its_tools(workspace: Workspace) -> None:
    workspace.write_config(
        {
            "time": time_entry(),
            "work-bench": workbench_entry(),
            "direct": time_entry(directTools=True),
        },
        settings={"namespaceProxyTools": True},
    )
    host = ExportHost(builtin_tools=["read"])
    async with workspace.attached(host, connect_missing=True) as adapter:
        tokens = measure_tokens(adapter)
        assert tokens.namespace_tool_count == 2
        assert 0 < tokens.namespace_tokens <= 300
        names = set(host.tools)
        assert {"mcp__time", "mcp__work_bench"} <= names
        # A server with direct tools is reached through them, not through a wrapper.
        assert "mcp__direct" not in names
        assert {"mcp__time", "mcp__work_bench"} <= set(host.get_active_tools())
        definition = host.tools["mcp__time"]
        assert definition.parameters == NAMESPACE_PARAMETERS
        assert "get_current_time" in definition.description
        assert definition_tokens(definition) <= 150

        # The server's own name and the catalog name both work.
        for tool in ("get_current_time", "time_get_current_time", "get-current-time"):
            result = await host.execute("mcp__time", {"tool": tool, "args": {"timezone": "UTC"}})
            assert not result.is_error, result.text_content
            assert json.loads(result.text_content)["timezone"] == "UTC"
            assert result.details["server"] == "time"

        # Only this server's tools: another server's tool is unknown here, with the names
        # that would work.
        other = await host.execute("mcp__time", {"tool": "echo", "args": {"message": "x"}})
        assert other.is_error
        assert 'Tool "echo" not found on server "time"' in other.text_content
        assert "time has: get_current_time, convert_time" in other.text_content

        # args as a JSON string, as the proxy accepts them.
        echoed = await host.execute(
            "mcp__work_bench", {"tool": "echo", "args": json.dumps({"message": "hi"})}
        )
        assert echoed.text_content == "Echo: hi"

        # Bad input is a result, never an exception; argument errors show the parameters.
        missing = await host.execute("mcp__time", {"args": {}})
        assert missing.is_error
        assert "mcp__time needs tool" in missing.text_content
        assert "get_current_time" in missing.text_content
        invalid = await host.execute("mcp__work_bench", {"tool": "add", "args": {"a": "x"}})
        assert invalid.is_error
        assert "Expected parameters:" in invalid.text_content
        not_json = await host.execute("mcp__work_bench", {"tool": "add", "args": "{nope"})
        assert not_json.is_error
        assert "not valid JSON" in not_json.text_content


@pytest.mark.slow
async def test_calls_through_a_wrapper_are_approved_and_recorded_like_any_call(
    workspace: Workspace,
) -> None:
    workspace.write_config(
        {"work-bench": workbench_entry(approveTools=["add"])},
        settings={"namespaceProxyTools": True, "captureStats": True},
    )
    host = ExportHost()
    async with workspace.attached(host, connect_missing=True) as adapter:
        refused = await host.execute("mcp__work_bench", {"tool": "add", "args": {"a": 1, "b": 2}})
        assert refused.is_error
        assert refused.details["error"] == "approval_denied"
        done = await host.execute("mcp__work_bench", {"tool": "echo", "args": {"message": "s"}})
        assert not done.is_error
        stats = adapter.stats
        assert stats is not None
        recorded = {(row.server, row.tool) for row in stats.session_stats()}
        assert ("work-bench", "echo") in recorded


@pytest.mark.slow
async def test_two_servers_with_one_namespace_get_no_wrapper(workspace: Workspace) -> None:
    workspace.write_config(
        {"my-time": time_entry(), "my_time": time_entry()},
        settings={"namespaceProxyTools": True},
    )
    notices: list[str] = []
    host = ExportHost(on_notify=lambda message, level="info": notices.append(message))
    async with workspace.attached(host, connect_missing=True):
        assert "mcp__my_time" not in host.tools
        assert any("have the same namespace" in n for n in notices)


@pytest.mark.slow
async def test_turning_the_setting_off_removes_the_wrappers_on_reload(
    workspace: Workspace,
) -> None:
    workspace.write_config({"time": time_entry()}, settings={"namespaceProxyTools": True})
    host = ExportHost()
    async with workspace.attached(host, connect_missing=True) as adapter:
        assert "mcp__time" in host.tools
        workspace.write_config({"time": time_entry()})
        await adapter.reload()
        assert "mcp__time" not in host.tools
        assert "mcp__time" not in host.get_active_tools()
