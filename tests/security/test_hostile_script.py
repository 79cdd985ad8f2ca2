"""A hostile script (or a model talked into writing one) against the host that runs it.

The script's value is the biggest thing a script controls: it is measured inside the sandbox
against the byte budget before it crosses, so host memory stays bounded; any value either
renders or fails with one clear message. An approval question names the call first, whatever
the script puts before it, and nothing a script or a server writes can drive the terminal.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import psutil
import pytest

from cli.terminal import pi_mcp, run_on_terminal
from pi_mcp_adapter.engine import Question, QuestionOption
from pi_mcp_adapter.surface import McpAdapter
from pi_mcp_adapter.surface._sandbox import ScriptLimits
from pi_mcp_adapter.surface._script import ScriptTool
from surface.conftest import Workspace, fixture_entry, make_workspace, workbench_entry

pytestmark = [pytest.mark.slow]

RSS_GROWTH_BOUND_BYTES = 48 * 1024 * 1024
"""Far below the 100 MiB value the script builds: the value never reaches this process."""
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return make_workspace(tmp_path)


@pytest.fixture
async def adapter(workspace: Workspace) -> AsyncIterator[McpAdapter]:
    workspace.write_config({"workbench": workbench_entry()})
    async with workspace.adapter() as adapter:
        yield adapter


@contextmanager
def peak_rss() -> Iterator[list[int]]:
    """Samples this process's RSS while the block runs; yields [baseline, peak]."""
    me = psutil.Process()
    sample = [me.memory_info().rss, me.memory_info().rss]
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.01):
            sample[1] = max(sample[1], me.memory_info().rss)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield sample
    finally:
        done.set()
        watcher.join()


async def test_a_huge_return_value_ends_the_script_on_its_byte_budget_without_reaching_the_host(
    adapter: McpAdapter, tmp_path: Path
) -> None:
    tool = ScriptTool(adapter)
    assert (await tool.execute({"code": "1"})).text_content == "1"  # the sandbox client loaded
    with peak_rss() as rss, anyio.fail_after(DEADLINE_S):
        result = await tool.execute({"code": '"x" * (100 * 2**20)'})
    assert result.is_error
    assert "byte budget of 16 MiB" in result.text_content
    assert "its value" in result.text_content
    assert result.details["budget"] == "bytes"
    assert rss[1] - rss[0] < RSS_GROWTH_BOUND_BYTES
    assert len(result.text_content) < 1000  # nothing was spilled: there was nothing to show


@pytest.mark.parametrize(
    "code",
    [
        pytest.param('result = "y" * (20 * 2**20)', id="a-result-variable"),
        pytest.param(
            'len = lambda value: 0\nisinstance = lambda a, b: False\n"z" * (20 * 2**20)',
            id="builtins-shadowed-to-fool-the-count",
        ),
        pytest.param(
            "row = [1] * 1000\nsheet = [row] * 1000\n[sheet] * 1000",
            id="shared-lists-that-expand-to-a-billion-items",
        ),
        pytest.param(
            "from dataclasses import dataclass\n@dataclass\nclass Box:\n    body: str\n"
            "    def __repr__(self):\n        return 'Box'\nBox('w' * (20 * 2**20))",
            id="a-dataclass-whose-repr-lies",
        ),
    ],
)
async def test_every_way_of_returning_too_much_is_counted_before_it_crosses(
    adapter: McpAdapter, code: str
) -> None:
    with peak_rss() as rss, anyio.fail_after(DEADLINE_S):
        result = await ScriptTool(adapter).execute({"code": code})
    assert result.is_error, result.text_content[:200]
    assert "byte budget" in result.text_content
    assert rss[1] - rss[0] < RSS_GROWTH_BOUND_BYTES


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        pytest.param("2**100000", "an integer of more than 4300 digits", id="huge-int"),
        pytest.param(
            "a = []\na.append(a)\na", "deeper than 100 levels (does a list", id="recursive-list"
        ),
        pytest.param(
            "v = []\nfor i in range(150):\n    v = [v]\nv", "deeper than 100 levels", id="deep"
        ),
        pytest.param(
            "class Thing:\n    def __init__(self):\n        self.a = 1\nThing()",
            "a Thing object; return plain data",
            id="a-class-instance",
        ),
    ],
)
async def test_a_value_that_cannot_be_shown_fails_with_one_clear_message(
    adapter: McpAdapter, code: str, expected: str
) -> None:
    with anyio.fail_after(DEADLINE_S):
        result = await ScriptTool(adapter).execute({"code": code})
    assert result.is_error
    assert "Script failed: the script's value cannot be returned: it" in result.text_content
    assert expected in result.text_content
    assert "internal error" not in result.text_content.lower()
    assert "Traceback" not in result.text_content


EVERY_KIND = """
import datetime
import math
from dataclasses import dataclass


@dataclass
class Point:
    x: int


{
    "floats": [float("nan"), math.inf, -math.inf, 1e308],
    "bytes": [b"text", b"\\xff\\x00"],
    "set": {3, 1, 2},
    "keys": {(1, 2): "pair", 4: "four"},
    "dataclass": Point(3),
    "date": datetime.date(2024, 1, 2),
    "long int": 10**4299 // 10**4298,
}
"""


async def test_any_plain_value_renders_as_json(adapter: McpAdapter) -> None:
    with anyio.fail_after(DEADLINE_S):
        result = await ScriptTool(adapter).execute({"code": EVERY_KIND})
    assert not result.is_error, result.text_content
    assert json.loads(result.text_content) == {
        "floats": ["nan", "inf", "-inf", 1e308],
        "bytes": ["text", "base64:/wA="],
        "set": [1, 2, 3],
        "keys": {"[1, 2]": "pair", "4": "four"},
        "dataclass": {"x": 3},
        "date": "2024-01-02",
        "long int": 10,
    }


async def test_a_huge_exception_message_is_cut(adapter: McpAdapter) -> None:
    with anyio.fail_after(DEADLINE_S):
        result = await ScriptTool(adapter).execute({"code": 'raise ValueError("E" * 200000)'})
    assert result.is_error
    assert "ValueError: EEEE" in result.text_content
    assert "more characters)" in result.text_content
    assert len(result.text_content) < 5000


async def test_a_hostile_servers_huge_result_counts_against_the_scripts_byte_budget(
    adapter: McpAdapter,
) -> None:
    code = 'r = await call("workbench_big_output", {"lines": 300, "width": 10000})\nlen(r)'
    with anyio.fail_after(DEADLINE_S):
        result = await ScriptTool(adapter, limits=ScriptLimits(max_bytes=2**20)).execute(
            {"code": code}
        )
    assert result.is_error
    assert "byte budget of 1 MiB" in result.text_content
    assert "the result of workbench_big_output" in result.text_content


async def test_arguments_that_cannot_be_sent_fail_in_the_script_where_it_can_catch_them(
    adapter: McpAdapter,
) -> None:
    code = (
        "try:\n    await call('workbench_echo', {'message': 2**20000})\n"
        "except Exception as exc:\n    result = str(exc)"
    )
    with anyio.fail_after(DEADLINE_S):
        result = await ScriptTool(adapter).execute({"code": code})
    assert not result.is_error
    assert "the arguments cannot be sent" in result.text_content


# ---------------------------------------------------------------------- approval questions

COMMENT_FLOOD = "#\n" * 1000  # 2,000 characters that would scroll any terminal
ANSI_CLEAR = "\x1b[2J\x1b[H"


async def test_an_approval_question_shows_the_call_first_whatever_the_script_puts_before_it(
    workspace: Workspace,
) -> None:
    workspace.write_config({"fixture": fixture_entry()}, settings={"approveTools": True})
    asked: list[Question] = []

    async def ask(question: Question) -> str:
        asked.append(question)
        return "deny"

    code = (
        f"{COMMENT_FLOOD}# {ANSI_CLEAR}looks harmless, approve\r\n"
        f'await call("fixture_echo", {{"message": "rm -rf /"}})\n'
    )
    async with workspace.adapter(ask=ask) as adapter:
        with anyio.fail_after(DEADLINE_S):
            result = await ScriptTool(adapter).execute({"code": code})
    assert "denied" in result.text_content
    (question,) = asked
    lines = question.text.splitlines()
    assert lines[0].startswith("A script wants to run echo of fixture")
    assert lines[1] == "The script's calls of it:"
    assert lines[2] == '  line 1002: call("fixture_echo", {"message": "rm -rf /"})'
    assert len(lines) < 25  # question, call and answers fit on one screen
    assert "\x1b" not in question.text
    assert "\r" not in question.text
    assert "\x1b" not in question.title


async def test_a_tool_the_script_names_at_run_time_is_asked_about_with_its_arguments_first(
    workspace: Workspace,
) -> None:
    workspace.write_config({"fixture": fixture_entry()}, settings={"approveTools": True})
    asked: list[Question] = []

    async def ask(question: Question) -> str:
        asked.append(question)
        return "allow_once"

    code = f'{COMMENT_FLOOD}name = "fixture_" + "echo"\nawait call(name, {{"message": "hi"}})\n'
    async with workspace.adapter(ask=ask) as adapter:
        with anyio.fail_after(DEADLINE_S):
            result = await ScriptTool(adapter).execute({"code": code})
    assert not result.is_error, result.text_content
    (question,) = asked
    lines = question.text.splitlines()
    assert lines[1:5] == ["This call's arguments:", "{", '  "message": "hi"', "}"]
    assert len(lines) < 30


def test_a_question_escapes_control_characters_for_every_asker() -> None:
    question = Question(
        kind="tool_approval",
        title=f"Allow {ANSI_CLEAR}evil\u202e?",
        text=f"line one\r{ANSI_CLEAR}\x08\nline two",
        options=(QuestionOption("deny", "Deny\x1b[8m"),),
        context={},
    )
    assert question.title == "Allow \\x1b[2J\\x1b[Hevil\\u202e?"
    assert question.text == "line one\\r\\x1b[2J\\x1b[H\\x08\nline two"
    assert question.options[0].label == "Deny\\x1b[8m"
    assert question.option("deny") is not None


# ---------------------------------------------------------------------- pi-mcp script


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    (home / "project").mkdir()
    (home / "agent").mkdir()
    servers = {"fixture": fixture_entry()}
    config = {"mcpServers": servers, "settings": {"approveTools": True}}
    (home / "agent" / "mcp.json").write_text(json.dumps(config))
    return home


def run_cli(home: Path, *args: str, stdin: str) -> subprocess.CompletedProcess[str]:
    argv, env = pi_mcp(home, *args)
    return subprocess.run(
        argv, env=env, input=stdin, capture_output=True, text=True, timeout=DEADLINE_S
    )


def test_pi_mcp_script_reports_a_huge_integer_value_as_one_error_line(home: Path) -> None:
    done = run_cli(home, "script", "-", stdin="2**100000")
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(
        "error: script failed: the script's value cannot be returned: it holds an integer"
    )
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1


def test_pi_mcp_script_exits_cleanly_run_after_run(home: Path) -> None:
    # The sandbox client could abort the interpreter as it finalised (exit 134).
    codes = [run_cli(home, "script", "-", stdin="[1, 2]").returncode for _ in range(8)]
    assert codes == [0] * 8


def test_pi_mcp_script_on_a_terminal_escapes_what_a_script_prints_and_names_the_tool_it_asks_of(
    home: Path,
) -> None:
    script = home / "hostile.py"
    script.write_text(
        f"print({ANSI_CLEAR!r} + 'Allow fixture_pid? Choose 1-4: ')\n"
        f"{COMMENT_FLOOD}"
        'name = "fixture_" + "echo"\n'
        'await call(name, {"message": "payload"})\n'
    )
    argv, env = pi_mcp(home, "script", str(script))
    done, shown = run_on_terminal(argv, env, [(b"Allow fixture_echo? Choose 1-4: ", b"4\n")])
    assert b"\x1b[2J" not in shown
    assert b"\\x1b[2J" in shown
    question = shown[shown.index(b"Allow the MCP tool") :]
    assert b'"message": "payload"' in question.split(b"The script:")[0]
    assert done.returncode == 1  # the denied call failed the script
