"""ToolSearch activation and direct tools, through a recording host and real servers."""

from __future__ import annotations

import json
import re

import anyio
import pytest

from pi_mcp_adapter.config._models import ServerEntry
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.surface._direct import resolve_direct_selection
from pi_mcp_adapter.surface._render import WEAK_MATCH_HEADER
from pi_mcp_adapter.surface._script import SCRIPT_TOOL_NAME
from pi_mcp_adapter.surface._tokens_report import definition_tokens
from pi_mcp_adapter.surface._toolsearch import TOOL_SEARCH_NAME, parse_select

from .conftest import Workspace, time_entry, workbench_entry


@pytest.mark.parametrize(
    ("query", "names"),
    [
        pytest.param("select:a,b", ["a", "b"], id="two-names"),
        pytest.param("SELECT: b , a ,", ["b", "a"], id="spaces-case-trailing-comma"),
        pytest.param("read files", None, id="keywords"),
    ],
)
def test_select_queries_keep_the_requested_order(query: str, names: list[str] | None) -> None:
    assert parse_select(query) == names


SERVERS = {
    "alpha": ServerEntry(command="x"),
    "beta": ServerEntry(command="y"),
    "team/gamma": ServerEntry(command="z"),
}


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        pytest.param(None, {}, id="nothing-configured"),
        pytest.param("*", {"alpha": None, "beta": None, "team/gamma": None}, id="star-is-all"),
        pytest.param("__none__", {}, id="none-marker"),
        pytest.param("alpha", {"alpha": None}, id="whole-server"),
        pytest.param("alpha/echo,alpha/add", {"alpha": ("echo", "add")}, id="two-tools"),
        pytest.param("team/gamma/run", {"team/gamma": ("run",)}, id="server-name-with-slash"),
        pytest.param("alpha,alpha/echo", {"alpha": None}, id="whole-server-wins"),
    ],
)
def test_mcp_direct_tools_variable_selects_servers_and_tools(
    env: str | None, expected: dict[str, tuple[str, ...] | None]
) -> None:
    assert dict(resolve_direct_selection(SERVERS, env).servers) == expected


def test_config_direct_tools_apply_when_the_variable_is_unset() -> None:
    servers = {
        "alpha": ServerEntry(command="x", direct_tools=True),
        "beta": ServerEntry(command="y", direct_tools=("echo",)),
        "gamma": ServerEntry(command="z"),
    }
    assert dict(resolve_direct_selection(servers, None).servers) == {
        "alpha": None,
        "beta": ("echo",),
    }
    # The variable replaces the config's choice entirely.
    assert dict(resolve_direct_selection(servers, "gamma").servers) == {"gamma": None}


@pytest.mark.slow
async def test_toolsearch_activates_matches_for_the_next_turn(workspace: Workspace) -> None:
    workspace.write_config(
        {"workbench": workbench_entry(), "time": time_entry()},
        settings={"surface": "toolsearch"},
    )
    host = ExportHost(builtin_tools=["read", "bash"])
    async with workspace.attached(host):
        # Every MCP tool is registered, but only the builtins and ToolSearch are active.
        assert "workbench_echo" in host.tools
        assert "time_get_current_time" in host.tools
        assert host.get_active_tools() == ["read", "bash", TOOL_SEARCH_NAME, SCRIPT_TOOL_NAME]
        definition = host.tools[TOOL_SEARCH_NAME]
        description = definition.description
        assert "workbench (8 tools):" in description
        # One line per tool, name and the start of its description, as the budget allows.
        assert "- workbench_echo: Echo a message back, prefixed with 'Echo: '." in description
        assert "- time_get_current_time: Get current time in a specific timezone\n" in description
        assert "not listed" not in description
        assert definition_tokens(definition) <= 600

        result = await host.execute(TOOL_SEARCH_NAME, {"query": "current time in a timezone"})
        assert not result.is_error
        assert "time_get_current_time" in result.details["loaded"]
        assert "time_get_current_time" in host.get_active_tools()
        assert len(result.details["loaded"]) <= 5

        called = await host.execute("time_get_current_time", {"timezone": "UTC"})
        assert not called.is_error
        assert json.loads(called.text_content)["timezone"] == "UTC"


@pytest.mark.slow
async def test_toolsearch_says_when_it_found_only_weak_matches(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()}, settings={"surface": "toolsearch"})
    host = ExportHost()
    async with workspace.attached(host):
        strong = await host.execute(TOOL_SEARCH_NAME, {"query": "current time in Tokyo"})
        assert strong.details["confident"] is True
        assert not strong.text_content.startswith(WEAK_MATCH_HEADER)
        weak = await host.execute(
            TOOL_SEARCH_NAME, {"query": "time to repot succulents with cactus compost"}
        )
        assert weak.details["confident"] is False
        assert weak.text_content.startswith(WEAK_MATCH_HEADER)
        assert weak.details["matches"]


@pytest.mark.slow
async def test_toolsearch_select_loads_exact_names_in_order(workspace: Workspace) -> None:
    workspace.write_config({"workbench": workbench_entry()}, settings={"surface": "toolsearch"})
    host = ExportHost()
    async with workspace.attached(host):
        result = await host.execute(
            TOOL_SEARCH_NAME, {"query": "select:workbench_add,workbench_echo,nope"}
        )
        assert result.details["loaded"] == ["workbench_add", "workbench_echo"]
        assert result.details["missing"] == ["nope"]
        assert host.get_active_tools() == [
            TOOL_SEARCH_NAME,
            SCRIPT_TOOL_NAME,
            "workbench_add",
            "workbench_echo",
        ]
        again = await host.execute(TOOL_SEARCH_NAME, {"query": "select:workbench_add"})
        assert again.details["loaded"] == []
        assert "already loaded" in again.text_content


@pytest.mark.slow
async def test_toolsearch_description_stays_within_its_budget_with_many_servers(
    workspace: Workspace,
) -> None:
    servers = {f"bench{i:02d}": workbench_entry() for i in range(40)}
    workspace.write_config(
        servers, settings={"surface": "toolsearch", "toolSearchBudgetTokens": 200}
    )
    host = ExportHost()
    async with workspace.attached(host):
        definition = host.tools[TOOL_SEARCH_NAME]
        assert definition_tokens(definition) <= 200 + 60  # the schema and name are outside it
        description = definition.description
        assert "bench00 (8 tools):\n- bench00_echo: Echo a message back" in description
        # What does not fit is counted per server on the closing line.
        tail = description.splitlines()[-1]
        assert tail.startswith("More tools, not listed (search finds them): bench00 (")
        assert re.search(r"… and \d+ more servers \(\d+ tools\)$", tail)


@pytest.mark.slow
async def test_direct_tools_register_from_cache_before_any_connection(
    workspace: Workspace,
) -> None:
    workspace.write_config({"workbench": workbench_entry(directTools=["echo", "add"])})
    # First run fills the metadata cache.
    async with workspace.attached(ExportHost()):
        pass
    host = ExportHost(builtin_tools=["read"])
    async with workspace.attached(host, connect_missing=False) as adapter:
        assert host.get_active_tools() == [
            "read",
            "mcp",
            SCRIPT_TOOL_NAME,
            "workbench_echo",
            "workbench_add",
        ]
        assert adapter.server_status("workbench").status == "cached"
        with anyio.fail_after(30):
            result = await host.execute("workbench_echo", {"message": "lazy"})
        assert result.text_content == "Echo: lazy"
        assert adapter.server_status("workbench").status == "connected"


@pytest.mark.slow
async def test_direct_tools_never_shadow_host_tools(workspace: Workspace) -> None:
    workspace.write_config({"workbench": workbench_entry(directTools=True, toolPrefix="none")})
    host = ExportHost(builtin_tools=["echo"])
    async with workspace.attached(host):
        assert host.tools.get("echo") is None  # the host's own tool is not replaced
        assert "add" in host.get_active_tools()
        assert any("echo" in message for _, message in host.notices)


@pytest.mark.slow
async def test_direct_tools_survive_toolsearch_rebuilds_across_connects_and_reconnects(
    workspace: Workspace,
) -> None:
    workspace.write_config(
        {"workbench": workbench_entry(directTools=["echo"]), "time": time_entry()},
        settings={"surface": "toolsearch"},
    )
    host = ExportHost(builtin_tools=["read"])
    # Nothing cached and nothing connected at start: every tool arrives through a rebuild.
    async with workspace.attached(host, connect_missing=False) as adapter:
        assert host.get_active_tools() == ["read", TOOL_SEARCH_NAME, SCRIPT_TOOL_NAME]
        with anyio.fail_after(30):
            await adapter.connect("workbench")
        assert "workbench_echo" in host.get_active_tools()
        assert "workbench_add" in host.tools
        assert "workbench_add" not in host.get_active_tools()  # deferred, not direct
        with anyio.fail_after(30):
            await adapter.connect("time")
            await adapter.reconnect("workbench")
            await adapter.connect("workbench")
        assert "workbench_echo" in host.tools
        assert "workbench_echo" in host.get_active_tools()
        with anyio.fail_after(30):
            result = await host.execute("workbench_echo", {"message": "still here"})
        assert result.text_content == "Echo: still here"
    # From the cache, then a lazy connect on the first call: the same.
    host = ExportHost(builtin_tools=["read"])
    async with workspace.attached(host, connect_missing=False) as adapter:
        assert host.get_active_tools() == [
            "read",
            TOOL_SEARCH_NAME,
            SCRIPT_TOOL_NAME,
            "workbench_echo",
        ]
        description = host.tools[TOOL_SEARCH_NAME].description
        assert "- workbench_add:" in description
        assert "- workbench_echo:" not in description  # direct: already visible
        with anyio.fail_after(30):
            first = await host.execute("workbench_echo", {"message": "lazy"})
            await adapter.connect("time")
        assert first.text_content == "Echo: lazy"
        assert host.get_active_tools() == [
            "read",
            TOOL_SEARCH_NAME,
            SCRIPT_TOOL_NAME,
            "workbench_echo",
        ]
        loaded = await host.execute(TOOL_SEARCH_NAME, {"query": "select:time_get_current_time"})
        assert loaded.details["loaded"] == ["time_get_current_time"]
        assert "workbench_echo" in host.get_active_tools()


@pytest.mark.slow
async def test_direct_tools_search_registers_a_servers_tools_inactive_for_mcp_search(
    workspace: Workspace,
) -> None:
    # The TypeScript adapter's directTools: "search": the server's tools wait, inactive, and
    # the mcp proxy's search turns on what it finds.
    workspace.write_config(
        {"workbench": workbench_entry(), "time": time_entry(directTools="search")}
    )
    host = ExportHost(builtin_tools=["read"])
    async with workspace.attached(host):
        assert "time_get_current_time" in host.tools
        assert "workbench_echo" not in host.tools  # not a "search" server: proxy only
        assert host.get_active_tools() == ["read", "mcp", SCRIPT_TOOL_NAME]

        found = await host.execute("mcp", {"search": "current time timezone"})
        assert "time_get_current_time" in found.details["loaded"]
        assert "time_get_current_time" in host.get_active_tools()
        assert "call directly" in found.text_content

        called = await host.execute("time_get_current_time", {"timezone": "UTC"})
        assert json.loads(called.text_content)["timezone"] == "UTC"
        again = await host.execute("mcp", {"search": "current time timezone"})
        assert "loaded" not in again.details
