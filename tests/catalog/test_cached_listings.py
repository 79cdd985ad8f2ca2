"""Opening a catalog from the metadata store reads each server's listing, not its entry.

A listing is the entry without its tools' input and output schemas (two thirds of the
entries at 95,000 tools); a tool's schemas are read from its server's entry when asked for.
These tests pin that nothing else changes: the same tools, schemas and search index."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.catalog import CachedListing, MetadataCache, ServerMetadata
from pi_mcp_adapter.catalog._cache import RECENT_SCHEMA_ENTRIES
from pi_mcp_adapter.catalog._naming import build_tool_infos, format_tool_name
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_store import search_index_store_path
from pi_mcp_adapter.catalog._store import CatalogStore
from pi_mcp_adapter.config import ServerEntry, Settings


def entry_of(name: str) -> ServerEntry:
    return ServerEntry(command="server", args=(name,))


def metadata_of(name: str) -> ServerMetadata:
    return ServerMetadata(
        tools=tuple(
            {
                "name": f"tool_{t}",
                "description": f"Find the {name} records number {t} by a query.",
                "inputSchema": {
                    "type": "object",
                    "properties": {f"query_{t}": {"type": "string", "description": "words"}},
                },
                **({"outputSchema": {"type": "object"}} if t == 0 else {}),
                "annotations": {"readOnlyHint": True},
            }
            for t in range(4)
        ),
        resources=({"uri": f"file:///{name}.txt", "name": f"{name} notes"},),
        instructions=f"{name} instructions",
    )


SERVERS = [f"server-{s}" for s in range(6)]


def stored(agent_dir: Path) -> Path:
    path = agent_dir / "mcp-cache.json"
    cache = MetadataCache(path)
    for name in SERVERS:
        cache.store(name, entry_of(name), metadata_of(name))
    cache.flush()
    return path


def infos(metadata: dict[str, ServerMetadata]) -> list[Any]:
    settings = Settings()
    return [
        info
        for name, meta in metadata.items()
        for info in build_tool_infos(name, meta, entry=entry_of(name), settings=settings)
    ]


class CountingStore(CatalogStore):
    reads = 0

    def entry_text(self, name: str) -> str | None:
        CountingStore.reads += 1
        return super().entry_text(name)

    def entry_texts(self, names: Any) -> dict[str, str]:
        CountingStore.reads += len(names)
        return super().entry_texts(names)


@pytest.fixture
def entries() -> dict[str, ServerEntry]:
    return {name: entry_of(name) for name in SERVERS}


def test_a_catalog_from_cached_listings_has_the_tools_and_schemas_of_the_entries(
    tmp_path: Path, entries: dict[str, ServerEntry]
) -> None:
    path = stored(tmp_path)
    listed = MetadataCache(path).get_listings(entries)
    whole = MetadataCache(path).get_many(entries)
    assert list(listed) == SERVERS
    assert all(type(m) is CachedListing for m in listed.values())
    assert all("inputSchema" not in t for m in listed.values() for t in m.tools)
    from_listings, from_entries = infos(listed), infos(whole)
    assert from_listings == from_entries
    assert [t.input_schema for t in from_listings] == [t.input_schema for t in from_entries]
    assert [t.output_schema for t in from_listings] == [t.output_schema for t in from_entries]
    assert from_listings[0].output_schema == {"type": "object"}
    assert {t.resource_uri for t in from_listings} >= {f"file:///{s}.txt" for s in SERVERS}


ODD_TOOLS: tuple[Any, ...] = (
    {"name": "x" * 80, "description": "a name cut to 64 characters"},
    {"name": "odd_server_already_prefixed", "description": "keeps its own prefix"},
    {"name": "odd_server_", "description": "only the prefix: prefixed again"},
    {"name": "dots.and spaces/é", "title": "Only a title"},
    {"name": "", "description": "no name: skipped"},
    {"name": 7, "description": "not a name: skipped"},
    {"description": "no name at all: skipped"},
    {"name": "annotated", "annotations": {"title": "T"}, "_meta": {"ui": {"a": 1}}},
)


VALID_TOOLS: tuple[Any, ...] = (
    {"name": "y" * 80, "description": "a valid name cut to 64 characters"},
    {"name": "odd-server_already_prefixed", "description": "keeps its own prefix"},
    {"name": "odd-server_", "description": "only the prefix: prefixed again"},
    {"name": "with-hyphen_and_UPPER9"},
    {"name": "annotated", "annotations": {"title": "T"}, "_meta": {"ui": {"a": 1}}},
)
"""Names valid as they are, which are named without a substitution each."""

NEWLINE_TOOLS: tuple[Any, ...] = (
    {"name": "first"},
    {"name": "line\nbreak", "description": "a newline is not a valid character either"},
)


@pytest.mark.parametrize(
    "settings",
    [Settings(), Settings(tool_prefix="none"), Settings(tool_separator="__")],
    ids=["server-prefix", "no-prefix", "double-underscore"],
)
@pytest.mark.parametrize(
    ("tools", "named"),
    [(ODD_TOOLS, 5), (VALID_TOOLS, 5), (NEWLINE_TOOLS, 2)],
    ids=["odd", "valid", "newline"],
)
def test_tool_names_are_named_the_same_from_a_listing_and_from_the_entry(
    tmp_path: Path, settings: Settings, tools: tuple[Any, ...], named: int
) -> None:
    path = tmp_path / "mcp-cache.json"
    entry = entry_of("odd-server")
    MetadataCache(path).store("odd-server", entry, ServerMetadata(tools=tools))
    listed = MetadataCache(path).get_listings({"odd-server": entry})["odd-server"]
    whole = MetadataCache(path).get_many({"odd-server": entry})["odd-server"]
    assert type(listed) is CachedListing
    from_listing = build_tool_infos("odd-server", listed, entry=entry, settings=settings)
    from_entry = build_tool_infos("odd-server", whole, entry=entry, settings=settings)
    assert from_listing == from_entry
    assert [t.name for t in from_listing] == [t.name for t in from_entry]
    assert len(from_listing) == named
    assert all(t.name and len(t.name) <= 64 for t in from_listing)
    assert [t.annotations for t in from_listing] == [t.annotations for t in from_entry]
    assert [t.meta for t in from_listing] == [t.meta for t in from_entry]


def test_valid_names_are_prefixed_kept_and_cut_as_the_rules_say(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    entry = entry_of("odd-server")
    MetadataCache(path).store("odd-server", entry, ServerMetadata(tools=VALID_TOOLS))
    listed = MetadataCache(path).get_listings({"odd-server": entry})["odd-server"]
    names = [
        t.name for t in build_tool_infos("odd-server", listed, entry=entry, settings=Settings())
    ]
    assert names == [format_tool_name(t["name"], "odd-server") for t in VALID_TOOLS]
    cut, kept, prefixed, hyphen, annotated = names
    assert len(cut) == 64
    assert cut.startswith("odd-server_yyy")
    assert "y" * 60 not in cut
    assert kept == "odd-server_already_prefixed"
    assert prefixed == "odd-server_odd-server_"
    assert hyphen == "odd-server_with-hyphen_and_UPPER9"
    assert annotated == "odd-server_annotated"


def test_opening_reads_no_entry_and_a_schema_reads_only_its_servers(
    tmp_path: Path, entries: dict[str, ServerEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = stored(tmp_path)
    monkeypatch.setattr("pi_mcp_adapter.catalog._cache.CatalogStore", CountingStore)
    CountingStore.reads = 0
    cache = MetadataCache(path)
    tools = infos(cache.get_listings(entries))
    assert cache.definition_changes(SERVERS[0]).names() == ()
    assert CountingStore.reads == 0

    first = next(t for t in tools if t.server == SERVERS[2] and t.original_name == "tool_1")
    assert first.input_schema["properties"] == {
        "query_1": {"type": "string", "description": "words"}
    }
    assert CountingStore.reads == 1
    sibling = next(t for t in tools if t.server == SERVERS[2] and t.original_name == "tool_3")
    assert "query_3" in sibling.input_schema["properties"]
    assert CountingStore.reads == 1  # the entry read for its sibling is kept


def test_an_entry_stored_without_its_listing_is_read_whole(
    tmp_path: Path, entries: dict[str, ServerEntry]
) -> None:
    path = stored(tmp_path)
    # What a program that keeps no listing leaves: the entry rewritten, the listing not.
    with sqlite3.connect(tmp_path / "mcp-cache.db") as db:
        db.execute("UPDATE servers SET gen = gen + 100 WHERE name = ?", (SERVERS[1],))
    db.close()
    listed = MetadataCache(path).get_listings(entries)
    assert type(listed[SERVERS[1]]) is ServerMetadata
    assert listed[SERVERS[1]] == metadata_of(SERVERS[1])
    assert type(listed[SERVERS[0]]) is CachedListing


@pytest.mark.parametrize(
    "asked",
    [
        pytest.param([SERVERS[4], SERVERS[1]], id="a few: read by name"),
        pytest.param([*reversed(SERVERS[1:]), "never-stored"], id="most: one pass over the table"),
    ],
)
def test_the_store_reads_the_same_listings_by_name_and_in_one_pass(
    tmp_path: Path, asked: list[str]
) -> None:
    stored(tmp_path)
    with sqlite3.connect(tmp_path / "mcp-cache.db") as db:  # see the test above
        db.execute("UPDATE servers SET gen = gen + 100 WHERE name = ?", (SERVERS[1],))
    db.close()
    store = CatalogStore(tmp_path / "mcp-cache.db")
    one_by_one = {name: store.listings([name]) for name in asked}

    listed = store.listings(asked)

    assert set(listed) == set(asked) - {SERVERS[1], "never-stored"}
    assert listed == {name: found[name] for name, found in one_by_one.items() if found}


def test_a_cached_listing_is_never_stored_back(
    tmp_path: Path, entries: dict[str, ServerEntry]
) -> None:
    path = stored(tmp_path)
    cache = MetadataCache(path)
    listing = cache.get_listings(entries)[SERVERS[0]]
    with pytest.raises(UsageError, match="lacks its tools' schemas"):
        cache.store(SERVERS[0], entries[SERVERS[0]], listing)
    assert MetadataCache(path).get(SERVERS[0], entries[SERVERS[0]]) == metadata_of(SERVERS[0])


def test_an_index_stored_from_live_listings_opens_unpatched_from_cached_ones(
    tmp_path: Path, entries: dict[str, ServerEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = stored(tmp_path)
    store = search_index_store_path(tmp_path)
    live = infos({name: metadata_of(name) for name in SERVERS})
    built = SearchIndex(live, ranking="lexical", index_store=store)
    query = "records number 2 query"
    expected = [h.tool.name for h in built.search(query, limit=5).hits]
    del built

    monkeypatch.setattr("pi_mcp_adapter.catalog._cache.CatalogStore", CountingStore)
    CountingStore.reads = 0
    opened = SearchIndex(
        infos(MetadataCache(path).get_listings(entries)), ranking="lexical", index_store=store
    )
    assert CountingStore.reads == 0  # the fingerprints take each schema's recorded digest
    activity = opened.store_activity
    assert activity is not None
    assert activity.patched_servers == ()
    assert activity.rows_written == 0
    assert [h.tool.name for h in opened.search(query, limit=5).hits] == expected


@pytest.mark.parametrize(
    "damage",
    [
        "{not json",
        # Two listings in one text: parsed in one array with the others, it would shift each
        # later server's listing onto the server before it.
        "NEXT, NEXT",
    ],
)
def test_a_server_whose_listing_is_unreadable_is_read_from_its_entry(
    tmp_path: Path, entries: dict[str, ServerEntry], damage: str
) -> None:
    path = stored(tmp_path)
    with sqlite3.connect(tmp_path / "mcp-cache.db") as db:
        (following,) = db.execute(
            "SELECT listing FROM listings WHERE name = ?", (SERVERS[4],)
        ).fetchone()
        text = damage.replace("NEXT", following)
        db.execute("UPDATE listings SET listing = ? WHERE name = ?", (text, SERVERS[3]))
    db.close()
    listed = MetadataCache(path).get_listings(entries)
    assert list(listed) == SERVERS
    assert type(listed[SERVERS[3]]) is ServerMetadata
    assert listed[SERVERS[3]] == metadata_of(SERVERS[3])
    for server in SERVERS[4:]:
        assert type(listed[server]) is not ServerMetadata
        descriptions = [tool["description"] for tool in listed[server].tools]
        assert descriptions == [tool["description"] for tool in metadata_of(server).tools]


def test_building_and_storing_an_index_reads_each_servers_entry_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # More servers than the cache keeps parsed: a second pass over the schemas, to store the
    # index, read every entry again.
    names = [f"server-{s}" for s in range(RECENT_SCHEMA_ENTRIES + 6)]
    entries = {name: entry_of(name) for name in names}
    cache = MetadataCache(tmp_path / "mcp-cache.json")
    for name in names:
        cache.store(name, entries[name], metadata_of(name))
    cache.flush()
    monkeypatch.setattr("pi_mcp_adapter.catalog._cache.CatalogStore", CountingStore)
    CountingStore.reads = 0
    tools = infos(MetadataCache(tmp_path / "mcp-cache.json").get_listings(entries))

    built = SearchIndex(tools, ranking="lexical", index_store=search_index_store_path(tmp_path))

    assert built.store_activity.full_build
    assert CountingStore.reads == len(names)
    reopened = SearchIndex(tools, ranking="lexical", index_store=search_index_store_path(tmp_path))
    assert not reopened.store_activity.full_build
    query = "server-70 records number 2"
    assert [h.tool.name for h in reopened.search(query, limit=3).hits] == [
        h.tool.name for h in built.search(query, limit=3).hits
    ]
