"""A relisting costs what the relisted server offers, at any catalog size.

The catalog and each caller's view are derived from the previous ones when one server's tools
change (``Catalog.replacing_server``); these tests pin that the derived catalog is the one a
full build gives, and count the Python function calls a relisting makes at two catalog sizes:
work that grows with the catalog shows up as calls, on a busy machine as on an idle one.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from _large_catalog import (  # tests/ is on sys.path
    TOOLS_PER_SERVER,
    collections_counted,
    counted_calls,
    server_metadata,
    server_name,
)
from pi_mcp_adapter.catalog import Catalog, MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.engine import CallerPolicy, acting_for
from pi_mcp_adapter.engine._catalog_state import CatalogState

COST_RATIO_LIMIT = 1.5
"""A request at ten times the catalog may make at most this many times the calls."""


def entry(**fields: Any) -> ServerEntry:
    return ServerEntry(command="server", **fields)


def catalog_state(tmp_path: Path, servers: int) -> tuple[CatalogState, dict[str, ServerEntry]]:
    entries = {f"server-{s:05d}": entry() for s in range(servers)}
    state = CatalogState(
        cache=MetadataCache(tmp_path / f"cache-{servers}.json"),
        agent_dir=tmp_path,
        entries=lambda: entries,
        settings=Settings,
    )
    for name in entries:
        state.publish(name, server_metadata(name))
    return state, entries


def relisting_cost(state: CatalogState, server: str, read: Callable[[], object]) -> int:
    """Calls made by one relisting of ``server`` followed by ``read`` of the views."""
    read()  # the views exist before the relisting, as in a running gateway
    state.cache.flush()
    with counted_calls() as count:
        state.publish(server, server_metadata(server, version=1))
        read()
        state.cache.flush()  # on disk, whether the store was written at once or later
    return count[0]


def full_build(state: CatalogState, entries: dict[str, ServerEntry]) -> Catalog:
    metadata = {n: m for n in entries if (m := state.metadata(n)) is not None}
    return Catalog.build(metadata, entries, Settings())


def test_replacing_one_servers_tools_gives_the_catalog_a_full_build_gives() -> None:
    entries = {name: entry() for name in ("alpha", "beta", "gamma")}
    metadata = {name: server_metadata(name) for name in entries}
    before = Catalog.build(metadata, entries, Settings())
    changed = ServerMetadata(
        tools=({"name": "fresh", "description": "new"}, *server_metadata("beta", 1).tools[1:])
    )
    expected = Catalog.build({**metadata, "beta": changed}, entries, Settings())
    tools = Catalog.build({"beta": changed}, {"beta": entries["beta"]}, Settings()).tools()

    derived = before.replacing_server("beta", tools, servers=list(entries))

    assert derived is not None
    assert derived.servers == expected.servers
    assert [t.name for t in derived.tools()] == [t.name for t in expected.tools()]
    assert derived.lookup("fresh").name == "beta_fresh"
    assert derived.lookup("Beta-Fresh").name == "beta_fresh"
    assert derived.get("beta_tool_0") is None
    assert before.lookup("beta_tool_0").server == "beta"  # the previous snapshot is intact
    assert len(derived) == len(expected)


def test_a_server_listed_for_the_first_time_takes_its_configured_place() -> None:
    entries = {name: entry() for name in ("alpha", "beta", "gamma")}
    metadata = {name: server_metadata(name) for name in ("alpha", "gamma")}
    before = Catalog.build(metadata, entries, Settings())
    tools = Catalog.build({"beta": server_metadata("beta")}, entries, Settings()).tools()

    derived = before.replacing_server("beta", tools, servers=list(entries))

    assert derived is not None
    assert derived.servers == ("alpha", "beta", "gamma")
    assert derived.lookup("beta_tool_1").server == "beta"
    assert derived.lookup("beta_tool_1", server="beta").original_name == "tool_1"


def test_a_relisted_server_in_a_new_server_order_takes_that_order() -> None:
    entries = {name: entry() for name in ("alpha", "beta", "gamma")}
    metadata = {name: server_metadata(name) for name in entries}
    before = Catalog.build(metadata, entries, Settings())
    tools = Catalog.build({"beta": server_metadata("beta", 1)}, entries, Settings()).tools()

    derived = before.replacing_server("beta", tools, servers=["gamma", "beta", "alpha"])

    assert derived is not None
    assert derived.servers == ("gamma", "beta", "alpha")
    assert [t.server for t in derived.tools()][:3] == ["gamma"] * 3
    assert derived.tools("beta") == tuple(tools)
    assert before.servers == ("alpha", "beta", "gamma")


def test_a_contested_name_is_left_to_a_full_build() -> None:
    entries = {"alpha": entry(toolPrefix="none"), "beta": entry(toolPrefix="none")}
    before = Catalog.build(
        {"alpha": server_metadata("alpha"), "beta": ServerMetadata(tools=({"name": "own"},))},
        entries,
        Settings(),
    )
    wants_taken_name = Catalog.build(
        {"beta": ServerMetadata(tools=({"name": "tool_0"},))}, entries, Settings()
    ).tools()

    assert before.replacing_server("beta", wants_taken_name, servers=list(entries)) is None


def test_a_catalog_derived_through_many_relistings_is_the_one_a_full_build_gives() -> None:
    # Each derived catalog keeps its changes on top of a base it shares with earlier ones, and
    # folds them into a new base once they grow: hundreds of relistings cross that point.
    entries = {f"server-{s:02d}": entry() for s in range(30)}
    metadata = {name: server_metadata(name) for name in entries}
    catalog = Catalog.build(metadata, entries, Settings())
    snapshots = [catalog]
    for step in range(400):
        server = f"server-{step * 7 % 30:02d}"
        tools = tuple(
            {"name": f"tool_{t}_{step % 3}", "description": f"step {step}"} for t in range(step % 4)
        )
        metadata[server] = ServerMetadata(tools=tools)
        named = Catalog.build({server: metadata[server]}, entries, Settings()).tools()
        derived = catalog.replacing_server(server, named, servers=list(entries))
        assert derived is not None
        catalog = derived
        if step % 97 == 0:
            snapshots.append(catalog)
    expected = Catalog.build(metadata, entries, Settings())

    assert [t.name for t in catalog.tools()] == [t.name for t in expected.tools()]
    assert len(catalog) == len(expected)
    for tool in expected.tools():
        assert catalog.lookup(tool.name) == tool
        assert catalog.lookup(tool.name.upper().replace("_", "-")) == tool
    assert catalog.get("server-00_tool_0_9") is None
    # An earlier snapshot still answers as it did.
    first = snapshots[0]
    assert len(first) == 30 * TOOLS_PER_SERVER
    assert first.lookup("server-07_tool_3").server == "server-07"


@pytest.mark.slow
def test_a_relisting_costs_the_same_at_ten_times_the_catalog(tmp_path: Path) -> None:
    costs: list[int] = []
    for servers in (300, 3000):
        state, entries = catalog_state(tmp_path, servers)
        server = f"server-{servers // 2:05d}"

        def read(state: CatalogState = state, server: str = server) -> object:
            return state.catalog.lookup(f"{server}_tool_3")

        costs.append(relisting_cost(state, server, read))
        assert state.catalog.get(f"{server}_tool_3") is not None
        assert len(state.catalog) == full_build(state, entries).__len__()
        assert "version 1" in (state.catalog.lookup(f"{server}_tool_3").description or "")
        state.cache.flush()
    small, large = costs
    assert large <= small * COST_RATIO_LIMIT, costs


@pytest.mark.slow
def test_a_callers_view_follows_a_relisting_at_the_cost_of_that_server(tmp_path: Path) -> None:
    policy = CallerPolicy("model", deny=("*tool_4",))
    costs: list[int] = []
    for servers in (300, 3000):
        state, _entries = catalog_state(tmp_path, servers)
        server = f"server-{servers // 2:05d}"

        def read(state: CatalogState = state, server: str = server) -> object:
            with acting_for(policy):
                return state.catalog.lookup(f"{server}_tool_3")

        costs.append(relisting_cost(state, server, read))
        with acting_for(policy):
            view = state.catalog
            assert f"{server}_tool_4" not in view
            assert "version 1" in (view.lookup(f"{server}_tool_3").description or "")
            assert len(view) == servers * (TOOLS_PER_SERVER - 1)
        state.cache.flush()
    small, large = costs
    assert large <= small * COST_RATIO_LIMIT, costs


def filled_cache(path: Path, servers: int) -> MetadataCache:
    cache = MetadataCache(path)
    for s in range(servers):
        name = f"server-{s:05d}"
        cache.store(name, entry(args=(name,)), server_metadata(name))
    cache.flush()
    return cache


def test_storing_one_server_costs_the_same_at_ten_times_the_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # JSON work is C code that a call count misses: count the characters encoded and parsed.
    json_chars = [0]
    dumps, loads = json.dumps, json.loads

    def counted_dumps(value: Any, **options: Any) -> str:
        text = dumps(value, **options)
        json_chars[0] += len(text)
        return text

    def counted_loads(text: str | bytes, **options: Any) -> Any:
        json_chars[0] += len(text)
        return loads(text, **options)

    costs: list[int] = []
    for servers in (200, 2000):
        path = tmp_path / f"cache-{servers}.json"
        cache = filled_cache(path, servers)
        name = f"server-{servers // 2:05d}"
        json_chars[0] = 0
        with monkeypatch.context() as patched:
            patched.setattr(json, "dumps", counted_dumps)
            patched.setattr(json, "loads", counted_loads)
            cache.store(name, entry(args=(name,)), server_metadata(name, version=1))
            cache.flush()
        costs.append(json_chars[0])
        # The file is still the reference's format, byte for byte what one dump writes.
        written = json.loads(path.read_bytes())
        assert written["version"] == 1
        assert "version 1" in written["servers"][name]["tools"][0]["description"]
        assert path.read_bytes() == json.dumps(
            written, ensure_ascii=False, separators=(",", ":")
        ).encode("utf-8")
        assert MetadataCache(path).get(name, entry(args=(name,))) == server_metadata(name, 1)
    small, large = costs
    assert large <= small * COST_RATIO_LIMIT, costs


def test_a_store_made_on_an_event_loop_is_written_by_another_thread(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    cache = MetadataCache(path)
    writers: list[int] = []
    original = cache._write

    def recording_write(servers: Any) -> None:
        writers.append(threading.get_ident())
        original(servers)

    cache._write = recording_write  # type: ignore[method-assign]

    async def store_on_the_loop() -> None:
        cache.store("alpha", entry(), server_metadata("alpha"))

    anyio.run(store_on_the_loop)
    cache.flush()  # waits for the background write
    assert writers
    assert threading.get_ident() not in writers
    assert MetadataCache(path).get("alpha", entry()) == server_metadata("alpha")
    cache.store("beta", entry(), server_metadata("beta"))
    cache.flush()
    assert MetadataCache(path).servers == ("alpha", "beta")


def test_the_json_export_is_written_a_piece_at_a_time_never_as_one_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Joining and encoding the whole file in one C call held the interpreter lock for as long
    # as the file is large (60 ms at 16 MB): every other thread, the event loop included,
    # stalled meanwhile. A piece per batch of servers bounds that hold.
    from pi_mcp_adapter import _files
    from pi_mcp_adapter.catalog import _cache, _store

    path = tmp_path / "mcp-cache.json"
    servers = 2000
    cache = filled_cache(path, servers)
    pieces: list[int] = []
    write = _files.write_atomically_in_chunks

    def recording_write(target: Path, chunks: Any, **options: Any) -> None:
        def recorded() -> Any:
            for chunk in chunks:
                pieces.append(len(chunk))
                yield chunk

        write(target, recorded(), **options)

    monkeypatch.setattr(_cache, "write_atomically_in_chunks", recording_write)
    name = server_name(1000)
    cache.store(name, entry(args=(name,)), server_metadata(name, version=1))
    cache.flush()

    written = path.read_bytes()
    entries = json.loads(written)["servers"]
    largest_entry = max(
        len(json.dumps([key, raw], ensure_ascii=False, separators=(",", ":")).encode())
        for key, raw in entries.items()
    )
    assert len(entries) == servers
    assert sum(pieces) == len(written)
    assert len(pieces) >= servers // _store.EXPORT_ROWS_PER_BATCH
    assert max(pieces) <= _store.EXPORT_ROWS_PER_BATCH * largest_entry
    assert written == json.dumps(
        json.loads(written), ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")


def test_opening_the_catalog_reads_its_listings_a_batch_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One query per server cost more than parsing the entries at 19,641 servers; opening
    # reads each server's listing, and no entry.
    from pi_mcp_adapter.catalog import _store

    servers = 1200
    filled_cache(tmp_path / "mcp-cache.json", servers)
    entries = {server_name(s): entry(args=(server_name(s),)) for s in range(servers)}
    entries["never-listed"] = entry(args=("never-listed",))
    entries[server_name(7)] = entry(args=("changed",))  # its entry is for another config
    queries: list[int] = []
    entry_reads: list[int] = []
    for method in ("entry_text", "entry_texts", "listings"):
        original = getattr(_store.CatalogStore, method)

        def recording(
            self: Any, names: Any, _original: Any = original, _method: str = method
        ) -> Any:
            queries.append(1 if isinstance(names, str) else len(names))
            if _method != "listings":
                entry_reads.append(1 if isinstance(names, str) else len(names))
            return _original(self, names)

        monkeypatch.setattr(_store.CatalogStore, method, recording)
    state = CatalogState(
        cache=MetadataCache(tmp_path / "mcp-cache.json"),
        agent_dir=tmp_path,
        entries=lambda: entries,
        settings=Settings,
    )

    state.load_cache()

    assert len(queries) <= 3, queries
    assert entry_reads == []
    assert state.whole_metadata(server_name(0)) == server_metadata(server_name(0))
    assert state.metadata(server_name(7)) is None
    assert state.metadata("never-listed") is None
    assert sum(1 for name in entries if state.is_known(name)) == servers - 1


def test_opening_a_large_catalog_sets_off_no_garbage_collection(tmp_path: Path) -> None:
    # Each collection set off while millions of parsed objects arrive walks them all: three
    # quarters of reading the entries at 95,000 tools went to the collector.
    servers = 400  # 2,000 tools: a catalog whose parsed entries live as long as the adapter
    filled_cache(tmp_path / "mcp-cache.json", servers)
    entries = {server_name(s): entry(args=(server_name(s),)) for s in range(servers)}
    state = CatalogState(
        cache=MetadataCache(tmp_path / "mcp-cache.json"),
        agent_dir=tmp_path,
        entries=lambda: entries,
        settings=Settings,
    )
    try:
        with collections_counted() as collections:
            state.load_cache()
            catalog = state.full_catalog
    finally:
        gc.unfreeze()  # what the state froze belongs to this test only
    assert len(catalog) == servers * TOOLS_PER_SERVER
    assert collections == []


def test_loading_a_configuration_of_thousands_of_servers_sets_off_no_garbage_collection(
    tmp_path: Path,
) -> None:
    from pi_mcp_adapter.config import load_config

    config = tmp_path / "mcp.json"
    servers = {server_name(s): {"command": "/bin/false", "args": [str(s)]} for s in range(2000)}
    config.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    with collections_counted() as collections:
        loaded = load_config(
            agent_dir=tmp_path / "agent", project_dir=tmp_path, config_path=config, home=tmp_path
        )
    assert len(loaded.servers) == len(servers)
    # One collection may follow as the pause ends (the configuration is not frozen: a reload
    # replaces it); loading itself set off none (it set off a few hundred).
    assert len(collections) <= 1, collections


def test_catching_up_with_other_processes_reads_the_changed_rows_only(tmp_path: Path) -> None:
    # A write catches up with what other processes committed while holding the cache's state
    # lock, which every call takes to record its result's shape: a scan of every row there
    # (35 ms at 19,641 servers) was the longest stall of a concurrent call.
    from pi_mcp_adapter.catalog._store import CatalogStore

    steps: list[int] = []
    for servers in (200, 2000):
        store = CatalogStore(tmp_path / f"store-{servers}.db")
        with store.transaction() as txn:
            for s in range(servers):
                txn.put(server_name(s), f'"{server_name(s)}"', "{}", "{}", 0)
        with store.transaction() as txn:
            txn.put(server_name(7), f'"{server_name(7)}"', '{"new":1}', "{}", 0)
            changed_at = txn.gen
        counted = [0]

        def step(counted: list[int] = counted) -> int:
            counted[0] += 1
            return 0  # go on

        with store._connection() as connection:
            connection.set_progress_handler(step, 10)
            try:
                gen, _removals, rows = store.summaries(since_gen=changed_at - 1)
            finally:
                connection.set_progress_handler(None, 0)
        assert gen == changed_at
        assert [row.name for row in rows] == [server_name(7)]
        steps.append(counted[0])
        store.close()
    small, large = steps
    assert large <= small * COST_RATIO_LIMIT, steps
