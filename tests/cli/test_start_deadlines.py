"""A one-shot command that stops waiting for a slow server says it is still starting, and
leaves nothing behind that other processes would obey."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
MCP_FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"


def pi_mcp(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    env["PI_MCP_WARM"] = "0"
    return subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_cold_tools_command_reports_a_slow_server_as_still_starting_not_failed(
    tmp_path: Path,
) -> None:
    (tmp_path / "project").mkdir()
    agent = tmp_path / "agent"
    agent.mkdir()
    slow = {
        "command": sys.executable,
        "args": [str(MCP_FIXTURE), "--start-delay", "14"],
        "startupTimeoutMs": 60_000,
    }
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"slow": slow}}))

    listed = pi_mcp(tmp_path, "tools", "--json")

    assert "still starting" in listed.stderr
    assert "pi-mcp connect slow" in listed.stderr
    assert "could not list" not in listed.stderr
    failures = agent / "mcp-failures.json"
    recorded = json.loads(failures.read_text())["servers"] if failures.exists() else {}
    assert "slow" not in recorded
    status = json.loads(pi_mcp(tmp_path, "status", "--json").stdout)
    rows = {row["name"]: row for row in status["servers"]}
    assert rows["slow"]["status"] != "failed"


def test_a_cold_call_waits_for_its_servers_whole_start_up_time(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    agent = tmp_path / "agent"
    agent.mkdir()
    slow = {
        "command": sys.executable,
        "args": [str(MCP_FIXTURE), "--start-delay", "12"],
        "startupTimeoutMs": 60_000,
    }
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"slow": slow}}))

    called = pi_mcp(tmp_path, "call", "slow_echo", '{"message": "late"}')

    assert called.returncode == 0, called.stderr
    assert called.stdout == "Echo: late\n"
