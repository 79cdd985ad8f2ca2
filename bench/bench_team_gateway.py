"""The team gateway: replicas behind nginx with shared state in Redis and per-client tokens.

Rows, measured in this run against the same Python fixture server (each replica starts its own
stdio copy; ``fixture_echo`` is a direct tool), with K clients (default 32) calling at once
over Streamable HTTP, stateless replicas, kept-alive client sessions:

- baseline: one replica without ``sharedState`` or ``gatewayClients``, called directly;
- team features: one replica with both (Redis for its state, a bearer token checked by the
  SDK's auth and a policy for every call), called directly;
- nginx -> 1, 2, 3 team replicas.

The rows take turns (``--rounds``), so a load change on this shared machine hits all of them
alike. Also counted: the Redis commands the team replica sent per call (``INFO stats``).
Needs the Debian packages ``redis-server`` and ``nginx``.

Usage: .venv/bin/python bench/bench_team_gateway.py [--clients K] [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gateway"))
from _team_services import free_port, missing_packages, nginx, redis_server, wait_for_port

from _summary import record

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
PI_MCP = Path(sys.executable).parent / "pi-mcp"
TOKEN = "bench-team-token"


def start_replica(root: Path, name: str, config: Path) -> tuple[subprocess.Popen[bytes], int]:
    agent_dir = root / name
    agent_dir.mkdir()
    port = free_port()
    process = subprocess.Popen(
        [
            *(str(PI_MCP), "--config", str(config), "--agent-dir", str(agent_dir)),
            *("--project", str(root), "serve", "--transport", "http", "--stateless"),
            *("--port", str(port)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=(root / f"{name}.stderr").open("wb"),
        cwd=root,
    )
    wait_for_port(port, timeout_s=30)
    return process, port


def write_config(path: Path, settings: dict[str, Any]) -> Path:
    servers = {
        "fixture": {
            "command": sys.executable,
            "args": [str(FIXTURE)],
            "directTools": True,
            "lifecycle": "eager",
        }
    }
    path.write_text(json.dumps({"mcpServers": servers, "settings": settings}))
    return path


def redis_commands(port: int) -> int:
    out = subprocess.run(
        ["redis-cli", "-p", str(port), "info", "stats"], capture_output=True, text=True, check=True
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("total_commands_processed:"))
    return int(line.split(":")[1])


async def connect(stack: AsyncExitStack, url: str, clients: int, token: str | None) -> list[Client]:
    sessions = []
    for _ in range(clients):
        headers = {"Authorization": f"Bearer {token}"} if token else None
        http = create_mcp_http_client(headers=headers)
        client = Client(streamable_http_client(url, http_client=http))
        sessions.append(await stack.enter_async_context(client))
    for session in sessions:  # warm: each has made a call before the clock starts
        await session.call_tool("fixture_echo", {"message": "warm"})
    return sessions


async def turn(sessions: list[Client], calls: int, latencies: list[float]) -> float:
    async def one(session: Client) -> None:
        for _ in range(calls):
            started = time.perf_counter()
            result = await session.call_tool("fixture_echo", {"message": "x"})
            latencies.append((time.perf_counter() - started) * 1000)
            assert not result.is_error

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for session in sessions:
            tg.start_soon(one, session)
    return time.perf_counter() - started


async def main(args: argparse.Namespace) -> None:
    missing = missing_packages(nginx=True)
    if missing:
        print(f"skipped: needs the Debian package(s) {', '.join(missing)}")
        return
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp, ExitStack() as stack:
        root = Path(tmp)
        redis = stack.enter_context(redis_server(root / "redis"))
        plain = write_config(root / "plain.json", {})
        team = write_config(
            root / "team.json",
            {
                "sharedState": redis.url,
                "gatewayClients": [
                    {
                        "name": "bench",
                        "tokenSha256": hashlib.sha256(TOKEN.encode()).hexdigest(),
                        "allow": ["fixture_*"],
                        "deny": ["fixture_crash"],
                    }
                ],
            },
        )
        processes = []
        base_process, base_port = start_replica(root, "plain", plain)
        processes.append(base_process)
        team_ports = []
        for index in range(3):
            process, port = start_replica(root, f"team-{index}", team)
            processes.append(process)
            team_ports.append(port)
        stack.callback(lambda: [p.terminate() for p in processes])
        balancers = [
            stack.enter_context(nginx(root / f"nginx-{count}", team_ports[:count]))
            for count in (1, 2, 3)
        ]
        rows: list[tuple[str, str, str | None]] = [
            (
                "baseline: 1 replica, no shared state, no tokens",
                f"http://127.0.0.1:{base_port}/mcp",
                None,
            ),
            (
                "team: 1 replica, Redis + client token",
                f"http://127.0.0.1:{team_ports[0]}/mcp",
                TOKEN,
            ),
        ] + [
            (f"team: nginx -> {count} replica(s)", f"http://127.0.0.1:{b.port}/mcp", TOKEN)
            for count, b in zip((1, 2, 3), balancers, strict=True)
        ]
        async with AsyncExitStack() as clients:
            sessions = [await connect(clients, url, args.clients, token) for _, url, token in rows]
            seconds = [0.0] * len(rows)
            latencies: list[list[float]] = [[] for _ in rows]
            redis_per_call: list[float] = []
            for _ in range(args.rounds):
                for index in range(len(rows)):
                    before = redis_commands(redis.port) if index == 1 else 0
                    seconds[index] += await turn(sessions[index], args.calls, latencies[index])
                    if index == 1:
                        # Minus the INFO command itself.
                        sent = redis_commands(redis.port) - before - 1
                        redis_per_call.append(sent / (args.clients * args.calls))
        total = args.clients * args.calls * args.rounds
        print(
            f"\nteam gateway, {args.clients} clients x {args.calls} calls x {args.rounds} rounds "
            "(loopback, stateless replicas, fixture_echo)"
        )
        print(f"{'row':<50} {'calls/s':>8} {'p50 ms':>8} {'p95 ms':>8}")
        rates = []
        for (name, _, _), spent, samples in zip(rows, seconds, latencies, strict=True):
            rate = total / spent
            rates.append(rate)
            p95 = statistics.quantiles(samples, n=20)[-1]
            print(f"{name:<50} {rate:>8.0f} {statistics.median(samples):>8.1f} {p95:>8.1f}")
        print(f"Redis commands per call (team replica): {statistics.mean(redis_per_call):.3f}")
        record(
            "team gateway",
            "calls/s, Redis state + client token vs plain replica",
            round(rates[1]),
            round(rates[0]),
            unit="calls/s",
            baseline_name="plain replica",
            lower_is_better=False,
        )
        record(
            "team gateway",
            "calls/s, nginx -> 3 replicas vs nginx -> 1",
            round(rates[4]),
            round(rates[2]),
            unit="calls/s",
            baseline_name="nginx -> 1 replica",
            lower_is_better=False,
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    anyio.run(main, parser.parse_args())
