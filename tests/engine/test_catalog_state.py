"""The engine's catalog state during a listing pass: listeners hear of listings in batches,
and never miss the last one; a first search makes its index in a worker thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.engine import CallerPolicy, acting_for
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


def _described(description: str) -> ServerMetadata:
    return ServerMetadata(
        tools=(
            {
                "name": "echo",
                "description": description,
                "inputSchema": {"type": "object", "properties": {}},
            },
        )
    )


def _builders_of(state: CatalogState) -> list[int]:
    """The threads that make ``state``'s search indexes from now on, one per index made."""
    builders: list[int] = []
    build = state._build_index

    def counted_build(*args: Any, **kwargs: Any) -> Any:
        builders.append(threading.get_ident())
        return build(*args, **kwargs)

    state._build_index = counted_build  # type: ignore[method-assign]
    return builders


@pytest.mark.anyio
async def test_a_first_search_index_is_made_in_a_worker_thread_once(tmp_path: Path) -> None:
    state, listings = _state(tmp_path, 20)
    for name, metadata in listings.items():
        state.publish(name, metadata)
    loop_thread = threading.get_ident()
    builders = _builders_of(state)
    async with anyio.create_task_group() as tasks:
        for _ in range(3):  # concurrent first searches
            tasks.start_soon(state.prepare_index)
    assert len(builders) == 1
    assert loop_thread not in builders
    assert [hit.tool.server for hit in state.index.search("echo s7", limit=1).hits] == ["s7"]
    await state.prepare_index()  # made: nothing more to do
    assert len(builders) == 1


@pytest.mark.anyio
async def test_a_catalog_replaced_while_its_index_is_made_is_indexed_again(
    tmp_path: Path,
) -> None:
    state, listings = _state(tmp_path, 5)
    for name, metadata in listings.items():
        state.publish(name, metadata)
    build = state._build_index
    builds: list[int] = []

    def build_while_s2_is_relisted(*args: Any, **kwargs: Any) -> Any:
        builds.append(len(builds))
        if len(builds) == 1:  # a relisting arrives while the first index is made
            anyio.from_thread.run_sync(state.publish, "s2", _described("relisted unicorn"))
        return build(*args, **kwargs)

    state._build_index = build_while_s2_is_relisted  # type: ignore[method-assign]
    await state.prepare_index()
    assert len(builds) == 2
    hits = state.index.search("unicorn", limit=3).hits
    assert [hit.tool.server for hit in hits] == ["s2"]


@pytest.mark.anyio
async def test_a_policys_first_search_makes_its_own_index_in_a_worker_thread(
    tmp_path: Path,
) -> None:
    state, listings = _state(tmp_path, 6)
    for name, metadata in listings.items():
        state.publish(name, metadata)
    builders = _builders_of(state)
    policy = CallerPolicy("client", deny=("s3_*",))
    with acting_for(policy):
        await state.prepare_index()
        found = {hit.tool.server for hit in state.index.search("echo", limit=10).hits}
    assert len(builders) == 1
    assert threading.get_ident() not in builders
    assert found == {"s0", "s1", "s2", "s4", "s5"}
    assert state._index is None  # the full catalog's index is made when first searched
