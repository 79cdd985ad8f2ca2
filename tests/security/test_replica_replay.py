"""Attack: a gateway replica dies mid-call and the load balancer replays the request.

Real processes: ``redis-server``, ``pi-mcp serve --transport http --stateless`` replicas, nginx
and haproxy with the retry settings of ``examples/team-gateway/``, and a stdio server of ours
(``tests/fixtures/ledger_server.py``) that writes one ledger line per execution, so every test
counts executions at the upstream, where a payment would happen.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from gateway._team_services import (
    PI_MCP,
    GatewayReplica,
    GatewayReplicas,
    gateway_replicas,
    haproxy,
    missing_packages,
    nginx,
    redis_server,
)

from ._replicas_support import (
    REPO,
    executions,
    ledger_entry,
    ledger_pids,
    post_call,
    result_text,
    tool_call_body,
)

MISSING = missing_packages()
needs_redis = pytest.mark.skipif(
    bool(MISSING),
    reason=f"needs the Debian package(s) {', '.join(MISSING)} (.ci/run installs them)",
)
UNKNOWN = "Its outcome is unknown"
TOKEN = "replay-client-token-5e1f"


@contextmanager
def replicas_of(
    tmp_path: Path, ledger: Path, *, hold: Path | None = None
) -> Iterator[GatewayReplicas]:
    """Redis and a configuration whose ``ledger`` server runs eagerly on every replica;
    ``archive`` is made safe to repeat by the server's ``idempotentTools``."""
    with redis_server(tmp_path / "redis") as redis:
        config = tmp_path / "mcp.json"
        server = ledger_entry(ledger, hold=hold, lifecycle="eager", idempotentTools=["arch*"])
        settings = {
            "sharedState": redis.url,
            "gatewayClients": [
                {"name": "team", "tokenSha256": hashlib.sha256(TOKEN.encode()).hexdigest()}
            ],
        }
        config.write_text(json.dumps({"mcpServers": {"ledger": server}, "settings": settings}))
        with gateway_replicas(tmp_path, config) as crew:
            yield crew


def auth_client() -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)


async def wait_until(check: Callable[[], bool], *, timeout_s: float = 30) -> None:
    with anyio.fail_after(timeout_s):
        while not check():
            await anyio.sleep(0.02)


async def wait_for_listing(replica: GatewayReplica, http: httpx.AsyncClient) -> None:
    """Until the replica lists the ledger server's tools (it starts eagerly)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}).encode()

    async def listed() -> bool:
        result = await post_call(http, replica.url, body, proxy_request_id=None)
        return any(t["name"] == "ledger_transfer" for t in result["tools"])

    with anyio.fail_after(30):
        while not await listed():
            await anyio.sleep(0.1)


@needs_redis
@pytest.mark.slow
async def test_a_replay_of_a_call_cut_by_a_replica_kill_runs_again_only_if_safe_to_repeat(
    tmp_path: Path,
) -> None:
    ledger, hold = tmp_path / "ledger.txt", tmp_path / "hold"
    with replicas_of(tmp_path, ledger, hold=hold) as crew:
        first, second = crew.start("replica-1"), crew.start("replica-2")
        async with auth_client() as http:
            await wait_for_listing(first, http)
            await wait_for_listing(second, http)
            hold.touch()  # every call stays in flight upstream until the file goes
            tools = ("transfer", "balance", "set_flag", "archive")
            bodies = {tool: tool_call_body(f"ledger_{tool}", f"{tool}-1", 3) for tool in tools}
            async with anyio.create_task_group() as tg:
                for tool in tools:
                    tg.start_soon(_cut_call, http, first.url, bodies[tool], f"req-{tool}")
                await wait_until(lambda: len(executions(ledger)) == len(tools))
                first.kill()  # the balancer now replays each request on the second replica
            hold.unlink()
            replayed = {
                tool: await post_call(
                    http, second.url, bodies[tool], proxy_request_id=f"req-{tool}"
                )
                for tool in tools
            }
    counts = executions(ledger)
    # Not safe to repeat: answered at once, never run a second time.
    assert replayed["transfer"]["isError"] is True
    assert UNKNOWN in result_text(replayed["transfer"])
    assert "not repeat the call blindly" in result_text(replayed["transfer"])
    assert counts["transfer", "transfer-1"] == 1
    # Read-only and idempotent by annotation, and idempotent by the server's setting: run again.
    for tool in ("balance", "set_flag", "archive"):
        assert replayed[tool]["isError"] is False, replayed[tool]
        assert result_text(replayed[tool]) == f"{tool} {tool}-1 done"
        assert counts[tool, f"{tool}-1"] == 2


async def _cut_call(http: httpx.AsyncClient, url: str, body: bytes, request_id: str) -> None:
    """A request whose replica is killed before it answers."""
    try:
        await post_call(http, url, body, proxy_request_id=request_id)
    except (httpx.HTTPError, AssertionError):
        return
    raise AssertionError("the call answered although its replica was killed")


@needs_redis
@pytest.mark.slow
async def test_a_replay_of_a_finished_call_gets_its_result_and_a_new_request_runs(
    tmp_path: Path,
) -> None:
    ledger = tmp_path / "ledger.txt"
    with replicas_of(tmp_path, ledger) as crew:
        first, second = crew.start("replica-1"), crew.start("replica-2")
        async with auth_client() as http:
            await wait_for_listing(first, http)
            await wait_for_listing(second, http)
            body = tool_call_body("ledger_transfer", "paid-once", 5)
            answered = await post_call(http, first.url, body, proxy_request_id="req-a")
            # The answer was lost on its way back; the balancer sends the request again.
            replayed = await post_call(http, second.url, body, proxy_request_id="req-a")
            assert counts_of(ledger, "paid-once") == 1
            assert replayed == answered
            # The same body in a new request (a new id from the balancer) is a new call.
            await post_call(http, second.url, body, proxy_request_id="req-b")
            assert counts_of(ledger, "paid-once") == 2
            # Without a request id, the same client sending the same body again after the
            # first finished is a new call too (a new stateless session reuses JSON-RPC ids).
            again = tool_call_body("ledger_transfer", "no-id", 1)
            await post_call(http, first.url, again, proxy_request_id=None)
            await post_call(http, second.url, again, proxy_request_id=None)
            assert counts_of(ledger, "no-id") == 2


def counts_of(ledger: Path, tag: str) -> int:
    return sum(n for (_tool, t), n in executions(ledger).items() if t == tag)


@dataclass
class Load:
    results: dict[str, Any] = field(default_factory=dict)
    """tag -> the CallToolResult, or the exception the client got."""
    killed_at: float | None = None


CLIENTS = 9
CALLS = 8


async def _run_load(url: str, victim: GatewayReplica, ledger: Path, hold: Path) -> Load:
    """:data:`CLIENTS` SDK clients through the balancer, each making :data:`CALLS` 200 ms calls
    that alternate a payment (``transfer``) and a read (``balance``); ``victim`` is SIGKILLed
    while one of its calls is in flight upstream (held there by ``hold``, so a busy machine
    cannot let it finish before the kill)."""
    load = Load()

    async def one(index: int) -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"})
        async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
            for call in range(CALLS):
                tool = "ledger_transfer" if call % 2 == 0 else "ledger_balance"
                tag = f"{tool}:{index}-{call}"
                try:
                    load.results[tag] = await client.call_tool(tool, {"tag": tag})
                except Exception as exc:  # a failed call: counted, never retried here
                    load.results[tag] = exc

    async def kill_mid_call() -> None:
        upstream = victim.descendant_pids()
        with anyio.fail_after(60):
            while len(ledger_pids(ledger)) < 2 * CLIENTS:
                await anyio.sleep(0.01)
            seen, looked_at = len(ledger_pids(ledger)), time.monotonic()
            while True:
                pids = ledger_pids(ledger)
                if upstream & set(pids[seen:]):
                    # The victim's server started a call since the last look; calls wait
                    # upstream once their 200 ms are over while the hold lasts, so if that
                    # look was recent enough the call is surely in flight at the kill.
                    hold.touch()
                    if time.monotonic() - looked_at < 0.15:
                        break
                    hold.unlink()
                seen, looked_at = len(pids), time.monotonic()
                await anyio.sleep(0.01)
        victim.kill()
        load.killed_at = time.monotonic()
        hold.unlink()

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_mid_call)
        for index in range(CLIENTS):
            tg.start_soon(one, index)
    return load


Balancer = Callable[[Path, list[int]], AbstractContextManager[Any]]


@needs_redis
@pytest.mark.slow
@pytest.mark.parametrize(
    "balancer",
    [
        pytest.param(
            nginx,
            id="nginx",
            marks=pytest.mark.skipif(bool(missing_packages(nginx=True)), reason="needs nginx"),
        ),
        pytest.param(
            haproxy,
            id="haproxy",
            marks=pytest.mark.skipif(bool(missing_packages(haproxy=True)), reason="needs haproxy"),
        ),
    ],
)
async def test_a_replica_killed_mid_stream_runs_no_payment_twice_and_fails_no_read(
    tmp_path: Path, balancer: Balancer
) -> None:
    ledger = tmp_path / "ledger.txt"
    hold = tmp_path / "hold"
    with replicas_of(tmp_path, ledger, hold=hold) as crew:
        replicas = [crew.start(f"replica-{i}") for i in (1, 2, 3)]
        async with auth_client() as http:
            for replica in replicas:
                await wait_for_listing(replica, http)
        with balancer(tmp_path / "balancer", [r.port for r in replicas]) as front:
            url = f"http://127.0.0.1:{front.port}/mcp"
            load = await _run_load(url, replicas[1], ledger, hold)
    assert load.killed_at is not None
    counts = executions(ledger)
    failed = {tag: r for tag, r in load.results.items() if isinstance(r, BaseException)}
    assert not failed, failed  # every request got an answer (the balancer replayed the cut ones)
    assert len(load.results) == CLIENTS * CALLS
    unknown = []
    for tag, result in load.results.items():
        tool = tag.split(":")[0].removeprefix("ledger_")
        ran = counts[tool, tag]
        if tool == "transfer":
            assert ran <= 1, f"{tag} ran {ran} times"
            if result.is_error:
                assert UNKNOWN in result.content[0].text, result
                unknown.append(tag)
            else:
                assert ran == 1
        else:
            assert not result.is_error, (tag, result)
            assert ran >= 1
    rerun_reads = [t for (tool, t), n in counts.items() if tool == "balance" and n > 1]
    # The kill did cut calls in flight: one replay at least, of a payment or of a read.
    assert unknown or rerun_reads, "no request was replayed: the kill hit no call in flight"
    print(
        f"\n{balancer.__name__}: {len(load.results)} calls, payments answered 'outcome unknown': "
        f"{len(unknown)}, reads run again: {len(rerun_reads)}, duplicated payments: 0"
    )


def test_the_shipped_balancer_configurations_send_a_request_id_and_retry_post(
    tmp_path: Path,
) -> None:
    nginx_conf = (REPO / "examples" / "team-gateway" / "nginx.conf").read_text()
    assert "proxy_set_header X-Request-Id $request_id;" in nginx_conf
    assert "non_idempotent" in nginx_conf
    haproxy_cfg = (REPO / "examples" / "team-gateway" / "haproxy.cfg").read_text()
    assert "http-request set-header X-Request-Id %[unique-id]" in haproxy_cfg
    assert "retry-on conn-failure empty-response" in haproxy_cfg


def test_idempotent_tools_must_be_a_list_of_tool_names(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    entry = ledger_entry(tmp_path / "ledger.txt", idempotentTools="transfer")
    config.write_text(json.dumps({"mcpServers": {"ledger": entry}}))
    status = subprocess.run(
        [
            *(str(PI_MCP), "--config", str(config), "--agent-dir", str(tmp_path / "agent")),
            *("--project", str(tmp_path), "status", "--json"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    errors = " ".join(json.loads(status.stdout)["configErrors"])
    assert "idempotentTools" in errors
    assert "list" in errors
