"""What the telemetry worker does per call on pi-mcp's own providers, counted (not timed):
a call's span is built as the SDK hands it to ``on_end`` and given to the span processors
directly, the sampler asked once; a duration sample goes into the SDK's aggregation of its
label set directly, ``Histogram.record`` called once per label set. Each checked against a
real stdio server, real span processors and real metric readers (in memory and Prometheus);
and the SDK's own paths where something would notice the difference."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import Histogram as HistogramInstrument
from opentelemetry.sdk.metrics.export import AggregationTemporality, Histogram, InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_ON,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind, StatusCode, TraceState
from opentelemetry.util.types import Attributes

from gateway._telemetry_support import traceparent_entry
from pi_mcp_adapter.engine import McpAdapter, _telemetry

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CALL_SPAN = "tools/call traceparent"
CALLS = 5


class CountingSampler(Sampler):
    """Samples as ``decides`` does, counts the questions per span name, and adds an
    attribute of its own to what it samples (as a sampler may)."""

    def __init__(self, decides: Sampler = ALWAYS_ON) -> None:
        self.decides = decides
        self.asked: Counter[str] = Counter()

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        self.asked[name] += 1
        result = self.decides.should_sample(
            parent_context, trace_id, name, kind, attributes, links, trace_state
        )
        if not result.decision.is_recording():
            return result
        return SamplingResult(
            result.decision, {**(attributes or {}), "test.sampled_by": "counting"}, None
        )

    def get_description(self) -> str:
        return "CountingSampler"


class SeesStarts(SpanProcessor):
    """A processor that looks at spans as they start: the SDK's own span must reach it."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span.name)


@dataclass
class Observed:
    adapter: McpAdapter
    telemetry: _telemetry.Telemetry
    exported: InMemorySpanExporter
    metrics: InMemoryMetricReader

    def spans(self, name: str) -> list[ReadableSpan]:
        _telemetry.flush_pending()
        return [s for s in self.exported.get_finished_spans() if s.name == name]


@asynccontextmanager
async def observed(
    tmp_path: Path,
    *,
    sampler: Sampler | None = None,
    processors: Sequence[SpanProcessor] = (),
    metrics: InMemoryMetricReader | None = None,
) -> AsyncIterator[Observed]:
    """An adapter over the traceparent server, telemetry on pi-mcp's own tracer provider
    (with ``sampler`` when given) and meter provider, spans exported in memory."""
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tp": traceparent_entry()}}))
    resource = Resource.create({"service.name": "pi-mcp-direct-test"})
    provider_class = _telemetry._provider_class()
    provider = (
        provider_class(resource=resource, sampler=sampler)
        if sampler is not None
        else provider_class(resource=resource)
    )
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    for processor in processors:
        provider.add_span_processor(processor)
    reader = metrics or InMemoryMetricReader()
    telemetry = _telemetry.create_telemetry(tracer_provider=provider, metric_readers=[reader])
    previous = _telemetry.install(telemetry)
    try:
        async with McpAdapter(agent_dir=tmp_path, project_dir=tmp_path) as adapter:
            yield Observed(adapter, telemetry, exported, reader)
    finally:
        _telemetry.install(previous)
        telemetry.shutdown()
        provider.shutdown()


async def _call(adapter: McpAdapter, times: int = 1) -> None:
    for _ in range(times):
        outcome = await adapter.call("tp_traceparent", {})
        assert outcome.error_kind is None, outcome
        assert not outcome.is_error, outcome


def _durations_counted(reader: InMemoryMetricReader) -> list[tuple[int, float]]:
    """(count, sum) of each ``mcp.client.operation.duration`` point one collection sees."""
    _telemetry.flush_pending()
    data = reader.get_metrics_data()
    assert data is not None
    points: list[tuple[int, float]] = []
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "mcp.client.operation.duration":
                    assert isinstance(metric.data, Histogram)
                    points += [(p.count, p.sum) for p in metric.data.data_points]
    return points


def _count_records(histogram: Any) -> Callable[[], int]:
    """Wrap the SDK instrument's real ``record``: how many samples took the SDK's path."""
    instrument = histogram._instrument
    real = instrument.record
    calls = [0]

    def record(*args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        real(*args, **kwargs)

    instrument.record = record
    return lambda: calls[0]


async def test_a_calls_span_carries_the_providers_resource_and_scope_and_the_sampler_is_asked_once(
    tmp_path: Path,
) -> None:
    sampler = CountingSampler()
    async with observed(tmp_path, sampler=sampler) as seen:
        await _call(seen.adapter, CALLS)
        spans = seen.spans(CALL_SPAN)

    assert len(spans) == CALLS
    # Asked once per call, before the request went out: not again when the span was made.
    assert sampler.asked[CALL_SPAN] == CALLS
    for span in spans:
        assert isinstance(span, ReadableSpan)
        assert span.resource.attributes["service.name"] == "pi-mcp-direct-test"
        assert span.instrumentation_scope is not None
        assert span.instrumentation_scope.name == "pi-mcp-adapter"
        assert span.kind is SpanKind.CLIENT
        assert span.status.status_code is StatusCode.UNSET
        assert span.parent is None
        attributes = dict(span.attributes or {})
        assert attributes["test.sampled_by"] == "counting"  # what the sampler gave it
        assert attributes["gen_ai.tool.name"] == "traceparent"
        assert attributes["pi_mcp.server"] == "tp"
        assert span.start_time is not None
        assert span.end_time is not None
        assert span.start_time <= span.end_time


async def test_a_ratio_sampler_decides_which_call_spans_exist_and_every_call_is_counted(
    tmp_path: Path,
) -> None:
    sampler = CountingSampler(TraceIdRatioBased(0.5))
    async with observed(tmp_path, sampler=sampler) as seen:
        await _call(seen.adapter, 40)
        spans = seen.spans(CALL_SPAN)
        counted = _durations_counted(seen.metrics)

    assert sampler.asked[CALL_SPAN] == 40
    # The ratio sampler's own verdict on each exported span's trace id.
    bound = TraceIdRatioBased.get_bound_for_rate(0.5)
    assert all(span.context.trace_id & TraceIdRatioBased.TRACE_ID_LIMIT < bound for span in spans)
    assert 0 < len(spans) < 40
    assert sum(count for count, _ in counted) == 40


async def test_a_processor_that_looks_at_span_starts_gets_the_sdks_own_span(
    tmp_path: Path,
) -> None:
    starts = SeesStarts()
    sampler = CountingSampler()
    async with observed(tmp_path, sampler=sampler, processors=[starts]) as seen:
        await _call(seen.adapter, 3)
        spans = seen.spans(CALL_SPAN)

    assert starts.started.count(CALL_SPAN) == 3
    assert len(spans) == 3
    assert all(dict(s.attributes or {})["test.sampled_by"] == "counting" for s in spans)


async def test_durations_of_one_label_set_go_through_the_sdks_record_once_and_all_are_counted(
    tmp_path: Path,
) -> None:
    async with observed(tmp_path) as seen:
        took_sdk_path = _count_records(seen.telemetry._upstream_duration)
        await _call(seen.adapter, CALLS)
        ((count, total_s),) = _durations_counted(seen.metrics)

        assert took_sdk_path() == 1  # the first sample: it makes the label set's aggregation
        assert count == CALLS
        assert total_s > 0
        recent = [call.duration_ms for call in seen.telemetry.recent][:CALLS]
        assert total_s == pytest.approx(sum(recent) / 1000, rel=0.01, abs=1e-4)

        # Collected again: still every sample, none counted twice (cumulative).
        await _call(seen.adapter, 2)
        ((count, _),) = _durations_counted(seen.metrics)
        assert count == CALLS + 2


async def test_a_prometheus_reader_added_after_calls_counts_every_later_call_and_so_does_the_first(
    tmp_path: Path,
) -> None:
    async with observed(tmp_path) as seen:
        await _call(seen.adapter, 3)
        _telemetry.flush_pending()  # those three are recorded before the second reader exists
        seen.telemetry.serve_prometheus()  # the label set's aggregations are looked up again
        await _call(seen.adapter, 4)
        _telemetry.flush_pending()
        text = seen.telemetry.prometheus_text().decode()
        ((in_memory, _),) = _durations_counted(seen.metrics)

    (scraped,) = re.findall(
        r'^mcp_client_operation_duration_seconds_count\{[^}]*gen_ai_tool_name="traceparent"'
        r"[^}]*\} (\S+)$",
        text,
        re.MULTILINE,
    )
    assert float(scraped) == 4
    assert in_memory == 7


async def test_a_delta_reader_counts_each_call_once_across_collections(tmp_path: Path) -> None:
    delta = InMemoryMetricReader(
        preferred_temporality={HistogramInstrument: AggregationTemporality.DELTA}
    )
    async with observed(tmp_path, metrics=delta) as seen:
        await _call(seen.adapter, 3)
        first = _durations_counted(delta)
        await _call(seen.adapter, 2)
        second = _durations_counted(delta)
        third = _durations_counted(delta)

    assert [count for count, _ in first] == [3]
    assert [count for count, _ in second] == [2]
    assert third == []


async def test_an_applications_own_providers_still_get_every_span_and_sample(
    tmp_path: Path,
) -> None:
    """Not pi-mcp's providers: spans are made by the SDK at once, samples recorded by it."""
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tp": traceparent_entry()}}))
    provider = SdkTracerProvider()
    exported = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    from opentelemetry.sdk.metrics import MeterProvider

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    telemetry = _telemetry.create_telemetry(tracer_provider=provider, meter_provider=meters)
    previous = _telemetry.install(telemetry)
    try:
        took_sdk_path = _count_records(telemetry._upstream_duration)
        async with McpAdapter(agent_dir=tmp_path, project_dir=tmp_path) as adapter:
            await _call(adapter, 3)
        ((count, _),) = _durations_counted(reader)
    finally:
        _telemetry.install(previous)
        telemetry.shutdown()
        meters.shutdown()
        provider.shutdown()
    assert count == 3
    assert took_sdk_path() == 3
    assert len([s for s in exported.get_finished_spans() if s.name == CALL_SPAN]) == 3
