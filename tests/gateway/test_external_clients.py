"""The gateway against clients no one here wrote: the MCP Inspector CLI and the official MCP
conformance suite (both from npm, run with Node 22 from ``tests/npm``)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from .conftest import (
    CONFORMANCE_FIXTURE,
    NODE22,
    NPM_BIN,
    PI_MCP,
    GatewayWorkspace,
    conformance_entry,
    fixture_entry,
    run_http_gateway,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.npm,
    pytest.mark.skipif(not NODE22.exists(), reason="npm test packages not installed (make npm)"),
]

INSPECTOR = NPM_BIN / "mcp-inspector"
CONFORMANCE = NPM_BIN / "conformance"

BASELINE_SCENARIOS = {
    "server-initialize",
    "ping",
    "logging-set-level",
    "tools-list",
    "resources-list",
    "prompts-list",
    "dns-rebinding-protection",
}
"""What any server must pass; the gateway passes them with its default proxy surface."""

TRANSPARENCY_SCENARIOS = {
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-with-logging",
    "tools-call-error",
    "tools-call-with-progress",
    "tools-call-sampling",
    "tools-call-elicitation",
    "json-schema-2020-12",
    "elicitation-sep1034-defaults",
    "elicitation-sep1330-enums",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "completion-complete",
    "resources-subscribe",
    "resources-unsubscribe",
}
"""The tool, resource (subscriptions included), prompt and completion scenarios the fixture
upstream implements."""

_RESULT_LINE = re.compile(r"^[✓✗] (?P<name>[\w-]+): (?P<passed>\d+) passed, (?P<failed>\d+) failed")


def run_conformance(url: str, output_dir: Path) -> dict[str, bool]:
    """Every server scenario (pending ones included) against ``url``: ``{scenario: passed}``."""
    completed = subprocess.run(
        [
            str(NODE22),
            str(CONFORMANCE),
            "server",
            "--url",
            url,
            "--suite",
            "all",
            "-o",
            str(output_dir),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    results = {}
    for line in completed.stdout.splitlines():
        match = _RESULT_LINE.match(line.strip())
        if match:
            results[match["name"]] = int(match["failed"]) == 0 and int(match["passed"]) > 0
    assert results, completed.stdout + completed.stderr
    return results


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def fixture_over_http() -> Iterator[str]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(CONFORMANCE_FIXTURE), "--http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        # The fixture announces itself on stderr; reading blocks until then (no polling).
        assert process.stderr is not None
        for raw in process.stderr:
            if raw.startswith(b"LISTENING"):
                break
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_conformance_baseline_through_the_default_proxy_surface(
    gw_workspace: GatewayWorkspace, tmp_path: Path
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager")})
    with run_http_gateway(gw_workspace) as gateway:
        results = run_conformance(gateway.url, tmp_path / "baseline")
    failed = sorted(s for s in BASELINE_SCENARIOS if not results.get(s))
    assert not failed, results


def test_conformance_scenarios_pass_through_the_gateway_as_they_do_directly(
    gw_workspace: GatewayWorkspace, tmp_path: Path
) -> None:
    with fixture_over_http() as url:
        direct = run_conformance(url, tmp_path / "direct")
    missing = sorted(s for s in TRANSPARENCY_SCENARIOS if not direct.get(s))
    assert not missing, f"the fixture itself fails {missing}"

    gw_workspace.write_config(
        {"conf": conformance_entry(lifecycle="eager", directTools=True, toolPrefix="none")}
    )
    with run_http_gateway(gw_workspace) as gateway:
        through = run_conformance(gateway.url, tmp_path / "gateway")
    assert {s for s, ok in through.items() if ok} >= {s for s, ok in direct.items() if ok}


def _inspector(*args: str) -> dict[str, object]:
    completed = subprocess.run(
        [str(NODE22), str(INSPECTOR), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    parsed: dict[str, object] = json.loads(completed.stdout)
    return parsed


def _echo_args() -> list[str]:
    return [
        "--method",
        "tools/call",
        "--tool-name",
        "mcp",
        "--tool-arg",
        "tool=fixture_echo",
        'args={"message": "from the inspector"}',
    ]


def _assert_listed_and_called(listed: dict[str, object], called: dict[str, object]) -> None:
    tools = listed["tools"]
    assert isinstance(tools, list)
    assert [t["name"] for t in tools] == ["mcp", "mcp_script"]
    assert called["content"] == [{"type": "text", "text": "Echo: from the inspector"}]
    assert called.get("isError") is False


def test_inspector_lists_and_calls_through_stdio(gw_workspace: GatewayWorkspace) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager")})
    command = ["--", str(PI_MCP), *gw_workspace.serve_args()]
    listed = _inspector("--method", "tools/list", *command)
    called = _inspector(*_echo_args(), *command)
    _assert_listed_and_called(listed, called)


def test_inspector_lists_and_calls_over_http(gw_workspace: GatewayWorkspace) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager")})
    with run_http_gateway(gw_workspace) as gateway:
        target = [gateway.url, "--transport", "http"]
        listed = _inspector(*target, "--method", "tools/list")
        called = _inspector(*target, *_echo_args())
    _assert_listed_and_called(listed, called)


@pytest.mark.parametrize(
    ("entry", "call"),
    [
        pytest.param({}, _echo_args(), id="proxy"),
        pytest.param(
            {"directTools": True},
            [
                "--method",
                "tools/call",
                "--tool-name",
                "fixture_echo",
                "--tool-arg",
                "message=from the inspector",
            ],
            id="direct-tool",
        ),
    ],
)
def test_inspector_immediate_call_on_a_cold_gateway_with_the_default_agent_dir(
    tmp_path: Path, entry: dict[str, object], call: list[str]
) -> None:
    """What a client meets the first time it starts the gateway: no metadata cache, a lazy
    server never listed, the agent dir found from HOME (the Inspector passes few variables),
    and a call as the very first request, through the proxy or to a direct tool (the
    Inspector lists the tools first and refuses a name it does not find there)."""
    home = tmp_path / "home"
    agent_dir = home / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    config = {"mcpServers": {"fixture": fixture_entry(**entry)}}
    (agent_dir / "mcp.json").write_text(json.dumps(config))
    project = tmp_path / "project"
    project.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PI_CODING_AGENT_DIR", "PI_MCP_CONFIG")}
    completed = subprocess.run(
        [str(NODE22), str(INSPECTOR), "--cli", *call, "--", str(PI_MCP), "serve"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "HOME": str(home)},
        cwd=project,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    called = json.loads(completed.stdout)
    assert called["content"] == [{"type": "text", "text": "Echo: from the inspector"}]
    assert called.get("isError") is False
    assert (agent_dir / "mcp-cache.json").exists()  # the default agent dir was the one used
