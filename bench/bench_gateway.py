"""The gateway hop: the same echo call direct, through ``pi-mcp serve`` and through FastMCP's
proxy; over stdio one client at a time, over Streamable HTTP in both protocol generations
(2025-11-25 with its ``initialize`` handshake, 2026-07-28 with a self-contained request each)
at 1, 4 and 16 concurrent clients.

Every row is measured in this run against the same Python fixture server
(``tests/fixtures/mcp_fixture.py``):

- direct: a bare SDK ``Client`` (no cache) to the fixture server itself, over the row's
  transport (over HTTP: the fixture serving Streamable HTTP, in the row's protocol generation);
- pi-mcp serve: the same client to the gateway, which serves the upstream's ``echo`` as a
  direct tool (``directTools``) and forwards to it;
- FastMCP proxy: the same client to ``fastmcp.server.create_proxy`` (fastmcp 4.1.6, run from
  its own environment ``bench/.venv-fastmcp``; see the README for the install) in front of the
  same upstream.

Over stdio the front is a child of the benchmark and the upstream a child of the front, and the
fronts are called in turn. Over HTTP each front serves Streamable HTTP on loopback with one
stdio upstream of its own (FastMCP's proxy opens a fresh upstream session per request, which
over HTTP is a new connection and handshake each call; a stdio upstream keeps the comparison
about the front), and each generation has its own processes (FastMCP's proxy restarts its
upstream when the generation of its client changes). The client speaks the row's generation:
``mode="legacy"`` for 2025-11-25, the SDK's default ``mode="auto"`` for 2026-07-28 (checked).
For each client count K, K clients per front and generation are connected and warm before the
clock starts; then the (generation, front) pairs take turns, ``ROUNDS`` each, with their K
clients calling at once, so a load change on this shared machine hits every row of that K
alike: p50 and p95 of every call's latency, calls/s over the turns' wall time, and the upstream
processes under each front afterwards (one, whatever K).

Usage: .venv/bin/python bench/bench_gateway.py [--calls N] [--per-client M] [--no-fastmcp]
       [--transports stdio,http] [--protocols 2025-11-25,2026-07-28] [--clients 1,4,16]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
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
LEGACY = "2025-11-25"
MODERN = "2026-07-28"
PROTOCOLS = (LEGACY, MODERN)
CLIENT_COUNTS = (1, 4, 16)
ROUNDS = 10
"""Turns each front takes per HTTP row: a load change on this shared machine hits them alike."""
LOAD_WARMUP_CALLS = 5


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
async def _http_client(url: str, protocol: str = LEGACY) -> AsyncIterator[Client]:
    """A client speaking ``protocol``: the handshake era, or 2026-07-28 as an SDK 2.3 client
    negotiates it by default (``mode="auto"``: ``server/discover``, then one request each)."""
    mode = "legacy" if protocol == LEGACY else "auto"
    async with Client(url, mode=mode, cache=None) as client:
        if client.protocol_version != protocol:
            raise SystemExit(f"{url} speaks {client.protocol_version}, not {protocol}")
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


async def stdio_rows(calls: int, with_fastmcp: bool) -> list[tuple[str, list[float]]]:
    fixture = _fixture_stdio()
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
        return [(name, values) for _, name, values in await _interleaved("stdio", fronts, calls)]


@dataclass(frozen=True, slots=True)
class HttpRow:
    protocol: str
    clients: int
    front: str
    samples: list[float]
    """Every call's latency (ms)."""
    calls_per_s: float
    upstream_processes: int | None = None
    """Upstream server processes under the front after the row (None: direct)."""

    @property
    def p50(self) -> float:
        return percentile(self.samples, 0.5)

    @property
    def p95(self) -> float:
        return percentile(self.samples, 0.95)


async def http_rows(
    per_client: int, with_fastmcp: bool, protocols: list[str], client_counts: list[int]
) -> list[HttpRow]:
    """Every front over Streamable HTTP, each with one stdio upstream; direct is the fixture
    serving Streamable HTTP itself. Each generation gets its own processes: FastMCP's proxy
    restarts its stdio upstream whenever the generation of its client changes."""
    rows: list[HttpRow] = []
    with ExitStack() as processes:
        urls: dict[tuple[str, str], str] = {}
        fronts: dict[tuple[str, str], subprocess.Popen[bytes]] = {}
        for protocol in protocols:
            urls[protocol, "direct"] = processes.enter_context(_upstream_http())
            started = [("pi-mcp serve", _gateway_http)]
            if with_fastmcp:
                started.append(("FastMCP proxy", _fastmcp_http))
            for name, front in started:
                fronts[protocol, name], urls[protocol, name] = processes.enter_context(
                    front(_fixture_stdio())
                )
        for clients in client_counts:
            for row in await _load_rows(urls, clients, per_client):
                front_process = fronts.get((row.protocol, row.front))
                upstream = _upstream_processes(front_process) if front_process else None
                rows.append(replace(row, upstream_processes=upstream))
    # By generation, then client count (a stable sort keeps the fronts' order).
    return sorted(rows, key=lambda row: (protocols.index(row.protocol), row.clients))


def _upstream_processes(front: subprocess.Popen[bytes]) -> int:
    """The fixture servers running under ``front``: one for any number of clients."""
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


async def _load_rows(
    urls: dict[tuple[str, str], str], clients: int, per_client: int
) -> list[HttpRow]:
    """``clients`` clients per (generation, front) pair, each making ``per_client`` timed
    calls over ``ROUNDS`` turns; every pair takes one turn per round, so a load change on this
    shared machine hits the rows alike."""
    per_turn = max(1, math.ceil(per_client / ROUNDS))
    pairs = list(urls)
    samples: dict[tuple[str, str], list[float]] = {pair: [] for pair in pairs}
    busy_s: dict[tuple[str, str], float] = dict.fromkeys(pairs, 0.0)
    async with AsyncExitStack() as stack:
        connected: dict[tuple[str, str], list[tuple[Client, str]]] = {}
        for protocol, front in pairs:
            connected[protocol, front] = []
            for _ in range(clients):
                client = await stack.enter_async_context(
                    _http_client(urls[protocol, front], protocol)
                )
                tool = await _echo_tool(client)
                for _ in range(LOAD_WARMUP_CALLS):
                    await client.call_tool(tool, {"message": "warm"})
                connected[protocol, front].append((client, tool))
        for _ in range(ROUNDS):
            for pair, pool in connected.items():
                began = time.perf_counter()
                async with anyio.create_task_group() as tg:
                    for client, tool in pool:
                        tg.start_soon(_call_in_turn, client, tool, per_turn, samples[pair])
                busy_s[pair] += time.perf_counter() - began
    rows = []
    for protocol, front in pairs:
        rate = clients * per_turn * ROUNDS / busy_s[protocol, front]
        row = HttpRow(protocol, clients, front, samples[protocol, front], rate)
        rows.append(row)
        print(
            f"  {protocol} K={clients:<3} {front:14} p50 {row.p50:7.3f} ms  "
            f"p95 {row.p95:7.3f} ms  {rate:7.1f} calls/s",
            flush=True,
        )
    return rows


async def _call_in_turn(client: Client, tool: str, calls: int, samples: list[float]) -> None:
    for i in range(calls):
        began = time.perf_counter()
        result = await client.call_tool(tool, {"message": f"m{i}"})
        samples.append((time.perf_counter() - began) * 1000)
        if result.is_error:
            raise SystemExit(f"{tool} failed: {result.content}")


# -- tables ------------------------------------------------------------------------------------


def print_stdio_table(rows: list[tuple[str, list[float]]]) -> None:
    if not rows:
        return
    print("\n| stdio front | p50 ms | p99 ms | p50 vs direct | p50 vs FastMCP proxy |")
    print("|---|---|---|---|---|")
    by_front = dict(rows)
    direct = percentile(by_front["direct"], 0.5)
    fastmcp = percentile(by_front["FastMCP proxy"], 0.5) if "FastMCP proxy" in by_front else None
    for front, samples in rows:
        p50, p99 = percentile(samples, 0.5), percentile(samples, 0.99)
        versus = f"{p50 / fastmcp:.2f}x" if fastmcp else "–"
        print(f"| {front} | {p50:.3f} | {p99:.3f} | {p50 / direct:.2f}x | {versus} |")
        if front == "direct":
            continue
        record(
            "gateway hop",
            f"echo p50 over stdio, {front}",
            p50,
            direct,
            unit="ms",
            baseline_name="direct SDK client",
        )
        if fastmcp and front != "FastMCP proxy":
            record(
                "gateway hop",
                f"echo p50 over stdio, {front} vs FastMCP",
                p50,
                fastmcp,
                unit="ms",
                baseline_name="FastMCP proxy",
            )


def print_http_table(rows: list[HttpRow]) -> None:
    if not rows:
        return
    print(
        "\n| protocol | clients | front | p50 ms | p95 ms | calls/s | p50 vs direct "
        "| p50 vs FastMCP | calls/s vs FastMCP | upstream processes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    cells = {(r.protocol, r.clients, r.front): r for r in rows}
    for row in rows:
        direct = cells[(row.protocol, row.clients, "direct")]
        peer = cells.get((row.protocol, row.clients, "FastMCP proxy"))
        versus_p50 = f"{row.p50 / peer.p50:.2f}x" if peer else "–"
        versus_rate = f"{row.calls_per_s / peer.calls_per_s:.2f}x" if peer else "–"
        upstream = "–" if row.upstream_processes is None else row.upstream_processes
        print(
            f"| {row.protocol} | {row.clients} | {row.front} | {row.p50:.2f} | {row.p95:.2f} "
            f"| {row.calls_per_s:.0f} | {row.p50 / direct.p50:.2f}x | {versus_p50} "
            f"| {versus_rate} | {upstream} |"
        )
    for row in rows:
        if row.front != "pi-mcp serve":
            continue
        where = f"over HTTP {row.protocol}, {row.clients} client" + ("s" if row.clients > 1 else "")
        direct = cells[(row.protocol, row.clients, "direct")]
        peer = cells.get((row.protocol, row.clients, "FastMCP proxy"))
        if row.clients == 1:
            record(
                "gateway hop",
                f"echo p50 {where}, pi-mcp serve",
                row.p50,
                direct.p50,
                unit="ms",
                baseline_name="direct SDK client",
            )
            if peer:
                record(
                    "gateway hop",
                    f"echo p50 {where}, pi-mcp serve vs FastMCP",
                    row.p50,
                    peer.p50,
                    unit="ms",
                    baseline_name="FastMCP proxy",
                )
        if peer and row.clients == max(r.clients for r in rows):
            record(
                "gateway clients",
                f"echo p95 {where}, pi-mcp serve",
                row.p95,
                peer.p95,
                unit="ms",
                baseline_name="FastMCP proxy",
            )
        if peer:
            record(
                "gateway clients",
                f"calls/s {where}, pi-mcp serve",
                row.calls_per_s,
                peer.calls_per_s,
                unit="calls/s",
                baseline_name="FastMCP proxy",
                lower_is_better=False,
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="sequential calls per stdio row")
    parser.add_argument(
        "--per-client", type=int, default=100, help="timed calls per client (HTTP rows)"
    )
    parser.add_argument("--no-fastmcp", action="store_true", help="skip the FastMCP proxy rows")
    parser.add_argument("--transports", default="stdio,http", help="stdio, http or both")
    parser.add_argument(
        "--protocols", default=",".join(PROTOCOLS), help="HTTP protocol generations to run"
    )
    parser.add_argument(
        "--clients",
        default=",".join(map(str, CLIENT_COUNTS)),
        help="concurrent client counts (HTTP rows)",
    )
    options = parser.parse_args()
    with_fastmcp = not options.no_fastmcp
    if with_fastmcp and not FASTMCP_PYTHON.exists():
        raise SystemExit(
            "bench/.venv-fastmcp is missing: run bench/install_fastmcp.sh or pass --no-fastmcp"
        )
    protocols = options.protocols.split(",")
    if unknown := set(protocols) - set(PROTOCOLS):
        raise SystemExit(f"unknown protocol {sorted(unknown)}; choose from {', '.join(PROTOCOLS)}")
    transports = options.transports.split(",")
    stdio: list[tuple[str, list[float]]] = []
    if "stdio" in transports:
        print(f"echo over stdio, {options.calls} sequential calls after {WARMUP_CALLS} warm-up:")
        stdio = await stdio_rows(options.calls, with_fastmcp)
    http: list[HttpRow] = []
    if "http" in transports:
        print(
            f"\necho over Streamable HTTP, {options.per_client} calls per client in {ROUNDS} "
            "turns per front:"
        )
        client_counts = [int(k) for k in options.clients.split(",")]
        http = await http_rows(options.per_client, with_fastmcp, protocols, client_counts)
    print_stdio_table(stdio)
    print_http_table(http)


if __name__ == "__main__":
    anyio.run(main)
