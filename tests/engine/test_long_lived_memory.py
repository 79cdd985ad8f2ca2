"""A long-lived process frees what a reload replaces.

From ``LONG_LIVED_FROM_TOOLS`` tools a built catalog and search index are frozen out of the
cyclic collector's view (``gc.freeze``): anything in them that sat on a reference cycle was
never freed, so a gateway grew by the whole index on every reload, and the replaced index's
reader of the stored file kept its snapshot, so the file's WAL was never folded back. These
tests drop a large index (no ``gc.collect`` anywhere: reference counting alone) and check that
it is gone, together with its connection to the stored file.
"""

from __future__ import annotations

import sqlite3
import threading
import weakref
from pathlib import Path

import anyio
import pytest

from _large_catalog import server_metadata, server_name  # tests/ is on sys.path
from pi_mcp_adapter.catalog import MetadataCache
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_store import search_index_store_path
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.engine._catalog_state import LONG_LIVED_FROM_TOOLS, CatalogState

SERVERS = 250
"""1,250 tools: a catalog large enough to be frozen."""
WAIT_S = 60.0
"""Bound on every wait: the machine may be busy."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class _Workspace:
    def __init__(self, agent_dir: Path) -> None:
        self.entries = {
            server_name(i): ServerEntry(command="/bin/false", args=(server_name(i),))
            for i in range(SERVERS)
        }
        self.agent_dir = agent_dir
        self.state = CatalogState(
            cache=MetadataCache(agent_dir / "mcp-cache.json"),
            agent_dir=agent_dir,
            entries=lambda: self.entries,
            settings=Settings,
        )
        for name in self.entries:
            self.state.publish(name, server_metadata(name))
        assert len(self.state.catalog) >= LONG_LIVED_FROM_TOOLS

    def use(self) -> SearchIndex:
        """Search, look up and suggest: every lazily built part of the views exists."""
        index = self.state.index
        hits = index.search("tool 3 of server-00007").hits
        assert hits[0].tool.name == "server-00007_tool_3"
        catalog = self.state.catalog
        assert catalog.lookup("server-00001_tool_1") is not None
        catalog.suggest("server-00001_tol_1")
        return index

    def reload(self, *, without: str | None = None) -> None:
        """What a configuration reload does to the catalog state."""
        if without is not None:
            self.entries = {n: e for n, e in self.entries.items() if n != without}
        self.state.follow_reload(
            self.entries,
            removed=() if without is None else (without,),
            restarted=(),
            live=lambda _name: None,
        )

    def wal_frames_not_folded_back(self) -> int:
        """Frames of the stored index's WAL that a checkpoint cannot copy into the file
        (a reader's older snapshot still needs them)."""
        with sqlite3.connect(search_index_store_path(self.agent_dir)) as other:
            busy, logged, copied = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0
        return int(logged) - int(copied)


def test_a_reload_frees_the_large_catalog_and_index_it_replaced(tmp_path: Path) -> None:
    workspace = _Workspace(tmp_path)
    # Built and stored, then (after a reload) opened from the stored file: both kinds.
    for _generation in range(2):
        index = workspace.use()
        gone: list[weakref.ref[object]] = [
            weakref.ref(index),
            weakref.ref(index._ranking),
            weakref.ref(workspace.state.catalog),
        ]
        del index
        workspace.reload()
        assert [ref() for ref in gone] == [None, None, None]


def test_a_replaced_reader_of_the_stored_index_lets_its_wal_be_folded_back(
    tmp_path: Path,
) -> None:
    workspace = _Workspace(tmp_path)
    workspace.use()  # built and stored whole
    workspace.reload()
    workspace.use()  # opened from the file: a reader keeping its snapshot
    workspace.reload(without=server_name(0))
    workspace.use()  # the file patched (server-00000 taken out) and read at the new snapshot
    assert workspace.wal_frames_not_folded_back() == 0
    workspace.reload()  # no reader left at all: the WAL is cut back to nothing
    with sqlite3.connect(search_index_store_path(tmp_path)) as other:
        assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
    wal = search_index_store_path(tmp_path).with_name("mcp-search-index.sqlite-wal")
    assert wal.stat().st_size == 0


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_search_running_on_a_replaced_index_finishes_and_then_frees_it(
    tmp_path: Path,
) -> None:
    workspace = _Workspace(tmp_path)
    state = workspace.state
    workspace.use()
    workspace.reload()
    with anyio.fail_after(WAIT_S * 2):
        async with anyio.create_task_group() as tasks:
            state.run_soon = tasks.start_soon
            old = workspace.use()  # opened from the stored file
            # A relisting followed in place, in the background, as in a running adapter.
            relisted = server_name(5)
            state.begin_listing([relisted])
            state.publish(relisted, server_metadata(relisted, version=1))
            state.end_listing(relisted)
            assert await state.wait_for_listings([relisted], timeout_s=WAIT_S)
            assert old is state.index
            freed = threading.Event()
            weakref.finalize(old._ranking, freed.set)
            replaced = threading.Event()

            def search_after_replacement(index: SearchIndex) -> list[str]:
                assert replaced.wait(WAIT_S)
                hits = index.search("tool 3 of server-00000").hits
                return [hit.tool.name for hit in hits[:1]]

            found: list[str] = []

            async def search_in_worker(index: SearchIndex) -> None:
                found.extend(await anyio.to_thread.run_sync(search_after_replacement, index))

            tasks.start_soon(search_in_worker, old)
            del old
            workspace.reload(without=server_name(0))
            workspace.use()  # the new index: the stored file patched under the old reader
            replaced.set()
            state.run_soon = None  # the task group ends with the search and the freeing
    # The old snapshot still answers: server-00000 is in it, though the file no longer has it.
    assert found == ["server-00000_tool_3"]
    assert await anyio.to_thread.run_sync(freed.wait, WAIT_S)
    assert workspace.wal_frames_not_folded_back() == 0
