"""The metadata cache through the team gateway's shared state: a store of one server writes
that server's Redis record (and its digest) only, and a replica that loads reads the records
that differ from its own store only, whatever the catalog's size (a real ``redis-server``)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter import _shared_state as shared_state
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


def entry_of(name: str) -> ServerEntry:
    return ServerEntry(command="server", args=(name,))


def hash_writes(url: str) -> dict[str, int]:
    """Calls of each hash-writing or record-reading command Redis has served so far."""
    import redis as redis_client

    client = redis_client.Redis.from_url(url)
    try:
        stats: dict[str, Any] = client.info("commandstats")
    finally:
        client.close()
    return {
        command: int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
        for command in ("hset", "hdel", "hmset", "del", "hmget", "hget", "hgetall")
    }


def peek(url: str) -> Any:
    import redis as redis_client

    return redis_client.Redis.from_url(url, decode_responses=True)


def store_servers(agent: Path, count: int) -> MetadataCache:
    cache = MetadataCache(agent / "mcp-cache.json")
    for s in range(count):
        name = f"server-{s:04d}"
        cache.store(name, entry_of(name), metadata_of(name))
    cache.flush()
    return cache


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
    # The relisting and the acknowledgement: this server's record and its digest, twice.
    assert after["hset"] - before["hset"] <= 4, (before, after)
    assert after["hdel"] == before["hdel"]
    assert after["del"] == before["del"]
    assert after["hmset"] == before["hmset"]
    joined = MetadataCache(tmp_path / "replica" / "mcp-cache.json")
    relisted = joined.get(name, ServerEntry(command="server", args=(name,)))
    assert relisted == metadata_of(name, 1)
    assert len(joined.servers) == SERVERS


def test_a_replica_reads_the_shared_records_its_own_store_lacks_only(
    redis: RedisServer, tmp_path: Path
) -> None:
    one = store_servers(tmp_path / "one", SERVERS)
    stored = peek(redis.url)
    # Each record has the digest of its text beside it.
    record = stored.hget("pi-mcp:cache", "server-0000")
    assert stored.hget("pi-mcp:cache#digests", "server-0000") == shared_state.text_digest(record)

    # A replica that joins with an empty agent dir reads every record, and keeps them.
    before = hash_writes(redis.url)
    joined = MetadataCache(tmp_path / "two" / "mcp-cache.json")
    assert joined.get("server-0007", entry_of("server-0007")) == metadata_of("server-0007")
    first = hash_writes(redis.url)
    assert first["hmget"] > before["hmget"]
    assert first["hgetall"] - before["hgetall"] == 1  # the digests

    # Loading again, it reads the digests only: its store has every record.
    again = MetadataCache(tmp_path / "two" / "mcp-cache.json")
    assert again.get("server-0007", entry_of("server-0007")) == metadata_of("server-0007")
    assert len(again.servers) == SERVERS
    second = hash_writes(redis.url)
    assert second["hmget"] == first["hmget"]
    assert second["hget"] == first["hget"]
    assert second["hgetall"] - first["hgetall"] == 1

    # Another replica relists one server: the next load reads that record only, and the one
    # after it none, with the new listing shown both times (it is in the store now).
    one.store("server-0042", entry_of("server-0042"), metadata_of("server-0042", 1))
    one.flush()
    before = hash_writes(redis.url)
    relisted = MetadataCache(tmp_path / "two" / "mcp-cache.json")
    assert relisted.get("server-0042", entry_of("server-0042")) == metadata_of("server-0042", 1)
    assert hash_writes(redis.url)["hmget"] - before["hmget"] == 1
    before = hash_writes(redis.url)
    settled = MetadataCache(tmp_path / "two" / "mcp-cache.json")
    assert settled.get("server-0042", entry_of("server-0042")) == metadata_of("server-0042", 1)
    assert hash_writes(redis.url)["hmget"] == before["hmget"]


def test_a_shared_record_without_a_digest_is_read_once_and_given_its_digest(
    redis: RedisServer, tmp_path: Path
) -> None:
    """As an earlier version writes it: its text is the only judge, so the first load reads it
    and writes the digest of what it read; later loads compare digests only."""
    store_servers(tmp_path / "one", 3)
    stored = peek(redis.url)
    text = stored.hget("pi-mcp:cache", "server-0001")
    assert "server-0001 v0" in text
    older = text.replace("server-0001 v0", "server-0001 v9")
    stored.hset("pi-mcp:cache", "server-0001", older)
    stored.hdel("pi-mcp:cache#digests", "server-0001")
    reads = []
    for _load in range(2):
        before = hash_writes(redis.url)
        replica = MetadataCache(tmp_path / "two" / "mcp-cache.json")
        shown = replica.get("server-0001", entry_of("server-0001"))
        assert shown == metadata_of("server-0001", 9)
        reads.append(hash_writes(redis.url)["hmget"] - before["hmget"])
    assert reads == [1, 0]
    assert stored.hget("pi-mcp:cache#digests", "server-0001") == shared_state.text_digest(older)


@pytest.mark.slow
def test_a_replica_holds_no_shared_record_in_memory_and_publishes_its_store_again(
    redis: RedisServer, tmp_path: Path
) -> None:
    """Redis restarted empty: the records come back from the replica's store, each with its
    digest, without the replica keeping a copy of every record's text in memory."""
    serving = store_servers(tmp_path / "one", SERVERS)
    shared = shared_state.active()
    assert shared is not None
    assert not [item for item in shared._held if item[0].startswith("cache")]
    redis.restart()
    stored = peek(redis.url)
    assert stored.hlen("pi-mcp:cache") == 0
    deadline = time.monotonic() + 4 * shared_state.EPOCH_CHECK_S + 10
    while stored.hlen("pi-mcp:cache#digests") < SERVERS:
        assert time.monotonic() < deadline, "the records were not published again"
        shared.refresh()
        time.sleep(0.2)
    assert stored.hlen("pi-mcp:cache") == SERVERS
    assert serving.get("server-0099", entry_of("server-0099")) == metadata_of("server-0099")
    before = hash_writes(redis.url)
    joined = MetadataCache(tmp_path / "two" / "mcp-cache.json")
    assert joined.get("server-0099", entry_of("server-0099")) == metadata_of("server-0099")
    assert len(joined.servers) == SERVERS
    assert hash_writes(redis.url)["hmget"] > before["hmget"]


def test_a_replica_with_nothing_to_take_writes_nothing(redis: RedisServer, tmp_path: Path) -> None:
    """An empty shared table and no files: the first run, as without a shared state."""
    cache = MetadataCache(tmp_path / "agent" / "mcp-cache.json")
    assert cache.load() == "no-cache"
    assert not (tmp_path / "agent").exists()
    store_servers(tmp_path / "one", 2)
    assert cache.load() == "loaded"
    assert cache.get("server-0001", entry_of("server-0001")) == metadata_of("server-0001")
    assert (tmp_path / "agent" / "mcp-cache.db").exists()
