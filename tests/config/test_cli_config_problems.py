"""Configuration problems as ``pi-mcp`` reports them: a missing ``--config`` file, misspelled
keys, an empty server name, a missing working directory or socket; each reported once, by
every command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "mcp_fixture.py"
PI_MCP = Path(sys.executable).parent / "pi-mcp"

pytestmark = [pytest.mark.slow]


def _pi_mcp(root: Path, config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (root / "project").mkdir(exist_ok=True)
    return subprocess.run(
        [
            str(PI_MCP),
            "--config",
            str(config),
            "--agent-dir",
            str(root / "agent"),
            "--project",
            str(root / "project"),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "HOME": str(root), "PI_MCP_WARM": "0"},
    )


@pytest.mark.parametrize("command", [["status"], ["search", "echo"], ["config"], ["tools"]])
def test_a_missing_config_file_is_one_line_and_exit_2(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "nonexistent.json"
    completed = _pi_mcp(tmp_path, missing, *command)
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        f"error: config file not found: {missing} (given with --config)"
    ]
    assert completed.stdout == ""


def test_init_may_name_a_config_file_it_is_about_to_create(tmp_path: Path) -> None:
    completed = _pi_mcp(tmp_path, tmp_path / "new.json", "init", "--help")
    assert completed.returncode == 0, completed.stderr


MISSPELLED = """{
  "settngs": {"toolPrefix": "server"},
  "mcpServers": {
    "fx": {
      "command": "PYTHON",
      "args": ["FIXTURE"],
      "lifecyle": "lazy"
    },
    "typo": {"comand": "mcp-server-time"},
    "": {"command": "echo"}
  }
}
""".replace("PYTHON", sys.executable).replace("FIXTURE", str(FIXTURE))
"""Written by hand, not with json.dumps, so that each key's line number is known."""

EXPECTED_WARNINGS = [
    "{path}:2: unknown top-level key 'settngs' is ignored; did you mean 'settings'?",
    "{path}:7: server 'fx': unknown key 'lifecyle' is kept but not used; did you mean 'lifecycle'?",
    "{path}:9: server 'typo': unknown key 'comand' is kept but not used; did you mean 'command'?",
]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["status"], id="status"),
        pytest.param(["status", "--json"], id="status-json"),
        pytest.param(["search", "echo"], id="search"),
        pytest.param(["tools"], id="tools"),
        pytest.param(["describe", "fx_echo"], id="describe"),
        pytest.param(["call", "fx_echo", '{"message": "hi"}'], id="call"),
        pytest.param(["config"], id="config"),
    ],
)
def test_every_command_warns_once_about_each_misspelled_key_and_the_empty_name(
    tmp_path: Path, command: list[str]
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(MISSPELLED)
    completed = _pi_mcp(tmp_path, config, *command)
    for expected in EXPECTED_WARNINGS:
        line = "warning: " + expected.format(path=config)
        assert completed.stderr.splitlines().count(line) == 1, completed.stderr
    empty_name = f"{config}:10: a server name must not be empty"
    assert completed.stderr.count(empty_name) == 1, completed.stderr
    if "--json" not in command:  # a JSON document carries the errors as data as well
        assert empty_name not in completed.stdout
    if command[0] != "config":
        assert completed.returncode == 0, completed.stderr


def test_the_empty_server_name_is_rejected_and_the_others_still_load(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"": {"command": "echo"}, "ok": {"url": "x"}}}))
    completed = _pi_mcp(tmp_path, config, "config", "--json")
    report = json.loads(completed.stdout)
    assert "" not in report["servers"]
    assert "" not in report["invalidServers"]
    assert [e["message"] for e in report["errors"] if "server name" in e["message"]]
    assert completed.returncode == 1


def test_a_missing_working_directory_is_named_as_such(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    missing = tmp_path / "no-such-dir"
    entry = {"command": sys.executable, "args": [str(FIXTURE)], "cwd": str(missing)}
    config.write_text(json.dumps({"mcpServers": {"fx": entry}}))
    completed = _pi_mcp(tmp_path, config, "connect", "fx")
    assert completed.returncode == 1
    assert completed.stderr.splitlines() == [
        f"error: server 'fx': working directory '{missing}' does not exist; check `cwd`"
    ]


def test_a_missing_socket_is_named_as_such(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    missing = tmp_path / "no-such.sock"
    config.write_text(json.dumps({"mcpServers": {"mux": {"socket": str(missing)}}}))
    completed = _pi_mcp(tmp_path, config, "connect", "mux")
    assert completed.returncode == 1
    [line] = completed.stderr.splitlines()
    assert line.startswith(f"error: server 'mux': socket '{missing}' does not exist")
    assert "command" not in line
