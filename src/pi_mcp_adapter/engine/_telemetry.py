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

A request's and an upstream call's spans, duration samples and status-page lines are made
after the answer by one worker thread per telemetry, from a bounded queue the caller appends
a tuple to (see "the worker" below); :func:`flush_pending` waits for it.

Off (the default) costs one global read per hook: :func:`active` is ``None`` and nothing
imports the OpenTelemetry SDK. On when ``settings.telemetry`` says so (a user-level file:
an untrusted project must not send data anywhere), when the standard ``OTEL_*`` variables
name an exporter or endpoint, or when the application already installed a tracer provider
(a pydantic-ai or openai-agents program with its own tracing): its spans then include the
MCP calls. ``OTEL_SDK_DISABLED=true`` keeps it off.
"""

from __future__ import annotations

import atexit
import json
import logging
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
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
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
    "create_tracer_provider",
    "flush_pending",
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

logger = logging.getLogger(__name__)

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
    is the ordinary way in. Calls the previous one answered are finished first."""
    global _active
    flush_pending()
    previous, _active = _active, telemetry
    return previous


@dataclass(frozen=True, slots=True)
class _Wanted:
    exporter: Literal["otlp", "console", "none"]
    protocol: Literal["http/protobuf", "grpc"]
    traces_endpoint: str | None
    metrics_endpoint: str | None
    """Where each signal goes; ``None``: the exporter's default (``localhost``)."""
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
    protocol = protocol or "http/protobuf"
    return _Wanted(
        exporter=exporter or "none",
        protocol=protocol,
        traces_endpoint=_endpoint("traces", values.endpoint, protocol, environ),
        metrics_endpoint=_endpoint("metrics", values.endpoint, protocol, environ),
        record_arguments=values.record_arguments,
        record_results=values.record_results,
        service_name=environ.get("OTEL_SERVICE_NAME") or values.service_name,
        metrics_token=values.metrics_token,
    )


def _endpoint(
    signal: str, configured: str | None, protocol: str, environ: Mapping[str, str]
) -> str | None:
    """The URL ``signal``'s exporter posts to: ``settings.telemetry.endpoint`` (a base URL),
    else ``OTEL_EXPORTER_OTLP_{SIGNAL}_ENDPOINT`` as it is, else ``OTEL_EXPORTER_OTLP_ENDPOINT``
    (a base URL), read from the adapter's environment (the exporters' own defaults would read
    the process's, which an embedder's adapter need not run with)."""
    base = configured
    if base is None:
        specific = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
        if specific:
            return specific
        base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or None
    if base is None or protocol == "grpc":
        return base  # gRPC has one endpoint for every signal
    return base.rstrip("/") + f"/v1/{signal}"


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
        wanted = _Wanted(
            "none", "http/protobuf", None, None, False, False, INSTRUMENTATION_NAME, None
        )
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


def _application_meter_provider() -> MeterProvider | None:
    """The meter provider the program installed, if it did: our instruments go there, so an
    application's metrics pipeline has the MCP calls beside its own measurements."""
    from opentelemetry import metrics

    provider = metrics.get_meter_provider()
    if type(provider).__name__ in ("_ProxyMeterProvider", "NoOpMeterProvider"):
        return None
    return provider  # type: ignore[return-value]


def _create_from(wanted: _Wanted) -> Telemetry:
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise TelemetryUnavailableError() from exc
    readers: list[MetricReader] = []
    provider = trace.get_tracer_provider()
    if type(provider).__name__ in ("ProxyTracerProvider", "NoOpTracerProvider"):
        sdk_provider = create_tracer_provider({"service.name": wanted.service_name})
        exporter = _span_exporter(wanted)
        if exporter is not None:
            sdk_provider.add_span_processor(BatchSpanProcessor(exporter))
        # Global, so the MCP SDK's own client spans (and their traceparent) join ours.
        trace.set_tracer_provider(sdk_provider)
        provider = sdk_provider
    app_meters = _application_meter_provider()
    if wanted.exporter == "otlp" and app_meters is None:
        readers.append(_otlp_metric_reader(wanted))
    return create_telemetry(
        tracer_provider=provider,
        meter_provider=app_meters,
        metric_readers=readers,
        resource_attributes={"service.name": wanted.service_name},
        record_arguments=wanted.record_arguments,
        record_results=wanted.record_results,
        metrics_token=wanted.metrics_token,
    )


MCP_SDK_TRACER = "mcp-python-sdk"
"""The instrumentation scope of the MCP SDK's own spans (``MCP send {method}``)."""


def create_tracer_provider(resource_attributes: Mapping[str, str]) -> SdkTracerProvider:
    """An SDK tracer provider for a process whose tracing is ours (nothing installed one
    before), set as the global one so the MCP SDK's trace context reaches upstream servers.

    On it the MCP SDK's ``MCP send`` CLIENT span is left out where one of our upstream-call
    spans already stands for that request (the same request, fewer attributes, twice the
    cost); the SDK then writes our span's context into ``params._meta``. Its other requests
    (``initialize``, listings, pings) keep their spans. While no telemetry is installed
    (:func:`install` ``(None)``) the SDK's spans are off too, as without a provider.

    Raises:
        TelemetryUnavailableError: the ``telemetry`` extra is missing.
    """
    try:
        from opentelemetry.sdk.resources import Resource
    except ImportError as exc:
        raise TelemetryUnavailableError() from exc
    return _provider_class()(resource=Resource.create(dict(resource_attributes)))


_PROVIDER_CLASS: list[type[SdkTracerProvider]] = []


def _provider_class() -> type[SdkTracerProvider]:
    """Defined on first use: the module imports no OpenTelemetry SDK until telemetry is on."""
    if _PROVIDER_CLASS:
        return _PROVIDER_CLASS[0]
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider as SdkProvider
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

    client_kind = trace.SpanKind.CLIENT
    invalid = trace.INVALID_SPAN

    class McpSdkTracer(trace.Tracer):
        """The MCP SDK's tracer: its span where ours is not, ours where it is."""

        def __init__(self, real: trace.Tracer) -> None:
            self._real = real

        def _stand_in(self, context: Any) -> Span | None:
            if _active is None:
                return invalid
            current: Any = trace.get_current_span(context)
            if type(current) in _PENDING_SPAN_CLASS:
                # An upstream call's span, made once the call has its answer, stands for this
                # request; under a gateway request's (SERVER) the SDK's span is a child of it.
                return current if current.kind is client_kind else None
            scope = getattr(current, "instrumentation_scope", None)
            if getattr(current, "kind", None) is client_kind and (
                scope is not None and scope.name == INSTRUMENTATION_NAME
            ):
                return trace.NonRecordingSpan(current.get_span_context())
            return None

        def start_span(self, name: str, context: Any = None, *args: Any, **kwargs: Any) -> Span:
            stand_in = self._stand_in(context)
            if stand_in is not None:
                return stand_in
            return self._real.start_span(name, context, *args, **kwargs)

        def start_as_current_span(  # type: ignore[override]
            self, name: str, context: Any = None, *args: Any, **kwargs: Any
        ) -> AbstractContextManager[Span]:
            stand_in = self._stand_in(context)
            if stand_in is not None:
                # Nothing to make current: ours is, and the SDK injects the current context.
                return nullcontext(stand_in)
            return self._real.start_as_current_span(name, context, *args, **kwargs)

    class PresetIdGenerator(RandomIdGenerator):
        """Random ids, except for a span whose ids went out before it was made.

        An upstream call's span is made after the call has its answer (see
        :class:`_DeferredSpans`), with the ids its request's ``traceparent`` carried:
        they are set here just before the SDK makes it, in the same thread, used once."""

        def __init__(self) -> None:
            self._preset = threading.local()

        def preset(self, ids: tuple[int, int] | None) -> None:
            """(trace id, span id) of the next span made in this thread; ``None``: random."""
            self._preset.ids = ids

        def generate_span_id(self) -> int:
            ids: tuple[int, int] | None = getattr(self._preset, "ids", None)
            if ids is None:
                return super().generate_span_id()
            self._preset.ids = None
            return ids[1]

        def generate_trace_id(self) -> int:
            # Asked before the span id, and only for a root span: the preset stays set.
            ids: tuple[int, int] | None = getattr(self._preset, "ids", None)
            return ids[0] if ids is not None else super().generate_trace_id()

    class PiMcpTracerProvider(SdkProvider):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("id_generator", PresetIdGenerator())
            super().__init__(*args, **kwargs)

        def get_tracer(self, instrumenting_module_name: str, *args: Any, **kwargs: Any) -> Any:
            tracer = super().get_tracer(instrumenting_module_name, *args, **kwargs)
            if instrumenting_module_name == MCP_SDK_TRACER:
                return McpSdkTracer(tracer)
            return tracer

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            flush_pending()  # the calls answered so far have their spans made first
            return super().force_flush(timeout_millis)

        def shutdown(self) -> None:
            flush_pending()
            super().shutdown()

    _PROVIDER_CLASS.append(PiMcpTracerProvider)
    return PiMcpTracerProvider


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

        return GrpcSpanExporter(endpoint=wanted.traces_endpoint)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter(endpoint=wanted.traces_endpoint)


def _otlp_metric_reader(wanted: _Wanted) -> MetricReader:
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if wanted.protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import (
            OTLPMetricExporter as GrpcMetricExporter,
        )

        return PeriodicExportingMetricReader(GrpcMetricExporter(endpoint=wanted.metrics_endpoint))
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=wanted.metrics_endpoint))


def create_telemetry(
    *,
    tracer_provider: TracerProvider,
    metric_readers: Iterable[MetricReader] = (),
    resource_attributes: Mapping[str, str] | None = None,
    record_arguments: bool = False,
    record_results: bool = False,
    metrics_token: str | None = None,
    meter_provider: MeterProvider | None = None,
) -> Telemetry:
    """A :class:`Telemetry` over ``tracer_provider``, its metrics read by ``metric_readers``
    and by a Prometheus registry of its own (the gateway's ``/metrics``); not installed.
    With ``meter_provider`` (an application's own) the instruments are made there instead,
    and read by whatever reads it; it stays its owner's to shut down.

    Raises:
        TelemetryUnavailableError: the ``telemetry`` extra is missing.
    """
    try:
        # Imported when served (Telemetry.serve_prometheus); missing, the extra is.
        import opentelemetry.exporter.prometheus  # noqa: F401
        from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter
        from opentelemetry.sdk.metrics import MeterProvider as SdkMeterProvider
        from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View
        from opentelemetry.sdk.resources import Resource
        from prometheus_client import CollectorRegistry
    except ImportError as exc:
        raise TelemetryUnavailableError() from exc
    registry = CollectorRegistry(auto_describe=True)
    owns_meter_provider = meter_provider is None
    if meter_provider is None:
        meter_provider = SdkMeterProvider(
            # The Prometheus registry gets its reader when it is served (serve_prometheus).
            metric_readers=list(metric_readers),
            # No exemplars: Prometheus' text format drops them, and sampling one for every
            # duration recorded inside a span is a large part of a call's telemetry cost.
            exemplar_filter=AlwaysOffExemplarFilter(),
            resource=Resource.create(
                dict(resource_attributes or {"service.name": "pi-mcp-adapter"})
            ),
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
        owns_meter_provider=owns_meter_provider,
        deferred_spans=_DeferredSpans.for_provider(tracer_provider),
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
        owns_meter_provider: bool = True,
        deferred_spans: _DeferredSpans | None = None,
    ) -> None:
        self.tracer = tracer
        self._owns_meter_provider = owns_meter_provider
        self.meter_provider = meter_provider
        self.prometheus_registry = prometheus_registry
        self.record_arguments = record_arguments
        self.record_results = record_results
        self.metrics_token = metrics_token
        self._prometheus_reader: MetricReader | None = None
        self._prometheus_lock = threading.Lock()
        self.recent: deque[RecentCall] = deque(maxlen=RECENT_CALLS)
        self.waiting: dict[int, WaitingApproval] = {}
        self._watched = _Watched()
        from opentelemetry import context, trace

        # Bound once: the per-call path makes its span current without the API's context
        # managers (see _UpstreamCallSpan).
        self.span_kinds = trace.SpanKind
        self.attach = context.attach
        self.detach = context.detach
        self.set_span_in_context = trace.set_span_in_context
        self.get_current = context.get_current
        self._deferred_spans = deferred_spans
        self._request_shapes: dict[tuple[Any, ...], _Shape] = {}
        self._call_shapes: dict[tuple[Any, ...], _Shape] = {}
        self._finisher = _Finisher()
        meter: Meter = meter_provider.get_meter(INSTRUMENTATION_NAME)
        self._request_duration = _DurationHistogram(
            meter.create_histogram(
                "mcp.server.operation.duration",
                unit="s",
                description="Requests gateway clients sent, by method, tool, client and outcome.",
            ),
            direct=owns_meter_provider,
        )
        self._upstream_duration = _DurationHistogram(
            meter.create_histogram(
                "mcp.client.operation.duration",
                unit="s",
                description=(
                    "Requests to upstream servers, by method, server, tool, client, outcome."
                ),
            ),
            direct=owns_meter_provider,
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
        meter.create_observable_counter(
            "pi_mcp.telemetry.dropped",
            callbacks=[self._observe_dropped],
            unit="{call}",
            description="Calls whose span and duration were dropped: too many waited for them.",
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

    def _observe_dropped(self, _options: Any) -> Iterator[Any]:
        from opentelemetry.metrics import Observation

        yield Observation(self._finisher.dropped)

    # -- spans -----------------------------------------------------------------------------

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
    ) -> AbstractContextManager[_RequestRecord]:
        """One SERVER span for a request a gateway client sent, continuing the client's
        trace when its ``params._meta`` carries a ``traceparent``."""
        key = (method, target, transport, client, protocol_version)
        shape = self._request_shapes.get(key)
        if shape is None:
            if len(self._request_shapes) >= _MAX_SHAPES:
                self._request_shapes.clear()
            shape = self._request_shapes[key] = _request_shape(*key)
        return _RequestSpan(self, shape, request_id, session_id, parent_meta)

    def upstream_call(
        self,
        tool: ToolInfo,
        entry: ServerEntry | None,
        arguments: Mapping[str, Any],
        *,
        client: str | None,
    ) -> AbstractContextManager[Callable[[CallOutcome], None]]:
        """One CLIENT span for a call to ``tool``'s server; the caller passes the outcome to
        the function it gets. The MCP SDK writes this span's context into the request's
        ``params._meta.traceparent``."""
        is_resource = tool.resource_uri is not None
        transport = _transport_of(entry)
        key = (tool.server, tool.original_name, is_resource, transport, client)
        shape = self._call_shapes.get(key)
        if shape is None:
            if len(self._call_shapes) >= _MAX_SHAPES:
                self._call_shapes.clear()
            shape = _call_shape(tool.server, tool.original_name, is_resource, transport, client)
            self._call_shapes[key] = shape
        return _UpstreamCallSpan(self, shape, arguments)

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

    def serve_prometheus(self) -> None:
        """Aggregate the metrics for :meth:`prometheus_text` from now on (the gateway calls
        this as it starts). Each reader aggregates every measurement again, so a process
        that serves no ``/metrics`` (an application's adapter) keeps only its exporter's.
        An application's own meter provider is read by the application, not here."""
        with self._prometheus_lock:
            if self._prometheus_reader is not None or not self._owns_meter_provider:
                return
            from opentelemetry.exporter.prometheus import PrometheusMetricReader

            reader = PrometheusMetricReader(registry=self.prometheus_registry)
            self.meter_provider.add_metric_reader(reader)
            self._prometheus_reader = reader

    def prometheus_text(self) -> bytes:
        """The metrics in Prometheus' text exposition format (counted from the first
        :meth:`serve_prometheus` or, without one, from this first call on)."""
        from prometheus_client import generate_latest

        self.serve_prometheus()
        return generate_latest(self.prometheus_registry)

    def flush(self) -> None:
        """Finish the calls answered so far: their spans reach the span processors, their
        durations the histograms, their lines the status page."""
        self._finisher.flush()

    def shutdown(self) -> None:
        """Finish the calls answered so far, end the worker thread, and flush and stop the
        metric readers (spans are the tracer provider's owner's, and an application's meter
        provider is the application's)."""
        self._finisher.close()  # the calls answered last are counted before the readers stop
        if self._owns_meter_provider:
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


# ---------------------------------------------------------------------------- hot path
# A call with telemetry on costs what it must (one span, one histogram sample) and little
# else: what every call of one tool from one client has in common (span name, attributes,
# label sets) is built once, and the span is made current without the API's generator-based
# context managers. bench/bench_telemetry.py measures what remains.

_MAX_SHAPES = 4096
"""Shapes kept per kind before the cache starts over (tools x clients is bounded in practice;
this bounds it whatever a client sends as a tool name)."""


@dataclass(slots=True)
class _Shape:
    span_name: str
    attributes: Mapping[str, Any]
    """The span's attributes at start (the SDK copies them; this mapping is never changed)."""
    base_labels: Mapping[str, str]
    labels: dict[tuple[str, str | None], Mapping[str, str]] = field(default_factory=dict)
    server: str = ""
    tool: str = ""
    client: str | None = None

    def labels_for(self, outcome: str, error_type: str | None) -> Mapping[str, str]:
        key = (outcome, error_type)
        labels = self.labels.get(key)
        if labels is None:
            built = {**self.base_labels, "pi_mcp.outcome": outcome}
            if error_type:
                built["error.type"] = error_type
            labels = self.labels[key] = built
        return labels


class _DurationHistogram:
    """A duration histogram of the hot path: a sample goes straight into the SDK's
    aggregation of its label set, in every metric reader's storage.

    The SDK's ``Histogram.record`` copies, validates and hashes the labels again for every
    sample and every reader (most of a call's metric cost); a call's labels are one of its
    shape's cached mappings, so the aggregations they lead to are looked up once, by the
    SDK's own first ``record``, and kept. Every reader still sees every sample as it is
    recorded (nothing waits for a collection). Used only on pi-mcp's own meter provider,
    without exemplars, where each label set keeps its aggregation from one collection to the
    next (cumulative readers); otherwise, and whenever the SDK's storage is not laid out as
    expected, each sample goes through ``record``. Called by one thread at a time (the
    worker, or the caller when there is none)."""

    __slots__ = ("_aggregations", "_context", "_direct", "_instrument", "_measurement", "_storages")

    def __init__(self, instrument: Any, *, direct: bool) -> None:
        self._instrument = instrument
        self._direct = direct and self._may_be_direct()
        self._storages: Any = None
        self._aggregations: dict[int, tuple[Mapping[str, str], tuple[Any, ...]]] = {}
        """id(labels) -> (labels, their aggregations in every reader's storage)."""

    def _may_be_direct(self) -> bool:
        try:
            from opentelemetry.context import Context
            from opentelemetry.sdk.metrics import AlwaysOffExemplarFilter
            from opentelemetry.sdk.metrics._internal.measurement import Measurement
        except ImportError:
            return False
        consumer = getattr(self._instrument, "_measurement_consumer", None)
        config = getattr(consumer, "_sdk_config", None)
        if not isinstance(getattr(config, "exemplar_filter", None), AlwaysOffExemplarFilter):
            return False
        self._measurement = Measurement
        self._context = Context()
        return hasattr(consumer, "_reader_storages")

    @property
    def direct_label_sets(self) -> int:
        """Label sets whose samples go straight into their aggregations (for tests)."""
        return len(self._aggregations)

    def record(self, value: float, labels: Mapping[str, str]) -> None:
        instrument = self._instrument
        if self._direct:
            storages = instrument._measurement_consumer._reader_storages
            if storages is not self._storages:  # a reader added or removed: look up again
                self._aggregations.clear()
                self._storages = storages
            known = self._aggregations.get(id(labels))
            if known is not None and known[0] is labels and instrument._is_enabled():
                # Only the value is read: no exemplars, hence no time, context or labels.
                measurement = self._measurement(value, 0, instrument, self._context, None)
                for aggregation in known[1]:
                    aggregation.aggregate(measurement, False)
                return
        instrument.record(value, labels)
        if self._direct:
            self._learn(labels)

    def _learn(self, labels: Mapping[str, str]) -> None:
        """Keep the aggregations ``labels`` lead to, now that ``record`` made them."""
        try:
            from opentelemetry.sdk.metrics._internal._view_instrument_match import (
                _hash_attributes,
            )

            key = _hash_attributes(dict(labels))
            aggregations: list[Any] = []
            for storage in self._storages.values():
                matches = storage._instrument_view_instrument_matches.get(self._instrument)
                if not matches:
                    return  # this reader does not aggregate it (yet)
                for match in matches:
                    if getattr(match, "_reset_on_collect", True) or (
                        match._view._attribute_keys is not None
                    ):
                        # A delta reader starts each label set afresh at every collection,
                        # a view may drop labels: the SDK's own path keeps them right.
                        self._direct = False
                        return
                    aggregation = match._attributes_aggregation.get(key)
                    if aggregation is None:
                        return  # beyond the cardinality limit, say: the SDK's path
                    aggregations.append(aggregation)
        except (ImportError, AttributeError, TypeError):
            logger.debug("telemetry: durations recorded through the SDK", exc_info=True)
            self._direct = False
            return
        if len(self._aggregations) >= _MAX_SHAPES:
            self._aggregations.clear()
        self._aggregations[id(labels)] = (labels, tuple(aggregations))


def _request_shape(
    method: str,
    target: str | None,
    transport: str,
    client: str | None,
    protocol_version: str | None,
) -> _Shape:
    attributes: dict[str, Any] = {"mcp.method.name": method, "network.transport": transport}
    labels = {"mcp.method.name": method}
    if protocol_version:
        attributes["mcp.protocol.version"] = protocol_version
    if client:
        attributes["pi_mcp.client"] = labels["pi_mcp.client"] = client
    if method == "tools/call":
        attributes["gen_ai.operation.name"] = "execute_tool"
        if target is not None:
            attributes["gen_ai.tool.name"] = labels["gen_ai.tool.name"] = target
    elif method == "prompts/get" and target is not None:
        attributes["gen_ai.prompt.name"] = target
    name = f"{method} {target}" if target else method
    return _Shape(name, attributes, labels, client=client)


def _call_shape(
    server: str, tool: str, is_resource: bool, transport: str | None, client: str | None
) -> _Shape:
    method = "resources/read" if is_resource else "tools/call"
    attributes: dict[str, Any] = {
        "mcp.method.name": method,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "pi_mcp.server": server,
    }
    if transport is not None:
        attributes["network.transport"] = transport
    labels = {"mcp.method.name": method, "pi_mcp.server": server, "gen_ai.tool.name": tool}
    if client:
        attributes["pi_mcp.client"] = labels["pi_mcp.client"] = client
    return _Shape(f"{method} {tool}", attributes, labels, server=server, tool=tool, client=client)


class _RequestSpan:
    """:meth:`Telemetry.request`'s context manager (a class: cheaper than a generator)."""

    __slots__ = (
        "_meta",
        "_record",
        "_request_id",
        "_session_id",
        "_shape",
        "_span",
        "_started",
        "_telemetry",
        "_token",
    )

    def __init__(
        self,
        telemetry: Telemetry,
        shape: _Shape,
        request_id: str | int | None,
        session_id: str | None,
        parent_meta: Mapping[str, Any] | None,
    ) -> None:
        self._telemetry = telemetry
        self._shape = shape
        self._request_id = request_id
        self._session_id = session_id
        self._meta = parent_meta
        self._record = _RequestRecord()

    def _ids(self) -> dict[str, str] | None:
        """This request's own attributes (its JSON-RPC id and session), beside its shape's."""
        if self._request_id is None and not self._session_id:
            return None
        ids = {}
        if self._request_id is not None:
            ids["jsonrpc.request.id"] = str(self._request_id)
        if self._session_id:
            ids["mcp.session.id"] = self._session_id
        return ids

    def __enter__(self) -> _RequestRecord:
        telemetry = self._telemetry
        shape = self._shape
        deferred = telemetry._deferred_spans
        span: Any
        if deferred is not None:
            parent = _extract(self._meta)
            if parent is None:
                parent = telemetry.get_current()
            attributes = shape.attributes
            if not deferred.parent_decides:  # a sampler that may read them: at start
                attributes = {**attributes, **(self._ids() or {})}
            # Else the worker adds the ids as it makes the span (_end).
            span = deferred.start(shape.span_name, attributes, parent, telemetry.span_kinds.SERVER)
        else:
            span = telemetry.tracer.start_span(
                shape.span_name,
                context=_extract(self._meta),
                kind=telemetry.span_kinds.SERVER,
                attributes={**shape.attributes, **(self._ids() or {})},
                record_exception=False,
                set_status_on_exception=False,
            )
        self._span = span
        self._token = telemetry.attach(telemetry.set_span_in_context(span))
        self._started = time.perf_counter()
        return self._record

    def __exit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> None:
        duration_s = time.perf_counter() - self._started
        end_ns = time.time_ns()
        self._telemetry.detach(self._token)
        record = self._record
        if exc is not None:
            record.error_type = record.error_type or _error_type(exc)
        self._telemetry._finisher.submit(self._end, (duration_s, end_ns))

    def _end(self, duration_s: float, end_ns: int) -> None:
        """In the worker thread: the span (made now on pi-mcp's provider), the duration sample."""
        record = self._record
        span = self._span
        # A pending span gets its request's ids now; a span made at once had them at start.
        extra = self._ids() if isinstance(span, _PendingSpan) else None
        _end_span(self._telemetry, span, extra, record.error_type, end_ns)
        labels = self._shape.labels_for(record.outcome(), record.error_type)
        self._telemetry._request_duration.record(duration_s, labels)


class _PendingSpan:
    """The span a request or an upstream call stands for while it runs: ids and sampling
    decided, the SDK span not made yet. Current meanwhile, so the MCP SDK writes its context
    into ``params._meta.traceparent`` and spans started meanwhile are its children; the span
    itself is made with these ids once there is an answer (:class:`_DeferredSpans`).
    A subclass of the API's ``NonRecordingSpan``, created in :func:`_pending_span_class`."""

    __slots__ = ()
    name: str
    kind: Any
    attributes: Mapping[str, Any]
    """Its attributes at start (never changed: a shape's, or a copy)."""
    parent: Any
    """The context it started in: the span's parent when it is made."""
    parent_span: Any
    """That context's span's ``SpanContext``, or ``None`` for a root span."""
    recording: bool
    """The sampler's decision: ``False``, and no span is made (the ids still go out)."""
    start_ns: int


_PENDING_SPAN_CLASS: list[type[Any]] = []


def _pending_span_class() -> type[Any]:
    """Defined on first use, as the tracer provider class is (the API's span type)."""
    if _PENDING_SPAN_CLASS:
        return _PENDING_SPAN_CLASS[0]
    from opentelemetry.trace import NonRecordingSpan

    class PendingSpan(NonRecordingSpan, _PendingSpan):
        __slots__ = ("attributes", "kind", "name", "parent", "parent_span", "recording", "start_ns")

    _PENDING_SPAN_CLASS.append(PendingSpan)
    return PendingSpan


class _DeferredSpans:
    """How a request's and an upstream call's spans are made after the answer, on pi-mcp's
    own tracer provider.

    Making an SDK span (ids, sampling, attribute checks, the span object) is most of what
    telemetry adds to a call; made before the request is sent it delays every answer. So a
    call only takes its span's ids and the sampler's decision (what its ``traceparent``
    says) and the span is made with them, its start time the call's, after the answer, by
    the worker thread: the same span, the same parent, the same ids the upstream server saw. An
    application's own provider has no way to be handed ids, so there spans are made at once.
    """

    __slots__ = (
        "_checked_processors",
        "_current_span",
        "_direct",
        "_flags",
        "_ids",
        "_pending_class",
        "_random_ids",
        "_readable_span",
        "_sampler",
        "_span_context",
        "_status_error",
        "_status_unset",
        "direct_spans",
        "parent_decides",
    )

    def __init__(self, sampler: Any, ids: Any) -> None:
        from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
        from opentelemetry.sdk.trace.sampling import DEFAULT_ON
        from opentelemetry.trace import SpanContext, TraceFlags, get_current_span

        self._sampler = sampler
        # The default sampler (no OTEL_TRACES_SAMPLER): a root span is sampled, a child is
        # when its parent is, and it keeps its parent's trace state. Said here, not asked.
        self.parent_decides = sampler is DEFAULT_ON
        self._ids = ids
        self._random_ids = RandomIdGenerator()  # new ids; ``_ids`` is told them when used
        self._span_context = SpanContext
        self._current_span = get_current_span
        # [sampled][random trace id] -> flags, as the SDK sets them on the spans it makes.
        self._flags = [
            [TraceFlags(TraceFlags.DEFAULT), TraceFlags(TraceFlags.RANDOM_TRACE_ID)],
            [
                TraceFlags(TraceFlags.SAMPLED),
                TraceFlags(TraceFlags.SAMPLED | TraceFlags.RANDOM_TRACE_ID),
            ],
        ]
        self._pending_class = _pending_span_class()
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.trace import Status, StatusCode

        self._readable_span = ReadableSpan
        self._status_unset = Status(StatusCode.UNSET)
        self._status_error = Status(StatusCode.ERROR)
        self._checked_processors: tuple[Any, ...] | None = None
        self._direct = False
        self.direct_spans = 0
        """Spans handed to the span processors made directly (:meth:`end`); for tests."""

    @classmethod
    def for_provider(cls, provider: TracerProvider) -> _DeferredSpans | None:
        if not _PROVIDER_CLASS or not isinstance(provider, _PROVIDER_CLASS[0]):
            return None
        ids = provider.id_generator
        if not callable(getattr(ids, "preset", None)):  # given an id generator of its own
            return None
        return cls(provider.sampler, ids)

    def start(self, name: str, attributes: Mapping[str, Any], parent: Any, kind: Any) -> Any:
        """The pending span ``name`` under ``parent`` (a context), starting now."""
        parent_span = self._current_span(parent).get_span_context()
        has_parent = parent_span.is_valid  # a property: computed on each read
        if not has_parent:
            trace_id = self._random_ids.generate_trace_id()
            random_id = True
        else:
            trace_id = parent_span.trace_id
            random_id = parent_span.trace_flags.random_trace_id
        if self.parent_decides:
            sampled = recording = not has_parent or parent_span.trace_flags.sampled
            trace_state = parent_span.trace_state if has_parent else None
        else:
            sampling = self._sampler.should_sample(parent, trace_id, name, kind, attributes)
            sampled = sampling.decision.is_sampled()
            recording = sampling.decision.is_recording()
            trace_state = sampling.trace_state
            if recording and sampling.attributes is not None:
                # What the SDK would give the span: the sampler may add attributes.
                attributes = sampling.attributes
        context = self._span_context(
            trace_id,
            self._random_ids.generate_span_id(),
            False,  # is_remote
            self._flags[sampled][random_id],
            trace_state,
        )
        pending = self._pending_class(context)
        pending.name = name
        pending.kind = kind
        pending.attributes = attributes
        pending.parent = parent
        pending.parent_span = parent_span if has_parent else None
        pending.recording = recording
        pending.start_ns = time.time_ns()
        return pending

    def end(
        self,
        tracer: Tracer,
        pending: Any,
        extra: Mapping[str, Any] | None,
        error_type: str | None,
        end_ns: int,
    ) -> None:
        """Make the span ``pending`` stood for (its ids, parent, start time, attributes and
        ``extra`` ones), end it at ``end_ns`` and hand it to the span processors.

        Where every span processor only looks at ended spans (the SDK's batch and simple
        processors: their ``on_start`` does nothing), the finished span is built as the SDK
        hands it to ``on_end`` (a ``ReadableSpan`` with the provider's resource and the
        tracer's scope) and given to them directly: the SDK's start path (a second sampler
        call, the id generator, locks, attribute re-validation, ``on_start``) would repeat
        what :meth:`start` decided. Otherwise the SDK makes it (:meth:`make`)."""
        processor = self._direct_processor(tracer)
        if processor is None:
            span = self.make(tracer, pending, extra)
            _finish(span, error_type)
            span.end(end_ns)
            return
        attributes = dict(pending.attributes)
        if extra:
            attributes.update(extra)
        if error_type is not None:
            attributes["error.type"] = error_type
        sdk_tracer: Any = tracer
        processor.on_end(
            self._readable_span(
                name=pending.name,
                context=pending.get_span_context(),
                parent=pending.parent_span,
                resource=sdk_tracer.resource,
                attributes=attributes,
                kind=pending.kind,
                instrumentation_info=sdk_tracer.instrumentation_info,
                status=self._status_unset if error_type is None else self._status_error,
                start_time=pending.start_ns,
                end_time=end_ns,
                instrumentation_scope=sdk_tracer._instrumentation_scope,
            )
        )
        self.direct_spans += 1

    def _direct_processor(self, tracer: Any) -> Any:
        """The tracer's span processor when a span may be handed to it directly, else
        ``None`` (checked again whenever a span processor is added)."""
        processor = getattr(tracer, "span_processor", None)
        processors = getattr(processor, "_span_processors", None)
        if processors is None or not tracer._is_enabled():
            return None
        if processors is not self._checked_processors:
            self._direct = _spans_may_be_made_directly(tracer, processors)
            self._checked_processors = processors
        return processor if self._direct else None

    def make(self, tracer: Tracer, pending: Any, extra: Mapping[str, Any] | None) -> Span:
        """The SDK span ``pending`` stood for: its ids, parent, start time and attributes
        (and ``extra`` ones)."""
        span_context = pending.get_span_context()
        attributes = pending.attributes if not extra else {**pending.attributes, **extra}
        self._ids.preset((span_context.trace_id, span_context.span_id))
        try:
            return tracer.start_span(
                pending.name,
                context=pending.parent,
                kind=pending.kind,
                attributes=attributes,
                start_time=pending.start_ns,
                record_exception=False,
                set_status_on_exception=False,
            )
        finally:
            self._ids.preset(None)  # unused when the tracer is disabled: never a later span's


_MIN_SPAN_ATTRIBUTES = 32
"""A span limit below this (``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT``) has the SDK make our spans:
it drops attributes beyond it, which the direct path does not."""


def _spans_may_be_made_directly(tracer: Any, processors: tuple[Any, ...]) -> bool:
    """Whether nothing but ``on_end`` would see a span the SDK makes on ``tracer``: each
    processor's ``on_start`` and ``_on_ending`` are the SDK's own no-ops, the SDK counts no
    spans of its own (``OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED``), and no span limit would
    cut or drop an attribute."""
    from opentelemetry.sdk.trace import SpanProcessor, SynchronousMultiSpanProcessor
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    if type(tracer.span_processor) is not SynchronousMultiSpanProcessor:
        return False
    quiet = (SpanProcessor, BatchSpanProcessor, SimpleSpanProcessor)
    no_op_starts = {kind.on_start for kind in quiet}
    no_op_endings = {getattr(kind, "_on_ending", None) for kind in quiet}
    for processor in processors:
        if type(processor).on_start not in no_op_starts:
            return False
        if getattr(type(processor), "_on_ending", None) not in no_op_endings:
            return False
    counting = getattr(tracer, "_tracer_metrics", None)
    if counting is not None and type(counting).__name__ != "NoOpTracerMetrics":
        return False
    limits = getattr(tracer, "_span_limits", None)
    if limits is None:
        return False
    count_limit = limits.max_span_attributes
    return limits.max_span_attribute_length is None and (
        count_limit is None or count_limit >= _MIN_SPAN_ATTRIBUTES
    )


def _is_recording(span: Any) -> bool:
    return bool(span.recording if isinstance(span, _PendingSpan) else span.is_recording())


def _end_span(
    telemetry: Telemetry,
    span: Any,
    extra: Mapping[str, Any] | None,
    error_type: str | None,
    end_ns: int,
) -> None:
    """End ``span`` at ``end_ns`` with ``extra`` attributes and ``error_type``; a pending
    span's SDK span is made now (:meth:`_DeferredSpans.end`), or nothing when it was
    sampled out (nothing to make, nothing exported)."""
    if isinstance(span, _PendingSpan):
        if not span.recording:
            return
        deferred = telemetry._deferred_spans
        assert deferred is not None  # a pending span comes from it
        deferred.end(telemetry.tracer, span, extra, error_type, end_ns)
        return
    if extra and span.is_recording():
        span.set_attributes(extra)
    _finish(span, error_type)
    span.end(end_ns)


class _UpstreamCallSpan:
    """:meth:`Telemetry.upstream_call`'s context manager (a class: cheaper than a generator)."""

    __slots__ = (
        "_arguments",
        "_outcome",
        "_recorded_arguments",
        "_shape",
        "_span",
        "_started",
        "_telemetry",
        "_token",
    )

    def __init__(self, telemetry: Telemetry, shape: _Shape, arguments: Mapping[str, Any]) -> None:
        self._telemetry = telemetry
        self._shape = shape
        self._arguments = arguments
        self._outcome: CallOutcome | None = None
        self._recorded_arguments: str | None = None

    def _finished(self, outcome: CallOutcome) -> None:
        if self._outcome is None:
            self._outcome = outcome

    def __enter__(self) -> Callable[[CallOutcome], None]:
        telemetry = self._telemetry
        shape = self._shape
        deferred = telemetry._deferred_spans
        span: Any
        current = None  # set_span_in_context reads the current context itself
        if deferred is not None:
            current = telemetry.get_current()
            span = deferred.start(
                shape.span_name, shape.attributes, current, telemetry.span_kinds.CLIENT
            )
            if telemetry.record_arguments and span.recording:
                # Now, not after the answer: the caller may reuse its arguments meanwhile.
                self._recorded_arguments = _recorded(dict(self._arguments))
        else:
            span = telemetry.tracer.start_span(
                shape.span_name,
                kind=telemetry.span_kinds.CLIENT,
                attributes=shape.attributes,
                record_exception=False,
                set_status_on_exception=False,
            )
            if telemetry.record_arguments and span.is_recording():
                span.set_attribute("gen_ai.tool.call.arguments", _recorded(dict(self._arguments)))
        self._span = span
        self._token = telemetry.attach(telemetry.set_span_in_context(span, current))
        in_flight = telemetry._in_flight
        in_flight[shape.server] = in_flight.get(shape.server, 0) + 1
        self._started = time.perf_counter()
        return self._finished

    def __exit__(self, exc_type: Any, exc: BaseException | None, _tb: Any) -> None:
        duration_s = time.perf_counter() - self._started
        end_ns = time.time_ns()
        telemetry = self._telemetry
        telemetry._in_flight[self._shape.server] -= 1
        telemetry.detach(self._token)
        error_type = _error_type(exc) if exc is not None and self._outcome is None else None
        outcome = self._outcome
        recorded_result = None
        if (
            telemetry.record_results
            and outcome is not None
            and outcome.result is not None
            and _is_recording(self._span)
        ):
            # Now, in the caller's thread: the caller owns the result once it has it.
            recorded_result = _recorded(outcome.result.model_dump(mode="json"))
        telemetry._finisher.submit(self._end, (duration_s, end_ns, error_type, recorded_result))

    def _end(
        self, duration_s: float, end_ns: int, raised: str | None, recorded_result: str | None
    ) -> None:
        """In the worker thread: the span (made now on pi-mcp's provider), the duration sample,
        the status page's line."""
        telemetry = self._telemetry
        shape = self._shape
        outcome = self._outcome
        if outcome is not None:
            outcome_name, error_type = _outcome_of(outcome)
            error_kind: str | None = outcome.error_kind
        else:
            outcome_name = "failed"
            error_type = error_kind = raised
        # Arguments were taken at start (a span made at once has them already); a result only
        # when the call had one and its span records (see __exit__).
        extra: dict[str, str] = {}
        if self._recorded_arguments is not None:
            extra["gen_ai.tool.call.arguments"] = self._recorded_arguments
        if recorded_result is not None and outcome is not None:
            extra["gen_ai.tool.call.result"] = recorded_result
        _end_span(telemetry, self._span, extra, error_type, end_ns)
        telemetry._upstream_duration.record(duration_s, shape.labels_for(outcome_name, error_type))
        telemetry.recent.appendleft(
            RecentCall(
                end_ns / 1e9,
                shape.server,
                shape.tool,
                shape.client,
                outcome_name,
                round(duration_s * 1000, 3),
                error_kind,
            )
        )


# ---------------------------------------------------------------------------- the worker
# A call's span and duration sample are made after its answer, and not by the caller: the
# caller hands the worker a tuple (what to finish, its times, its outcome) and goes on. The
# worker runs while the caller waits for its next answer (an I/O wait releases the GIL), so
# the answer never waits for the span, and the span's work overlaps the next request's.

_FINISH_QUEUE_CAPACITY = 10_000
"""Calls answered and not finished yet, at most, per telemetry: beyond, a call's span, duration
sample and status-page line are dropped and counted (``pi_mcp.telemetry.dropped``). Reached
only when span processors stall the worker for a long time (a synchronous exporter whose
endpoint does not answer); memory then stays bounded."""
_POLL_INTERVAL_S = 0.01
"""How often a busy worker looks at its queue: a call's span ends within this of its answer,
and the calls answered meanwhile are finished together, mostly while the caller waits for its
next answer."""
_CALLS_PER_GIL_RELEASE = 8
"""Calls the worker finishes before it lets go of the GIL (``time.sleep(0)``) when more wait:
a thread that wants the GIL otherwise gets it only when the holder blocks or after the
interpreter's switch interval (5 ms), so an answer arriving for the caller would wait for
the whole batch (thousands of calls after a stalled exporter recovers). Eight calls' work is
about 0.1-0.2 ms; letting go after every call doubled the worker's CPU per call (a system
call and a GIL hand-over each) for no p50 the benchmark could tell apart."""
_IDLE_POLLS = 200
"""Empty looks (a second) before the worker sleeps until a call wakes it: an idle process
is not woken every few milliseconds."""
_FLUSH_TIMEOUT_S = 30.0
"""How long a flush waits for the worker to finish what was queued before it: longer means a
span processor is stuck, and the flushing caller (a ``/metrics`` scrape, a shutdown) goes on."""
_STOP_TIMEOUT_S = 5.0
"""How long closing waits for the worker to exit after its flush."""


def _stop() -> None:
    return None


class _Finisher:
    """One telemetry's worker thread (a daemon, started by the first call it is given) and
    its bounded queue of calls to finish."""

    __slots__ = ("__weakref__", "_queue", "_sleeping", "_thread", "_wake", "dropped")

    def __init__(self) -> None:
        self._queue: deque[tuple[Callable[..., None], tuple[Any, ...]]] = deque()
        self._wake = threading.Event()
        self._sleeping = False
        """Set by the worker before it looks at an empty queue and waits: a submit that sees
        it wakes the worker, one that does not was appended before the worker looked."""
        self._thread: threading.Thread | None = None
        self.dropped = 0
        _finishers.add(self)

    @property
    def thread(self) -> threading.Thread | None:
        """The worker thread, while it runs."""
        return self._thread

    def submit(self, finish: Callable[..., None], args: tuple[Any, ...]) -> None:
        """Have the worker run ``finish(*args)``; dropped (and counted) when the queue is full."""
        queue = self._queue
        if len(queue) >= _FINISH_QUEUE_CAPACITY:
            if not self.dropped:
                logger.warning(
                    "telemetry falls behind: %d calls wait for their spans; further calls' "
                    "spans and durations are dropped and counted in pi_mcp.telemetry.dropped",
                    len(queue),
                )
            self.dropped += 1
            return
        queue.append((finish, args))
        if self._sleeping:
            self._wake.set()
        elif self._thread is None:
            self._start()

    def _start(self) -> None:
        with _start_lock:
            if self._thread is not None:
                return
            thread = threading.Thread(target=self._run, name="pi-mcp-telemetry", daemon=True)
            self._thread = thread
            thread.start()

    def _run(self) -> None:
        queue = self._queue
        empty_polls = 0
        since_release = 0
        while True:
            try:
                finish, args = queue.popleft()
            except IndexError:
                since_release = 0
                wake = self._wake
                wake.clear()
                if empty_polls < _IDLE_POLLS:
                    # Busy: look again shortly, unasked (waking this thread at every call
                    # would cost the caller a system call and a thread switch per answer).
                    empty_polls += 1
                    if not queue:
                        wake.wait(_POLL_INTERVAL_S)
                    continue
                self._sleeping = True  # idle: the next call wakes it
                if not queue:
                    wake.wait()
                self._sleeping = False
                empty_polls = 0
                continue
            empty_polls = 0
            if finish is _stop:
                return
            try:
                finish(*args)
            except Exception:  # one span's failure must not lose the others'
                logger.debug("finishing a span failed", exc_info=True)
            since_release += 1
            if since_release >= _CALLS_PER_GIL_RELEASE and queue:
                since_release = 0
                time.sleep(0)  # lets a thread waiting for the GIL (the caller) run first

    def flush(self) -> None:
        """Return once every call submitted before is finished (at most ``_FLUSH_TIMEOUT_S``)."""
        thread = self._thread
        if thread is None or thread is threading.current_thread() or not thread.is_alive():
            self._finish_here()
            return
        done = threading.Event()
        self._queue.append((done.set, ()))  # past the capacity: a flush is never dropped
        self._wake.set()
        if not done.wait(_FLUSH_TIMEOUT_S):
            logger.warning("telemetry: spans not finished after %.0f s", _FLUSH_TIMEOUT_S)

    def close(self) -> None:
        """Finish what is queued and end the worker (a later call starts a new one)."""
        self.flush()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        self._queue.append((_stop, ()))
        self._wake.set()
        thread.join(_STOP_TIMEOUT_S)
        self._thread = None
        self._finish_here()  # submitted while it stopped

    def _finish_here(self) -> None:
        """Without a worker (none yet, or a forked child's copy): in the calling thread."""
        while True:
            try:
                finish, args = self._queue.popleft()
            except IndexError:
                return
            try:
                finish(*args)
            except Exception:
                logger.debug("finishing a span failed", exc_info=True)

    def _forget_thread(self) -> None:
        self._thread = None
        self._sleeping = False
        self._wake = threading.Event()
        # The parent's worker finishes what was queued there: finished here too, each of
        # those spans would be exported twice.
        self._queue.clear()


_finishers: weakref.WeakSet[_Finisher] = weakref.WeakSet()
_start_lock = threading.Lock()


def flush_pending() -> None:
    """Finish the calls answered and not finished yet, of every telemetry (an exporter, a
    ``/metrics`` scrape or a test that reads spans right after a call calls this first; so do
    :meth:`Telemetry.shutdown`, :func:`install` and pi-mcp's tracer provider's
    ``force_flush``/``shutdown``)."""
    for finisher in list(_finishers):
        finisher.flush()


def _forget_threads_after_fork() -> None:
    """A forked child has no worker thread: its next call starts one."""
    global _start_lock
    _start_lock = threading.Lock()  # another thread may have held it as the process forked
    for finisher in list(_finishers):
        finisher._forget_thread()


atexit.register(flush_pending)  # the last calls of a process (daemon threads still run here)
os.register_at_fork(after_in_child=_forget_threads_after_fork)


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
