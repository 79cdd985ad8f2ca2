"""What the gateway shows of itself: OpenTelemetry spans that continue a client's trace into
the upstream server, a Prometheus endpoint a real Prometheus scrapes, a status page a real
browser renders, and OTLP export from a real ``pi-mcp serve`` into a receiver."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from opentelemetry.trace import SpanKind

from ._telemetry_support import (
    OtlpReceiver,
    fixture_entry,
    observed_gateway,
    running_otlp_receiver,
    traceparent_entry,
)
from .conftest import GatewayWorkspace, run_http_gateway

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

CLIENT_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN_ID = "b7ad6b7169203331"
CLIENT_TRACEPARENT = f"00-{CLIENT_TRACE_ID}-{CLIENT_SPAN_ID}-01"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


async def test_a_clients_trace_continues_through_the_gateway_into_the_upstream_server(
    tmp_path: Path,
) -> None:
    async with observed_gateway(tmp_path, {"tp": traceparent_entry()}) as gateway:
        async with Client(gateway.url, mode="legacy", cache=None) as client:
            result = await client.call_tool(
                "mcp",
                {"tool": "tp_traceparent", "args": {"note": "private words"}},
                meta={"traceparent": CLIENT_TRACEPARENT},
            )
        received = _text(result).strip()
        spans = gateway.finished()

    request = next(s for s in spans if s.name == "tools/call mcp")
    upstream = next(s for s in spans if s.name == "tools/call traceparent")
    # The gateway's request span continues the client's trace...
    assert request.kind == SpanKind.SERVER
    assert f"{request.context.trace_id:032x}" == CLIENT_TRACE_ID
    assert request.parent is not None
    assert f"{request.parent.span_id:016x}" == CLIENT_SPAN_ID
    # ...the upstream request is its child...
    assert upstream.kind == SpanKind.CLIENT
    assert upstream.parent is not None
    assert upstream.parent.span_id == request.context.span_id
    # ...and the server received that span's context in params._meta.traceparent.
    version, trace_id, parent_id, _flags = received.split("-")
    assert (version, trace_id) == ("00", CLIENT_TRACE_ID)
    assert parent_id == f"{upstream.context.span_id:016x}"

    attributes = dict(request.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "mcp"
    assert attributes["network.transport"] == "tcp"
    assert attributes["mcp.session.id"]
    assert attributes["jsonrpc.request.id"]
    upstream_attributes = dict(upstream.attributes or {})
    assert upstream_attributes["gen_ai.tool.name"] == "traceparent"
    assert upstream_attributes["pi_mcp.server"] == "tp"
    assert upstream_attributes["network.transport"] == "pipe"
    search = [s for s in spans if s.name == "pi_mcp.search"]
    assert search == []  # a call searches nothing


async def test_a_tool_error_and_a_search_are_recorded_as_the_conventions_say(
    tmp_path: Path,
) -> None:
    async with observed_gateway(tmp_path, {"fx": fixture_entry()}) as gateway:
        async with Client(gateway.url, mode="legacy", cache=None) as client:
            await client.call_tool("mcp", {"search": "echo"})
            await client.call_tool("mcp", {"tool": "fx_fail", "args": {}})
        spans = gateway.finished()
    failed = next(s for s in spans if s.name == "tools/call fail")
    assert dict(failed.attributes or {})["error.type"] == "tool_error"
    search = next(s for s in spans if s.name == "pi_mcp.search")
    assert dict(search.attributes or {})["pi_mcp.search.hits"] >= 1
    search_request = next(s for s in spans if s is not search and s.name == "tools/call mcp")
    assert search.parent is not None
    assert search.parent.span_id in {s.context.span_id for s in spans if s.name == "tools/call mcp"}
    assert search_request is not None


# ---------------------------------------------------------------------------- Prometheus


@pytest.fixture
def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        pytest.skip("prometheus is not installed (scripts/install-debian-packages.sh)")
    return found


@pytest.fixture
def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_a_real_prometheus_scrapes_the_gateway_and_answers_with_its_call_counts(
    tmp_path: Path, prometheus_binary: str, free_port: int
) -> None:
    token = "scrape-token-3c1d"
    async with observed_gateway(tmp_path, {"fx": fixture_entry()}, metrics_token=token) as gateway:
        async with Client(gateway.url, mode="legacy", cache=None) as client:
            for word in ("one", "two", "three"):
                await client.call_tool("mcp", {"tool": "fx_echo", "args": {"message": word}})
            await client.call_tool("mcp", {"tool": "fx_fail", "args": {}})
        target = gateway.base.removeprefix("http://")
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s}\n"
            "scrape_configs:\n"
            "  - job_name: pi-mcp\n"
            "    authorization: {type: Bearer, credentials: " + token + "}\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n"
        )
        process = subprocess.Popen(
            [
                prometheus_binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{free_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "prometheus.log").open("wb"),
        )
        try:
            query = (
                "sum by (pi_mcp_outcome) "
                '(mcp_client_operation_duration_seconds_count{gen_ai_tool_name=~"echo|fail"})'
            )
            counts: dict[str, float] = {}
            async with httpx.AsyncClient() as http:
                with anyio.fail_after(90):
                    while counts.get("ok") != 3.0 or counts.get("error") != 1.0:
                        await anyio.sleep(0.5)  # Prometheus scrapes on its own clock
                        try:
                            answer = await http.get(
                                f"http://127.0.0.1:{free_port}/api/v1/query",
                                params={"query": query},
                            )
                        except httpx.TransportError:
                            continue  # still starting
                        if answer.status_code != 200:
                            continue
                        counts = {
                            r["metric"].get("pi_mcp_outcome", ""): float(r["value"][1])
                            for r in answer.json()["data"]["result"]
                        }
        finally:
            process.terminate()
            process.wait(timeout=30)
    assert counts == {"ok": 3.0, "error": 1.0}


async def test_the_metrics_endpoint_shows_servers_in_flight_search_and_cache(
    tmp_path: Path,
) -> None:
    async with observed_gateway(tmp_path, {"fx": fixture_entry()}) as gateway:
        async with Client(gateway.url, mode="legacy", cache=None) as client:
            await client.call_tool("mcp", {"search": "echo"})
            await client.call_tool("mcp", {"tool": "fx_echo", "args": {"message": "hi"}})
        async with httpx.AsyncClient() as http:
            text = (await http.get(gateway.base + "/metrics")).text
    lines = text.splitlines()

    def sample(name: str, *labels: str) -> float:
        found = [
            line
            for line in lines
            if line.startswith(name + "{") and all(label in line for label in labels)
        ]
        assert found, f"no {name} with {labels} in:\n{text}"
        return float(found[0].rsplit(" ", 1)[1])

    assert sample("pi_mcp_servers", 'pi_mcp_server_state="connected"') == 1
    assert sample("pi_mcp_calls_in_flight", 'pi_mcp_server="fx"') == 0
    assert sample("pi_mcp_search_duration_seconds_count") == 1
    assert sample("pi_mcp_cache_tools") >= 1
    assert sample("mcp_server_operation_duration_seconds_count", 'gen_ai_tool_name="mcp"') == 2


# ---------------------------------------------------------------------------- status page


@pytest.fixture
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (scripts/install-debian-packages.sh)")
    return found


def _render(chromium: str, url: str, profile: Path) -> str:
    completed = subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={profile}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    return completed.stdout


async def test_the_status_page_renders_servers_clients_and_recent_calls_in_a_browser(
    tmp_path: Path, chromium: str
) -> None:
    async with observed_gateway(tmp_path, {"fx": fixture_entry()}) as gateway:
        async with Client(gateway.url, mode="legacy", cache=None) as client:
            await client.call_tool("mcp", {"tool": "fx_echo", "args": {"message": "hi"}})
            await client.call_tool("mcp", {"tool": "fx_fail", "args": {}})
        dom = await anyio.to_thread.run_sync(
            _render, chromium, gateway.base + "/status", tmp_path / "profile"
        )
    assert '<table id="servers">' in dom
    assert 'data-server="fx"' in dom
    assert '<td class="state">connected</td>' in dom
    assert '<tr class="call ok">' in dom
    assert "<td>echo</td>" in dom
    assert '<tr class="call error">' in dom
    assert "<td>fail</td>" in dom
    assert '<table id="approvals">' in dom


# ---------------------------------------------------------------------------- OTLP


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    with running_otlp_receiver() as receiver:
        yield receiver


def test_pi_mcp_serve_exports_its_spans_over_otlp_http_when_the_otel_variables_say_so(
    gw_workspace: GatewayWorkspace, otlp_receiver: OtlpReceiver
) -> None:
    gw_workspace.write_config({"fx": fixture_entry()})
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_receiver.endpoint,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "OTEL_METRIC_EXPORT_INTERVAL": "600000",
    }
    with run_http_gateway(gw_workspace, env=env) as gateway:

        async def call() -> None:
            async with gateway.client() as client:
                await client.call_tool("mcp", {"tool": "fx_echo", "args": {"message": "x"}})

        anyio.run(call)
        otlp_receiver.wait_for(lambda spans: any(s.name == "tools/call echo" for s in spans))
    names = {s.name for s in otlp_receiver.spans}
    assert {"tools/call mcp", "tools/call echo"} <= names, json.dumps(sorted(names))
    upstream = next(s for s in otlp_receiver.spans if s.name == "tools/call echo")
    assert upstream.attributes["pi_mcp.server"] == "fx"
    assert "x" not in upstream.attributes.values()
