"""The ``pi-mcp`` engine commands, run as real subprocesses against real servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
WORKBENCH = ROOT / "tests" / "surface" / "workbench_server.py"


def pi_mcp(home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    env.pop("MCP_DIRECT_TOOLS", None)
    proc = subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    (home / "project").mkdir()
    (home / "agent").mkdir()
    config: dict[str, Any] = {
        "mcpServers": {
            "workbench": {"command": sys.executable, "args": [str(WORKBENCH)]},
            "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
            "off": {"command": "nothing-here", "disabled": True},
        }
    }
    (home / "agent" / "mcp.json").write_text(json.dumps(config))
    return home


def test_tools_bootstraps_the_cache_then_status_reads_it(home: Path) -> None:
    listed = json.loads(pi_mcp(home, "tools", "--json").stdout)
    names = {t["name"] for t in listed}
    assert {"workbench_echo", "time_get_current_time", "workbench_read_readme"} <= names
    assert (home / "agent" / "mcp-cache.json").is_file()
    status = json.loads(pi_mcp(home, "status", "--json").stdout)
    rows = {row["name"]: row for row in status["servers"]}
    assert rows["workbench"]["status"] == "cached"
    assert rows["workbench"]["toolCount"] == 8
    assert rows["off"]["status"] == "disabled"


def test_search_prints_ranked_matches(home: Path) -> None:
    out = pi_mcp(home, "search", "convert time between timezones", "--limit", "2").stdout
    assert out.splitlines()[0].startswith("Found")
    assert "time_convert_time" in out
    data = json.loads(pi_mcp(home, "search", "echo", "--json").stdout)
    assert data["details"]["matches"][0]["name"] == "workbench_echo"


def test_search_takes_unquoted_words_like_the_quoted_form(home: Path) -> None:
    quoted = json.loads(pi_mcp(home, "search", "convert time between timezones", "--json").stdout)
    unquoted = pi_mcp(home, "search", "convert", "time", "between", "--limit", "3", "timezones")
    assert (
        unquoted.stdout
        == pi_mcp(home, "search", "convert time between timezones", "--limit", "3").stdout
    )
    words = json.loads(
        pi_mcp(home, "search", "convert", "time", "between", "timezones", "--json").stdout
    )
    assert words == quoted
    assert words["details"]["matches"][0]["name"] == "time_convert_time"


def test_describe_shows_parameters(home: Path) -> None:
    out = pi_mcp(home, "describe", "workbench_book_flight").stdout
    assert "destination" in out
    assert "required" in out
    missing = pi_mcp(home, "describe", "workbench_ecko", check=False)
    assert missing.returncode == 1
    assert "workbench_echo" in missing.stderr
    assert missing.stdout == ""


def test_describe_of_several_tools_or_a_server_prints_one_signature_line_per_tool(
    home: Path,
) -> None:
    one = pi_mcp(home, "describe", "workbench_add").stdout
    assert "Signature:\n  workbench_add(a: int, b: int) -> str" in one
    flagged = pi_mcp(home, "describe", "workbench_add", "--signatures").stdout
    assert flagged.strip() == "# workbench\nworkbench_add(a: int, b: int) -> str"
    several = pi_mcp(home, "describe", "workbench_echo", "time_get_current_time").stdout
    assert "# workbench\nworkbench_echo(message: str) -> str\n\n# time\n" in several
    server = pi_mcp(home, "describe", "workbench").stdout.splitlines()
    assert server[0] == "# workbench"
    assert "workbench_echo(message: str) -> str" in server
    assert len(server) > 5
    missing = pi_mcp(home, "describe", "nothing_here", "--signatures", check=False)
    assert missing.returncode == 1


def test_call_prints_the_result_and_fails_on_tool_errors(home: Path) -> None:
    assert pi_mcp(home, "call", "workbench_echo", '{"message": "cli"}').stdout == "Echo: cli\n"
    failed = pi_mcp(home, "call", "workbench_fail", '{"message": "nope"}', check=False)
    assert failed.returncode == 1
    assert "nope" in failed.stderr
    assert failed.stderr.count("nope") == 1
    bad = pi_mcp(home, "call", "workbench_echo", "[1]", check=False)
    assert bad.returncode == 2
    assert "expected a JSON object" in bad.stderr


def test_connect_and_reconnect_report_per_server(home: Path) -> None:
    out = pi_mcp(home, "connect", "time").stdout
    assert "Connected to time" in out
    results = json.loads(pi_mcp(home, "reconnect", "workbench", "--json").stdout)
    assert results == {"workbench": {"ok": True, "error": None}}


def test_tokens_compares_the_proxy_with_every_tool(home: Path) -> None:
    report = json.loads(pi_mcp(home, "tokens", "--json").stdout)
    assert report["toolCount"] == 10
    assert 0 < report["proxyTokens"] <= 250
    assert report["allToolsTokens"] > report["proxyTokens"]
    assert report["directTokens"] == 0
    # What the model reads on mcp({}): bounded, equal to the full status for a few servers.
    assert report["serverCount"] >= 1
    assert 0 < report["statusTokens"] == report["statusUnboundedTokens"]
    assert 0 < report["statusLineTokens"] < 20
    text = pi_mcp(home, "tokens").stdout
    assert f"mcp({{}}) status ({report['serverCount']} servers)" in text


def test_prompt_renders_a_servers_prompt(home: Path) -> None:
    out = pi_mcp(home, "prompt", "workbench_greet", '{"name": "Cli"}').stdout
    assert out == (
        "Prompt workbench_greet (server workbench):\nGreet someone by name.\n"
        "\n[user]\nPlease greet Cli in a plain style.\n\n[assistant]\nHello, Cli!\n"
    )
    data = json.loads(pi_mcp(home, "prompt", "greet", '{"name": "J"}', "--json").stdout)
    assert data["details"]["name"] == "workbench_greet"
    missing = pi_mcp(home, "prompt", "workbench_greet", check=False)
    assert missing.returncode == 1
    assert "needs argument(s): name" in missing.stderr


def test_status_without_any_server_says_how_to_add_one(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    shown = pi_mcp(tmp_path, "status").stdout
    assert "No MCP servers configured." in shown
    assert "`pi-mcp add NAME -- COMMAND [ARGS...]`" in shown
    assert "`pi-mcp init`" in shown
