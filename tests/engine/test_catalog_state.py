"""The engine's catalog state during a listing pass: listeners hear of listings in batches,
and never miss the last one."""

from __future__ import annotations

from pathlib import Path

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.engine._catalog_state import CatalogState


def _state(tmp_path: Path, servers: int) -> tuple[CatalogState, dict[str, ServerMetadata]]:
    entries = {f"s{i}": ServerEntry(command="server", args=(str(i),)) for i in range(servers)}
    state = CatalogState(
        cache=MetadataCache(tmp_path / "mcp-cache.json"),
        agent_dir=tmp_path,
        entries=lambda: entries,
        settings=Settings,
    )
    listings = {
        name: ServerMetadata(
            tools=({"name": "echo", "inputSchema": {"type": "object", "properties": {}}},)
        )
        for name in entries
    }
    return state, listings


def test_a_listing_pass_tells_listeners_in_batches_and_after_the_last_listing(
    tmp_path: Path,
) -> None:
    state, listings = _state(tmp_path, 200)
    heard: list[int] = []
    state.on_changed(lambda: heard.append(len(state.catalog.tools())))
    state.begin_listing(list(listings))
    for name, metadata in listings.items():
        state.publish(name, metadata)
        state.end_listing(name)
    assert len(heard) < 20  # not once per server
    assert heard[-1] == 200  # the last hearing sees every server


def test_a_listing_alone_is_told_at_once(tmp_path: Path) -> None:
    state, listings = _state(tmp_path, 3)
    heard: list[int] = []
    state.on_changed(lambda: heard.append(len(state.catalog.tools())))
    for name, metadata in listings.items():
        state.begin_listing([name])
        state.publish(name, metadata)
        assert heard[-1] == len(heard)  # told before its listing ends
        state.end_listing(name)
    assert heard == [1, 2, 3]


def test_a_lookup_during_a_pass_sees_what_was_published_before_listeners_are_told(
    tmp_path: Path,
) -> None:
    state, listings = _state(tmp_path, 50)
    state.on_changed(lambda: None)
    state.begin_listing(list(listings))
    for name, metadata in listings.items():
        state.publish(name, metadata)
    assert len(state.catalog.tools()) == 50
    assert state.catalog.lookup("s49_echo").server == "s49"


@pytest.mark.anyio
async def test_a_wait_for_a_listing_returns_after_listeners_heard_of_it(tmp_path: Path) -> None:
    # Listeners register a host's direct tools. A listing told late (batched while another
    # server still starts) must reach them before a waiter reads the first tool list.
    state, listings = _state(tmp_path, 3)
    heard: list[set[str]] = []
    state.on_changed(lambda: heard.append({tool.server for tool in state.catalog.tools()}))
    state.begin_listing(list(listings))
    state.publish("s0", listings["s0"])
    state.end_listing("s0")
    state.publish("s1", listings["s1"])  # s2 still starts: this one is batched
    state.end_listing("s1")
    assert await state.wait_for_listings(["s1"], timeout_s=5) is False
    assert "s1" in heard[-1]
