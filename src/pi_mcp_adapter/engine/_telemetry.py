"""Telemetry: OpenTelemetry traces and metrics of what the engine does.

One process-wide :class:`Telemetry` (OpenTelemetry's providers are process-wide too) is
configured by the first adapter that starts with it on, and every hook in the engine, the
surfaces and the hosts goes through this module:

- :meth:`Telemetry.request` - one SERVER span per request a gateway client sends;
- :meth:`Telemetry.upstream_call` - one CLIENT span per request to an upstream server (the
  SDK writes its context into ``params._meta.traceparent``, so the server's trace continues);
- :meth:`Telemetry.search`, :meth:`Telemetry.approval`, :meth:`Telemetry.script` - child
  spans for a search, a question to the person, a script run.

Names follow the OpenTelemetry semantic conventions for MCP (span ``{mcp.method.name}
{target}``; ``mcp.method.name``, ``gen_ai.tool.name``, ``mcp.session.id``,
``jsonrpc.request.id``, ``network.transport``, ``error.type``); what the conventions have no
name for is under ``pi_mcp.`` (the server a tool belongs to, the gateway client). Argument
values and results are never attributes unless ``settings.telemetry.recordArguments`` /
``recordResults`` turn them on, and then pass the secret masking first.

Off (the default) costs one global read per hook: :func:`active` is ``None`` and nothing
imports the OpenTelemetry SDK. On when ``settings.telemetry`` says so (a user-level file:
an untrusted project must not send data anywhere), when the standard ``OTEL_*`` variables
name an exporter or endpoint, or when the application already installed a tracer provider
(a pydantic-ai or openai-agents program with its own tracing): its spans then include the
MCP calls. ``OTEL_SDK_DISABLED=true`` keeps it off.
"""

from __future__ import annotations

import json
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pi_mcp_adapter._secrets import redact

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Span, Tracer, TracerProvider
    from prometheus_client import CollectorRegistry

    from pi_mcp_adapter.catalog import ToolInfo
    from pi_mcp_adapter.config import ServerEntry, Settings

    from ._values import CallOutcome, StatusReport

__all__ = [
    "RECENT_CALLS",
    "RecentCall",
    "Telemetry",
    "TelemetryUnavailableError",
    "WaitingApproval",
    "active",
    "approval_span",
    "configure_telemetry",
    "create_telemetry",
    "install",
    "script_span",
    "search_span",
    "telemetry_wanted",
    "upstream_call_span",
]

INSTRUMENTATION_NAME = "pi-mcp-adapter"
RECENT_CALLS = 50
"""How many finished calls the status page shows (newest first)."""
_DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
"""The semantic conventions' advice for MCP operation durations (seconds)."""
_MAX_RECORDED_VALUE_CHARS = 4096
"""An opted-in argument or result attribute is cut here: a backend rejects huge attributes."""

_OTLP_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)

_active: Telemetry | None = None
_configure_lock = threading.Lock()


class TelemetryUnavailableError(RuntimeError):
    """Telemetry was asked for and the ``telemetry`` extra is not installed."""

    def __init__(self) -> None:
        super().__init__(
            "telemetry is configured but OpenTelemetry's SDK is not installed: "
            "pip install 'pi-mcp-adapter[telemetry]'"
        )


def active() -> Telemetry | None:
    """The process's telemetry, or ``None`` when it is off."""
    return _active


def install(telemetry: Telemetry | None) -> Telemetry | None:
    """Make ``telemetry`` the process's (``None`` turns it off); returns the previous one.

    For tests and embedders that build their own providers; :func:`configure_telemetry`
    is the ordinary way in."""
    global _active
    previous, _active = _active, telemetry
    return previous


@dataclass(frozen=True, slots=True)
class _Wanted:
    exporter: Literal["otlp", "console", "none"]
    protocol: Literal["http/protobuf", "grpc"]
    endpoint: str | None
    record_arguments: bool
    record_results: bool
    service_name: str
    metrics_token: str | None


def telemetry_wanted(settings: Settings, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``settings`` and the environment turn telemetry on (see the module docstring)."""
    return _wanted(settings, environ) is not None


def _wanted(settings: Settings, environ: Mapping[str, str]) -> _Wanted | None:
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    configured = settings.telemetry
    if configured is False or (configured is not True and not configured.enabled):
        configured_on = False
    else:
        configured_on = True
    from pi_mcp_adapter.config import TelemetrySettings

    values = configured if isinstance(configured, TelemetrySettings) else TelemetrySettings()
    env_exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    env_names_one = any(environ.get(name) for name in _OTLP_VARIABLES) or env_exporter not in (
        "",
        "none",
    )
    if not (configured_on or env_names_one):
        return None
    exporter = values.exporter
    if exporter is None:
        if env_exporter in ("console", "none"):
            exporter = env_exporter  # type: ignore[assignment]
        elif env_names_one or values.endpoint:
            exporter = "otlp"
        else:
            exporter = "none"  # on for /metrics, the status page and an app's own provider
    protocol = values.protocol or (
        "grpc" if environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "").strip() == "grpc" else None
    )
    return _Wanted(
        exporter=exporter or "none",
        protocol=protocol or "http/protobuf",
        endpoint=values.endpoint,
        record_arguments=values.record_arguments,
        record_results=values.record_results,
        service_name=environ.get("OTEL_SERVICE_NAME") or values.service_name,
        metrics_token=values.metrics_token,
    )


def configure_telemetry(
    settings: Settings, environ: Mapping[str, str] = os.environ
) -> Telemetry | None:
    """Turn telemetry on for this process when ``settings`` or ``environ`` ask for it, or an
    application installed a tracer provider; the first configuration wins (providers are
    process-wide). Returns the active telemetry, or ``None`` when off.

    Raises:
        TelemetryUnavailableError: asked for, and the ``telemetry`` extra is missing.
    """
    global _active
    if _active is not None:
        return _active
    wanted = _wanted(settings, environ)
    if wanted is None:
        if not _application_has_tracing():
            return None
        wanted = _Wanted("none", "http/protobuf", None, False, False, INSTRUMENTATION_NAME, None)
    with _configure_lock:
        if _active is None:
            _active = _create_from(wanted)
    return _active


def _application_has_tracing() -> bool:
    """Whether the program installed a real tracer provider (read without importing the SDK:
    the API is loaded already when the MCP SDK is)."""
    import sys

    trace_api = sys.modules.get("opentelemetry.trace")
    if trace_api is None:
        return False
    provider = trace_api.get_tracer_provider()
    return type(provider).__name__ not in ("ProxyTracerProvider", "NoOpTracerProvider")


def _create_from(wanted: _Wanted) -> Telemetry:
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise TelemetryUnavailableError() from exc
    resource = Resource.create({"service.name": wanted.service_name})
    readers: list[MetricReader] = []
    provider = trace.get_tracer_provider()
    if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
        sdk_provider = SdkTracerProvider(resource=resource)
        exporter = _span_exporter(wanted)
        if exporter is not None:
            sdk_provider.add_span_processor(BatchSpanProcessor(exporter))
        # Global, so the MCP SDK's own client spans (and their traceparent) join ours.
        trace.set_tracer_provider(sdk_provider)
        provider = sdk_provider
    if wanted.exporter == "otlp":
        readers.append(_otlp_metric_reader(wanted))
    return create_telemetry(
        tracer_provider=provider,
        metric_readers=readers,
        resource_attributes={"service.name": wanted.service_name},
        record_arguments=wanted.record_arguments,
        record_results=wanted.record_results,
        metrics_token=wanted.metrics_token,
    )


def _span_exporter(wanted: _Wanted) -> SpanExporter | None:
    if wanted.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    if wanted.exporter != "otlp":
        return None
    if wanted.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
            OTLPSpanExporter as GrpcSpanExporter,
        )

        return GrpcSpanExporter(endpoint=wanted.endpoint or None)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if wanted.endpoint:
        return OTLPSpanExporter(endpoint=wanted.endpoint.rstrip("/") + "/v1/traces")
    return OTLPSpanExporter()


def _otlp_metric_reader(wanted: _Wanted) -> MetricReader:
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if wanted.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        grpc_exporter = (
            GrpcMetricExporter(endpoint=wanted.endpoint)
            if wanted.endpoint
            else GrpcMetricExporter()
        )
        return PeriodicExportingMetricReader(grpc_exporter)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    http_exporter = (
        OTLPMetricExporter(endpoint=wanted.endpoint.rstrip("/") + "/v1/metrics")
        if wanted.endpoint
        else OTLPMetricExporter()
    )
    return PeriodicExportingMetricReader(http_exporter)


def create_telemetry(
    *,
    tracer_provider: TracerProvider,
    metric_readers: Iterable[MetricReader] = (),
    resource_attributes: Mapping[str, str] | None = None,
    record_arguments: bool = False,
    record_results: bool = False,
    metrics_token: str | None = None,
) -> Telemetry:
    """A :class:`Telemetry` over ``tracer_provider``, its metrics read by ``metric_readers``
    and by a Prometheus registry of its own (the gateway's ``/metrics``); not installed.

    Raises:
        TelemetryUnavailableError: the ``telemetry`` extra is missing.
    """
    try:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
        from opentelemetry.sdk.resources import Resource
        from prometheus_client import CollectorRegistry
    except ImportError as exc:
        raise TelemetryUnavailableError() from exc
    registry = CollectorRegistry(auto_describe=True)
    readers = [*metric_readers, PrometheusMetricReader(registry=registry)]
    meter_provider = SdkMeterProvider(
        metric_readers=readers,
        resource=Resource.create(dict(resource_attributes or {"service.name": "pi-mcp-adapter"})),
        views=[
            View(
                instrument_name="*duration",
                aggregation=ExplicitBucketHistogramAggregation(_DURATION_BUCKETS_S),
            )
        ],
    )
    return Telemetry(
        tracer=tracer_provider.get_tracer(INSTRUMENTATION_NAME),
        meter_provider=meter_provider,
        prometheus_registry=registry,
        record_arguments=record_arguments,
        record_results=record_results,
        metrics_token=metrics_token,
    )


# ---------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class RecentCall:
    """One finished upstream call, as the status page shows it (no arguments, no result)."""

    at: float
    """Wall-clock time it finished (seconds since the epoch)."""
    server: str
    tool: str
    client: str | None
    outcome: str
    """``ok`` | ``error`` (the tool said so) | ``failed`` (no answer; ``error_kind`` says why)."""
    duration_ms: float
    error_kind: str | None = None


@dataclass(frozen=True, slots=True)
class WaitingApproval:
    """A question to the person about a call that waits for the answer."""

    server: str
    tool: str
    since: float


@dataclass(slots=True)
class _Watched:
    adapters: weakref.WeakSet[Any] = field(default_factory=weakref.WeakSet)


def _outcome_of(outcome: CallOutcome) -> tuple[str, str | None]:
    """(``ok`` | ``error`` | ``failed``, ``error.type``) of a call's outcome."""
    if outcome.error_kind is not None:
        return "failed", outcome.error_kind
    if outcome.is_error:
        return "error", "tool_error"  # the conventions' value for an isError result
    return "ok", None


def _transport_of(entry: ServerEntry | None) -> str | None:
    """``network.transport``: ``pipe`` for a stdio server, ``tcp`` for an HTTP one."""
    if entry is None:
        return None
    return "tcp" if entry.url else "pipe"


def _recorded(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    return redact(text)[:_MAX_RECORDED_VALUE_CHARS]


# ---------------------------------------------------------------------------- telemetry


class Telemetry:
    """Spans and instruments of one process (see the module docstring)."""

    def __init__(
        self,
        *,
        tracer: Tracer,
        meter_provider: MeterProvider,
        prometheus_registry: CollectorRegistry,
        record_arguments: bool = False,
        record_results: bool = False,
        metrics_token: str | None = None,
    ) -> None:
        self.tracer = tracer
        self.meter_provider = meter_provider
        self.prometheus_registry = prometheus_registry
        self.record_arguments = record_arguments
        self.record_results = record_results
        self.metrics_token = metrics_token
        self.recent: deque[RecentCall] = deque(maxlen=RECENT_CALLS)
        self.waiting: dict[int, WaitingApproval] = {}
        self._watched = _Watched()
        meter: Meter = meter_provider.get_meter(INSTRUMENTATION_NAME)
        self._request_duration = meter.create_histogram(
            "mcp.server.operation.duration",
            unit="s",
            description="Requests gateway clients sent, by method, tool, client and outcome.",
        )
        self._upstream_duration = meter.create_histogram(
            "mcp.client.operation.duration",
            unit="s",
            description="Requests to upstream servers, by method, server, tool, client, outcome.",
        )
        # Counted in a plain dict and observed at collection: a synchronous instrument would
        # cost two measurements per call, the largest part of telemetry's per-call overhead.
        self._in_flight: dict[str, int] = {}
        meter.create_observable_up_down_counter(
            "pi_mcp.calls.in_flight",
            callbacks=[self._observe_in_flight],
            unit="{call}",
            description="Upstream tool calls running.",
        )
        self._search_duration = meter.create_histogram(
            "pi_mcp.search.duration", unit="s", description="Catalog searches."
        )
        meter.create_observable_gauge(
            "pi_mcp.servers",
            callbacks=[self._observe_servers],
            unit="{server}",
            description="Configured servers by state.",
        )
        meter.create_observable_gauge(
            "pi_mcp.cache.tools",
            callbacks=[self._observe_cache],
            unit="{tool}",
            description="Tools known from live listings and the metadata cache.",
        )
        meter.create_observable_gauge(
            "pi_mcp.approvals.waiting",
            callbacks=[self._observe_waiting],
            unit="{question}",
            description="Calls waiting for the person's approval.",
        )

    # -- what is watched -----------------------------------------------------------------

    def watch(self, adapter: Any) -> None:
        """Report ``adapter``'s servers and cache in the gauges while it lives."""
        self._watched.adapters.add(adapter)

    def status_reports(self) -> list[StatusReport]:
        reports = []
        for adapter in list(self._watched.adapters):
            try:
                reports.append(adapter.status())
            except Exception:  # an adapter shutting down has no status to give
                continue
        return reports

    def _observe_servers(self, _options: Any) -> Iterator[Any]:
        from opentelemetry.metrics import Observation

        counts: dict[str, int] = {}
        for report in self.status_reports():
            for server in report.servers:
                counts[server.status] = counts.get(server.status, 0) + 1
        for state, count in sorted(counts.items()):
            yield Observation(count, {"pi_mcp.server.state": state})

    def _observe_cache(self, _options: Any) -> Iterator[Any]:
        from opentelemetry.metrics import Observation

        yield Observation(sum(report.tool_count for report in self.status_reports()))

    def _observe_in_flight(self, _options: Any) -> Iterator[Any]:
        from opentelemetry.metrics import Observation

        for server, count in sorted(self._in_flight.items()):
            yield Observation(count, {"pi_mcp.server": server})

    def _observe_waiting(self, _options: Any) -> Iterator[Any]:
        from opentelemetry.metrics import Observation

        yield Observation(len(self.waiting))

    # -- spans -----------------------------------------------------------------------------

    @contextmanager
    def request(
        self,
        method: str,
        *,
        target: str | None,
        request_id: str | int | None,
        session_id: str | None,
        transport: str,
        client: str | None,
        parent_meta: Mapping[str, Any] | None,
        protocol_version: str | None = None,
    ) -> Iterator[_RequestRecord]:
        """One SERVER span for a request a gateway client sent, continuing the client's
        trace when its ``params._meta`` carries a ``traceparent``."""
        from opentelemetry.trace import SpanKind

        attributes: dict[str, Any] = {"mcp.method.name": method, "network.transport": transport}
        if protocol_version:
            attributes["mcp.protocol.version"] = protocol_version
        if request_id is not None:
            attributes["jsonrpc.request.id"] = str(request_id)
        if session_id:
            attributes["mcp.session.id"] = session_id
        if client:
            attributes["pi_mcp.client"] = client
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
            if target is not None:
                attributes["gen_ai.tool.name"] = target
        elif method == "prompts/get" and target is not None:
            attributes["gen_ai.prompt.name"] = target
        record = _RequestRecord()
        started = time.perf_counter()
        with self.tracer.start_as_current_span(
            f"{method} {target}" if target else method,
            kind=SpanKind.SERVER,
            attributes=attributes,
            context=_extract(parent_meta),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield record
            except BaseException as exc:
                record.error_type = record.error_type or _error_type(exc)
                raise
            finally:
                _finish(span, record.error_type)
                labels = {"mcp.method.name": method, "pi_mcp.outcome": record.outcome()}
                if target is not None and method == "tools/call":
                    labels["gen_ai.tool.name"] = target
                if client:
                    labels["pi_mcp.client"] = client
                if record.error_type:
                    labels["error.type"] = record.error_type
                self._request_duration.record(time.perf_counter() - started, labels)

    @contextmanager
    def upstream_call(
        self,
        tool: ToolInfo,
        entry: ServerEntry | None,
        arguments: Mapping[str, Any],
        *,
        client: str | None,
    ) -> Iterator[Callable[[CallOutcome], None]]:
        """One CLIENT span for a call to ``tool``'s server; the caller passes the outcome to
        the function it gets. The MCP SDK writes this span's context into the request's
        ``params._meta.traceparent``."""
        from opentelemetry.trace import SpanKind

        method = "resources/read" if tool.resource_uri is not None else "tools/call"
        attributes: dict[str, Any] = {
            "mcp.method.name": method,
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool.original_name,
            "pi_mcp.server": tool.server,
        }
        transport = _transport_of(entry)
        if transport is not None:
            attributes["network.transport"] = transport
        if client:
            attributes["pi_mcp.client"] = client
        if self.record_arguments:
            attributes["gen_ai.tool.call.arguments"] = _recorded(dict(arguments))
        finished: list[CallOutcome] = []
        started = time.perf_counter()
        self._in_flight[tool.server] = self._in_flight.get(tool.server, 0) + 1
        try:
            with self.tracer.start_as_current_span(
                f"{method} {tool.original_name}",
                kind=SpanKind.CLIENT,
                attributes=attributes,
                record_exception=False,
                set_status_on_exception=False,
            ) as span:
                error_type: str | None = None
                try:
                    yield finished.append
                except BaseException as exc:
                    error_type = _error_type(exc)
                    raise
                finally:
                    outcome_name = "failed"
                    error_kind: str | None = error_type
                    if finished:
                        outcome_name, error_type = _outcome_of(finished[0])
                        error_kind = finished[0].error_kind
                        if self.record_results and finished[0].result is not None:
                            span.set_attribute(
                                "gen_ai.tool.call.result",
                                _recorded(finished[0].result.model_dump(mode="json")),
                            )
                    _finish(span, error_type)
                    duration_s = time.perf_counter() - started
                    labels = {
                        "mcp.method.name": method,
                        "pi_mcp.server": tool.server,
                        "gen_ai.tool.name": tool.original_name,
                        "pi_mcp.outcome": outcome_name,
                    }
                    if client:
                        labels["pi_mcp.client"] = client
                    if error_type:
                        labels["error.type"] = error_type
                    self._upstream_duration.record(duration_s, labels)
                    self.recent.appendleft(
                        RecentCall(
                            time.time(),
                            tool.server,
                            tool.original_name,
                            client,
                            outcome_name,
                            round(duration_s * 1000, 3),
                            error_kind,
                        )
                    )
        finally:
            self._in_flight[tool.server] -= 1

    @contextmanager
    def search(self, *, server: str | None, regex: bool, query: str) -> Iterator[_SearchRecord]:
        """An INTERNAL span and the latency histogram for one catalog search."""
        attributes: dict[str, Any] = {"pi_mcp.search.regex": regex}
        if server is not None:
            attributes["pi_mcp.server"] = server
        if self.record_arguments:
            attributes["pi_mcp.search.query"] = _recorded(query)
        record = _SearchRecord()
        started = time.perf_counter()
        with self.tracer.start_as_current_span("pi_mcp.search", attributes=attributes) as span:
            try:
                yield record
            finally:
                span.set_attribute("pi_mcp.search.hits", record.hits)
                self._search_duration.record(
                    time.perf_counter() - started, {"pi_mcp.search.regex": regex}
                )

    @contextmanager
    def approval(self, tool: ToolInfo) -> Iterator[_ApprovalRecord]:
        """An INTERNAL span while the person is asked about a call of ``tool``; the call is
        listed as waiting meanwhile."""
        record = _ApprovalRecord()
        key = id(record)
        self.waiting[key] = WaitingApproval(tool.server, tool.original_name, time.time())
        try:
            with self.tracer.start_as_current_span(
                f"pi_mcp.approval {tool.original_name}",
                attributes={"gen_ai.tool.name": tool.original_name, "pi_mcp.server": tool.server},
            ) as span:
                try:
                    yield record
                finally:
                    span.set_attribute("pi_mcp.approval.answer", record.answer)
        finally:
            self.waiting.pop(key, None)

    @contextmanager
    def script(self) -> Iterator[None]:
        """An INTERNAL span around one ``mcp_script`` run; its calls are its children."""
        with self.tracer.start_as_current_span("pi_mcp.script"):
            yield

    # -- export ----------------------------------------------------------------------------

    def prometheus_text(self) -> bytes:
        """The metrics in Prometheus' text exposition format."""
        from prometheus_client import generate_latest

        return generate_latest(self.prometheus_registry)

    def shutdown(self) -> None:
        """Flush and stop the metric readers (spans are the tracer provider's owner's)."""
        self.meter_provider.shutdown()


@dataclass(slots=True)
class _RequestRecord:
    error_type: str | None = None

    def outcome(self) -> str:
        if self.error_type is None:
            return "ok"
        return "error" if self.error_type == "tool_error" else "failed"


@dataclass(slots=True)
class _SearchRecord:
    hits: int = 0


@dataclass(slots=True)
class _ApprovalRecord:
    answer: str = "none"
    """``allowed`` | ``denied`` | ``none`` (no answer came)."""


def _extract(meta: Mapping[str, Any] | None) -> Any:
    """The client's trace context from ``params._meta`` (W3C ``traceparent``), or ``None``
    so the span nests under the current one; a malformed carrier is ignored."""
    if not meta or not isinstance(meta.get("traceparent"), str):
        return None
    from opentelemetry.propagate import extract
    from opentelemetry.trace import get_current_span

    try:
        context = extract(dict(meta))
    except (ValueError, TypeError):
        return None
    return context if get_current_span(context).get_span_context().is_valid else None


def _error_type(exc: BaseException) -> str:
    code = getattr(getattr(exc, "error", None), "code", None)
    if isinstance(code, int):
        return str(code)  # a JSON-RPC error the peer sees
    return type(exc).__qualname__


def _finish(span: Span, error_type: str | None) -> None:
    if error_type is None:
        return
    from opentelemetry.trace import StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(StatusCode.ERROR)


# ---------------------------------------------------------------------------- hooks
# What the engine, surfaces and hosts call: with telemetry off, each is one global read and
# a shared do-nothing context manager (``nullcontext`` may be entered any number of times).


def _ignore(_outcome: CallOutcome) -> None:
    return None


_OFF_UPSTREAM: AbstractContextManager[Callable[[CallOutcome], None]] = nullcontext(_ignore)
_OFF_SEARCH: AbstractContextManager[_SearchRecord] = nullcontext(_SearchRecord())
_OFF_APPROVAL: AbstractContextManager[_ApprovalRecord] = nullcontext(_ApprovalRecord())
_OFF: AbstractContextManager[None] = nullcontext()


def upstream_call_span(
    tool: ToolInfo,
    entry: ServerEntry | None,
    arguments: Mapping[str, Any],
    *,
    client: str | None,
) -> AbstractContextManager[Callable[[CallOutcome], None]]:
    """:meth:`Telemetry.upstream_call` when telemetry is on."""
    telemetry = _active
    if telemetry is None:
        return _OFF_UPSTREAM
    return telemetry.upstream_call(tool, entry, arguments, client=client)


def search_span(
    *, server: str | None, regex: bool, query: str
) -> AbstractContextManager[_SearchRecord]:
    """:meth:`Telemetry.search` when telemetry is on."""
    telemetry = _active
    if telemetry is None:
        return _OFF_SEARCH
    return telemetry.search(server=server, regex=regex, query=query)


def approval_span(tool: ToolInfo) -> AbstractContextManager[_ApprovalRecord]:
    """:meth:`Telemetry.approval` when telemetry is on."""
    telemetry = _active
    if telemetry is None:
        return _OFF_APPROVAL
    return telemetry.approval(tool)


def script_span() -> AbstractContextManager[None]:
    """:meth:`Telemetry.script` when telemetry is on."""
    telemetry = _active
    if telemetry is None:
        return _OFF
    return telemetry.script()
