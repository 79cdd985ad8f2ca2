"""The official conformance suite's client scenarios with ``pi-mcp`` as the client (Node 22
from tests/npm): the general ones through the command line, and SEP-1034 elicitation defaults
with ``pi-mcp call`` at a terminal and with the Python API. The OAuth scenarios are in
``tests/oauth/test_conformance.py``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
NPM_BIN = TESTS / "npm" / "node_modules" / ".bin"
NODE22 = NPM_BIN / "node"
CONFORMANCE = NPM_BIN / "conformance"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.npm,
    pytest.mark.skipif(not NODE22.exists(), reason="npm test packages not installed (make npm)"),
    pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX"),
]

SCENARIO = "elicitation-sep1034-client-defaults"
TOOL = "test_client_elicitation_defaults"
"""The one tool the scenario's server offers; it elicits a form whose fields all have defaults."""


def run_client_scenario(command: str, scenario: str) -> str:
    """The suite's report of ``scenario`` with ``command`` as its client."""
    completed = subprocess.run(
        [str(NODE22), str(CONFORMANCE), "client", "--command", command, "--scenario", scenario],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return completed.stdout + completed.stderr


@pytest.mark.parametrize(
    "client",
    [
        pytest.param(TESTS / "cli" / "terminal.py", id="pi-mcp-call-at-a-terminal"),
        pytest.param(TESTS / "engine" / "conformance_client.py", id="python-api-elicit"),
    ],
)
def test_the_sep1034_defaults_scenario_passes(client: Path) -> None:
    output = run_client_scenario(f"{sys.executable} {client} {TOOL}", SCENARIO)
    assert "OVERALL: PASSED" in output, output[-3000:]
    assert "Passed: 5/5" in output, output[-3000:]


@pytest.mark.parametrize("scenario", ["initialize", "tools_call", "sse-retry"])
def test_the_general_client_scenarios_pass_through_the_command_line(scenario: str) -> None:
    client = TESTS / "cli" / "conformance_cli_client.py"
    output = run_client_scenario(f"{sys.executable} {client}", scenario)
    assert "OVERALL: PASSED" in output, output[-3000:]
    assert " 0 failed, 0 warnings" in output, output[-3000:]
