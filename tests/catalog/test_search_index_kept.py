"""An index opened by its kept catalog (``SearchIndex(KeptCatalog(...))``, what a search from
kept facts opens, see ``engine/_search_facts.py``) answers as the index of the catalog itself,
reads the tools of its hits' servers only, and refuses files written for another catalog.
Calls of the real store are counted (wrapped, never replaced), never time."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_semantic import semantic_available
from pi_mcp_adapter.catalog._search_store import KeptCatalog, StoredIndex

from .test_search_index_open import QUERIES, answers, catalog_tools, open_index

RANKINGS = [
    "lexical",
    pytest.param(
        "hybrid",
        marks=pytest.mark.skipif(not semantic_available(), reason="needs the semantic extra"),
    ),
]


def open_kept(kept: KeptCatalog, path: Path, ranking: str) -> SearchIndex:
    return SearchIndex(
        kept, ranking=ranking, index_store=path, vector_cache=path.with_suffix(".npz")
    )


def shown(tool: ToolInfo) -> tuple[Any, ...]:
    """What a search shows of a tool."""
    return (tool.server, tool.name, tool.original_name, tool.description, tool.input_schema)


@pytest.mark.parametrize("ranking", RANKINGS)
def test_an_index_opened_by_its_kept_catalog_answers_as_the_catalogs(
    tmp_path: Path, ranking: str
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(30)
    built = open_index(tools, path, ranking)
    kept = built.kept_catalog
    assert kept is not None
    assert (kept.vectors is not None) == (ranking == "hybrid")

    opened = open_kept(kept, path, ranking)

    assert answers(opened) == answers(built)
    for query in QUERIES:
        assert [shown(h.tool) for h in opened.search(query, limit=10).hits] == [
            shown(h.tool) for h in built.search(query, limit=10).hits
        ]
    assert len(opened) == len(tools)
    assert [shown(t) for t in opened.tools] == [shown(t) for t in tools]


def test_a_kept_index_reads_the_tools_of_its_hits_servers_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    kept = open_index(catalog_tools(40), path).kept_catalog
    assert kept is not None
    read: list[str] = []
    real = StoredIndex.server_tools

    def counted(self: StoredIndex, server: str) -> list[ToolInfo] | None:
        read.append(server)
        return real(self, server)

    monkeypatch.setattr(StoredIndex, "server_tools", counted)
    opened = open_kept(kept, path, "lexical")
    assert read == []

    page = opened.search("send an email to Anna", limit=3)

    servers = {h.tool.server for h in page.hits}
    assert sorted(read) == sorted(servers)  # each once
    assert len(servers) <= 3 < 40


@pytest.mark.parametrize("ranking", RANKINGS)
def test_a_patched_index_is_kept_with_its_numbering(tmp_path: Path, ranking: str) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    open_index(catalog_tools(20), path, ranking)
    changed = "server-00007"
    patched = open_index(catalog_tools(20, changed=changed), path, ranking)
    kept = patched.kept_catalog
    assert kept is not None

    opened = open_kept(kept, path, ranking)

    assert answers(opened) == answers(patched)
    names = [f"{changed}_zebra_crossing", "server-00015_weather_tool_3"]
    assert [t.name for t in opened.select(names)] == names
    assert [h.tool.name for h in opened.search("", server=changed).hits] == names[:1]


def _another_catalog(kept: KeptCatalog, path: Path) -> KeptCatalog:
    open_index(catalog_tools(30, changed="server-00003"), path, "lexical")
    return kept


def _another_index(kept: KeptCatalog, _path: Path) -> KeptCatalog:
    return KeptCatalog("0" * 64, kept.vectors)


def _other_vectors(kept: KeptCatalog, _path: Path) -> KeptCatalog:
    return KeptCatalog(kept.index, "0" * 40)


def _no_vectors(kept: KeptCatalog, _path: Path) -> KeptCatalog:
    return KeptCatalog(kept.index, None)


def _vectors_removed(kept: KeptCatalog, path: Path) -> KeptCatalog:
    path.with_suffix(".npz").unlink()
    return kept


REFUSED = {
    "the index written since for another catalog": ("lexical", _another_catalog),
    "another index fingerprint": ("lexical", _another_index),
    "another vector digest": ("hybrid", _other_vectors),
    "no vectors kept": ("hybrid", _no_vectors),
    "the vector file removed": ("hybrid", _vectors_removed),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_files_that_do_not_hold_the_kept_catalog_are_refused(tmp_path: Path, case: str) -> None:
    ranking, change = REFUSED[case]
    if ranking == "hybrid" and not semantic_available():
        pytest.skip("needs the semantic extra")
    path = tmp_path / "mcp-search-index.sqlite"
    kept = open_index(catalog_tools(30), path, ranking).kept_catalog
    assert kept is not None

    with pytest.raises(LookupError):
        open_kept(change(kept, path), path, ranking)


def test_an_index_its_files_do_not_hold_is_not_kept(tmp_path: Path) -> None:
    tools: Sequence[ToolInfo] = catalog_tools(10)
    assert SearchIndex(tools, ranking="lexical").kept_catalog is None  # nothing stored
    assert SearchIndex(tools, ranking="bm25").kept_catalog is None
    with pytest.raises(LookupError):
        open_kept(KeptCatalog("0" * 64, None), tmp_path / "none.sqlite", "bm25")
