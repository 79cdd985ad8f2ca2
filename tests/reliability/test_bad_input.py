"""Bad input everywhere: the ``mcp`` proxy tool, ToolSearch queries, regexes and CLI arguments.

Every case runs against an adapter whose catalog comes from the metadata cache (2,000 tools on
ten servers whose commands do not exist, so nothing can start and a call fails fast). Whatever
the input, the answer is a result or a clear error, quickly: never a traceback, never a hang.
Regular expressions that backtrack catastrophically are refused or cut off by the time budget.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.catalog._search_regex import REGEX_TIME_BUDGET_S
from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.engine import McpAdapter, ToolResult
from pi_mcp_adapter.hosts._export import ExportHost
from pi_mcp_adapter.surface import ProxyTool, register_surfaces
from pi_mcp_adapter.surface._namespace import call_in_namespace

SERVERS = 10
TOOLS_PER_SERVER = 200
ANSWER_BOUND_S = REGEX_TIME_BUDGET_S + 5.0
"""CPU seconds any answer may cost, a refused regex included: the regex budget plus slack (the
regex engine looks at its clock only every so many steps). CPU time, not wall time, so that a
loaded machine does not stretch it; a hang spins for minutes, or forever."""


def cpu_seconds() -> float:
    return time.process_time()


LONG_NAME = "a" * 100 + "!"
"""What backtracking patterns like ``(a|aa)+$`` explode on."""

CATASTROPHIC_REGEXES = [
    "(a+)+$",
    "((a+))+$",
    "(a|a)+$",
    "(a|aa)+$",
    "(?:a|a)*$",
    "((a|b)+)+$",
    "(a|a?)+$",
    "(.*a){25}$",
    "(\\w+\\s?)+$",
    "a*a*a*a*a*a*a*a*a*a*a*a*$",
    ".*.*.*.*.*.*.*.*=",
    "(x+x+)+y",
    "^(a+)\\1*$",
]


def write_agent_dir(agent_dir: Path) -> None:
    """A config of servers that cannot start, and a cache that knows their tools."""
    servers = {
        f"srv{i}": {"command": f"pi-mcp-no-such-command-{i}", "args": ["--serve"]}
        for i in range(SERVERS)
    }
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    config = load_config(agent_dir=agent_dir, project_dir=agent_dir, home=agent_dir, environ={})
    cache = MetadataCache(agent_dir / "mcp-cache.json")
    for server, entry in config.servers.items():
        tools = [
            {
                "name": LONG_NAME if i == 0 else f"tool_{i}_read_records",
                "description": ("a" * 3000 + "!") if i == 1 else f"Reads records of kind {i}.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"query": {"type": "string"}, "count": {"type": "integer"}},
                    "required": ["query"],
                },
            }
            for i in range(TOOLS_PER_SERVER)
        ]
        cache.store(server, entry, ServerMetadata(tools=tuple(tools)))


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bad-input") / "agent"
    write_agent_dir(path)
    return path


@pytest.fixture
async def adapter(agent_dir: Path) -> AsyncIterator[McpAdapter]:
    async with McpAdapter(
        agent_dir=agent_dir, project_dir=agent_dir, connect_missing=False, environ={}
    ) as adapter:
        assert len(adapter.tools()) == SERVERS * TOOLS_PER_SERVER
        yield adapter


def assert_clean(result: ToolResult) -> None:
    assert isinstance(result, ToolResult)
    text = "".join(getattr(part, "text", "") for part in result.content)
    assert "Traceback" not in text
    json.dumps(dict(result.details), default=str)


# ---------------------------------------------------------------------------- regexes


@pytest.mark.timeout(120, method="thread")  # a hang inside the regex engine ends the run loudly
@pytest.mark.parametrize("pattern", CATASTROPHIC_REGEXES)
async def test_a_catastrophic_regex_is_refused_or_cut_off_never_a_hang(
    adapter: McpAdapter, pattern: str
) -> None:
    started = cpu_seconds()
    result = await ProxyTool(adapter).execute({"search": pattern, "regex": True})
    elapsed = cpu_seconds() - started

    assert elapsed < ANSWER_BOUND_S
    assert_clean(result)
    if result.is_error:
        text = result.content[0].text  # type: ignore[union-attr]
        assert pattern in text or repr(pattern) in text
        assert "regular expression" in text


# ---------------------------------------------------------------------------- mcp proxy

_text = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="a()|+*?{}[]\\.^$!,:-_ ", max_size=40),
    st.sampled_from(["srv0", "srv3_tool_5_read_records", LONG_NAME, "select:", "", " "]),
    st.builds(lambda n: "x" * n, st.integers(1000, 20_000)),
)
_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    _text,
)
_json = st.recursive(
    _scalar,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
_keys = st.sampled_from(
    [
        "tool",
        "args",
        "connect",
        "describe",
        "instructions",
        "search",
        "regex",
        "server",
        "servers",
        "includeSchemas",
        "limit",
        "offset",
        "unknown",
    ]
)


@pytest.mark.timeout(300, method="thread")
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=st.dictionaries(_keys, _json, max_size=5) | _json)
async def test_any_mcp_parameters_get_a_result_or_a_clear_error_quickly(
    adapter: McpAdapter, params: Any
) -> None:
    started = cpu_seconds()
    result = await ProxyTool(adapter).execute(params)
    assert cpu_seconds() - started < ANSWER_BOUND_S
    assert_clean(result)


_namespace_keys = st.sampled_from(["tool", "args", "unknown"])


@pytest.mark.timeout(300, method="thread")
@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(params=st.dictionaries(_namespace_keys, _json, max_size=3) | _json)
async def test_any_namespace_tool_parameters_get_a_result_or_a_clear_error_quickly(
    adapter: McpAdapter, params: Any
) -> None:
    started = cpu_seconds()
    result = await call_in_namespace(adapter, "srv0", params)
    assert cpu_seconds() - started < ANSWER_BOUND_S
    assert_clean(result)


# ---------------------------------------------------------------------------- ToolSearch


@pytest.fixture
async def toolsearch(adapter: McpAdapter) -> Any:
    surfaces = register_surfaces(adapter, ExportHost(), surface="toolsearch")
    assert surfaces.toolsearch is not None
    return surfaces.toolsearch


_queries = st.one_of(
    _text,
    st.builds(lambda names: "select:" + ",".join(names), st.lists(_text, max_size=30)),
    st.builds(lambda words: " ".join(words), st.lists(_text, max_size=20)),
)


@pytest.mark.timeout(300, method="thread")
@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(query=_queries | _json)
async def test_any_toolsearch_query_gets_a_result_or_a_clear_error_quickly(
    toolsearch: Any, query: Any
) -> None:
    started = cpu_seconds()
    result = await toolsearch.execute({"query": query})
    assert cpu_seconds() - started < ANSWER_BOUND_S
    assert_clean(result)


# ---------------------------------------------------------------------------- CLI


COMMAND_OPTIONS: dict[str, list[str]] = {
    "status": ["--json"],
    "tools": ["--json", "srv0", "nope"],
    "search": ["--json", "--server", "--regex", "--limit", "--offset", "--no-schemas"],
    "describe": ["--json", "srv1_tool_3_read_records"],
    "call": ["--json", "srv2_tool_4_read_records", '{"query": "x"}', "{", "[1]"],
    "config": ["--json"],
    "tokens": ["--json"],
    "eval-search": ["--set", "--rankings"],
    "connect": ["srv4", "nope"],
}
"""Commands that do not wait on a person or run forever (``serve``, ``auth``, ``demo``, ``init``
are exercised elsewhere), with the options and arguments they know."""


@pytest.fixture(scope="module")
def cli_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("cli-home")
    write_agent_dir(home / "agent")
    (home / "project").mkdir()
    return home


_argument = st.one_of(
    _text.filter(lambda s: "\x00" not in s),
    st.integers(-5, 10**12).map(str),
    st.sampled_from(["-1", "0", "1e9", "nan", "--", "-", "--json", "--help", "{}", "null"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_cli_arguments_end_with_an_exit_status_never_a_traceback(
    cli_home: Path, data: st.DataObject
) -> None:
    from pi_mcp_adapter.cli import app

    command = data.draw(st.sampled_from(sorted(COMMAND_OPTIONS)))
    known = st.sampled_from(COMMAND_OPTIONS[command])
    arguments = data.draw(st.lists(known | _argument, max_size=6))
    started = cpu_seconds()
    result = CliRunner().invoke(
        app,
        [
            "--agent-dir",
            str(cli_home / "agent"),
            "--project",
            str(cli_home / "project"),
            command,
            *arguments,
        ],
        env={"HOME": str(cli_home)},
    )
    assert cpu_seconds() - started < 20
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        command,
        arguments,
        result.exception,
    )
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 1, 2), (command, arguments, result.output)
