"""``mcp({})`` stays within a fixed budget whatever the number of servers; every unavailable
server is named (within a bound) and ``mcp({servers})`` lists the rest, page by page."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from typing import Any

import pytest

from pi_mcp_adapter._secrets import register_secret
from pi_mcp_adapter.catalog import config_hash
from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.engine import ServerStatus, StatusReport
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.servers import TaskState
from pi_mcp_adapter.surface import ProxyTool, register_surfaces
from pi_mcp_adapter.surface._render import (
    STATUS_BUDGET_CHARS,
    STATUS_UNAVAILABLE_LINE_CHARS,
    UNAVAILABLE_STATES,
    render_servers,
    render_status,
)
from pi_mcp_adapter.surface._tokens import count_tokens
from pi_mcp_adapter.surface._tokens_report import measure_tokens

from .conftest import Workspace, time_entry

STATUS_BUDGET_TOKENS = 1000
"""What the test holds ``mcp({})`` to (o200k); STATUS_BUDGET_CHARS is the bound in the code."""

LONG_ERROR = "spawn failed: " + "the server wrote a very long stack trace line; " * 40


def synthetic_report(count: int, *, unavailable: int = 0, changed: int = 0) -> StatusReport:
    rows: list[ServerStatus] = []
    states = ("failed", "needs-auth", "untrusted", "invalid")
    for i in range(count):
        name = f"server-{i:03d}"
        if i < unavailable:
            status = states[i % len(states)]
            rows.append(ServerStatus(name, status, 0, error=LONG_ERROR + "\nsecond line"))
        else:
            rows.append(
                ServerStatus(
                    name,
                    "cached",
                    1 + (i * 7) % 23,
                    changed_tools=tuple(f"tool_{j}" for j in range(12))
                    if i < unavailable + changed
                    else (),
                )
            )
    return StatusReport(
        servers=tuple(rows), config_errors=tuple(f"{LONG_ERROR} #{i}" for i in range(6))
    )


def page_through(report: StatusReport, which: str) -> list[str]:
    """Every server name ``mcp({servers: which})`` lists, following its offsets."""
    names: list[str] = []
    offset = 0
    while True:
        text = render_servers(report, which, offset=offset)
        lines = text.splitlines()
        names += [line.split(" ")[1] for line in lines[1:] if line[:1] in "✓…○✗⚠⊘"]
        more = [line for line in lines if line.startswith("offset: ")]
        if not more:
            return names
        offset = int(more[0].split()[1])


@pytest.mark.parametrize("count", [5, 50, 500])
def test_the_status_stays_within_its_budget_at_any_number_of_servers(count: int) -> None:
    report = synthetic_report(count, unavailable=min(count, 40), changed=min(count, 5))
    text = render_status(report, max_chars=STATUS_BUDGET_CHARS)
    assert len(text) <= STATUS_BUDGET_CHARS
    assert count_tokens(text) <= STATUS_BUDGET_TOKENS
    assert text.startswith(f"MCP: 0/{report.enabled} servers connected")


def test_changed_definitions_and_config_errors_survive_the_cut() -> None:
    # Unavailable servers with long errors, changes and config errors: the cut drops the
    # largest servers (which mcp({servers}) lists), never the warnings.
    report = synthetic_report(500, unavailable=40, changed=3)
    text = render_status(report, max_chars=STATUS_BUDGET_CHARS)
    assert text.count("tool definitions changed since last trusted") == 2
    assert "… and 1 more server with changed tool definitions" in text
    assert text.count("config error:") == 3
    assert text.endswith('… (status cut; mcp({servers: "all"}) lists every server)')


def test_a_few_servers_read_as_before_one_line_each() -> None:
    report = StatusReport(
        servers=(
            ServerStatus("time", "connected", 2, transport="stdio"),
            ServerStatus("git", "cached", 12),
            ServerStatus("broken", "failed", 0, error="exited with 1"),
        )
    )
    assert render_status(report, max_chars=STATUS_BUDGET_CHARS) == render_status(report)


def test_every_unavailable_server_is_named_or_counted_with_the_call_that_lists_them() -> None:
    report = synthetic_report(500, unavailable=60)
    text = render_status(report, max_chars=STATUS_BUDGET_CHARS)
    unavailable = [r.name for r in report.servers if r.status in UNAVAILABLE_STATES]
    named = [name for name in unavailable if name in text]
    # The first ones with their reason (one line each, cut), then names within a bound.
    assert "✗ server-000 (failed" in text
    assert len(named) >= 8
    hidden = len(unavailable) - len(named)
    assert f'… and {hidden} more: mcp({{servers: "unavailable"}})' in text
    # A long reason keeps its first and last words on its one line.
    reasons = [line for line in text.splitlines() if line.startswith("✗ server-000 ")]
    assert len(reasons) == 1
    assert len(reasons[0]) <= STATUS_UNAVAILABLE_LINE_CHARS
    assert "…" in reasons[0]
    assert reasons[0].endswith("second line)")
    # The call names them all.
    assert sorted(page_through(report, "unavailable")) == sorted(unavailable)


def test_counts_per_state_and_the_largest_servers_come_first() -> None:
    report = synthetic_report(500, unavailable=3)
    text = render_status(report, max_chars=STATUS_BUDGET_CHARS)
    assert "500 servers by state: 497 cached, 1 failed, 1 needs-auth, 1 untrusted" in text
    largest = max(r.tool_count for r in report.servers)
    first = text.split("Largest servers:\n", 1)[1].splitlines()[0]
    assert f"({largest} tools" in first
    assert 'mcp({servers: "all", offset: 10}) lists them, largest first' in text


def test_a_failed_server_with_cached_tools_is_listed_once_above_twelve_servers() -> None:
    rows = [ServerStatus(f"server-{i:02d}", "cached", 1 + i) for i in range(12)]
    rows.append(ServerStatus("broken", "failed", 40, error="spawn failed"))
    text = render_status(StatusReport(servers=tuple(rows)), max_chars=STATUS_BUDGET_CHARS)
    assert text.count("broken") == 1
    assert "✗ broken (40 tools cached; failed: spawn failed)" in text
    assert "server-11" in text.split("Largest servers:\n", 1)[1]


def test_paging_through_all_servers_lists_each_once_largest_first() -> None:
    report = synthetic_report(120)
    names = page_through(report, "all")
    assert sorted(names) == sorted(r.name for r in report.servers)
    sizes = {r.name: r.tool_count for r in report.servers}
    assert [sizes[n] for n in names] == sorted(sizes.values(), reverse=True)


def test_changed_servers_are_bounded_and_listed_by_their_own_call() -> None:
    report = synthetic_report(30, changed=6)
    text = render_status(report, max_chars=STATUS_BUDGET_CHARS)
    assert text.count("tool definitions changed since last trusted") == 2
    assert '… and 4 more servers with changed tool definitions: mcp({servers: "changed"})' in text
    assert sorted(page_through(report, "changed")) == [f"server-{i:03d}" for i in range(6)]


def test_config_errors_are_cut_and_counted() -> None:
    report = synthetic_report(3)
    text = render_status(report, max_chars=STATUS_BUDGET_CHARS)
    assert text.count("config error:") == 3
    assert "… and 3 more config errors" in text


# ---------------------------------------------------------------- a real adapter at scale


def write_scaled_catalog(ws: Workspace, count: int, **extra: dict[str, Any]) -> None:
    """``count`` servers known from a valid cache entry each (none can start), plus ``extra``."""
    servers: dict[str, Any] = {
        f"srv-{i:03d}": {"command": f"/nonexistent/catalog-server-{i}"} for i in range(count)
    }
    servers.update(extra)
    ws.write_config(servers)
    config = load_config(agent_dir=ws.agent_dir, project_dir=ws.project_dir, home=ws.home)
    now_ms = int(time.time() * 1000)
    entries = {}
    for i in range(count):
        name = f"srv-{i:03d}"
        tools = [
            {
                "name": f"action_{j}",
                "description": f"Does action {j} of {name}",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
            for j in range(1 + i % 9)
        ]
        entries[name] = {
            "configHash": config_hash(config.servers[name]),
            "cachedAt": now_ms,
            "tools": tools,
            "resources": [],
            "prompts": [],
        }
    (ws.agent_dir / "mcp-cache.json").write_text(json.dumps({"version": 1, "servers": entries}))


@pytest.mark.slow
async def test_a_500_server_catalog_has_a_bounded_status_and_every_server_is_listable(
    workspace: Workspace,
) -> None:
    failing = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}
    write_scaled_catalog(workspace, 500, aaa_broken=failing)
    (workspace.project_dir / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"from_clone": time_entry()}})
    )
    host = ExportHost()
    async with workspace.adapter(host=host, connect_missing=False) as adapter:
        register_surfaces(adapter, host)
        proxy = ProxyTool(adapter)
        failed = await proxy.connect_result("aaa_broken")
        assert failed.is_error
        status = await host.execute("mcp", {})
        text = status.text_content
        assert count_tokens(text) <= STATUS_BUDGET_TOKENS
        assert "✗ aaa_broken (failed" in text
        assert "⊘ from_clone (untrusted" in text
        assert "502 servers by state:" in text
        listed: list[str] = []
        offset = 0
        while True:
            page = await host.execute("mcp", {"servers": "all", "offset": offset})
            assert not page.is_error, page.text_content
            lines = page.text_content.splitlines()
            listed += [line.split(" ")[1] for line in lines[1:] if line[:1] in "✓…○✗⚠⊘"]
            more = [line for line in lines if line.startswith("offset: ")]
            if not more:
                break
            offset = int(more[0].split()[1])
        assert sorted(listed) == sorted(row.name for row in adapter.status().servers)
        assert len(listed) == 502
        unavailable = await host.execute("mcp", {"servers": "unavailable"})
        assert "aaa_broken" in unavailable.text_content
        assert "from_clone" in unavailable.text_content
        bad = await host.execute("mcp", {"servers": "sleeping"})
        assert bad.is_error
        assert '"unavailable"' in bad.text_content
        # The status line and ToolSearch's description are bounded too.
        assert count_tokens(adapter.status_line()) <= 20
        tokens = measure_tokens(adapter)
        budget = adapter.settings.tool_search_budget_tokens
        assert tokens.toolsearch_tokens <= budget + 150
        assert tokens.status_tokens <= STATUS_BUDGET_TOKENS < tokens.status_unbounded_tokens


@pytest.mark.parametrize("servers", [pytest.param(3, id="few"), pytest.param(40, id="many")])
def test_an_untrusted_servers_line_ends_with_the_trust_command_however_deep_the_checkout(
    servers: int,
) -> None:
    # As long as the path of a checkout in a test runner's or a CI's work directory.
    project = "/tmp/pytest-of-someone/pytest-1234/popen-gw11/test_an_untrusted_servers_line0/repo"
    error = (
        f"comes from the project file {project}/.mcp.json, which is not trusted; "
        f"run `pi-mcp trust --project {project}`"
    )
    rows = (
        ServerStatus("evil", "untrusted", 0, error=error),
        *(ServerStatus(f"server-{i:02d}", "cached", 1) for i in range(servers - 1)),
    )
    text = render_status(StatusReport(servers=rows), max_chars=STATUS_BUDGET_CHARS)
    line = next(line for line in text.splitlines() if line.startswith("⊘ evil "))
    assert line.startswith("⊘ evil (untrusted: comes")
    assert line.endswith(f"run `pi-mcp trust --project {project}`)")
    assert len(line) <= STATUS_UNAVAILABLE_LINE_CHARS
    assert "…" in line
    # And in the page that lists the unavailable servers.
    page = render_servers(StatusReport(servers=rows), "unavailable").splitlines()
    assert page[1].endswith(f"run `pi-mcp trust --project {project}`)")


def test_a_secret_cut_by_the_line_bound_is_replaced_before_the_cut() -> None:
    secret = "s3cr3t-" + "x" * 40
    register_secret(secret, "${API_TOKEN}")
    error = "spawn failed: " + "y" * 90 + secret  # the 140-character bound falls inside it
    rows = tuple(
        ServerStatus(f"server-{i:02d}", "failed" if i == 0 else "cached", i, error=error)
        for i in range(20)
    )
    text = render_status(StatusReport(servers=rows), max_chars=STATUS_BUDGET_CHARS)
    line = next(line for line in text.splitlines() if "server-00" in line)
    assert "s3cr3t" not in text
    assert line.endswith("${API_TOKEN})")
    page = render_servers(StatusReport(servers=rows), "failed")
    assert "s3cr3t" not in page


def _tasks(count: int) -> tuple[TaskState, ...]:
    return tuple(
        TaskState(
            server="jobs",
            tool="slow_report",
            task_id=f"task-{i}",
            status="working" if i else "input_required",
            age_s=3700.0 - i * 100,
        )
        for i in range(count)
    )


def test_running_tasks_are_listed_oldest_first_with_status_and_age() -> None:
    report = replace(synthetic_report(3), running_tasks=_tasks(7))
    full = render_status(report)
    assert "Running tasks (7):" in full
    assert "  jobs/slow_report  task task-0  input_required, 1 h 1 min" in full
    assert "  jobs/slow_report  task task-6  working, 51 min 40 s" in full
    bounded = render_status(report, max_chars=STATUS_BUDGET_CHARS)
    assert "task task-4" in bounded
    assert "task task-5" not in bounded
    assert "  … and 2 more" in bounded
    assert len(bounded) <= STATUS_BUDGET_CHARS


def test_without_running_tasks_the_status_has_no_tasks_section() -> None:
    report = synthetic_report(3)
    assert "Running tasks" not in render_status(report)
    assert "Running tasks" not in render_status(report, max_chars=STATUS_BUDGET_CHARS)
