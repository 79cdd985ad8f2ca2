"""A long-lived process frees what a reload replaces, and gives back what a build freed.

From ``LONG_LIVED_FROM_TOOLS`` tools a built catalog and search index are frozen out of the
cyclic collector's view (``gc.freeze``): anything in them that sat on a reference cycle was
never freed, so a gateway grew by the whole index on every reload, and the replaced index's
reader of the stored file kept its snapshot, so the file's WAL was never folded back. These
tests drop a large index (no ``gc.collect`` anywhere: reference counting alone) and check that
it is gone, together with its connection to the stored file.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import anyio
import pytest

from _large_catalog import server_metadata, server_name  # tests/ is on sys.path
from pi_mcp_adapter._collector import _malloc_trim
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_store import search_index_store_path
from pi_mcp_adapter.catalog._search_text import document_terms
from security._large_workspace import LargeWorkspace

WAIT_S = 60.0
"""Bound on every wait: the machine may be busy."""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_large_index_built_whole_is_kept_as_its_store_opens_it(tmp_path: Path) -> None:
    # A build leaves its survivors spread over the memory it used; the index a process keeps
    # is the one a next process would open, made in the memory the build freed.
    workspace = LargeWorkspace(tmp_path)
    built = weakref.WeakSet[SearchIndex]()
    make = SearchIndex.__init__

    def remembering_make(self: SearchIndex, *args: Any, **kwargs: Any) -> None:
        make(self, *args, **kwargs)
        built.add(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SearchIndex, "__init__", remembering_make)
        index = workspace.use()
    activity = index.store_activity
    assert activity is not None
    assert (activity.full_build, activity.patched_servers) == (False, ())
    assert list(built) == [index]  # the built one is gone already
    assert document_terms.cache_info().currsize == 0  # the build's texts are forgotten
    assert search_index_store_path(tmp_path).exists()

    # The same answers as the index built from the same tools.
    whole = SearchIndex(workspace.state.catalog.tools())
    for query in ("tool 3 of server-00007", "server 42", "tool 1"):
        kept = [(hit.tool.name, round(hit.score, 9)) for hit in index.search(query).hits]
        assert kept == [(hit.tool.name, round(hit.score, 9)) for hit in whole.search(query).hits]


def test_a_reload_frees_the_large_catalog_and_index_it_replaced(tmp_path: Path) -> None:
    workspace = LargeWorkspace(tmp_path)
    # Opened from the store just written, then (after a reload) from the store as it was.
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
    workspace = LargeWorkspace(tmp_path)
    workspace.use()  # built, stored whole and opened from the file
    workspace.reload()
    workspace.use()  # opened from the file again: a reader keeping its snapshot
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
    workspace = LargeWorkspace(tmp_path)
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
    # The finalizer runs as the ranking is freed, before its members (the connection among
    # them) are: the thread freeing it may still be closing the snapshot's connection.
    with anyio.move_on_after(WAIT_S):
        while workspace.wal_frames_not_folded_back() != 0:
            await anyio.sleep(0.05)
    assert workspace.wal_frames_not_folded_back() == 0


_FRAGMENTED_HEAP = """
import psutil
from pi_mcp_adapter._collector import return_freed_memory

def resident_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20

blocks = [bytes(4096) for _ in range(50_000)]  # about 200 MB from the C allocator
survivors = blocks[::16]  # the live ones are spread over the heap, as a build leaves it
del blocks
before = resident_mb()
return_freed_memory()
print(before, resident_mb())
"""


@pytest.mark.skipif(_malloc_trim() is None, reason="the C library has no malloc_trim")
def test_memory_a_build_freed_between_live_objects_goes_back_to_the_system() -> None:
    # Without it the freed blocks stay resident: the allocator gives memory back only from
    # the top of its heap, and the survivors pin every part of it.
    done = subprocess.run(
        [sys.executable, "-c", _FRAGMENTED_HEAP],
        capture_output=True,
        text=True,
        check=True,
        timeout=WAIT_S,
    )
    before, after = (float(x) for x in done.stdout.split())
    assert before - after > 100, (before, after)
