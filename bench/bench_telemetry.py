"""Per-call cost of telemetry: the same ``echo`` call through ``McpAdapter.call`` with
telemetry off and on (spans to the SDK's batch processor, metrics into the Prometheus
registry), alternating in blocks so load on the machine hits both alike. Target: p50 with it
on within 5% of off.

Usage: .venv/bin/python bench/bench_telemetry.py [--calls N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pi_mcp_adapter.engine import McpAdapter, _telemetry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
BLOCK = 50


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    options = parser.parse_args()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    telemetry = _telemetry.create_telemetry(tracer_provider=provider)
    with tempfile.TemporaryDirectory() as tmp:
        agent = Path(tmp)
        servers = {"fx": {"command": sys.executable, "args": [str(FIXTURE)]}}
        (agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        samples: dict[str, list[float]] = {"off": [], "on": []}
        async with McpAdapter(agent_dir=agent, project_dir=agent) as adapter:
            for _ in range(BLOCK):  # warm-up: connect, caches, imports
                await adapter.call("fx_echo", {"message": "warm"})
            done = 0
            while done < options.calls:
                for mode in ("off", "on"):
                    _telemetry.install(telemetry if mode == "on" else None)
                    for _ in range(BLOCK):
                        started = time.perf_counter()
                        await adapter.call("fx_echo", {"message": "x"})
                        samples[mode].append(time.perf_counter() - started)
                    exporter.clear()
                done += BLOCK
            _telemetry.install(None)
    provider.shutdown()
    telemetry.shutdown()
    print(f"echo through McpAdapter.call, {options.calls} calls each way")
    print(f"{'telemetry':<12}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for mode, values in samples.items():
        print(
            f"{mode:<12}{percentile(values, 0.5) * 1e3:>10.3f}"
            f"{percentile(values, 0.99) * 1e3:>10.3f}{statistics.fmean(values) * 1e3:>10.3f}"
        )
    ratio = percentile(samples["on"], 0.5) / percentile(samples["off"], 0.5)
    print(f"p50 ratio on/off: {ratio:.3f} (target <= 1.05)")
    record(
        "telemetry overhead",
        "echo p50 through McpAdapter.call, telemetry on",
        percentile(samples["on"], 0.5) * 1e3,
        percentile(samples["off"], 0.5) * 1e3,
        unit="ms",
        baseline_name="telemetry off",
    )


if __name__ == "__main__":
    anyio.run(main)
