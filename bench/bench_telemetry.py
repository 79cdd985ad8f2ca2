"""Per-call cost of telemetry, measured as users run it: the same ``echo`` call with telemetry
on and off, through ``McpAdapter.call`` and through ``pi-mcp serve`` over Streamable HTTP with
a real SDK client. Target: p50 with it on within 5% of off.

"On" is the production configuration, spans and metrics exported over OTLP/HTTP to a receiver
in a process of its own (it answers and discards):

- ``McpAdapter.call``: telemetry configured as ``OTEL_EXPORTER_OTLP_ENDPOINT`` configures it
  (the global tracer provider, a batch span processor, a periodic metric reader, the
  Prometheus registry); "off" uninstalls it, which is what an adapter without telemetry runs
  (one global read per hook; the MCP SDK's spans are off on that provider too);
- ``pi-mcp serve``: two gateways over the same upstream, one started with the ``OTEL_*``
  variables, one with ``OTEL_SDK_DISABLED=true``; one SDK client each, in this process.

The machine is shared (2 cores, other work running): "on", "off" and "off again" take turns
in rounds of ``--calls`` calls (the order rotates, so none always goes first), and the result
is the median over rounds of each round's p50 ratio, which a load change during one round
moves little. "off again" is "off" measured a second time: its ratio to "off" is the noise
floor of that run, what a ratio means nothing below. The pooled p50s are printed beside it,
and the CPU time per call of the process that served the calls (all its threads, the
exporter's included): telemetry's worker thread makes a call's span after the caller has its
answer, so latency is not the whole of its cost. In process it is also split by thread (the
caller, telemetry's worker, the span exporter; "on" minus "off").

A third measurement isolates what the upstream server pays for trace continuation: the same
echo from a bare SDK client with and without a ``traceparent`` in ``params._meta``.

Usage: .venv/bin/python bench/bench_telemetry.py [--rounds R] [--calls N]
       [--only adapter|gateway]   (defaults: 30 rounds of 60 calls per mode)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import cast

import anyio
import psutil
from mcp import Client, StdioServerParameters
from mcp_types import RequestParamsMeta
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from pi_mcp_adapter.config import Settings
from pi_mcp_adapter.engine import McpAdapter, _telemetry

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
PI_MCP = Path(sys.executable).parent / "pi-mcp"
WARMUP_CALLS = 100
TARGET_RATIO = 1.05
MODES = ("off", "on", "off again")
""""off again" is the control: "off" once more, in its own turn of each round."""

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Discard(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), Discard)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


@contextmanager
def _process(
    command: list[str], env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Run ``command``; it and its first line of output are handed back."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env or dict(os.environ)
    )
    assert process.stdout is not None
    try:
        yield process, process.stdout.readline().decode().strip()
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def otlp_receiver() -> Iterator[str]:
    with _process([sys.executable, "-c", RECEIVER]) as (_, port):
        if not port.isdigit():
            raise SystemExit(f"the OTLP receiver did not start: {port!r}")
        yield f"http://127.0.0.1:{port}"


def otel_environment(endpoint: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}


class Rounds:
    """Per-call latencies of each mode (:data:`MODES`), kept per round, and the CPU time each
    mode's calls cost the process that served them (all its threads: the exporter's too)."""

    def __init__(self) -> None:
        self.rounds: list[dict[str, list[float]]] = []
        self.cpu_ms_per_call: dict[str, float] = {}
        self.thread_cpu_us_per_call: dict[str, float] = {}
        """In process, "on" minus "off": CPU per call of each thread (caller, worker, export)."""
        self.dropped: int | None = None
        """Calls whose span the telemetry worker's full queue dropped (in process only)."""

    async def run(
        self,
        rounds: int,
        calls: int,
        call: Mapping[str, Callable[[], Awaitable[object]]],
        before: Callable[[str], None] = lambda _mode: None,
        after: Callable[[str], None] = lambda _mode: None,
    ) -> None:
        for index in range(rounds):
            shift = index % len(MODES)
            order = MODES[shift:] + MODES[:shift]
            samples: dict[str, list[float]] = {mode: [] for mode in MODES}
            for mode in order:
                before(mode)
                for _ in range(calls):
                    started = time.perf_counter()
                    await call[mode]()
                    samples[mode].append((time.perf_counter() - started) * 1000)
                after(mode)
            self.rounds.append(samples)

    def pooled(self, mode: str) -> list[float]:
        return [value for samples in self.rounds for value in samples[mode]]

    def median_ratio(self, mode: str = "on") -> float:
        """The median over rounds of ``mode``'s p50 over "off"'s p50 in the same round."""
        return statistics.median(
            percentile(r[mode], 0.5) / percentile(r["off"], 0.5) for r in self.rounds
        )


async def adapter_rounds(rounds: int, calls: int, endpoint: str) -> Rounds:
    """``McpAdapter.call`` of the fixture's echo, telemetry configured from OTEL_* or not."""
    telemetry = _telemetry.configure_telemetry(Settings(), otel_environment(endpoint))
    assert telemetry is not None
    measured = Rounds()
    with tempfile.TemporaryDirectory() as tmp:
        agent = Path(tmp)
        servers = {"fx": {"command": sys.executable, "args": [str(FIXTURE)]}}
        (agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
        # Started with telemetry installed, as configured (the adapter is watched by it).
        async with McpAdapter(agent_dir=agent, project_dir=agent) as adapter:
            for mode in MODES:  # connect, caches, imports, the first spans
                _telemetry.install(telemetry if mode == "on" else None)
                for _ in range(WARMUP_CALLS):
                    await adapter.call("fx_echo", {"message": "warm"})

            async def echo() -> object:
                outcome = await adapter.call("fx_echo", {"message": "x"})
                if outcome.error_kind is not None or outcome.is_error:
                    raise SystemExit(f"fx_echo failed: {outcome.message}")
                return outcome

            cpu_s = dict.fromkeys(MODES, 0.0)
            threads_s: dict[str, dict[str, float]] = {mode: {} for mode in MODES}
            block_started = [0.0]
            threads_started: list[dict[str, float]] = [{}]

            def switch(mode: str) -> None:
                _telemetry.install(telemetry if mode == "on" else None)
                threads_started[0] = _thread_cpu_s()
                block_started[0] = time.process_time()

            def account(mode: str) -> None:
                calls_done = _thread_cpu_s()
                if mode == "on":  # its spans' ends and export are its cost, not the next block's
                    _telemetry.flush_pending()
                    trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
                cpu_s[mode] += time.process_time() - block_started[0]
                flushed = _thread_cpu_s()
                # The caller's own part ends with its calls; the flush (the remaining spans'
                # export, in the caller's thread) is counted apart.
                flushed["flush at block end"] = flushed["caller"] - calls_done["caller"]
                flushed["caller"] = calls_done["caller"]
                for role, used in flushed.items():
                    spent = used - threads_started[0].get(role, 0.0)
                    threads_s[mode][role] = threads_s[mode].get(role, 0.0) + spent

            calls_by_mode = dict.fromkeys(MODES, echo)
            await measured.run(rounds, calls, calls_by_mode, switch, account)
            total = rounds * calls
            measured.cpu_ms_per_call = {m: cpu_s[m] / total * 1000 for m in cpu_s}
            roles = set(threads_s["on"]) | set(threads_s["off"])
            measured.thread_cpu_us_per_call = {
                role: (threads_s["on"].get(role, 0.0) - threads_s["off"].get(role, 0.0))
                / total
                * 1e6
                for role in sorted(roles)
            }
            measured.dropped = telemetry._finisher.dropped
        _telemetry.install(None)
    # Flushed while the receiver still listens.
    telemetry.shutdown()
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()
    return measured


async def gateway_rounds(rounds: int, calls: int, endpoint: str) -> Rounds:
    """The same echo through two ``pi-mcp serve`` gateways over HTTP, one with telemetry."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        config = directory / "mcp.json"
        entry = {"command": sys.executable, "args": [str(FIXTURE)]}
        entry |= {"directTools": ["echo"], "lifecycle": "eager"}
        config.write_text(json.dumps({"mcpServers": {"fx": entry}}))
        environments = {
            "off": {**os.environ, "OTEL_SDK_DISABLED": "true"},
            "on": {**os.environ, **otel_environment(endpoint)},
            "off again": {**os.environ, "OTEL_SDK_DISABLED": "true"},
        }
        urls: dict[str, str] = {}
        gateways: dict[str, psutil.Process] = {}
        with ExitStack() as stack:
            for mode, env in environments.items():
                agent = directory / f"agent-{mode.replace(' ', '-')}"
                command = [str(PI_MCP), "--config", str(config), "--agent-dir", str(agent)]
                command += ["serve", "--transport", "http", "--port", "0"]
                process, line = stack.enter_context(_process(command, env))
                gateways[mode] = psutil.Process(process.pid)
                if "listening on " not in line:
                    raise SystemExit(f"pi-mcp serve ({mode}) did not start: {line!r}")
                urls[mode] = line.split("listening on ", 1)[1].strip()
            async with AsyncExitStack() as clients:
                sessions = {
                    mode: await clients.enter_async_context(Client(url, mode="legacy", cache=None))
                    for mode, url in urls.items()
                }
                for session in sessions.values():
                    for _ in range(WARMUP_CALLS):
                        await session.call_tool("fx_echo", {"message": "warm"})

                def echo(session: Client) -> Callable[[], Awaitable[object]]:
                    async def call() -> object:
                        result = await session.call_tool("fx_echo", {"message": "x"})
                        if result.is_error:
                            raise SystemExit(f"fx_echo failed: {result.content}")
                        return result

                    return call

                measured = Rounds()
                calls_by_mode = {mode: echo(session) for mode, session in sessions.items()}
                # Each gateway serves only its own mode: its CPU over the run is that mode's.
                cpu_before = {m: _cpu_s(p) for m, p in gateways.items()}
                await measured.run(rounds, calls, calls_by_mode)
                await anyio.sleep(6)  # the "on" gateway's batch processor exports every 5 s
                measured.cpu_ms_per_call = {
                    m: (_cpu_s(p) - cpu_before[m]) / (rounds * calls) * 1000
                    for m, p in gateways.items()
                }
    return measured


async def upstream_share_rounds(rounds: int, calls: int) -> Rounds:
    """The upstream server's own part: the fixture's echo from a bare SDK client (no
    telemetry), with and without a ``traceparent`` in ``params._meta``. A server on the MCP
    SDK reads it and continues the trace; that costs it time whatever the caller does."""
    traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    # A key MCP's typed _meta does not name (read as an extra item).
    with_traceparent = cast("RequestParamsMeta", {"traceparent": traceparent})
    params = StdioServerParameters(command=sys.executable, args=[str(FIXTURE)])
    async with Client(params, mode="legacy", cache=None) as session:
        for _ in range(WARMUP_CALLS):
            await session.call_tool("echo", {"message": "warm"})

        async def plain() -> object:
            return await session.call_tool("echo", {"message": "x"})

        async def carrying() -> object:
            return await session.call_tool("echo", {"message": "x"}, meta=with_traceparent)

        measured = Rounds()
        await measured.run(rounds, calls, {"off": plain, "on": carrying, "off again": plain})
    return measured


_THREAD_ROLES = {
    "MainThread": "caller",
    "pi-mcp-telemetry": "telemetry worker",
    "OtelBatchSpanRecordProcessor": "span export",
}


def _thread_cpu_s() -> dict[str, float]:
    """CPU seconds each thread of this process has used, by role (each thread's own CPU
    clock: /proc's figures are in 10 ms ticks, coarser than a round's work)."""
    used: dict[str, float] = {}
    for thread in threading.enumerate():
        if thread.ident is None:
            continue
        try:
            seconds = time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
        except (OSError, AttributeError):  # exited meanwhile, or not a POSIX system
            continue
        role = _THREAD_ROLES.get(thread.name, "other threads")
        used[role] = used.get(role, 0.0) + seconds
    return used


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def report(title: str, metric: str, measured: Rounds) -> float:
    off, on = measured.pooled("off"), measured.pooled("on")
    ratio = measured.median_ratio()
    print(f"\n{title}: {len(measured.rounds)} rounds, {len(on)} calls per mode")
    print(f"{'telemetry':<12}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for mode in MODES:
        values = measured.pooled(mode)
        print(
            f"{mode:<12}{percentile(values, 0.5):>10.3f}"
            f"{percentile(values, 0.99):>10.3f}{statistics.fmean(values):>10.3f}"
        )
    cpu = measured.cpu_ms_per_call
    if cpu:
        print(
            f"CPU per call of the process serving it: off {cpu['off']:.3f} ms, "
            f"on {cpu['on']:.3f} ms (+{cpu['on'] - cpu['off']:.3f} ms), "
            f"off again {cpu['off again']:.3f} ms"
        )
    if measured.thread_cpu_us_per_call:
        print(
            "of which, by thread (on minus off, us per call): "
            + ", ".join(f"{r} {us:+.0f}" for r, us in measured.thread_cpu_us_per_call.items())
        )
    if measured.dropped is not None:
        print(f"calls whose span was dropped (telemetry's queue full): {measured.dropped}")
    verdict = "within" if ratio <= TARGET_RATIO else "OVER"
    print(f"median of per-round p50 ratios on/off: {ratio:.3f} ({verdict} target {TARGET_RATIO})")
    print(
        f"noise floor, the same ratio for off again/off: {measured.median_ratio('off again'):.3f}"
    )
    record(
        "telemetry overhead",
        metric,
        percentile(on, 0.5),
        percentile(off, 0.5),
        unit="ms",
        baseline_name="telemetry off",
    )
    return ratio


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=60, help="calls per round and mode")
    parser.add_argument("--only", choices=("adapter", "gateway"))
    options = parser.parse_args()
    with otlp_receiver() as endpoint:
        if options.only != "adapter":
            measured = await gateway_rounds(options.rounds, options.calls, endpoint)
            report(
                "echo through pi-mcp serve over HTTP (SDK client)",
                "echo p50 through pi-mcp serve over HTTP, telemetry on",
                measured,
            )
        if options.only != "gateway":
            measured = await adapter_rounds(options.rounds, options.calls, endpoint)
            report(
                "echo through McpAdapter.call",
                "echo p50 through McpAdapter.call, telemetry on",
                measured,
            )
            measured = await upstream_share_rounds(options.rounds, options.calls)
            report(
                "of which the upstream's: a bare SDK client's echo, 'on' = with a traceparent",
                "echo p50 from a bare SDK client, traceparent in _meta",
                measured,
            )


if __name__ == "__main__":
    anyio.run(main)
