"""An in-process HTTP gateway with telemetry recorded by the OpenTelemetry SDK's in-memory
exporter, over a real upstream server that reports the trace context it received."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.engine import McpAdapter, _telemetry
from pi_mcp_adapter.hosts import GatewayOptions, serve_gateway

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
TRACEPARENT_SERVER = FIXTURES / "traceparent_server.py"
MCP_FIXTURE = FIXTURES / "mcp_fixture.py"


@dataclass
class ObservedGateway:
    url: str
    spans: InMemorySpanExporter
    telemetry: _telemetry.Telemetry

    @property
    def base(self) -> str:
        return self.url.rsplit("/", 1)[0]

    def finished(self) -> list[ReadableSpan]:
        return list(self.spans.get_finished_spans())


def traceparent_entry() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(TRACEPARENT_SERVER)]}


def fixture_entry(*args: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(MCP_FIXTURE), *args]}


@asynccontextmanager
async def observed_gateway(
    tmp_path: Path,
    servers: dict[str, Any],
    *,
    settings: dict[str, Any] | None = None,
    options: GatewayOptions | None = None,
    record_arguments: bool = False,
    metrics_token: str | None = None,
    environ: dict[str, str] | None = None,
) -> AsyncIterator[ObservedGateway]:
    """Serve ``servers`` over loopback HTTP with telemetry on, spans kept in memory."""
    agent, project = tmp_path / "agent", tmp_path / "project"
    agent.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    body: dict[str, Any] = {"mcpServers": servers}
    if settings:
        body["settings"] = settings
    (agent / "mcp.json").write_text(json.dumps(body))
    config = load_config(agent_dir=agent, project_dir=project, home=tmp_path, environ=environ or {})
    adapter = McpAdapter(
        config=config, agent_dir=agent, project_dir=project, relay_server_requests=True
    )
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    telemetry = _telemetry.create_telemetry(
        tracer_provider=provider, record_arguments=record_arguments, metrics_token=metrics_token
    )
    previous = _telemetry.install(telemetry)
    urls: list[str] = []
    announced = anyio.Event()
    stopped = anyio.Event()

    def announce(url: str) -> None:
        urls.append(url)
        announced.set()

    async def serve() -> None:
        try:
            await serve_gateway(
                adapter, options or GatewayOptions(transport="http", port=0), announce=announce
            )
        finally:
            stopped.set()
            announced.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            with anyio.fail_after(60):
                await announced.wait()
            assert urls, "the gateway did not start"
            try:
                yield ObservedGateway(urls[0], spans, telemetry)
            finally:
                # As in production, on SIGTERM (its handler is installed before the address
                # is announced and removed once serving ends).
                if not stopped.is_set():
                    os.kill(os.getpid(), signal.SIGTERM)
                with anyio.fail_after(30):
                    await stopped.wait()
    finally:
        _telemetry.install(previous)
        telemetry.shutdown()
        provider.shutdown()
