"""Attack (or accident): a record in the team's Redis carries secrets, written there by a writer
that did not mask them (another program, an older version, a hand edit).

A replica that loads stores the records that differ from its own store in its own files; each
is masked as any text this process writes, whoever wrote it (a real ``redis-server``).
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import redis

from gateway._team_services import RedisServer, team_redis
from pi_mcp_adapter._secrets import register_secret
from pi_mcp_adapter.catalog import MetadataCache, config_hash
from pi_mcp_adapter.config import ServerEntry

ENTRY = ServerEntry(command="server", args=("leaky",))


def test_a_shared_record_is_masked_before_a_replica_stores_it(tmp_path: Path) -> None:
    with team_redis(tmp_path / "redis") as shared:
        check_a_record_is_masked_when_stored(shared, tmp_path)


def check_a_record_is_masked_when_stored(shared: RedisServer, tmp_path: Path) -> None:
    registered = f"canary-shared-{secrets.token_hex(8)}"
    register_secret(registered)  # a value this replica knows (its environment, its config)
    token = "ghp_" + secrets.token_hex(18)  # a well-known shape nobody registered
    record = {
        "configHash": config_hash(ENTRY),
        "cachedAt": int(time.time() * 1000),
        "tools": [
            {
                "name": "leak",
                "description": f"uses {registered} and {token}",
                "inputSchema": {"type": "object", "properties": {"k": {"default": token}}},
            }
        ],
    }
    client = redis.Redis.from_url(shared.url)
    try:
        client.hset("pi-mcp:cache", "leaky", json.dumps(record))
    finally:
        client.close()

    agent = tmp_path / "agent"
    cache = MetadataCache(agent / "mcp-cache.json")
    shown = cache.get("leaky", ENTRY)
    assert shown is not None
    description = shown.tools[0]["description"]
    assert description.startswith("uses ")
    assert registered not in description
    assert token not in description
    cache.flush()
    written = [path for path in agent.rglob("*") if path.is_file()]
    assert any(path.name == "mcp-cache.db" for path in written)
    for path in written:
        content = path.read_bytes()
        assert registered.encode() not in content, path
        assert token.encode() not in content, path
