"""The stores shared through Redis (``settings.sharedState``), with a real ``redis-server``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry
from pi_mcp_adapter.config._trust import TrustStore
from pi_mcp_adapter.engine._approval import ToolApprovals
from pi_mcp_adapter.servers._failures import FailureMemory

from ._team_services import RedisServer, team_redis
from .conftest import PI_MCP

ENTRY = ServerEntry(command=sys.executable, args=("server.py",))


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with team_redis(tmp_path / "redis") as server:
        yield server


def test_replicas_share_failures_cache_approvals_and_trust(
    redis: RedisServer, tmp_path: Path
) -> None:
    one, two = tmp_path / "one", tmp_path / "two"

    FailureMemory(one / "failures.json").record("github", ENTRY, "connection refused")
    record = FailureMemory(two / "failures.json").get("github", ENTRY)
    assert record is not None
    assert record.attempts == 1
    FailureMemory(two / "failures.json").clear("github")
    assert FailureMemory(one / "failures.json").get("github", ENTRY) is None

    metadata = ServerMetadata(tools=({"name": "search", "inputSchema": {"type": "object"}},))
    MetadataCache(one / "mcp-cache.json").store("github", ENTRY, metadata)
    # A replica with an empty agent dir starts warm.
    joined = MetadataCache(two / "mcp-cache.json")
    assert joined.get("github", ENTRY) == metadata

    ToolApprovals(one)._remember("github", "search", "digest-1")
    assert ToolApprovals(two)._always("github", "search") == "digest-1"

    project_file = tmp_path / "project" / ".mcp.json"
    project_file.parent.mkdir()
    project_file.write_text("{}")
    TrustStore.in_agent_dir(one).trust([(project_file, "sha-1")])
    assert TrustStore.in_agent_dir(two).is_trusted(project_file, "sha-1")


def test_redis_down_keeps_serving_from_files_and_catches_up(
    redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_state, "RETRY_AFTER_S", 0.0)
    one, two = tmp_path / "one", tmp_path / "two"
    state = shared_state.active()
    assert state is not None
    redis.stop()

    memory = FailureMemory(one / "failures.json")
    memory.record("github", ENTRY, "timed out")
    # Served from this replica's file meanwhile.
    assert memory.get("github", ENTRY) is not None
    status = state.status()
    assert not status.reachable
    assert status.pending_writes == 1
    assert "unreachable" in state.describe()
    assert "1 write(s) queued" in state.describe()

    redis.start()
    assert state.ping()
    assert state.status().pending_writes == 0
    assert "connected" in state.describe()
    record = FailureMemory(two / "failures.json").get("github", ENTRY)
    assert record is not None
    assert record.reason == "timed out"


def test_no_setting_no_redis(tmp_path: Path) -> None:
    shared_state.deactivate()
    assert shared_state.activate(None, environ={}) is None
    assert shared_state.active() is None


def test_oauth_records_are_shared_encrypted_with_the_state_key(
    redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import redis as redis_client
    from mcp.shared.auth import OAuthToken

    from pi_mcp_adapter.servers._token_store import AuthRecord, create_token_store

    access = "access-7d1e9b0c2f"
    record = AuthRecord(
        server_url="https://mcp.example/mcp",
        tokens=OAuthToken(access_token=access, refresh_token="refresh-55a1", expires_in=3600),
        expires_at=4_000_000_000.0,
        obtained_at=1_700_000_000.0,
    )
    monkeypatch.setenv("PI_MCP_STATE_KEY", "team passphrase")
    create_token_store("file", tmp_path / "one").save("github", record)

    joined = create_token_store("file", tmp_path / "two").load("github")
    assert joined.tokens is not None
    assert joined.tokens.access_token == access
    assert joined.server_url == "https://mcp.example/mcp"
    assert joined.expires_at == 4_000_000_000.0
    stored = redis_client.Redis.from_url(redis.url).hget("pi-mcp:oauth", "github")
    assert stored is not None
    assert access.encode() not in stored
    assert b"refresh-55a1" not in stored

    # Another key cannot read it: the replica uses its own (empty) store.
    monkeypatch.setenv("PI_MCP_STATE_KEY", "another passphrase")
    assert create_token_store("file", tmp_path / "three").load("github").tokens is None
    # Without the key, tokens stay local and never reach Redis.
    monkeypatch.delenv("PI_MCP_STATE_KEY")
    create_token_store("file", tmp_path / "four").save("gitlab", record)
    assert redis_client.Redis.from_url(redis.url).hget("pi-mcp:oauth", "gitlab") is None


def test_call_statistics_add_up_across_replicas_and_outages(
    redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_mcp_adapter.engine._stats import CallStats, read_shared_stats, read_stats

    monkeypatch.setattr(shared_state, "RETRY_AFTER_S", 0.0)
    one = CallStats(tmp_path / "one" / "stats.json")
    two = CallStats(tmp_path / "two" / "stats.json")
    for stats, calls in ((one, 3), (two, 2)):
        for _ in range(calls):
            stats.record("github", "search", latency_ms=10.0, ok=True, bytes_out=100)
        assert stats.flush()
    shared = read_shared_stats()
    assert shared is not None
    assert [(s.server, s.tool, s.calls, s.bytes_out) for s in shared] == [
        ("github", "search", 5, 500)
    ]

    redis.pause()
    one.record("github", "search", latency_ms=10.0, ok=False, bytes_out=1)
    assert one.flush()  # the file is written meanwhile
    assert read_shared_stats() is None
    assert read_stats(one.path)[0].calls == 4
    redis.resume()
    one.record("github", "search", latency_ms=10.0, ok=True, bytes_out=1)
    assert one.flush()
    shared = read_shared_stats()
    assert shared is not None
    assert (shared[0].calls, shared[0].errors) == (7, 1)  # each call counted once


def test_status_says_whether_the_shared_state_answers(redis: RedisServer, tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {}, "settings": {"sharedState": redis.url}}))
    command = [
        *(str(PI_MCP), "--config", str(config), "--agent-dir", str(tmp_path / "agent")),
        *("--project", str(tmp_path), "status"),
    ]
    answered = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tmp_path)
    assert f"shared state: {redis.url} (connected)" in answered.stdout
    redis.pause()
    try:
        away = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tmp_path)
    finally:
        redis.resume()
    assert f"shared state: {redis.url} unreachable" in away.stdout
    assert "serving from local files" in away.stdout


def test_a_password_in_the_url_is_never_shown() -> None:
    state = shared_state.SharedState("redis://user:s3cret-pass@redis.internal:6379/0")
    assert state.status().url == "redis://user:***@redis.internal:6379/0"
    assert "s3cret-pass" not in state.describe()
