"""The metadata cache through the team gateway's shared state: a store of one server writes
that server's Redis record only, whatever the catalog's size (a real ``redis-server``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry

from ._team_services import RedisServer, team_redis

SERVERS = 300


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with team_redis(tmp_path / "redis") as server:
        yield server


def metadata_of(name: str, version: int = 0) -> ServerMetadata:
    return ServerMetadata(tools=({"name": "only", "description": f"{name} v{version}"},))


def hash_writes(url: str) -> dict[str, int]:
    """Calls of each hash-writing command Redis has served so far."""
    import redis as redis_client

    client = redis_client.Redis.from_url(url)
    try:
        stats: dict[str, Any] = client.info("commandstats")
    finally:
        client.close()
    return {
        command: int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
        for command in ("hset", "hdel", "hmset", "del")
    }


def test_storing_one_server_writes_that_servers_shared_record_only(
    redis: RedisServer, tmp_path: Path
) -> None:
    cache = MetadataCache(tmp_path / "agent" / "mcp-cache.json")
    for s in range(SERVERS):
        name = f"server-{s:04d}"
        cache.store(name, ServerEntry(command="server", args=(name,)), metadata_of(name))
    cache.flush()
    before = hash_writes(redis.url)

    name = f"server-{SERVERS // 2:04d}"
    cache.store(name, ServerEntry(command="server", args=(name,)), metadata_of(name, 1))
    cache.acknowledge_changes(name)
    cache.flush()

    after = hash_writes(redis.url)
    # The relisting and the acknowledgement: this server's record, twice; nothing else.
    assert after["hset"] - before["hset"] <= 2, (before, after)
    assert after["hdel"] == before["hdel"]
    assert after["del"] == before["del"]
    assert after["hmset"] == before["hmset"]
    joined = MetadataCache(tmp_path / "replica" / "mcp-cache.json")
    relisted = joined.get(name, ServerEntry(command="server", args=(name,)))
    assert relisted == metadata_of(name, 1)
    assert len(joined.servers) == SERVERS
