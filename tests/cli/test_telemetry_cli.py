"""Telemetry from the CLI, run as real processes: ``pi-mcp call`` and ``pi-mcp serve`` export
their spans over OTLP/HTTP into a loopback receiver when the standard ``OTEL_*`` variables say
so, one CLIENT span per upstream call (the MCP SDK's own ``MCP send`` span gives way to it),
and ``serve`` refuses an MCP path where it serves its metrics or status page."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from gateway._telemetry_support import (
    OtlpReceiver,
    ReceivedSpan,
    running_grpc_otlp_receiver,
    running_otlp_receiver,
    traceparent_entry,
)
from gateway.conftest import PI_MCP, GatewayWorkspace, run_http_gateway

pytestmark = [pytest.mark.slow]


PI_MCP_MODULE = (sys.executable, "-m", "pi_mcp_adapter")


@pytest.fixture
def gw_workspace(tmp_path: Path) -> GatewayWorkspace:
    return GatewayWorkspace(tmp_path)


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    with running_otlp_receiver() as receiver:
        yield receiver


def otel_environment(receiver: OtlpReceiver) -> dict[str, str]:
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "600000",
    }


def named(spans: list[ReceivedSpan], name: str) -> list[ReceivedSpan]:
    return [s for s in spans if s.name == name]


def run_call(home: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``pi-mcp call tp_traceparent`` in an agent dir of its own under ``home``."""
    (home / "agent").mkdir()
    (home / "project").mkdir()
    config = {"mcpServers": {"tp": traceparent_entry()}}
    (home / "agent" / "mcp.json").write_text(json.dumps(config))
    environment = {
        **os.environ,
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(home / "agent"),
        **env,
    }
    arguments = json.dumps({"note": "private words"})
    done = subprocess.run(
        [*PI_MCP_MODULE, "--project", str(home / "project"), "call", "tp_traceparent", arguments],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done


def assert_one_call_span_whose_context_the_server_received(
    spans: list[ReceivedSpan], stdout: str
) -> None:
    (call,) = named(spans, "tools/call traceparent")
    assert call.scope == "pi-mcp-adapter"
    assert call.attributes["pi_mcp.server"] == "tp"
    assert call.attributes["mcp.method.name"] == "tools/call"
    assert "private words" not in json.dumps(call.attributes)
    # One CLIENT span for the call: the SDK's own send span gave way to ours...
    assert named(spans, "MCP send tools/call traceparent") == []
    # ...and the server received our span's context.
    _version, trace_id, parent_id, _flags = stdout.strip().split("-")
    assert (trace_id, parent_id) == (call.trace_id, call.span_id)


def test_pi_mcp_call_exports_its_call_span_over_otlp_and_the_server_continues_that_trace(
    tmp_path: Path, otlp_receiver: OtlpReceiver
) -> None:
    done = run_call(tmp_path, otel_environment(otlp_receiver))
    # The process flushes its spans and metrics as it exits: they are there without waiting.
    otlp_receiver.wait_for(lambda spans: bool(named(spans, "tools/call traceparent")), 10)
    assert_one_call_span_whose_context_the_server_received(otlp_receiver.spans, done.stdout)
    assert "mcp.client.operation.duration" in otlp_receiver.metrics


def test_pi_mcp_call_exports_over_otlp_grpc_when_the_protocol_variable_says_grpc(
    tmp_path: Path,
) -> None:
    with running_grpc_otlp_receiver() as receiver:
        env = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        }
        done = run_call(tmp_path, env)
        receiver.wait_for(lambda spans: bool(named(spans, "tools/call traceparent")), 10)
        spans, metrics = list(receiver.spans), list(receiver.metrics)
    assert_one_call_span_whose_context_the_server_received(spans, done.stdout)
    assert "mcp.client.operation.duration" in metrics


def test_a_gateway_call_exports_one_request_span_and_one_upstream_span_into_the_same_trace(
    gw_workspace: GatewayWorkspace, otlp_receiver: OtlpReceiver
) -> None:
    gw_workspace.write_config({"tp": traceparent_entry()})
    received: list[str] = []
    with run_http_gateway(gw_workspace, env=otel_environment(otlp_receiver)) as gateway:

        async def call() -> None:
            async with gateway.client() as client:
                result = await client.call_tool(
                    "mcp", {"tool": "tp_traceparent", "args": {"note": "x"}}
                )
                received.append("".join(getattr(b, "text", "") for b in result.content))

        anyio.run(call)
        otlp_receiver.wait_for(lambda spans: bool(named(spans, "tools/call traceparent")))
    (request,) = named(otlp_receiver.spans, "tools/call mcp")
    (upstream,) = named(otlp_receiver.spans, "tools/call traceparent")
    assert upstream.parent_span_id == request.span_id
    assert upstream.trace_id == request.trace_id
    sends = sorted(s.name for s in otlp_receiver.spans if s.name.startswith("MCP send"))
    assert "MCP send tools/call traceparent" not in sends, sends
    _version, trace_id, parent_id, _flags = received[0].strip().split("-")
    assert (trace_id, parent_id) == (upstream.trace_id, upstream.span_id)


@pytest.mark.parametrize("path", ["/metrics", "/status", "/metrics/"])
def test_pi_mcp_serve_refuses_an_mcp_path_where_it_serves_metrics_or_its_status_page(
    gw_workspace: GatewayWorkspace, path: str
) -> None:
    gw_workspace.write_config({"tp": traceparent_entry()}, settings={"telemetry": True})
    done = subprocess.run(
        [str(PI_MCP), *gw_workspace.serve_args("--transport", "http", "--path", path)],
        env={**os.environ, "OTEL_SDK_DISABLED": "false"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=gw_workspace.root,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "listening on" not in done.stdout
    assert f"--path {path!r}" in done.stderr
    assert "choose another path" in done.stderr
