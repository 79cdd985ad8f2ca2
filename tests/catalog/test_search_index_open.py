"""A process opens the stored search index of the catalog it was written for without working
out anything per server, and with the answers of the build it was written from.

The file records the fingerprint of the whole catalog it indexes. A process whose catalog has
that fingerprint takes the index as it is: no fingerprint per server is worked out nor read
(they are compared only when the catalog differs). A catalog listing the same servers in
another order is opened unpatched and its fingerprint recorded, so the next process is back
on that path. A file of the previous format is written again whole. These tests count calls
of the real functions (wrapped, never replaced) and rows written, never time.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import (
    Catalog,
    ServerMetadata,
    ToolInfo,
    _search_rankings,
    _search_semantic,
    _search_store,
)
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_semantic import semantic_available
from pi_mcp_adapter.catalog._search_store import StoreActivity, unpack_names
from pi_mcp_adapter.config import ServerEntry, Settings

_TOPICS = (
    ("weather", "Get the weather forecast for a city, with temperature and wind."),
    ("calendar", "List the events of a calendar between two dates."),
    ("mail", "Send an email message to a recipient with a subject and a body."),
    ("files", "Read a text file from the local disk and return its content."),
    ("issues", "Create an issue in a GitHub repository with a title and labels."),
)
QUERIES = (
    "weather forecast for Paris",
    "send an email to Anna",
    "use server-00003 to create an issue in a github repository",
    "read the file notes.txt then email it",
    "zebra crossing",
)


def catalog_tools(servers: int, changed: str = "") -> list[ToolInfo]:
    metadata: dict[str, ServerMetadata] = {}
    for s in range(servers):
        name = f"server-{s:05d}"
        topic, description = _TOPICS[s % len(_TOPICS)]
        tools = [
            {
                "name": f"{topic}_tool_{t}",
                "description": f"{description} Variant {t}.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "What to find"}},
                },
            }
            for t in range(4)
        ]
        if name == changed:
            tools = [{"name": "zebra_crossing", "description": "Find the zebra crossings."}]
        metadata[name] = ServerMetadata(tools=tuple(tools))
    entries = {name: ServerEntry(command="server") for name in metadata}
    return list(Catalog.build(metadata, entries, Settings()).tools())


def servers_reversed(tools: Sequence[ToolInfo]) -> list[ToolInfo]:
    """The same tools, servers listed the other way round (each server's tools in order)."""
    groups: dict[str, list[ToolInfo]] = {}
    for tool in tools:
        groups.setdefault(tool.server, []).append(tool)
    return [tool for server in reversed(list(groups)) for tool in groups[server]]


def open_index(tools: Sequence[ToolInfo], path: Path, ranking: str = "lexical") -> SearchIndex:
    return SearchIndex(
        tools, ranking=ranking, index_store=path, vector_cache=path.with_suffix(".npz")
    )


def answers(index: SearchIndex) -> list[list[tuple[str, float]]]:
    return [[(h.tool.name, h.score) for h in index.search(q, limit=10).hits] for q in QUERIES]


def activity_of(index: SearchIndex) -> StoreActivity:
    activity = index.store_activity
    assert activity is not None
    return activity


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], list[int]]:
    """Count the calls of a function of the stored index, wrapping it where it is used."""

    def count(name: str) -> list[int]:
        calls = [0]
        real: Callable[..., Any] = getattr(_search_store, name)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            calls[0] += 1
            return real(*args, **kwargs)

        for module in (_search_store, _search_rankings, _search_semantic):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, wrapped)
        return calls

    return count


def test_an_index_opened_for_its_own_catalog_works_out_no_fingerprint_per_server(
    tmp_path: Path, counted: Callable[[str], list[int]]
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(40)
    built = open_index(tools, path)
    per_server = counted("server_fingerprint")

    opened = open_index(tools, path)

    activity = activity_of(opened)
    assert (activity.full_build, activity.patched_servers, activity.rows_written) == (False, (), 0)
    assert per_server == [0]
    assert answers(opened) == answers(built)
    assert answers(opened) == answers(SearchIndex(tools, ranking="lexical"))


def test_a_catalog_listing_its_servers_in_another_order_is_opened_unpatched_and_recorded(
    tmp_path: Path, counted: Callable[[str], list[int]]
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(40)
    built = open_index(tools, path)
    reordered = servers_reversed(tools)
    per_server = counted("server_fingerprint")

    first = open_index(reordered, path)

    activity = activity_of(first)
    assert (activity.full_build, activity.patched_servers) == (False, ())
    assert activity.rows_written == 1  # the catalog's fingerprint, nothing else
    assert per_server[0] == 40
    # The index numbers the tools as when it was built: the same ranking, ties included.
    assert answers(first) == answers(built)
    assert [t.name for t in first.tools] == [t.name for t in reordered]

    per_server[0] = 0
    second = open_index(reordered, path)

    activity = activity_of(second)
    assert (activity.full_build, activity.patched_servers, activity.rows_written) == (False, (), 0)
    assert per_server == [0]
    assert answers(second) == answers(built)


def test_lookups_by_name_on_a_patched_index_find_the_catalogs_tools(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    open_index(catalog_tools(20), path)
    changed = "server-00007"
    after = catalog_tools(20, changed=changed)

    patched = open_index(after, path)

    assert activity_of(patched).patched_servers == (changed,)
    names = [
        f"{changed}_zebra_crossing",
        "server-00015_weather_tool_3",
        "server-00000_weather_tool_0",
    ]
    assert [t.name for t in patched.select(names)] == names
    page = patched.search("select:" + ",".join(names))
    assert [h.tool.name for h in page.hits] == names
    assert [h.tool.name for h in patched.search("", server=changed).hits] == names[:1]
    fresh = SearchIndex(after, ranking="lexical")
    assert [[h.tool.name for h in patched.search(q, limit=10).hits] for q in QUERIES] == [
        [h.tool.name for h in fresh.search(q, limit=10).hits] for q in QUERIES
    ]


@pytest.mark.skipif(not semantic_available(), reason="needs the semantic extra")
def test_a_hybrid_index_hashes_its_tools_texts_once_for_the_index_and_the_vectors(
    tmp_path: Path, counted: Callable[[str], list[int]]
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(30)
    built = open_index(tools, path, "hybrid")
    texts = counted("texts_fingerprint")

    opened = open_index(tools, path, "hybrid")

    assert texts == [1]
    assert not activity_of(opened).full_build
    assert answers(opened) == answers(built)


def _as_format_2(path: Path) -> None:
    """Rewrite the index at ``path`` as the previous format stored it: one ``servers`` table
    with each server's ids, words and name terms as JSON beside its tools, and the format
    named "2" in its key."""
    with sqlite3.connect(path) as connection:
        rows = connection.execute(
            "SELECT l.server, l.position, l.fingerprint, l.first, l.count, l.docs, l.names, "
            "t.tools FROM layout l JOIN tools t USING (server)"
        ).fetchall()
        connection.execute(
            "CREATE TABLE servers (server TEXT PRIMARY KEY, position INTEGER, "
            "fingerprint TEXT, docs BLOB, words TEXT, names TEXT, tools BLOB)"
        )
        for server, position, fingerprint, first, count, docs, names, tools in rows:
            ids = bytes(docs) if docs is not None else array("i", range(first, first + count))
            name_terms = [list(unpack_names(n)) for n in names.split("\x1e")]
            connection.execute(
                "INSERT INTO servers VALUES (?, ?, ?, ?, ?, ?, ?)",
                (server, position, fingerprint, bytes(ids), "[]", json.dumps(name_terms), tools),
            )
        connection.execute("DROP TABLE layout")
        connection.execute("DROP TABLE tools")
        (key,) = connection.execute("SELECT value FROM blobs WHERE name = 'key'").fetchone()
        _, parameters = bytes(key).split(b"\0", 1)
        connection.execute("UPDATE blobs SET value = ? WHERE name = 'key'", (b"2\0" + parameters,))
    connection.close()


def test_an_index_file_of_the_previous_format_is_written_again_with_the_same_answers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(30)
    expected = answers(open_index(tools, path))
    _as_format_2(path)

    rebuilt = open_index(tools, path)

    assert activity_of(rebuilt).full_build
    assert answers(rebuilt) == expected
    with sqlite3.connect(path) as connection:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master")}
    connection.close()
    assert "servers" not in tables
    reopened = open_index(tools, path)
    assert not activity_of(reopened).full_build
    assert answers(reopened) == expected


def test_a_relistings_prepare_makes_the_lookup_by_name_so_its_apply_makes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The prepare runs in a worker thread and the apply on the event loop: making the lookup
    # of 95,000 names in the apply stalled every client of a gateway for tens of ms.
    tools = catalog_tools(50)
    index = open_index(tools, tmp_path / "index.sqlite")
    made: list[str] = []
    real = SearchIndex._name_documents

    def counting(self: SearchIndex) -> None:
        made.append(threading.current_thread().name)
        real(self)

    monkeypatch.setattr(SearchIndex, "_name_documents", counting)
    server = "server-00007"
    renamed = [dataclasses.replace(t, name=f"{t.name}_v2") for t in tools if t.server == server]
    prepared: list[Any] = []
    worker = threading.Thread(
        target=lambda: prepared.append(index.prepare_replacement(server, renamed)), name="prep"
    )
    worker.start()
    worker.join(timeout=60)
    assert len(prepared) == 1
    assert prepared[0] is not None
    assert made == ["prep"]
    servers = list(dict.fromkeys(t.server for t in tools))
    assert index.apply_replacement(prepared[0], servers)
    assert made == ["prep"]
    assert [t.name for t in index.select([renamed[0].name, tools[0].name])] == [
        renamed[0].name,
        tools[0].name,
    ]
    assert index.select([f"{renamed[0].name[:-3]}"]) == []


@pytest.mark.parametrize("numbered_in_order", [True, False], ids=["in-order", "servers-reversed"])
def test_the_first_tool_of_a_name_keeps_it_across_the_lookups_slices(
    tmp_path: Path, numbered_in_order: bool
) -> None:
    # 1,250 servers of four tools: the lookup by name is made a few thousand names at a time.
    tools = catalog_tools(1250)
    if not numbered_in_order:
        tools = servers_reversed(tools)
    first, last = tools[3], tools[-2]
    tools[-2] = dataclasses.replace(last, name=first.name)  # one name, twice, far apart
    index = SearchIndex(tools, ranking="lexical")

    by_name = index._by_name()

    assert len(by_name) == len({t.name for t in tools})
    (found,) = index.select([first.name])
    assert (found.server, found.original_name) == (first.server, first.original_name)
    assert {
        name: getattr(index._doc_tools[doc], "name", None) for name, doc in by_name.items()
    } == {name: name for name in by_name}
