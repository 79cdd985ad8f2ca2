"""Attack (or accident): the Redis a team gateway shares restarts empty.

Real ``redis-server`` processes and ``pi-mcp serve`` replicas; the shared records are read
back with redis-py, as a replica that joins would read them.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest
import redis

from gateway._team_services import (
    PI_MCP,
    gateway_replicas,
    missing_packages,
    redis_server,
    tools_a_joining_replica_knows,
)
from pi_mcp_adapter._shared_state import EPOCH_CHECK_S, SharedState, text_digest

from ._replicas_support import ledger_entry

MISSING = missing_packages()
pytestmark = pytest.mark.skipif(
    bool(MISSING),
    reason=f"needs the Debian package(s) {', '.join(MISSING)} (.ci/run installs them)",
)


def status_of(tmp_path: Path, config: Path, agent_dir: Path, *, as_json: bool) -> str:
    completed = subprocess.run(
        [
            *(str(PI_MCP), "--config", str(config), "--agent-dir", str(agent_dir)),
            *("--project", str(tmp_path), "status", *(["--json"] if as_json else [])),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    return completed.stdout


@pytest.mark.slow
async def test_a_replica_publishes_the_tool_cache_again_when_redis_restarts_empty(
    tmp_path: Path,
) -> None:
    with redis_server(tmp_path / "redis") as server:
        config = tmp_path / "mcp.json"
        servers = {"ledger": ledger_entry(tmp_path / "ledger.txt", lifecycle="eager")}
        config.write_text(
            json.dumps({"mcpServers": servers, "settings": {"sharedState": server.url}})
        )
        peek = redis.Redis.from_url(server.url)
        with gateway_replicas(tmp_path, config) as crew:
            crew.start("replica-1")
            with anyio.fail_after(30):
                while not peek.hexists("pi-mcp:cache", "ledger"):
                    await anyio.sleep(0.1)
            server.restart()  # no persistence: every shared record is gone
            peek = redis.Redis.from_url(server.url)
            assert not peek.exists("pi-mcp:cache")
            # The serving replica notices within a few seconds and publishes what it holds.
            with anyio.fail_after(4 * EPOCH_CHECK_S + 10):
                while not peek.hexists("pi-mcp:cache", "ledger"):
                    await anyio.sleep(0.1)
        # A replica that joins now, with an empty agent dir, knows the tools at once.
        assert tools_a_joining_replica_knows(config, tmp_path / "joining", "ledger") == 4


async def test_records_a_process_wrote_or_read_are_written_back_after_an_empty_restart(
    tmp_path: Path,
) -> None:
    now = [0.0]
    with redis_server(tmp_path / "redis") as server:
        writer = SharedState(server.url, clock=lambda: now[0])
        reader = SharedState(server.url, clock=lambda: now[0])
        writer.put("oauth", "github", "encrypted-record")
        writer.put("approvals", "github", {"always": ["create_issue"]})
        assert reader.record("failures", "none") == (True, None)
        writer.put("failures", "flaky", {"count": 2})
        assert reader.table("failures") == {"flaky": {"count": 2}}
        writer.delete("approvals", "github")  # deleted records stay deleted
        server.restart()
        peek = redis.Redis.from_url(server.url)
        assert peek.keys("pi-mcp:*") == []
        now[0] += EPOCH_CHECK_S + 1
        # The reader's next read publishes what it read before it answers.
        assert reader.table("failures") == {"flaky": {"count": 2}}
        writer.refresh()
        assert json.loads(peek.hget("pi-mcp:oauth", "github") or b"null") == "encrypted-record"
        assert not peek.hexists("pi-mcp:approvals", "github")


class SlowPublisher:
    """A digested table's owner whose records take as long as the test says to read."""

    def __init__(self, records: list[tuple[str, str]]) -> None:
        self.records = records
        self.go = threading.Event()
        self.ran_on: list[threading.Thread] = []

    def give(self) -> list[tuple[str, str]]:
        self.ran_on.append(threading.current_thread())
        assert self.go.wait(30), "the test never let the publisher go"
        return self.records


def test_a_digested_table_is_published_again_without_holding_up_the_exchange_that_noticed(
    tmp_path: Path,
) -> None:
    """At 95,000 tools the metadata table takes seconds to give and write: the exchange that
    notices the loss (on any thread, an event loop's too) goes on, and the records follow."""
    now = [0.0]
    with redis_server(tmp_path / "redis") as server:
        replica = SharedState(server.url, clock=lambda: now[0])
        records = [(f"server-{n}", json.dumps({"tools": [], "n": n})) for n in range(3)]
        for key, text in records:
            replica.put_digested("cache", key, text)
        owner = SlowPublisher(records)
        replica.publish_digested_from("cache", owner.give)
        server.restart()
        peek = redis.Redis.from_url(server.url, decode_responses=True)
        now[0] += EPOCH_CHECK_S + 1
        replica.put("failures", "flaky", {"count": 1})  # notices the loss, and returns
        assert json.loads(peek.hget("pi-mcp:failures", "flaky") or "null") == {"count": 1}
        assert not peek.exists("pi-mcp:cache")
        owner.go.set()
        deadline = time.monotonic() + 30
        while peek.hlen("pi-mcp:cache#digests") < len(records):
            assert time.monotonic() < deadline, "the table was not published again"
            time.sleep(0.05)
        assert peek.hgetall("pi-mcp:cache") == dict(records)
        assert peek.hget("pi-mcp:cache#digests", "server-1") == text_digest(records[1][1])
        assert owner.ran_on
        assert owner.ran_on[0] is not threading.current_thread()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("redis_options", "persistence", "said"),
    [
        pytest.param({}, "volatile", "keeps nothing on restart", id="no-persistence"),
        pytest.param({"appendonly": True}, "persistent", None, id="appendonly"),
        pytest.param(
            {"extra_args": ["--rename-command", "CONFIG", ""]},
            "unknown",
            "is unknown",
            id="config-disabled",
        ),
    ],
)
def test_status_warns_when_the_shared_redis_keeps_nothing_on_restart(
    tmp_path: Path, redis_options: dict[str, object], persistence: str, said: str | None
) -> None:
    with redis_server(tmp_path / "redis", **redis_options) as server:  # type: ignore[arg-type]
        config = tmp_path / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {}, "settings": {"sharedState": server.url}}))
        report = json.loads(status_of(tmp_path, config, tmp_path / "agent", as_json=True))
        assert report["sharedState"]["persistence"] == persistence
        text = status_of(tmp_path, config, tmp_path / "agent", as_json=False)
        if said is None:
            assert "warning" not in text
            assert "note:" not in text
        else:
            assert said in text
