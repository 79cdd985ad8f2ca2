"""An in-process HTTP gateway with telemetry recorded by the OpenTelemetry SDK's in-memory
exporter, over a real upstream server that reports the trace context it received; and an
OTLP/HTTP receiver on loopback that keeps the spans a real process exports to it."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans
from opentelemetry.sdk.trace import ReadableSpan
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
        _telemetry.flush_pending()  # calls answered a moment ago end their spans now
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
    # pi-mcp's own provider, as `pi-mcp serve` makes it (tests/hosts has an application's).
    provider = _telemetry.create_tracer_provider({"service.name": "pi-mcp-test"})
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


# ---------------------------------------------------------------------------- OTLP


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as an OTLP exporter sent it (ids in lowercase hex)."""

    name: str
    scope: str
    attributes: dict[str, str]
    trace_id: str
    span_id: str
    parent_span_id: str


def received_spans(scope_spans: ScopeSpans) -> list[ReceivedSpan]:
    return [
        ReceivedSpan(
            span.name,
            scope_spans.scope.name,
            {a.key: a.value.string_value for a in span.attributes},
            span.trace_id.hex(),
            span.span_id.hex(),
            span.parent_span_id.hex(),
        )
        for span in scope_spans.spans
    ]


def metric_names(request: ExportMetricsServiceRequest) -> list[str]:
    return [
        metric.name
        for resource_metrics in request.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    ]


class OtlpReceiver(ThreadingHTTPServer):
    """Keeps what OTLP/HTTP exporters post to ``/v1/traces`` and ``/v1/metrics``."""

    spans: list[ReceivedSpan]
    metrics: list[str]

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 60) -> None:
        """Until ``found`` holds of the spans received (a batch processor exports on its own
        schedule), at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not found(list(self.spans)):
            time.sleep(0.2)


class _OtlpHandler(BaseHTTPRequestHandler):
    server: OtlpReceiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    self.server.spans.extend(received_spans(scope_spans))
        elif self.path == "/v1/metrics":
            metrics = ExportMetricsServiceRequest()
            metrics.ParseFromString(body)
            self.server.metrics.extend(metric_names(metrics))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@contextmanager
def running_otlp_receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver(("127.0.0.1", 0), _OtlpHandler)
    receiver.spans = []
    receiver.metrics = []
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.shutdown()
        receiver.server_close()


class GrpcOtlpReceiver:
    """An OTLP/gRPC collector on loopback (the TraceService and MetricsService of
    opentelemetry-proto on a grpcio server) that keeps what it is sent."""

    def __init__(self) -> None:
        self.spans: list[ReceivedSpan] = []
        self.metrics: list[str] = []
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def wait_for(self, found: Callable[[list[ReceivedSpan]], bool], timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not found(list(self.spans)):
            time.sleep(0.2)


@contextmanager
def running_grpc_otlp_receiver() -> Iterator[GrpcOtlpReceiver]:
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2_grpc
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceResponse,
    )
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    receiver = GrpcOtlpReceiver()

    class Traces(trace_service_pb2_grpc.TraceServiceServicer):  # type: ignore[misc]
        def Export(self, request: Any, context: Any) -> Any:
            for resource_spans in request.resource_spans:
                for scope_spans in resource_spans.scope_spans:
                    receiver.spans.extend(received_spans(scope_spans))
            return ExportTraceServiceResponse()

    class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):  # type: ignore[misc]
        def Export(self, request: Any, context: Any) -> Any:
            receiver.metrics.extend(metric_names(request))
            return ExportMetricsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), server)
    receiver.port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield receiver
    finally:
        server.stop(grace=None)
