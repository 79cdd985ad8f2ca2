"""``pi-mcp export`` and ``pi-mcp prompts``, run as real subprocesses against server-everything."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING_JS = (
    ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
CANARY = "canary-export-5d1e"
"""A secret in the server's env: no exported definition may carry it."""

pytestmark = [
    pytest.mark.slow,
    pytest.mark.npm,
    pytest.mark.skipif(
        not EVERYTHING_JS.exists() or shutil.which("node") is None,
        reason="npm test servers are not installed (make npm)",
    ),
]


def pi_mcp(home: Path, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    env.pop("MCP_DIRECT_TOOLS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == code, proc.stderr
    return proc


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    (home / "project").mkdir()
    (home / "agent").mkdir()
    config: dict[str, Any] = {
        "mcpServers": {
            "everything": {
                "command": "node",
                "args": [str(EVERYTHING_JS), "stdio"],
                "env": {"EVERYTHING_TOKEN": CANARY},
                "directTools": ["echo"],
            }
        }
    }
    (home / "agent" / "mcp.json").write_text(json.dumps(config))
    return home


def _names(tools: list[dict[str, Any]], format: str) -> list[str]:
    if format == "openai-chat":
        return [t["function"]["name"] for t in tools]
    return [t["name"] for t in tools]


@pytest.mark.parametrize(
    ("format", "schema_key"),
    [
        pytest.param("openai-chat", "parameters", id="openai-chat"),
        pytest.param("openai-responses", "parameters", id="openai-responses"),
        pytest.param("anthropic", "input_schema", id="anthropic"),
        pytest.param("mcp", "inputSchema", id="mcp"),
    ],
)
def test_export_prints_the_proxy_and_direct_tools_as_json(
    home: Path, format: str, schema_key: str
) -> None:
    out = pi_mcp(home, "export", "--format", format).stdout
    assert CANARY not in out
    tools = json.loads(out)
    assert _names(tools, format) == ["mcp", "mcp_script", "everything_echo"]
    first = tools[0]["function"] if format == "openai-chat" else tools[0]
    assert first[schema_key]["type"] == "object"
    assert "tool" in first[schema_key]["properties"]
    # --json is accepted and changes nothing: the output is JSON either way.
    assert json.loads(pi_mcp(home, "export", "--format", format, "--json").stdout) == tools


def test_export_toolsearch_surface_offers_toolsearch(home: Path) -> None:
    tools = json.loads(pi_mcp(home, "export", "--surface", "toolsearch").stdout)
    assert _names(tools, "openai-chat") == ["ToolSearch", "mcp_script", "everything_echo"]


def test_export_defer_hands_the_catalog_to_the_providers_search(home: Path) -> None:
    tools = json.loads(pi_mcp(home, "export", "--format", "anthropic", "--defer").stdout)
    assert tools[0]["name"] == "tool_search_tool_bm25"
    names = [t["name"] for t in tools]
    assert "ToolSearch" not in names
    deferred = [t["name"] for t in tools if t.get("defer_loading")]
    assert "everything_get-sum" in deferred
    assert "everything_echo" not in deferred  # a direct tool stays loaded


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--format", "gemini"), "unknown --format 'gemini'", id="unknown-format"),
        pytest.param(("--defer",), "--defer needs a format", id="defer-openai-chat"),
        pytest.param(
            ("--format", "anthropic", "--surface", "proxy", "--defer"),
            "use --surface toolsearch",
            id="defer-proxy",
        ),
    ],
)
def test_export_usage_errors_exit_2(home: Path, args: tuple[str, ...], message: str) -> None:
    proc = pi_mcp(home, "export", *args, code=2)
    assert message in proc.stderr
    assert proc.stdout == ""


def test_prompts_lists_names_descriptions_and_required_arguments(home: Path) -> None:
    out = pi_mcp(home, "prompts").stdout
    assert "everything_args-prompt  (everything)  A prompt with two arguments" in out
    assert "    city*  Name of the city" in out
    assert "    state" in out
    listed = json.loads(pi_mcp(home, "prompts", "everything", "--json").stdout)
    args_prompt = next(p for p in listed if p["originalName"] == "args-prompt")
    assert args_prompt["name"] == "everything_args-prompt"
    assert {"name": "city", "description": "Name of the city", "required": True} in args_prompt[
        "arguments"
    ]


def test_prompts_of_an_unknown_server_is_a_usage_error(home: Path) -> None:
    proc = pi_mcp(home, "prompts", "nope", code=2)
    assert "unknown server 'nope'" in proc.stderr


def test_an_unknown_prompt_points_to_pi_mcp_prompts(home: Path) -> None:
    proc = pi_mcp(home, "prompt", "nope", code=1)
    assert "`pi-mcp prompts`" in proc.stderr
    assert "pi-mcp tools" not in proc.stderr
    assert "mcp({" not in proc.stderr


def test_a_missing_argument_shows_the_cli_usage(home: Path) -> None:
    proc = pi_mcp(home, "prompt", "everything_args-prompt", code=1)
    assert "needs argument(s): city" in proc.stderr
    assert """Usage: pi-mcp prompt everything_args-prompt '{"city": "..."}'""" in proc.stderr
    rendered = pi_mcp(home, "prompt", "everything_args-prompt", '{"city": "Lyon"}').stdout
    assert "Lyon" in rendered
