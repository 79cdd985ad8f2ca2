"""Start: the metadata cache is read while the eager servers start, not before.

At tens of thousands of cached tools the read takes a second or more and an eager server's
process about as long to start; the adapter overlaps them. What a server publishes while the
read runs is applied after it, so the live listing is what the catalog shows."""

from __future__ import annotations

import time
from typing import Any

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry

from .conftest import Workspace, fixture_entry

pytestmark = [pytest.mark.slow]


def _reading_waits_for_connected(adapter: Any, server: str, seen: dict[str, bool]) -> None:
    """Make the adapter's cache read wait (at most 60 s) until ``server`` has connected."""
    read = adapter.state.load_cache

    def load_cache() -> None:
        deadline = time.monotonic() + 60
        while server not in adapter.notices.connected and time.monotonic() < deadline:
            time.sleep(0.02)
        seen["connected during the read"] = server in adapter.notices.connected
        read()

    adapter.state.load_cache = load_cache


@pytest.mark.parametrize("background_listing", [False, True])
async def test_an_eager_server_connects_while_the_cache_is_read(
    workspace: Workspace, background_listing: bool
) -> None:
    workspace.write_config({"eager": fixture_entry(lifecycle="eager")})
    seen: dict[str, bool] = {}
    adapter = workspace.adapter(background_listing=background_listing)
    _reading_waits_for_connected(adapter, "eager", seen)
    async with adapter:
        assert seen == {"connected during the read": True}
        assert adapter.server_status("eager").status == "connected"
        assert "eager_echo" in {t.name for t in adapter.tools("eager")}


async def test_a_listing_published_during_the_read_replaces_the_cached_one(
    workspace: Workspace,
) -> None:
    config = fixture_entry(lifecycle="eager")
    workspace.write_config({"eager": config})
    entry = ServerEntry.model_validate(config)
    stale = ServerMetadata(tools=({"name": "stale_tool", "inputSchema": {"type": "object"}},))
    cache = MetadataCache(workspace.agent_dir / "mcp-cache.json")
    cache.store("eager", entry, stale)
    cache.flush()
    assert cache.get("eager", entry) == stale  # a valid entry: the read takes it

    seen: dict[str, bool] = {}
    adapter = workspace.adapter()
    _reading_waits_for_connected(adapter, "eager", seen)
    async with adapter:
        assert seen == {"connected during the read": True}
        names = {t.name for t in adapter.tools("eager")}
        assert "eager_echo" in names
        assert "eager_stale_tool" not in names
        assert adapter.state.is_listing("eager") is False
    reread = MetadataCache(workspace.agent_dir / "mcp-cache.json")
    stored = reread.get("eager", entry)
    assert stored is not None
    assert "echo" in {t["name"] for t in stored.tools}
