"""The gateway hop: the same echo call direct, through ``pi-mcp serve`` and through FastMCP's
proxy, over stdio and Streamable HTTP; then K concurrent HTTP clients through one gateway.

Every row is measured in this run against the same Python fixture server
(``tests/fixtures/mcp_fixture.py``):

- direct: a bare SDK ``Client`` (legacy handshake, no cache) to the upstream server;
- pi-mcp serve: the same client to the gateway, which serves the upstream's ``echo`` as a
  direct tool (``directTools``) and forwards to it;
- FastMCP proxy: the same client to ``fastmcp.server.create_proxy`` (fastmcp 4.1.6, run from
  its own environment ``bench/.venv-fastmcp``; see the README for the install) in front of the
  same upstream.

Over stdio the front is a child of the benchmark and the upstream a child of the front; over
HTTP the upstream serves Streamable HTTP on loopback and the front connects to it by URL. The
concurrency part starts one gateway (and one FastMCP proxy) with a stdio upstream, runs K
clients at once, and counts the upstream processes under each front.

Usage: .venv/bin/python bench/bench_gateway.py [--calls N] [--per-client M] [--no-fastmcp]
       [--transports stdio,http] [--no-load]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import psutil
from mcp import Client, StdioServerParameters

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
PI_MCP = Path(sys.executable).parent / "pi-mcp"
FASTMCP_PYTHON = ROOT / "bench" / ".venv-fastmcp" / "bin" / "python"
FASTMCP_PROXY = ROOT / "bench" / "_fastmcp_proxy.py"
WARMUP_CALLS = 30
READY_TIMEOUT_S = 60


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _echo_tool(client: Client) -> str:
    names = [t.name for t in (await client.list_tools()).tools]
    matches = [n for n in names if n == "echo" or n.endswith("_echo")]
    if not matches:
        raise SystemExit(f"no echo tool among {names}")
    return matches[0]


async def _timed_calls(client: Client, tool: str, calls: int) -> list[float]:
    for _ in range(WARMUP_CALLS):
        await client.call_tool(tool, {"message": "warm"})
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        result = await client.call_tool(tool, {"message": f"m{i}"})
        samples.append((time.perf_counter() - started) * 1000)
        if result.is_error:
            raise SystemExit(f"{tool} failed: {result.content}")
    return samples


# -- fronts ------------------------------------------------------------------------------------


def _gateway_config(directory: Path, upstream: dict[str, Any]) -> list[str]:
    config = directory / "mcp.json"
    entry = {**upstream, "directTools": ["echo"], "lifecycle": "eager"}
    config.write_text(json.dumps({"mcpServers": {"fx": entry}}))
    return ["--config", str(config), "--agent-dir", str(directory / "agent"), "serve"]


def _fixture_stdio() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURE)]}


@contextmanager
def _process(command: list[str], ready: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """Start ``command``; its first stdout line containing ``ready`` is handed back."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout is not None
    try:
        line = process.stdout.readline().decode()
        if ready not in line:
            raise SystemExit(f"{command[0]} did not start: {line!r}")
        yield process, line
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextmanager
def _upstream_http() -> Iterator[str]:
    command = [sys.executable, str(FIXTURE), "--transport", "streamable-http"]
    with _process(command, "LISTENING") as (_, line):
        yield f"http://127.0.0.1:{line.split()[1]}/mcp"


@contextmanager
def _gateway_http(upstream: dict[str, Any]) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    with tempfile.TemporaryDirectory() as directory:
        args = _gateway_config(Path(directory), upstream)
        command = [str(PI_MCP), *args, "--transport", "http", "--port", "0"]
        with _process(command, "listening on") as (process, line):
            yield process, line.split("listening on ", 1)[1].strip()


@contextmanager
def _fastmcp_http(upstream: dict[str, Any]) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = _free_port()
    config = json.dumps({"mcpServers": {"fx": upstream}})
    process = subprocess.Popen(
        [str(FASTMCP_PYTHON), str(FASTMCP_PROXY), "http", config, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while True:  # FastMCP prints nothing when quiet: wait until the port accepts
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("the FastMCP proxy did not start") from None
                time.sleep(0.05)
        yield process, f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=15)


@asynccontextmanager
async def _stdio_client(command: str, args: list[str]) -> AsyncIterator[Client]:
    env = {**os.environ, "FASTMCP_LOG_LEVEL": "WARNING"}
    params = StdioServerParameters(command=command, args=args, env=env)
    async with Client(params, mode="legacy", cache=None) as client:
        yield client


@asynccontextmanager
async def _http_client(url: str) -> AsyncIterator[Client]:
    async with Client(url, mode="legacy", cache=None) as client:
        yield client


# -- measurements ------------------------------------------------------------------------------


async def _interleaved(
    transport: str, fronts: dict[str, Any], calls: int
) -> list[tuple[str, str, list[float]]]:
    """Open every front at once and call them in turn, so a load change on this shared
    machine hits all of them alike and the ratios stay fair."""
    async with AsyncExitStack() as stack:
        clients = {name: await stack.enter_async_context(cm) for name, cm in fronts.items()}
        tools = {name: await _echo_tool(client) for name, client in clients.items()}
        for _ in range(WARMUP_CALLS):
            for name, client in clients.items():
                await client.call_tool(tools[name], {"message": "warm"})
        samples: dict[str, list[float]] = {name: [] for name in clients}
        for i in range(calls):
            for name, client in clients.items():
                started = time.perf_counter()
                result = await client.call_tool(tools[name], {"message": f"m{i}"})
                samples[name].append((time.perf_counter() - started) * 1000)
                if result.is_error:
                    raise SystemExit(f"{name}: {tools[name]} failed: {result.content}")
    for name, values in samples.items():
        print(f"  {transport:5} {name:14} p50 {percentile(values, 0.5):.3f} ms", flush=True)
    return [(transport, name, values) for name, values in samples.items()]


async def hop_rows(
    calls: int, with_fastmcp: bool, transports: list[str]
) -> list[tuple[str, str, list[float]]]:
    fixture = _fixture_stdio()
    rows: list[tuple[str, str, list[float]]] = []
    if "stdio" in transports:
        rows += await _stdio_hops(calls, with_fastmcp, fixture)
    if "http" in transports:
        rows += await _http_hops(calls, with_fastmcp)
    return rows


async def _stdio_hops(
    calls: int, with_fastmcp: bool, fixture: dict[str, Any]
) -> list[tuple[str, str, list[float]]]:
    with tempfile.TemporaryDirectory() as directory:
        fronts: dict[str, Any] = {
            "direct": _stdio_client(sys.executable, [str(FIXTURE)]),
            "pi-mcp serve": _stdio_client(str(PI_MCP), _gateway_config(Path(directory), fixture)),
        }
        if with_fastmcp:
            config = json.dumps({"mcpServers": {"fx": fixture}})
            fronts["FastMCP proxy"] = _stdio_client(
                str(FASTMCP_PYTHON), [str(FASTMCP_PROXY), "stdio", config]
            )
        return await _interleaved("stdio", fronts, calls)


async def _http_hops(calls: int, with_fastmcp: bool) -> list[tuple[str, str, list[float]]]:
    with ExitStack() as processes:
        upstream_url = processes.enter_context(_upstream_http())
        upstream = {"url": upstream_url}
        fronts = {"direct": _http_client(upstream_url)}
        _, gateway_url = processes.enter_context(_gateway_http(upstream))
        fronts["pi-mcp serve"] = _http_client(gateway_url)
        if with_fastmcp:
            _, proxy_url = processes.enter_context(_fastmcp_http(upstream))
            fronts["FastMCP proxy"] = _http_client(proxy_url)
        return await _interleaved("http", fronts, calls)


def _upstream_processes(front: subprocess.Popen[bytes]) -> int:
    try:
        children = psutil.Process(front.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return 0
    count = 0
    for child in children:
        try:
            cmdline = child.cmdline()
            # Each stdio server runs under a supervisor whose command line names it too.
            if str(FIXTURE) in cmdline and not any(p.endswith("_reaper.py") for p in cmdline):
                count += 1
        except psutil.NoSuchProcess:
            continue
    return count


async def _load_round(url: str, clients: int, per_client: int) -> tuple[float, float]:
    """``clients`` clients call at once, each ``per_client`` times: (calls/s, p99 ms)."""
    samples: list[float] = []
    finished: list[float] = []
    warmed: list[str] = []
    ready = anyio.Event()
    clock: list[float] = []

    async def one_client() -> None:
        async with _http_client(url) as client:
            tool = await _echo_tool(client)
            for _ in range(5):
                await client.call_tool(tool, {"message": "warm"})
            # Every client is connected and warm before the clock starts.
            warmed.append(tool)
            if len(warmed) == clients:
                clock.append(time.perf_counter())
                ready.set()
            await ready.wait()
            for i in range(per_client):
                began = time.perf_counter()
                await client.call_tool(tool, {"message": f"m{i}"})
                samples.append((time.perf_counter() - began) * 1000)
            finished.append(time.perf_counter())

    async with anyio.create_task_group() as tg:
        for _ in range(clients):
            tg.start_soon(one_client)
    elapsed = max(finished) - clock[0]
    return clients * per_client / elapsed, percentile(samples, 0.99)


async def concurrency_rows(
    per_client: int, with_fastmcp: bool
) -> list[tuple[str, int, float, float, int]]:
    rows: list[tuple[str, int, float, float, int]] = []
    fronts = [("pi-mcp serve", _gateway_http)]
    if with_fastmcp:
        fronts.append(("FastMCP proxy", _fastmcp_http))
    for front_name, front in fronts:
        with front(_fixture_stdio()) as (process, url):
            for clients in (1, 4, 16):
                rate, p99 = await _load_round(url, clients, per_client)
                upstream = _upstream_processes(process)
                rows.append((front_name, clients, rate, p99, upstream))
                print(
                    f"  {front_name:14} K={clients:<3} {rate:7.1f} calls/s  p99 {p99:.2f} ms  "
                    f"upstream processes {upstream}",
                    flush=True,
                )
    return rows


def print_tables(
    hops: list[tuple[str, str, list[float]]], load: list[tuple[str, int, float, float, int]]
) -> None:
    print("\n| transport | front | p50 ms | p99 ms | p50 vs direct | p50 vs FastMCP proxy |")
    print("|---|---|---|---|---|---|")
    for transport in ("stdio", "http"):
        rows = {front: s for t, front, s in hops if t == transport}
        if not rows:
            continue
        direct = percentile(rows["direct"], 0.5)
        fastmcp = percentile(rows["FastMCP proxy"], 0.5) if "FastMCP proxy" in rows else None
        for front, samples in rows.items():
            p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
            versus = f"{p50 / fastmcp:.2f}x" if fastmcp else "–"
            ratio = f"{p50 / direct:.2f}x"
            print(f"| {transport} | {front} | {p50:.3f} | {p99:.3f} | {ratio} | {versus} |")
            if front == "direct":
                continue
            record(
                "gateway hop",
                f"echo p50 over {transport}, {front}",
                p50,
                direct,
                unit="ms",
                baseline_name="direct SDK client",
            )
            if fastmcp and front != "FastMCP proxy":
                record(
                    "gateway hop",
                    f"echo p50 over {transport}, {front} vs FastMCP",
                    p50,
                    fastmcp,
                    unit="ms",
                    baseline_name="FastMCP proxy",
                )
    print("\n| front (HTTP, stdio upstream) | K clients | calls/s | p99 ms | upstream processes |")
    print("|---|---|---|---|---|")
    fastmcp_rates = {k: r for f, k, r, _, _ in load if f == "FastMCP proxy"}
    for front, clients, rate, p99, upstream in load:
        print(f"| {front} | {clients} | {rate:.0f} | {p99:.2f} | {upstream} |")
        if front == "FastMCP proxy":
            continue
        record(
            "gateway clients",
            f"K={clients} HTTP clients, calls/s ({upstream} upstream process)",
            rate,
            fastmcp_rates.get(clients),
            unit="calls/s",
            baseline_name="FastMCP proxy",
            lower_is_better=False,
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="sequential calls per row")
    parser.add_argument("--per-client", type=int, default=100, help="calls per client (K rows)")
    parser.add_argument("--no-fastmcp", action="store_true", help="skip the FastMCP proxy rows")
    parser.add_argument(
        "--transports", default="stdio,http", help="hop rows to run (stdio, http or both)"
    )
    parser.add_argument("--no-load", action="store_true", help="skip the K-clients rows")
    options = parser.parse_args()
    with_fastmcp = not options.no_fastmcp
    if with_fastmcp and not FASTMCP_PYTHON.exists():
        raise SystemExit(
            "bench/.venv-fastmcp is missing: run bench/install_fastmcp.sh or pass --no-fastmcp"
        )
    print(f"echo over each front, {options.calls} sequential calls after {WARMUP_CALLS} warm-up:")
    hops = await hop_rows(options.calls, with_fastmcp, options.transports.split(","))
    load: list[tuple[str, int, float, float, int]] = []
    if not options.no_load:
        print(f"\nK concurrent HTTP clients, {options.per_client} calls each:")
        load = await concurrency_rows(options.per_client, with_fastmcp)
    print_tables(hops, load)


if __name__ == "__main__":
    anyio.run(main)
