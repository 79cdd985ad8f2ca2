"""What an index build holds at once: the words of one tool, no vectors it will open again,
and none of the rows it stores.

A first start at 95,000 tools peaked at 518 MB while building. Three things it held are now
made and dropped as they are used: each tool's words per field (kept from a first pass over
every tool, for the fields' average lengths), the vectors of every tool (embedded beside the
build, then embedded again by the index opened from the store), and each server's stored
tools (encoded in the first pass, written last). These tests count live objects, embedded
texts and files, never memory or time.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import Any

import pytest

from catalog._counting_embedder import CountingEmbedder  # tests/ is on sys.path
from pi_mcp_adapter.catalog import Catalog, ServerMetadata, ToolInfo
from pi_mcp_adapter.catalog._search_rankings import FieldRanking, HybridRanking
from pi_mcp_adapter.catalog._search_semantic import (
    search_vector_cache_path,
    semantic_available,
)
from pi_mcp_adapter.catalog._search_store import EncodedTools
from pi_mcp_adapter.config import ServerEntry, Settings
from security._large_workspace import LargeWorkspace  # tests/ is on sys.path

needs_model = pytest.mark.skipif(
    not semantic_available(), reason="the semantic extra (wordllama) is not installed"
)


def catalog_tools(servers: int) -> list[ToolInfo]:
    metadata = {
        f"server-{s:03d}": ServerMetadata(
            tools=tuple(
                {
                    "name": f"tool_{t}",
                    "description": f"Does task {t} of server {s}, in {s % 7} steps.",
                    "inputSchema": {
                        "type": "object",
                        "properties": {
                            f"field_{t}": {"type": "string", "description": f"Value {s}"},
                            "x": {"type": "integer"},
                        },
                    },
                }
                for t in range(3)
            )
        )
        for s in range(servers)
    }
    entries = {name: ServerEntry(command="server") for name in metadata}
    return list(Catalog.build(metadata, entries, Settings()).tools())


def words_per_field_alive() -> int:
    """How many tools' words per field (the dicts a build makes for each tool) are alive."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, dict) and "param_words" in o)


@pytest.mark.parametrize("stored", [False, True], ids=["in memory", "stored"])
def test_once_every_tool_is_added_no_tools_words_per_field_are_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stored: bool
) -> None:
    tools = catalog_tools(100)
    alive: list[int] = []
    add = FieldRanking._add

    def counting_add(self: FieldRanking, docs: Any) -> None:
        add(self, docs)
        alive.append(words_per_field_alive())

    monkeypatch.setattr(FieldRanking, "_add", counting_add)
    ranking = FieldRanking(tools, store=tmp_path / "index.sqlite" if stored else None)
    assert alive == [0]  # each tool's went once it was added (all 300 did before)
    assert ranking.store_activity.full_build
    assert (ranking.store_activity.rows_written > 0) is stored


@needs_model
def test_a_build_stored_to_be_opened_again_embeds_no_tool_and_the_opened_index_embeds_each_once(
    tmp_path: Path,
) -> None:
    tools = catalog_tools(20)
    store, cache = tmp_path / "index.sqlite", tmp_path / "vectors.npz"
    building = CountingEmbedder()
    built = HybridRanking(
        tools, embedder=building, vector_cache=cache, store=store, reopen_stored=True
    )
    assert built.store_activity.full_build
    assert built.store_activity.rows_written > 0
    assert building.texts == []
    assert not built.semantic
    assert not cache.exists()

    opening = CountingEmbedder()
    opened = HybridRanking(tools, embedder=opening, vector_cache=cache, store=store)
    assert not opened.store_activity.full_build
    assert opened.semantic
    assert cache.exists()
    assert len(opening.texts) == len(set(opening.texts)) == len(tools)


@needs_model
def test_a_build_whose_store_cannot_be_written_embeds_its_tools_itself(tmp_path: Path) -> None:
    # Not stored, it is not opened again: the build is the index, with its semantic signal.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    tools = catalog_tools(5)
    embedder = CountingEmbedder()
    ranking = HybridRanking(
        tools,
        embedder=embedder,
        vector_cache=tmp_path / "vectors.npz",
        store=blocker / "index.sqlite",
        reopen_stored=True,
    )
    assert ranking.store_activity.full_build
    assert ranking.store_activity.rows_written == 0
    assert ranking.semantic
    assert len(embedder.texts) == len(tools)


def test_a_large_catalogs_index_embeds_its_tools_only_as_opened_from_its_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = LargeWorkspace(tmp_path)
    vectors_made_by: list[bool] = []  # whether the ranking making them built the index
    tool_vectors = HybridRanking._tool_vectors

    def recording(self: HybridRanking, *args: Any, **kwargs: Any) -> Any:
        vectors_made_by.append(self.store_activity.full_build)
        return tool_vectors(self, *args, **kwargs)

    monkeypatch.setattr(HybridRanking, "_tool_vectors", recording)
    index = workspace.use()
    activity = index.store_activity
    assert activity is not None
    assert not activity.full_build
    if semantic_available():
        assert vectors_made_by == [False]  # once, by the index opened from the store
        assert search_vector_cache_path(tmp_path).exists()
    else:
        assert vectors_made_by == []  # the lexical ranking: no vectors at all


def test_encoded_tools_are_set_aside_in_an_unnamed_file_and_given_back_once(
    tmp_path: Path,
) -> None:
    aside = EncodedTools(tmp_path)
    rows = {f"server-{n}": os.urandom(n * 100 + 1) for n in range(50)}
    for server, encoded in rows.items():
        aside.put(server, encoded)
    assert list(tmp_path.iterdir()) == []  # nothing a crash could leave behind
    for server in reversed(rows):
        assert aside.pop(server) == rows[server]
    assert aside.pop("server-3") is None  # given back once
    assert aside.pop("never-put") is None
    aside.close()


def test_encoded_tools_are_held_in_memory_where_no_file_can_be_made(tmp_path: Path) -> None:
    aside = EncodedTools(tmp_path / "not-made-yet")
    aside.put("one", b"\x00tools")
    assert aside.pop("one") == b"\x00tools"
    assert aside.pop("one") is None
    aside.close()
