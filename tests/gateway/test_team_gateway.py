"""Three gateway replicas behind nginx with one shared state in Redis, on loopback.

Real processes only: ``redis-server``, ``nginx`` and ``pi-mcp serve --transport http
--stateless`` replicas, each with an agent dir of its own (as on separate machines), and 32
SDK clients in this process. The figures (calls/s with 1, 2 and 3 replicas, failed calls, a
joining replica's first call) are printed; run with ``-s`` to read them.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from ._team_services import (
    GatewayReplica,
    GatewayReplicas,
    gateway_replicas,
    missing_packages,
    nginx,
    redis_server,
    tools_a_joining_replica_knows,
)
from .conftest import PI_MCP, fixture_entry, text_of

MISSING = missing_packages(nginx=True)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.anyio,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"needs the Debian package(s) {', '.join(MISSING)} (.ci/run installs them)",
    ),
]

CLIENTS = 32
CALLS = int(os.environ.get("PI_MCP_TEAM_CALLS", "15"))
CI_TOKEN = "ci-team-token-3b9e"
ADMIN_TOKEN = "admin-team-token-c41d"


@contextmanager
def team(tmp_path: Path, redis_url: str) -> Iterator[GatewayReplicas]:
    config = tmp_path / "mcp.json"
    settings = {
        "sharedState": redis_url,
        "gatewayClients": [
            {
                "name": "ci",
                "tokenSha256": hashlib.sha256(CI_TOKEN.encode()).hexdigest(),
                "allow": ["fixture_echo", "fixture_pid"],
            },
            {"name": "admin", "tokenSha256": hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()},
        ],
    }
    servers = {"fixture": fixture_entry(directTools=True, lifecycle="eager")}
    config.write_text(json.dumps({"mcpServers": servers, "settings": settings}))
    with gateway_replicas(tmp_path, config) as crew:
        yield crew


def client(url: str, token: str) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return Client(streamable_http_client(url, http_client=http))


@dataclass
class Load:
    ok: int = 0
    failed: int = 0
    failed_after_kill: int = 0
    errors: list[str] = field(default_factory=list)


async def run_clients(url: str, *, kill: GatewayReplica | None = None) -> tuple[Load, float]:
    """32 clients (half ``ci``, half ``admin``) making :data:`CALLS` calls each through
    ``url``; ``kill`` is killed once a third of the calls are done. Returns the load and the
    seconds it took."""
    load = Load()
    total = CLIENTS * CALLS
    killed_at: list[float] = []

    async def one(index: int) -> None:
        token = CI_TOKEN if index % 2 else ADMIN_TOKEN
        done = 0
        for _attempt in range(CALLS):
            try:
                async with client(url, token) as session:
                    for call in range(done, CALLS):
                        result = await session.call_tool(
                            "fixture_echo", {"message": f"{index}-{call}"}
                        )
                        assert text_of(result) == f"Echo: {index}-{call}", text_of(result)
                        load.ok += 1
                        done += 1
                        if kill is not None and not killed_at and load.ok >= total // 3:
                            killed_at.append(time.monotonic())
                            kill.kill()
                return
            except Exception as exc:  # a call cut by the kill; reconnect through nginx
                load.failed += 1
                if killed_at and time.monotonic() - killed_at[0] > 1.0:
                    load.failed_after_kill += 1
                load.errors.append(repr(exc)[:200])

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        for index in range(CLIENTS):
            tg.start_soon(one, index)
    return load, time.monotonic() - started


async def test_replicas_behind_nginx_share_state_survive_a_kill_and_join_warm(
    tmp_path: Path,
) -> None:
    figures: dict[str, object] = {}
    with redis_server(tmp_path / "redis") as redis, team(tmp_path, redis.url) as crew:
        first = crew.start("replica-1")
        second = crew.start("replica-2")
        third = crew.start("replica-3")
        with nginx(tmp_path / "nginx", [first.port]) as balancer:
            url = f"http://127.0.0.1:{balancer.port}/mcp"
            phases = ((1, [first]), (2, [first, second]), (3, [first, second, third]))
            for count, upstreams in phases:
                balancer.set_upstreams([r.port for r in upstreams])
                load, seconds = await run_clients(url)
                assert load.failed == 0, load.errors[:3]
                figures[f"calls/s with {count} replica(s)"] = round(load.ok / seconds)

            # One replica dies mid-run: the others keep answering, its clients come back
            # through nginx.
            load, seconds = await run_clients(url, kill=second)
            assert second.process.poll() is not None  # it was killed mid-run
            assert load.ok == CLIENTS * CALLS
            assert load.failed_after_kill == 0, load.errors[:3]
            figures["failed calls when a replica was killed"] = load.failed
            figures["calls when a replica was killed"] = load.ok

            # A replica that joins is warm: its empty agent dir, yet the cache (from Redis)
            # knows every tool before it connects anything.
            status = subprocess.run(
                [
                    *(str(PI_MCP), "--config", str(crew.config)),
                    *("--agent-dir", str(tmp_path / "cold"), "--project", str(tmp_path)),
                    *("status", "--json"),
                ],
                capture_output=True,
                text=True,
                check=True,
                cwd=tmp_path,
            )
            report = json.loads(status.stdout)
            assert report["sharedState"]["reachable"] is True
            assert tools_a_joining_replica_knows(crew.config, tmp_path / "joining", "fixture") > 0
            fourth = crew.start("replica-4")
            async with client(fourth.url, ADMIN_TOKEN) as session:
                result = await session.call_tool("fixture_echo", {"message": "joined"})
            figures["new replica: start to first call (s)"] = round(
                time.monotonic() - fourth.started_at, 2
            )
            assert text_of(result) == "Echo: joined"
            balancer.set_upstreams([first.port, third.port, fourth.port])

            # The policy holds on every replica, whichever answers.
            for replica in (first, third, fourth):
                async with client(replica.url, CI_TOKEN) as session:
                    names = {t.name for t in (await session.list_tools()).tools}
                    assert "fixture_echo" in names
                    assert "fixture_env" not in names
                    refused = await session.call_tool("fixture_env", {"name": "HOME"})
                    assert refused.is_error
                    assert "Unknown tool 'fixture_env'" in text_of(refused)
            for replica in (first, third, fourth):
                assert CI_TOKEN not in (tmp_path / f"{replica.agent_dir.name}.stderr").read_text()
    print(f"\nteam gateway figures (loopback, {CLIENTS} clients x {CALLS} calls):")
    for name, value in figures.items():
        print(f"  {name}: {value}")
