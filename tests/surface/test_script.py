"""``mcp_script`` against real servers: mcp-server-git, mcp-server-time and the fixture server.

A script chains tools of two servers, searches and describes the catalog, meets tool errors as
exceptions it can catch, is asked about approval once per tool, and is ended by each budget
with a message that names it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from pi_mcp_adapter.engine import Question
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.surface import McpAdapter, register_surfaces
from pi_mcp_adapter.surface._sandbox import ScriptLimits
from pi_mcp_adapter.surface._script import (
    SCRIPT_DESCRIPTION,
    SCRIPT_TOOL_NAME,
    ScriptTool,
    render_signature,
)
from pi_mcp_adapter.surface._tokens_report import definition_tokens

from .conftest import Workspace, fixture_entry, time_entry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

pytestmark = [pytest.mark.slow]


def make_git_repo(path: Path) -> Path:
    """Four commits touching README.md (``tests/fixtures/git_repo.py``)."""
    subprocess.run([sys.executable, str(FIXTURES / "git_repo.py"), str(path)], check=True)
    return path


def git_entry(repo: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)]}


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_git_repo(tmp_path_factory.mktemp("git") / "repo")


@pytest.fixture
async def adapter(workspace: Workspace, repo: Path) -> AsyncIterator[McpAdapter]:
    workspace.write_config(
        {"git": git_entry(repo), "time": time_entry(), "fixture": fixture_entry()}
    )
    async with workspace.adapter() as adapter:
        yield adapter


CHAIN = """
log = await call("git_log", {"repo_path": REPO, "max_count": 3})
dates = [line[6:] for line in log.splitlines() if line.startswith("Date: ")]
times = []
for date in dates:
    print("converting", date)
    converted = await call(
        "time_convert_time",
        {"source_timezone": "UTC", "time": date[11:16], "target_timezone": "Asia/Tokyo"},
    )
    times.append(converted["target"]["datetime"][11:16])
{"commits": len(dates), "tokyo": times}
"""


async def test_a_script_chains_tools_of_two_servers_and_returns_only_its_value(
    adapter: McpAdapter, repo: Path
) -> None:
    code = CHAIN.replace("REPO", json.dumps(str(repo)))
    result = await ScriptTool(adapter).execute({"code": code})
    assert not result.is_error, result.text_content
    lines = result.text_content.splitlines()
    assert lines[:3] == ["converting 2024-04-01 10:00:00+00:00"] + [
        f"converting 2024-0{m}-01 10:00:00+00:00" for m in (3, 2)
    ]
    assert json.loads(lines[3]) == {"commits": 3, "tokyo": ["19:00", "19:00", "19:00"]}
    assert result.details["calls"] == 4
    assert result.details["mode"] == "script"


async def test_search_and_describe_return_data_and_a_typed_signature(adapter: McpAdapter) -> None:
    code = """
hits = await search("convert time zone")
spec = await describe(hits[0]["name"])
[hits[0]["name"], spec["server"], spec["signature"]]
"""
    result = await ScriptTool(adapter).execute({"code": code})
    assert not result.is_error, result.text_content
    name, server, signature = json.loads(result.text_content)
    assert (name, server) == ("time_convert_time", "time")
    assert signature.startswith("class TimeConvertTimeArgs(TypedDict):")
    assert "    source_timezone: str  # " in signature
    assert "    time: str  # Time to convert" in signature
    assert "\n# await call('time_convert_time', {...}) -> {\"source\": {" in signature


def test_a_signature_marks_optional_keys_and_renders_json_types() -> None:
    from pi_mcp_adapter.catalog._metadata import ToolInfo

    tool = ToolInfo(
        name="db_query",
        original_name="query",
        server="db",
        description="Run a query",
        input_schema={
            "type": "object",
            "properties": {
                "sql": {"type": "string"},
                "limit": {"type": "integer", "default": 10},
                "mode": {"enum": ["read", "write"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "filter": {"anyOf": [{"$ref": "#/$defs/F"}, {"type": "null"}]},
                "odd key": {"type": ["number", "boolean"]},
            },
            "required": ["sql", "mode"],
            "$defs": {"F": {"type": "object"}},
        },
    )
    assert render_signature(tool).splitlines() == [
        "class DbQueryArgs(TypedDict):",
        '    """Run a query"""',
        "    sql: str",
        "    limit: NotRequired[int]  # default 10",
        '    mode: Literal["read", "write"]',
        "    tags: NotRequired[list[str]]",
        "    filter: NotRequired[dict[str, Any] | None]",
        '    "odd key": NotRequired[float | bool]',  # quoted, control characters escaped
        "# await call('db_query', {...}) -> str | dict | list",
    ]


async def test_a_tool_error_is_an_exception_the_script_can_catch(adapter: McpAdapter) -> None:
    code = """
caught = []
for name, args in [("fixture_fail", {}), ("no_such_tool", {}), ("time_convert_time", {"x": 1})]:
    try:
        await call(name, args)
    except Exception as exc:
        caught.append(str(exc).splitlines()[0])
caught
"""
    result = await ScriptTool(adapter).execute({"code": code})
    assert not result.is_error, result.text_content
    failed, unknown, invalid = json.loads(result.text_content)
    assert failed.startswith("fixture_fail reported an error:")
    assert 'Tool "no_such_tool" not found' in unknown
    assert invalid == "Invalid arguments for time_convert_time:"


async def test_an_uncaught_error_ends_the_script_with_its_line_and_what_it_printed(
    adapter: McpAdapter,
) -> None:
    code = 'print("before")\nawait call("fixture_echo", {"message": "hi"})\nx = 1 / 0\n'
    result = await ScriptTool(adapter).execute({"code": code})
    assert result.is_error
    assert result.text_content == (
        "before\nScript failed: ZeroDivisionError: division by zero (line 3: x = 1 / 0). "
        "It had made 1 call."
    )


async def test_a_script_without_a_final_expression_returns_its_result_variable(
    adapter: McpAdapter,
) -> None:
    tool = ScriptTool(adapter)
    result = await tool.execute(
        {"code": 'r = await call("fixture_echo", {"message": "x"})\nresult = r.upper()'}
    )
    assert result.text_content == "ECHO: X"
    printed = await tool.execute({"code": 'result = 5\nprint("done")'})
    assert printed.text_content == "done"  # the last statement is an expression: None


@pytest.mark.parametrize(
    ("code", "limits", "budget", "words"),
    [
        pytest.param(
            'for i in range(10):\n    await call("fixture_echo", {"message": str(i)})',
            ScriptLimits(max_calls=3),
            "calls",
            "went over its call budget of 3 calls with call()",
            id="calls",
        ),
        pytest.param(
            'await call("fixture_echo", {"message": "x" * 5000})',
            ScriptLimits(max_bytes=4096),
            "bytes",
            "went over its byte budget of 4 KiB moved between tools and script with "
            "call('fixture_echo')",
            id="bytes",
        ),
        pytest.param(
            'try:\n    await call("fixture_slow", {"seconds": 30})\nexcept Exception:\n    pass',
            ScriptLimits(timeout_s=1.0),
            "time",
            "went over its time budget of 1 s",
            id="time-in-a-call",
        ),
    ],
)
async def test_a_budget_ends_the_script_with_a_message_naming_it(
    adapter: McpAdapter, code: str, limits: ScriptLimits, budget: str, words: str
) -> None:
    tool = ScriptTool(adapter, limits=limits)
    with anyio.fail_after(10):
        result = await tool.execute({"code": code})
    assert result.is_error
    assert result.details["budget"] == budget
    assert result.text_content.startswith(f"Script stopped: the script {words}")


async def test_stopping_a_script_cancels_its_call_in_flight(
    workspace: Workspace, tmp_path: Path
) -> None:
    workspace.write_config({"fixture": fixture_entry()})
    mark, cancelled = tmp_path / "started", tmp_path / "cancelled"
    code = (
        f'await call("fixture_slow", {{"seconds": 30, "mark": {json.dumps(str(mark))}, '
        f'"cancelled_mark": {json.dumps(str(cancelled))}}})'
    )
    async with workspace.adapter() as adapter:
        tool = ScriptTool(adapter)
        async with anyio.create_task_group() as tg:
            tg.start_soon(tool.execute, {"code": code})
            with anyio.fail_after(15):
                while not mark.exists():
                    await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
        with anyio.fail_after(10):
            while not cancelled.exists():
                await anyio.sleep(0.02)
        # The server is free again: the next script's call is answered.
        result = await tool.execute({"code": 'await call("fixture_echo", {"message": "next"})'})
        assert result.text_content == "Echo: next"


async def test_approval_is_asked_once_per_tool_per_script(workspace: Workspace) -> None:
    workspace.write_config({"fixture": fixture_entry()}, settings={"approveTools": ["echo"]})
    asked: list[Question] = []

    async def ask(question: Question) -> str:
        asked.append(question)
        return "allow_once"

    code = (
        "import asyncio\n"
        'await asyncio.gather(*[call("fixture_echo", {"message": str(i)}) for i in range(3)])\n'
        'await call("fixture_echo", {"message": "again"})\n'
        'await call("fixture_pid", {})'
    )
    async with workspace.adapter(ask=ask) as adapter:
        tool = ScriptTool(adapter)
        first = await tool.execute({"code": code})
        assert not first.is_error, first.text_content
        assert len(asked) == 1
        await tool.execute({"code": code})
        assert len(asked) == 2  # "allow once" holds for one script, not the next


async def test_the_tools_a_script_names_are_asked_about_before_it_runs(
    workspace: Workspace,
) -> None:
    calls = workspace.root / "calls.log"
    workspace.write_config(
        {"fixture": fixture_entry("--call-log", str(calls))}, settings={"approveTools": ["echo"]}
    )
    asked: list[Question] = []
    calls_made_when_asked: list[str] = []

    async def ask(question: Question) -> str:
        asked.append(question)
        calls_made_when_asked.append(calls.read_text() if calls.exists() else "")
        return "allow_once"

    code = 'await call("fixture_pid", {})\nawait call("fixture_echo", {"message": "x"})'
    async with workspace.adapter(ask=ask) as adapter:
        result = await ScriptTool(adapter).execute({"code": code})
    assert not result.is_error, result.text_content
    assert calls_made_when_asked == [""]  # nothing had run, not even the tool before it
    (question,) = asked
    assert "A script wants to run echo of fixture" in question.text
    assert 'await call("fixture_pid", {})' in question.text  # the person reads the script
    assert len(calls.read_text().splitlines()) == 2


async def test_a_denied_tool_stays_denied_for_the_rest_of_the_script(workspace: Workspace) -> None:
    workspace.write_config({"fixture": fixture_entry()}, settings={"approveTools": True})
    asked: list[Question] = []

    async def ask(question: Question) -> str:
        asked.append(question)
        return "deny"

    code = """
refusals = []
for i in range(3):
    try:
        await call("fixture_echo", {"message": "x"})
    except Exception as exc:
        refusals.append(str(exc))
refusals
"""
    async with workspace.adapter(ask=ask) as adapter:
        result = await ScriptTool(adapter).execute({"code": code})
    refusals = json.loads(result.text_content)
    assert len(asked) == 1
    assert len(refusals) == 3
    assert all("The user denied the call of fixture_echo" in r for r in refusals)


async def test_script_calls_are_traced_and_counted_like_any_call(workspace: Workspace) -> None:
    trace = workspace.root / "trace.jsonl"
    workspace.write_config(
        {"fixture": fixture_entry()},
        settings={"captureStats": True, "trace": {"enabled": True, "file": str(trace)}},
    )
    code = '[await call("fixture_echo", {"message": str(i)}) for i in range(2)]'
    async with workspace.adapter() as adapter:
        result = await ScriptTool(adapter).execute({"code": code})
        assert json.loads(result.text_content) == ["Echo: 0", "Echo: 1"]
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [(r["server"], r["tool"], r["outcome"]) for r in records] == [
        ("fixture", "echo", "ok"),
        ("fixture", "echo", "ok"),
    ]


async def test_the_script_tool_sits_beside_the_surface_tool_unless_turned_off(
    workspace: Workspace,
) -> None:
    workspace.write_config({"time": time_entry()})
    for surface in ("proxy", "toolsearch"):
        host = ExportHost()
        async with workspace.adapter(host=host) as adapter:
            register_surfaces(adapter, host, surface=surface)  # type: ignore[arg-type]
            assert SCRIPT_TOOL_NAME in host.get_active_tools()
    workspace.write_config({"time": time_entry()}, settings={"scriptMode": False})
    host = ExportHost()
    async with workspace.adapter(host=host) as adapter:
        register_surfaces(adapter, host)
        assert SCRIPT_TOOL_NAME not in host.get_active_tools()
        assert SCRIPT_TOOL_NAME not in host.host_tool_names()


async def test_a_long_result_is_cut_by_the_output_guard(workspace: Workspace) -> None:
    workspace.write_config({}, settings={"outputGuard": {"maxLines": 20}})
    async with workspace.adapter() as adapter:
        tool = ScriptTool(adapter)
        result = await tool.execute({"code": '"\\n".join(str(i) for i in range(500))'})
        assert result.details["truncated"] is True
        assert result.text_content.startswith("0\n1\n2\n")
        assert "[Output truncated" in result.text_content
        # However much a script prints, its value (or its error) stays in view.
        noisy = await tool.execute({"code": 'for i in range(500):\n    print(i)\n"the answer"'})
        assert noisy.text_content.startswith("0\n1\n")
        assert "[Output truncated" in noisy.text_content
        assert noisy.text_content.endswith("\nthe answer")
        assert len(noisy.text_content.splitlines()) <= 20


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="no-code"),
        pytest.param({"code": "  "}, id="blank"),
        pytest.param({"code": 5}, id="not-a-string"),
        pytest.param([1], id="not-an-object"),
    ],
)
async def test_bad_parameters_are_an_error_result(workspace: Workspace, params: object) -> None:
    async with workspace.adapter() as adapter:
        result = await ScriptTool(adapter).definition().execute(params)  # type: ignore[arg-type]
    assert result.is_error
    assert result.text_content.startswith("Invalid parameters: ")


def test_the_script_tool_description_stays_small() -> None:
    from pi_mcp_adapter.engine import ToolDefinition, ToolResult
    from pi_mcp_adapter.surface._script import SCRIPT_PARAMETERS

    async def nothing(params: object) -> ToolResult:
        return ToolResult.text("")

    definition = ToolDefinition(SCRIPT_TOOL_NAME, SCRIPT_DESCRIPTION, SCRIPT_PARAMETERS, nothing)
    assert definition_tokens(definition) < 150


async def test_a_script_never_sees_a_secret_so_cannot_reshape_it(workspace: Workspace) -> None:
    canary = "canary-5e1f-do-not-leak"
    workspace.write_config({"fixture": fixture_entry(env={"API_TOKEN": "${PI_TEST_TOKEN}"})})
    code = 'token = await call("fixture_env", {"name": "API_TOKEN"})\n[token, token[::-1]]'
    async with workspace.adapter(environ={"PI_TEST_TOKEN": canary}) as adapter:
        result = await ScriptTool(adapter).execute({"code": code})
    assert not result.is_error, result.text_content
    assert canary not in result.text_content
    assert canary[::-1] not in result.text_content
    assert json.loads(result.text_content)[0] == "${PI_TEST_TOKEN}"


async def test_call_takes_keywords_and_makes_script_values_json(adapter: McpAdapter) -> None:
    code = """
a = await call("fixture_echo", message="kw")
try:
    b = await call("fixture_echo", {"message": ("x", "y")})
except Exception as exc:
    b = str(exc)
try:
    await call()
except TypeError as exc:
    c = str(exc)
[a, b, c]
"""
    result = await ScriptTool(adapter).execute({"code": code})
    assert not result.is_error, result.text_content
    a, b, c = json.loads(result.text_content)
    assert a == "Echo: kw"
    # The tuple arrived as a JSON array, which the schema check refuses (a string is wanted).
    assert b.startswith("Invalid arguments for fixture_echo:\n- message: ['x', 'y']")
    assert c == "call(tool, args): give the tool's name and one dict of arguments"


TASKS_SERVER = FIXTURES / "tasks_server.py"


async def test_a_scripts_call_that_becomes_a_task_returns_its_result_or_cancels_it(
    workspace: Workspace, tmp_path: Path
) -> None:
    cancel_log = tmp_path / "cancelled.txt"
    workspace.write_config(
        {
            "jobs": {
                "command": sys.executable,
                "args": [str(TASKS_SERVER)],
                "env": {"TASKS_CANCEL_LOG": str(cancel_log)},
                "protocolVersion": "auto",
            }
        }
    )
    async with workspace.adapter() as adapter:
        tool = ScriptTool(adapter)
        done = await tool.execute({"code": 'await call("jobs_slow_report", {"seconds": 0.1})'})
        assert done.text_content == "report ready"
        async with anyio.create_task_group() as tg:
            tg.start_soon(tool.execute, {"code": 'await call("jobs_slow_report", {"seconds": 60})'})
            with anyio.fail_after(15):
                while not adapter.status().running_tasks:
                    await anyio.sleep(0.02)
            [running] = adapter.status().running_tasks
            tg.cancel_scope.cancel()
        assert cancel_log.read_text().split() == [running.task_id]
