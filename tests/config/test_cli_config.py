from __future__ import annotations

import json
from pathlib import Path

from click.testing import Result
from typer.testing import CliRunner

from pi_mcp_adapter.cli import app

from .conftest import CANARY, Machine

EXAMPLE = Path(__file__).parents[2] / "examples" / "mcp.json"


def _invoke(machine: Machine, *args: str, environ: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(
        app,
        ["--agent-dir", str(machine.agent_dir), "--project", str(machine.project), *args],
        env={"HOME": str(machine.home), **(environ or {})},
    )


def test_the_bundled_example_loads_with_provenance_and_masked_secrets(machine: Machine) -> None:
    result = _invoke(
        machine, "--config", str(EXAMPLE), "config", "--json", environ={"GITHUB_TOKEN": CANARY}
    )
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert set(report["servers"]) == {"time", "memory", "github", "filesystem"}
    assert report["errors"] == []
    assert report["invalidServers"] == {}
    github = report["servers"]["github"]
    assert github["transport"] == "http"
    assert github["config"]["headers"] == {"Authorization": "Bearer ${GITHUB_TOKEN}"}
    assert github["source"] == {"name": "config", "path": str(EXAMPLE), "line": 25}
    assert github["layers"][0]["fields"] == ["url", "headers", "lifecycle", "includeTools"]
    assert report["servers"]["filesystem"]["enabled"] is False
    assert report["servers"]["time"]["config"]["args"][:2] == ["-m", "mcp_server_time"]
    assert CANARY not in result.stdout


def test_the_text_report_shows_each_layer_and_sends_problems_to_stderr(machine: Machine) -> None:
    machine.write_layer(
        "agent", {"mcpServers": {"s": {"command": "x", "args": ["a"]}}, "imports": ["cursor"]}
    )
    machine.write_layer(
        "project-pi",
        {"mcpServers": {"s": {"lifecycle": "eager"}, "bad": {"url": "https://${NOPE_VAR}/"}}},
    )
    machine.write_layer("project", {"mcpServers": {"t": {"command": "y", "surprise": 1}}})
    result = _invoke(machine, "config")
    assert result.exit_code == 1
    out = result.stdout
    # project-pi overrides a field of the agent's server, so the merged entry is untrusted.
    assert "  s (stdio, untrusted)" in out
    assert f"      from agent {machine.layer_path('agent')}:3: command, args" in out
    assert f"      from project-pi {machine.layer_path('project-pi')}:3: lifecycle" in out
    assert "Servers that cannot be used (1):" in out
    assert "  bad: " in out
    assert "NOPE_VAR" in out
    assert "Imports: cursor" in out
    assert f"  loaded    agent                 {machine.layer_path('agent')} (1 servers)" in out
    assert "warning: " in result.stderr
    assert "unknown key 'surprise'" in result.stderr
    assert "warning:" not in out


def test_the_exclusive_flag_reads_only_the_config_file(machine: Machine) -> None:
    machine.write_layer("project-pi", {"mcpServers": {"project": {"command": "p"}}})
    only = machine.write(machine.root / "only.json", {"mcpServers": {"only": {"command": "o"}}})
    shared = _invoke(machine, "--config", str(only), "config", "--json")
    alone = _invoke(machine, "--config", str(only), "--exclusive", "config", "--json")
    assert set(json.loads(shared.stdout)["servers"]) == {"only", "project"}
    assert set(json.loads(alone.stdout)["servers"]) == {"only"}
