"""An upstream call's span on pi-mcp's own tracer provider: only its ids and sampling decision
are taken before the request goes out, and the span is made after the answer, by the telemetry
worker thread, with those ids, its parent and the call's times. Checked against a real stdio
server that answers with the ``traceparent`` it received, spans seen by a real span processor,
durations by the SDK's in-memory metric reader."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
from opentelemetry.trace import SpanKind

from gateway._telemetry_support import traceparent_entry
from pi_mcp_adapter.engine import McpAdapter, _telemetry

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CALL_SPAN = "tools/call traceparent"


@dataclass
class StartsAndEnds(SpanProcessor):
    """A span processor that keeps the name of every span started and every span ended, and
    the thread each was started and ended in."""

    started: list[str] = field(default_factory=list)
    ended: list[ReadableSpan] = field(default_factory=list)
    threads: dict[str, set[threading.Thread]] = field(default_factory=dict)

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span.name)
        self.threads.setdefault(span.name, set()).add(threading.current_thread())

    def on_end(self, span: ReadableSpan) -> None:
        self.ended.append(span)
        self.threads.setdefault(span.name, set()).add(threading.current_thread())


@dataclass
class Observed:
    adapter: McpAdapter
    provider: SdkTracerProvider
    spans: StartsAndEnds
    metrics: InMemoryMetricReader

    def ended(self, name: str) -> list[ReadableSpan]:
        _telemetry.flush_pending()
        return [s for s in self.spans.ended if s.name == name]

    def call_durations_counted(self) -> int:
        _telemetry.flush_pending()
        data = self.metrics.get_metrics_data()
        assert data is not None
        counted = 0
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == "mcp.client.operation.duration":
                        assert isinstance(metric.data, Histogram)
                        counted += sum(point.count for point in metric.data.data_points)
        return counted


@pytest.fixture
async def observed(tmp_path: Path) -> AsyncIterator[Observed]:
    async with _observed(tmp_path) as observed:
        yield observed


@asynccontextmanager
async def _observed(tmp_path: Path) -> AsyncIterator[Observed]:
    """An adapter over the traceparent server, telemetry on pi-mcp's own tracer provider."""
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tp": traceparent_entry()}}))
    provider = _telemetry.create_tracer_provider({"service.name": "pi-mcp-test"})
    spans = StartsAndEnds()
    provider.add_span_processor(spans)
    metrics = InMemoryMetricReader()
    telemetry = _telemetry.create_telemetry(tracer_provider=provider, metric_readers=[metrics])
    previous = _telemetry.install(telemetry)
    try:
        async with McpAdapter(agent_dir=tmp_path, project_dir=tmp_path) as adapter:
            yield Observed(adapter, provider, spans, metrics)
    finally:
        _telemetry.install(previous)
        telemetry.shutdown()
        provider.shutdown()


async def _received_traceparent(adapter: McpAdapter) -> str:
    outcome = await adapter.call("tp_traceparent", {})
    assert outcome.error_kind is None, outcome
    assert not outcome.is_error, outcome
    content: Any = getattr(outcome.result, "content", [])
    return "".join(getattr(block, "text", "") for block in content).strip()


async def test_a_calls_span_is_made_after_its_answer_with_the_ids_its_traceparent_carried(
    observed: Observed,
) -> None:
    tracer = observed.provider.get_tracer("agent")
    with tracer.start_as_current_span("agent step") as step:
        before_ns = time.time_ns()
        received = await _received_traceparent(observed.adapter)
        after_ns = time.time_ns()

    # The call's span is made and ended by the telemetry worker, never by the caller...
    (span,) = observed.ended(CALL_SPAN)
    (thread,) = observed.spans.threads[CALL_SPAN]
    assert thread is not threading.current_thread()
    assert thread.name == "pi-mcp-telemetry"
    # ...and it is the one the server was told about.
    version, trace_id, span_id, flags = received.split("-")
    assert version == "00"
    assert trace_id == f"{step.get_span_context().trace_id:032x}"
    assert span_id == f"{span.context.span_id:016x}"
    assert flags == f"{span.context.trace_flags:02x}"
    assert span.parent is not None
    assert span.parent.span_id == step.get_span_context().span_id
    assert span.kind == SpanKind.CLIENT
    assert span.start_time is not None
    assert span.end_time is not None
    assert before_ns <= span.start_time <= span.end_time <= after_ns
    attributes = dict(span.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "traceparent"
    assert attributes["pi_mcp.server"] == "tp"
    assert attributes["network.transport"] == "pipe"
    assert observed.call_durations_counted() == 1


async def test_a_call_outside_any_trace_starts_one_and_its_span_has_the_ids_sent(
    observed: Observed,
) -> None:
    first = await _received_traceparent(observed.adapter)
    second = await _received_traceparent(observed.adapter)

    spans = observed.ended(CALL_SPAN)
    assert len(spans) == 2
    for received, span in zip((first, second), spans, strict=True):
        _version, trace_id, span_id, flags = received.split("-")
        assert span.parent is None
        assert trace_id == f"{span.context.trace_id:032x}"
        assert span_id == f"{span.context.span_id:016x}"
        assert flags == f"{span.context.trace_flags:02x}"
        assert span.context.trace_flags.sampled
    assert spans[0].context.trace_id != spans[1].context.trace_id  # one trace per root call


async def test_a_call_under_an_unsampled_parent_says_so_upstream_makes_no_span_and_is_counted(
    observed: Observed,
) -> None:
    unsampled = trace.SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C,
        span_id=0xB7AD6B7169203331,
        is_remote=True,
        trace_flags=trace.TraceFlags(trace.TraceFlags.DEFAULT),
    )
    with trace.use_span(trace.NonRecordingSpan(unsampled)):
        received = await _received_traceparent(observed.adapter)

    _version, trace_id, span_id, flags = received.split("-")
    assert trace_id == f"{unsampled.trace_id:032x}"
    assert span_id not in ("0" * 16, f"{unsampled.span_id:016x}")  # the call's own id
    assert int(flags, 16) & trace.TraceFlags.SAMPLED == 0
    assert observed.ended(CALL_SPAN) == []
    assert CALL_SPAN not in observed.spans.started
    assert observed.call_durations_counted() == 1


async def test_a_sampler_named_by_otel_traces_sampler_decides_what_the_traceparent_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")  # read as the provider is made
    async with _observed(tmp_path) as observed:
        received = await _received_traceparent(observed.adapter)
        _version, trace_id, span_id, flags = received.split("-")
        assert int(trace_id, 16) != 0
        assert int(span_id, 16) != 0
        assert int(flags, 16) & trace.TraceFlags.SAMPLED == 0
        assert observed.ended(CALL_SPAN) == []
        assert observed.call_durations_counted() == 1


async def test_an_applications_own_provider_still_gets_the_calls_span_with_the_ids_sent(
    tmp_path: Path,
) -> None:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tp": traceparent_entry()}}))
    provider = SdkTracerProvider()  # not pi-mcp's: it cannot be handed ids in advance
    spans = StartsAndEnds()
    provider.add_span_processor(spans)
    telemetry = _telemetry.create_telemetry(tracer_provider=provider)
    previous = _telemetry.install(telemetry)
    try:
        async with McpAdapter(agent_dir=tmp_path, project_dir=tmp_path) as adapter:
            received = await _received_traceparent(adapter)
        _telemetry.flush_pending()
    finally:
        _telemetry.install(previous)
        telemetry.shutdown()
        provider.shutdown()
    (span,) = [s for s in spans.ended if s.name == CALL_SPAN]
    _version, trace_id, span_id, _flags = received.split("-")
    assert (trace_id, span_id) == (f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}")


async def test_closing_the_adapter_finishes_the_spans_of_its_last_calls(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"tp": traceparent_entry()}}))
    provider = _telemetry.create_tracer_provider({"service.name": "pi-mcp-test"})
    spans = StartsAndEnds()
    provider.add_span_processor(spans)
    telemetry = _telemetry.create_telemetry(tracer_provider=provider)
    previous = _telemetry.install(telemetry)
    try:
        async with McpAdapter(agent_dir=tmp_path, project_dir=tmp_path) as adapter:
            for _ in range(3):
                await _received_traceparent(adapter)
        # No flush asked for: closing the adapter waited for the worker.
        assert [s.name for s in spans.ended].count(CALL_SPAN) == 3
        assert not telemetry._finisher._queue
    finally:
        _telemetry.install(previous)
        telemetry.shutdown()
        provider.shutdown()


async def test_shutting_telemetry_down_finishes_what_waits_and_ends_its_worker_thread(
    observed: Observed,
) -> None:
    await _received_traceparent(observed.adapter)
    telemetry = _telemetry.active()
    assert telemetry is not None
    worker = telemetry._finisher.thread
    assert worker is not None
    assert worker.is_alive()
    assert worker.daemon  # never keeps a process from exiting

    telemetry.shutdown()

    assert not worker.is_alive()
    assert telemetry._finisher.thread is None
    assert [s.name for s in observed.spans.ended].count(CALL_SPAN) == 1


_FORKING_PROGRAM = """
import os, threading
from pi_mcp_adapter.engine import _telemetry

finisher = _telemetry._Finisher()
finished = []
taken, gate = threading.Event(), threading.Event()

def stuck():
    taken.set()
    gate.wait(30)

finisher.submit(stuck, ())
taken.wait(30)  # the parent's worker is busy with it...
finisher.submit(finished.append, ("queued in the parent",))  # ...and this one waits
pid = os.fork()
if pid == 0:
    finisher.submit(finished.append, ("the child's own",))
    finisher.flush()
    worker = finisher.thread
    print(finished, worker is not None and worker.is_alive(), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
gate.set()
finisher.flush()
print(finished, flush=True)
"""


def test_a_forked_child_finishes_only_its_own_calls_in_a_worker_of_its_own() -> None:
    import subprocess
    import sys

    completed = subprocess.run(
        [sys.executable, "-c", _FORKING_PROGRAM],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    child, parent = completed.stdout.splitlines()
    assert child == '["the child\'s own"] True'
    assert parent == "['queued in the parent']"
