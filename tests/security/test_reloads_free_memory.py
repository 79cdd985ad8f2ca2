"""Reloads cannot grow a long-lived process without bound.

Anyone who can touch the configuration (or a server that keeps contesting a tool name) makes a
gateway drop its catalog and search index again and again. A large one is frozen out of the
garbage collector's view, so each dropped generation that was not freed by reference counting
stayed for the life of the process (hundreds of MB each at 95,000 tools), with an open reader
of the stored index pinning its WAL. However many reloads come, one generation is held.
"""

from __future__ import annotations

import weakref
from pathlib import Path

import pytest

from _large_catalog import server_name  # tests/ is on sys.path
from security._large_workspace import LargeWorkspace

RELOADS = 5


@pytest.mark.slow
def test_many_reloads_leave_one_catalog_and_one_index_in_memory(tmp_path: Path) -> None:
    workspace = LargeWorkspace(tmp_path)
    generations: list[tuple[weakref.ref[object], ...]] = []
    for reload in range(RELOADS):
        index = workspace.use()
        generations.append(
            (weakref.ref(index), weakref.ref(index._ranking), weakref.ref(workspace.state.catalog))
        )
        del index
        # Every other reload changes the catalog: the stored file is patched under the reader.
        workspace.reload(without=server_name(100 + reload) if reload % 2 else None)
    held = [gen for gen, refs in enumerate(generations) if any(ref() is not None for ref in refs)]
    assert held == []
    assert workspace.wal_frames_not_folded_back() == 0
