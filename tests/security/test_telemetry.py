"""Attacks on telemetry: argument values and secrets in span attributes, the gateway's
``/metrics`` and status page read without the operator's token or by a restricted client,
a repository naming where traces go, HTML in what a server says, the cost of "off", and a
span pipeline that stops taking spans (calls go on; what waits for it stays bounded)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from gateway._telemetry_support import fixture_entry, observed_gateway
from pi_mcp_adapter._secrets import forget_secrets, register_secret
from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.config._models import GatewayClient
from pi_mcp_adapter.engine import McpAdapter, _telemetry
from pi_mcp_adapter.hosts import GatewayOptions

pytestmark = pytest.mark.anyio

CANARY = "canary-argument-51b7e0"
SECRET = "sk-live-secret-9d2e44a1"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _values_of(spans: list[object]) -> list[str]:
    values: list[str] = []
    for span in spans:
        for value in dict(getattr(span, "attributes", None) or {}).values():
            values.append(str(value))
        values.append(str(getattr(span, "name", "")))
    return values


@pytest.mark.slow
async def test_no_argument_value_or_result_becomes_a_span_attribute_by_default(
    tmp_path: Path,
) -> None:
    async with observed_gateway(tmp_path, {"fx": fixture_entry()}) as gateway:
        async with Client(gateway.url, mode="legacy", cache=None) as client:
            await client.call_tool("mcp", {"tool": "fx_echo", "args": {"message": CANARY}})
            await client.call_tool("mcp", {"search": CANARY})
        spans = gateway.finished()
    assert spans
    assert not [v for v in _values_of(spans) if CANARY in v]


@pytest.mark.slow
async def test_recorded_arguments_are_masked_by_value_when_the_user_turns_them_on(
    tmp_path: Path,
) -> None:
    register_secret(SECRET, "${API_KEY}")
    try:
        async with observed_gateway(
            tmp_path, {"fx": fixture_entry()}, record_arguments=True
        ) as gateway:
            async with Client(gateway.url, mode="legacy", cache=None) as client:
                await client.call_tool(
                    "mcp", {"tool": "fx_echo", "args": {"message": f"{CANARY} {SECRET}"}}
                )
            spans = gateway.finished()
    finally:
        forget_secrets()
    recorded = [v for v in _values_of(spans) if CANARY in v]
    assert recorded, "recordArguments put no argument in the span"
    assert not [v for v in _values_of(spans) if SECRET in v]


@pytest.mark.slow
async def test_metrics_and_status_need_the_operators_token_not_a_clients(
    tmp_path: Path,
) -> None:
    client_token = "client-token-a83f"
    options = GatewayOptions(
        transport="http",
        port=0,
        auth_token="gateway-token-77c1",
        clients=(
            GatewayClient.model_validate(
                {
                    "name": "restricted",
                    "tokenSha256": hashlib.sha256(client_token.encode()).hexdigest(),
                    "allow": ["fx_echo"],
                }
            ),
        ),
    )
    async with observed_gateway(
        tmp_path, {"fx": fixture_entry()}, options=options, metrics_token="scrape-token-19e0"
    ) as gateway:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {client_token}"})
        async with Client(streamable_http_client(gateway.url, http_client=http), mode="legacy"):
            pass  # the client's token is good for the MCP endpoint
        async with httpx.AsyncClient() as web:
            for path in ("/metrics", "/status"):
                url = gateway.base + path

                async def status(token: str | None, url: str = url) -> int:
                    headers = {"Authorization": f"Bearer {token}"} if token else {}
                    return (await web.get(url, headers=headers)).status_code

                assert await status(None) == 401
                assert await status("wrong") == 401
                assert await status(client_token) == 401
                assert await status("gateway-token-77c1") == 200
                assert await status("scrape-token-19e0") == 200
                refused = await web.post(url, headers={"Authorization": "Bearer scrape-token-19e0"})
                assert refused.status_code == 405


@pytest.mark.slow
async def test_the_status_page_shows_a_servers_words_as_text_never_as_markup(
    tmp_path: Path,
) -> None:
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    servers = {"fx": fixture_entry(), "bad": {"command": f"/nonexistent/{hostile}"}}
    async with observed_gateway(tmp_path, servers) as gateway:
        async with Client(gateway.url, mode="legacy", cache=None) as client:
            await client.call_tool("mcp", {"tool": "bad_x", "args": {}})
        async with httpx.AsyncClient() as web:
            page = await web.get(gateway.base + "/status")
    assert page.status_code == 200
    assert "<script>" not in page.text
    assert "<img" not in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]


def test_a_project_file_cannot_turn_telemetry_on_or_name_where_traces_go(
    tmp_path: Path,
) -> None:
    agent, project = tmp_path / "agent", tmp_path / "project"
    agent.mkdir()
    (project / ".pi").mkdir(parents=True)
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
    (project / ".pi" / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {},
                "settings": {
                    "telemetry": {"endpoint": "http://attacker.invalid", "recordArguments": True}
                },
            }
        )
    )
    config = load_config(
        agent_dir=agent,
        project_dir=project,
        home=tmp_path,
        environ={"PI_MCP_PROJECT_TRUST": "always"},
    )
    assert config.settings.telemetry is False
    assert any("settings.telemetry is ignored" in w for w in config.warnings)


def test_with_telemetry_off_nothing_imports_the_opentelemetry_sdk(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": {"fx": fixture_entry()}}))
    program = f"""
import sys, anyio
from pathlib import Path
from pi_mcp_adapter.engine import McpAdapter
async def main():
    agent, project = Path({str(agent)!r}), Path({str(tmp_path)!r})
    async with McpAdapter(agent_dir=agent, project_dir=project) as adapter:
        outcome = await adapter.call("fx_echo", {{"message": "hi"}})
        assert outcome.error_kind is None, outcome
anyio.run(main)
print(sorted(m for m in sys.modules if m.startswith("opentelemetry.sdk")))
"""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    completed = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip().splitlines()[-1] == "[]"


class _StalledProcessor(SpanProcessor):
    """A span processor whose ``on_end`` does not return until released (an exporter that
    posts each span synchronously to an endpoint that stopped answering)."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.entered = threading.Event()
        self.ended: list[str] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.entered.set()
        self.released.wait(60)
        self.ended.append(span.name)


def _dropped_counted(reader: object) -> int:
    data = reader.get_metrics_data()  # type: ignore[attr-defined]
    counted = 0
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "pi_mcp.telemetry.dropped":
                    counted += sum(point.value for point in metric.data.data_points)
    return counted


@pytest.mark.slow
async def test_a_stalled_span_pipeline_neither_holds_up_calls_nor_grows_without_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    capacity = 3
    monkeypatch.setattr(_telemetry, "_FINISH_QUEUE_CAPACITY", capacity)
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"fx": fixture_entry()}}))
    provider = _telemetry.create_tracer_provider({"service.name": "pi-mcp-test"})
    stalled = _StalledProcessor()
    provider.add_span_processor(stalled)
    metrics = InMemoryMetricReader()
    telemetry = _telemetry.create_telemetry(tracer_provider=provider, metric_readers=[metrics])
    previous = _telemetry.install(telemetry)
    calls = 10
    try:
        async with McpAdapter(agent_dir=tmp_path, project_dir=tmp_path) as adapter:
            first = await adapter.call("fx_echo", {"message": "first"})
            assert first.error_kind is None, first
            # The worker is now stuck in the processor with the first call's span...
            with anyio.fail_after(30):
                await anyio.to_thread.run_sync(stalled.entered.wait, 30)
            # ...and every further call still gets its answer at once.
            with anyio.fail_after(60):
                for index in range(calls - 1):
                    outcome = await adapter.call("fx_echo", {"message": f"m{index}"})
                    assert outcome.error_kind is None, outcome
                    assert not outcome.is_error, outcome
            finisher = telemetry._finisher
            assert len(finisher._queue) <= capacity
            dropped = finisher.dropped
            assert dropped == calls - 1 - capacity  # all but the first and the queued
            assert _dropped_counted(metrics) == dropped
            stalled.released.set()
        _telemetry.flush_pending()
        assert len(stalled.ended) == calls - dropped  # what was kept is finished
    finally:
        stalled.released.set()
        _telemetry.install(previous)
        telemetry.shutdown()
        provider.shutdown()


@pytest.mark.slow
async def test_a_metrics_scrape_waiting_on_a_stalled_span_pipeline_does_not_stall_other_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_mcp_adapter.hosts import _gateway_telemetry

    monkeypatch.setattr(_telemetry, "_FLUSH_TIMEOUT_S", 5.0)
    flush_started = threading.Event()
    real_flush = _gateway_telemetry.flush_pending

    def flush_pending() -> None:
        flush_started.set()
        real_flush()

    monkeypatch.setattr(_gateway_telemetry, "flush_pending", flush_pending)
    stalled = _StalledProcessor()
    try:
        async with observed_gateway(tmp_path, {"fx": fixture_entry()}) as gateway:
            processors: Any = gateway.telemetry.tracer
            processors.span_processor.add_span_processor(stalled)
            async with Client(gateway.url, mode="legacy", cache=None) as client:
                await client.call_tool("mcp", {"tool": "fx_echo", "args": {"message": "one"}})
                with anyio.fail_after(30):
                    await anyio.to_thread.run_sync(stalled.entered.wait, 30)
                scraped = anyio.Event()
                async with httpx.AsyncClient(timeout=60) as web, anyio.create_task_group() as tg:

                    async def scrape() -> None:
                        response = await web.get(gateway.base + "/metrics")
                        assert response.status_code == 200
                        scraped.set()

                    tg.start_soon(scrape)
                    with anyio.fail_after(30):
                        await anyio.to_thread.run_sync(flush_started.wait, 30)
                    # The scrape waits for the stuck worker; the gateway answers meanwhile.
                    result = await client.call_tool(
                        "mcp", {"tool": "fx_echo", "args": {"message": "two"}}
                    )
                    assert not result.is_error
                    assert not scraped.is_set()
                stalled.released.set()
    finally:
        stalled.released.set()


def test_thousands_of_tool_names_keep_the_duration_lookups_bounded_and_every_sample_counted() -> (
    None
):
    """A gateway client may send any tool name: each new name is a label set. The label
    sets whose samples go straight into the SDK's aggregations are bounded, and past the
    SDK's cardinality limit every sample is still counted (in its overflow point)."""
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    reader = InMemoryMetricReader()
    telemetry = _telemetry.create_telemetry(
        tracer_provider=TracerProvider(), metric_readers=[reader]
    )
    durations = telemetry._upstream_duration
    names = 5_000
    label_sets = [{"gen_ai.tool.name": f"tool-{index}"} for index in range(names)]
    for labels in label_sets:
        durations.record(0.001, labels)
    for labels in label_sets[:10]:  # known ones, looked up directly
        durations.record(0.001, labels)
    try:
        assert 0 < durations.direct_label_sets <= _telemetry._MAX_SHAPES
        data = reader.get_metrics_data()
        assert data is not None
        counted = sum(
            point.count
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "mcp.client.operation.duration"
            for point in metric.data.data_points  # type: ignore[attr-defined]
        )
        assert counted == names + 10
    finally:
        telemetry.shutdown()
