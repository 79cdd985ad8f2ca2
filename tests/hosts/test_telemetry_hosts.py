"""The Python bindings in an application with OpenTelemetry of its own: a pydantic-ai agent run
(its instrumentation on) and an openai-agents run inside the application's span, each with a
scripted model, hold the MCP call's span in their trace and its duration in their metrics.

Each runs as a process of its own (``telemetry_app.py``): an application installs its global
providers once, before the adapter starts, and so does the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import Workspace

pytestmark = [pytest.mark.slow]

APP = Path(__file__).resolve().parent / "telemetry_app.py"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_fixture.py"


def run_app(workspace: Workspace, host: str) -> dict[str, Any]:
    workspace.write_config({"fx": {"command": sys.executable, "args": [str(FIXTURE)]}})
    done = subprocess.run(
        [sys.executable, str(APP), host, str(workspace.agent_dir), str(workspace.project_dir)],
        env={k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    assert result["output"] == "done"
    return result


def one(spans: list[dict[str, Any]], name: str, scope: str) -> dict[str, Any]:
    (found,) = [s for s in spans if s["name"] == name and s["scope"] == scope]
    return found


def ancestors(spans: list[dict[str, Any]], span: dict[str, Any]) -> list[str]:
    by_id = {s["span_id"]: s for s in spans}
    names = []
    while span["parent_id"] in by_id:
        span = by_id[span["parent_id"]]
        names.append(span["name"])
    return names


def assert_the_call_is_measured_in_the_applications_metrics(result: dict[str, Any]) -> None:
    points = result["metrics"].get("mcp.client.operation.duration", [])
    assert {
        "mcp.method.name": "tools/call",
        "pi_mcp.server": "fx",
        "gen_ai.tool.name": "echo",
        "pi_mcp.outcome": "ok",
    } in points, result["metrics"]


def assert_one_span_of_ours_for_the_call(spans: list[dict[str, Any]]) -> dict[str, Any]:
    call = one(spans, "tools/call echo", "pi-mcp-adapter")
    assert call["attributes"]["pi_mcp.server"] == "fx"
    assert call["attributes"]["mcp.method.name"] == "tools/call"
    ours = [s for s in spans if s["scope"] == "pi-mcp-adapter"]
    assert "private words" not in json.dumps(ours)
    # On the application's provider the MCP SDK's own send span stays, as a child of ours.
    sends = [s for s in spans if s["name"] == "MCP send tools/call echo"]
    assert all(s["parent_id"] == call["span_id"] for s in sends)
    return call


def test_a_pydantic_ai_run_holds_the_mcp_call_span_and_the_apps_metrics_hold_its_duration(
    workspace: Workspace,
) -> None:
    result = run_app(workspace, "pydantic-ai")
    spans = result["spans"]
    call = assert_one_span_of_ours_for_the_call(spans)
    run = one(spans, "invoke_agent assistant", "pydantic-ai")
    tool = one(spans, "execute_tool mcp", "pydantic-ai")
    assert ancestors(spans, call)[:2] == [tool["name"], run["name"]]
    assert call["trace_id"] == run["trace_id"]
    assert_the_call_is_measured_in_the_applications_metrics(result)


def test_an_openai_agents_run_inside_the_apps_span_holds_the_mcp_call_span_and_metrics(
    workspace: Workspace,
) -> None:
    result = run_app(workspace, "openai-agents")
    spans = result["spans"]
    call = assert_one_span_of_ours_for_the_call(spans)
    request = one(spans, "handle request", "the-application")
    assert call["parent_id"] == request["span_id"]
    assert call["trace_id"] == request["trace_id"]
    assert_the_call_is_measured_in_the_applications_metrics(result)
