"""A search index follows a relisting in place, at the cost of the relisted server, and a
process opens the index stored for its catalog instead of building it.

``SearchIndex.prepare_replacement`` works out one server's new documents (in any thread) and
``apply_replacement`` swaps them in: the server's old documents leave the lexical index and
the vectors, the new ones are added, and every other document is left alone. These tests pin
that the updated index answers as a fresh build of the new catalog does, that removed tools
are never found again, and that the work done does not grow with the catalog (counted in
documents and Python calls, never in time).
"""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Sequence
from pathlib import Path

import pytest

from _large_catalog import counted_calls  # tests/ is on sys.path
from pi_mcp_adapter.catalog import Catalog, ServerMetadata, ToolInfo
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_rankings import _remove_from
from pi_mcp_adapter.catalog._search_semantic import semantic_available
from pi_mcp_adapter.config import ServerEntry, Settings

COST_RATIO_LIMIT = 1.5
"""Updating an index ten times larger may make at most this many times the calls."""

_TOPICS = (
    ("weather", "Get the weather forecast for a city, with temperature and wind."),
    ("calendar", "List the events of a calendar between two dates."),
    ("mail", "Send an email message to a recipient with a subject and a body."),
    ("files", "Read a text file from the local disk and return its content."),
    ("issues", "Create an issue in a GitHub repository with a title and labels."),
    ("notes", "Search the notes of a notebook by keyword and return the matches."),
)


def server_metadata(server: str, version: int = 0) -> ServerMetadata:
    topic, description = _TOPICS[int(server.rsplit("-", 1)[1]) % len(_TOPICS)]
    return ServerMetadata(
        tools=tuple(
            {
                "name": f"{topic}_tool_{t}",
                "description": f"{description} Variant {t}, revision {version}.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "What to find"}},
                },
            }
            for t in range(5)
        )
    )


def catalog_of(servers: int, relisted: dict[str, ServerMetadata] | None = None) -> Catalog:
    names = [f"server-{s:05d}" for s in range(servers)]
    metadata = {name: server_metadata(name) for name in names} | (relisted or {})
    entries = {name: ServerEntry(command="server") for name in names}
    return Catalog.build(metadata, entries, Settings())


def relisted_tools(catalog: Catalog, server: str, metadata: ServerMetadata) -> list[ToolInfo]:
    return list(
        Catalog.build(
            {server: metadata}, {server: ServerEntry(command="server")}, Settings()
        ).tools()
    )


def replace(index: SearchIndex, catalog: Catalog, server: str, tools: list[ToolInfo]) -> int:
    """Replace ``server``'s tools in ``index``; returns the documents the update touched."""
    replacement = index.prepare_replacement(server, tools)
    assert replacement is not None
    assert index.apply_replacement(replacement, catalog.servers)
    return replacement.documents_touched


QUERIES = (
    "weather forecast for Paris",
    "send an email to Anna",
    "create an issue in a github repository",
    "read the file notes.txt then email it",
    "zebra crossing",
)


def test_an_index_updated_for_a_relisting_answers_as_a_fresh_build_of_the_new_catalog() -> None:
    server = "server-00007"
    changed = ServerMetadata(
        tools=(
            {"name": "forecast_zebra", "description": "Zebra crossing forecast for a city."},
            *server_metadata(server, version=1).tools[1:],
        )
    )
    before = catalog_of(40)
    index = SearchIndex(before.tools(), ranking="lexical")
    after = catalog_of(40, {server: changed})

    touched = replace(index, after, server, relisted_tools(after, server, changed))
    fresh = SearchIndex(after.tools(), ranking="lexical")

    assert touched == 10  # the server's five old documents out, five new ones in
    assert index.tools == fresh.tools
    assert len(index) == len(fresh)
    for query in QUERIES:
        updated, built = index.search(query, limit=5), fresh.search(query, limit=5)
        assert [h.tool.name for h in updated.hits] == [h.tool.name for h in built.hits], query
        for a, b in zip(updated.hits, built.hits, strict=True):
            # Field lengths stay averaged as at the full build: scores move a hair, no more.
            assert a.score == pytest.approx(b.score, rel=0.02), query
        assert updated.total == built.total
        assert updated.confident == built.confident
    assert index.search("zebra", limit=1).hits[0].tool.name == f"{server}_forecast_zebra"


def test_a_removed_servers_tools_are_never_found_again() -> None:
    server = "server-00003"  # its tools are files_tool_0 to files_tool_4
    catalog = catalog_of(12)
    index = SearchIndex(catalog.tools(), ranking="lexical")
    names = [t.name for t in catalog.tools(server)]
    assert index.search("files_tool_2", limit=3).hits[0].tool.server == server

    after = catalog_of(12, {server: ServerMetadata()})
    replace(index, after, server, [])

    assert len(index) == len(catalog) - len(names)
    assert not {t.name for t in index.tools} & set(names)
    assert index.select(names) == []
    for query in ("read a text file", "files tool 2", f"{server} files"):
        assert all(h.tool.server != server for h in index.search(query).hits), query
    assert all(h.tool.server != server for h in index.search("files_tool", regex=True).hits)
    assert index.search("", server=server).hits == ()
    assert index.search("weather", server="server-00000", limit=2).hits


def test_a_server_new_to_the_index_takes_its_catalog_place() -> None:
    names = [f"server-{s:05d}" for s in range(6)]
    entries = {name: ServerEntry(command="server") for name in names}
    without = {name: server_metadata(name) for name in names if name != "server-00002"}
    index = SearchIndex(Catalog.build(without, entries, Settings()).tools(), ranking="lexical")
    full = Catalog.build(
        {**without, "server-00002": server_metadata("server-00002")}, entries, Settings()
    )

    replace(index, full, "server-00002", list(full.tools("server-00002")))

    assert index.tools == full.tools()
    assert index.search("", server="server-00002").total == 5
    page = index.search("server-00002_mail_tool_1", limit=1)
    assert page.hits[0].tool.name == "server-00002_mail_tool_1"


def test_an_index_far_from_its_full_build_asks_to_be_built_again() -> None:
    catalog = catalog_of(8)
    index = SearchIndex(catalog.tools(), ranking="lexical")
    many = [
        ToolInfo(name=f"server-00003_extra_{i}", original_name=f"extra_{i}", server="server-00003")
        for i in range(40)
    ]
    # A quarter more tools than at the full build: field lengths averaged then no longer hold.
    assert index.prepare_replacement("server-00003", many) is None
    # Rankings without an inverted index of their own are always built again.
    assert SearchIndex(catalog.tools(), ranking="bm25").prepare_replacement("x", []) is None


def test_a_replacement_prepared_before_another_change_is_refused() -> None:
    server = "server-00001"
    catalog = catalog_of(10)
    index = SearchIndex(catalog.tools(), ranking="lexical")
    first = index.prepare_replacement(
        server, relisted_tools(catalog, server, server_metadata(server, 1))
    )
    second = index.prepare_replacement(
        server, relisted_tools(catalog, server, server_metadata(server, 2))
    )
    assert first is not None
    assert second is not None

    assert index.apply_replacement(first, catalog.servers)
    assert not index.apply_replacement(second, catalog.servers)  # prepared against old ids
    assert "revision 1" in index.search("", server=server).hits[0].tool.description


@pytest.mark.slow
def test_a_relisting_touches_the_same_work_at_ten_times_the_catalog() -> None:
    costs: list[int] = []
    for servers in (300, 3000):
        catalog = catalog_of(servers)
        index = SearchIndex(catalog.tools(), ranking="lexical")
        server = f"server-{servers // 2:05d}"
        index.search("weather forecast", limit=5)  # read before, as a running gateway does
        tools = relisted_tools(catalog, server, server_metadata(server, version=1))
        with counted_calls() as count:
            touched = replace(index, catalog, server, tools)
        costs.append(count[0])
        assert touched == 10
        hits = index.search("", server=server).hits
        assert all("revision 1" in h.tool.description for h in hits)
    small, large = costs
    assert large <= small * COST_RATIO_LIMIT, costs


@pytest.mark.slow
@pytest.mark.skipif(not semantic_available(), reason="needs the semantic extra")
def test_a_hybrid_index_never_ranks_a_removed_tools_vector() -> None:
    server = "server-00002"
    catalog = catalog_of(12)
    index = SearchIndex(catalog.tools(), ranking="hybrid")
    after = catalog_of(12, {server: ServerMetadata()})
    replace(index, after, server, [])
    # Only the semantic signal can find anything for a request in none of the catalog's
    # words: the removed server's rows must not be among the most similar.
    page = index.search("meteorological outlook", limit=20)
    assert all(h.tool.server != server for h in page.hits)

    renamed = [
        dataclasses.replace(t, description="Outlook of precipitation and meteorology.")
        for t in catalog.tools(server)
    ]
    replace(index, catalog, server, renamed)
    page = index.search("meteorological outlook", limit=3)
    assert page.hits
    assert page.hits[0].tool.server == server


def stored_index(tools: Sequence[ToolInfo], path: Path) -> SearchIndex:
    return SearchIndex(tools, ranking="lexical", index_store=path)


def test_a_stored_index_answers_as_the_build_it_was_written_from(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    catalog = catalog_of(30)
    built = stored_index(catalog.tools(), path)
    assert path.exists()

    with counted_calls() as opening:
        opened = stored_index(catalog.tools(), path)
    with counted_calls() as building:
        SearchIndex(catalog.tools(), ranking="lexical")

    # Opening reads no tool's text: a small fraction of the calls of a build.
    assert opening[0] * 10 < building[0], (opening, building)
    for query in QUERIES:
        a, b = built.search(query, limit=10), opened.search(query, limit=10)
        assert [(h.tool.name, h.score) for h in a.hits] == [(h.tool.name, h.score) for h in b.hits]
        assert (a.total, a.confident, a.servers) == (b.total, b.confident, b.servers)
    # An opened index follows a relisting like a built one.
    server = "server-00005"
    tools = relisted_tools(catalog, server, server_metadata(server, version=1))
    for index in (built, opened):
        replace(index, catalog, server, tools)
    for query in (*QUERIES, "revision 1"):
        a, b = built.search(query, limit=10), opened.search(query, limit=10)
        assert [(h.tool.name, h.score) for h in a.hits] == [(h.tool.name, h.score) for h in b.hits]


def test_a_stored_index_of_other_tools_is_never_used(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    stored_index(catalog_of(10).tools(), path)
    server = "server-00004"
    changed = ServerMetadata(tools=({"name": "quokka_census", "description": "Count quokkas."},))
    catalog = catalog_of(10, {server: changed})

    index = stored_index(catalog.tools(), path)

    assert index.search("count quokkas", limit=1).hits[0].tool.name == f"{server}_quokka_census"
    assert index.search("", server=server).total == 1
    # The file now holds the new catalog's index.
    again = stored_index(catalog.tools(), path)
    assert again.search("count quokkas", limit=1).hits[0].tool.name == f"{server}_quokka_census"


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(b"not a database at all", id="garbage"),
        pytest.param(b"", id="empty"),
        pytest.param(None, id="cut-short"),
    ],
)
def test_a_damaged_stored_index_is_built_again_silently(
    tmp_path: Path, damage: bytes | None
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    catalog = catalog_of(10)
    expected = [h.tool.name for h in stored_index(catalog.tools(), path).search("email").hits]
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 3] if damage is None else damage)

    index = stored_index(catalog.tools(), path)

    assert [h.tool.name for h in index.search("email").hits] == expected
    reopened = stored_index(catalog.tools(), path)
    assert [h.tool.name for h in reopened.search("email").hits] == expected


def test_a_damaged_entry_of_a_stored_index_reads_as_absent(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "mcp-search-index.sqlite"
    catalog = catalog_of(10)
    stored_index(catalog.tools(), path)
    with sqlite3.connect(path) as connection:
        # Wrong sizes and document ids past the catalog, as a torn write or bad disk leaves.
        connection.execute("UPDATE entries SET value = x'0102030405' WHERE tab = 0")
        connection.execute("UPDATE entries SET value = x'ffffff7f' WHERE tab = 1")
    connection.close()

    index = stored_index(catalog.tools(), path)

    page = index.search("send an email", limit=3)  # no error: the query goes on without them
    assert page.total == 0 or all(h.tool.name in catalog for h in page.hits)
    assert index.search("server-00001_calendar_tool_2", limit=1).hits  # exact names still work


def test_a_stored_index_whose_tools_do_not_add_up_is_built_again(tmp_path: Path) -> None:
    import sqlite3
    from array import array

    path = tmp_path / "mcp-search-index.sqlite"
    catalog = catalog_of(10)
    expected = [h.tool.name for h in stored_index(catalog.tools(), path).search("email").hits]
    with sqlite3.connect(path) as connection:
        (first,) = connection.execute("SELECT server FROM layout ORDER BY position").fetchone()
        # A tool twice, one past the catalog (three tools with no name terms).
        connection.execute(
            "UPDATE layout SET docs = ?, count = 3, names = char(30, 30) WHERE server = ?",
            (array("i", [0, 0, 10_000]).tobytes(), first),
        )
    connection.close()

    index = stored_index(catalog.tools(), path)

    assert [h.tool.name for h in index.search("email").hits] == expected
    assert index.search("", server=first).total == 5


@pytest.mark.parametrize(
    ("ids", "removed", "left"),
    [
        pytest.param([3, 8, 9, 40], 9, [3, 8, 40], id="in-order: bisected"),
        pytest.param([40, 3, 9, 8], 9, [40, 3, 8], id="out-of-order: looked for one by one"),
        pytest.param([7], 7, None, id="the last one: the key goes"),
    ],
)
def test_a_documents_id_leaves_its_id_list_wherever_it_sits(
    ids: list[int], removed: int, left: list[int] | None
) -> None:
    index = {"word": array("i", ids)}

    _remove_from(index, "word", removed)

    assert (list(index["word"]) if "word" in index else None) == left


def test_removing_an_id_an_id_list_lacks_fails_loudly() -> None:
    with pytest.raises(ValueError, match="not in array"):
        _remove_from({"word": array("i", [1, 5, 9])}, "word", 6)
