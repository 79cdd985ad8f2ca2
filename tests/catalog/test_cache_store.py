"""The metadata store ``mcp-cache.db``: one row per server, its JSON export and import.

Costs are counted (rows changed, bytes the write-ahead log grew, characters parsed), never
timed, so the tests hold on a busy machine.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata, _cache, _store, config_hash
from pi_mcp_adapter.config._models import ServerEntry

WORKER = Path(__file__).with_name("cache_worker.py")
WORKER_DEADLINE_S = 90
"""Bound for worker processes that should finish in seconds; generous for a busy machine."""


def entry_of(name: str) -> ServerEntry:
    return ServerEntry(command="server", args=(name,))


def metadata_of(name: str, version: int = 0) -> ServerMetadata:
    return ServerMetadata(
        tools=tuple(
            {
                "name": f"tool_{t}",
                "description": f"Tool {t} of {name}, version {version}.",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
            for t in range(5)
        ),
        instructions=f"version {version}",
    )


def filled(path: Path, servers: int) -> MetadataCache:
    cache = MetadataCache(path)
    for s in range(servers):
        name = f"server-{s:05d}"
        cache.store(name, entry_of(name), metadata_of(name))
    cache.flush()
    return cache


def rows(db: Path) -> dict[str, tuple[str, int]]:
    """Each server's entry text and generation, read with SQLite itself."""
    with sqlite3.connect(db) as connection:
        found = connection.execute("SELECT name, entry, gen FROM servers").fetchall()
    connection.close()
    return {str(name): (str(text), int(gen)) for name, text, gen in found}


def checkpoint(db: Path) -> None:
    """Move the write-ahead log into the database, so the log's growth is one write's."""
    connection = sqlite3.connect(db)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        connection.close()


@pytest.fixture
def agent_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "agent"
    directory.mkdir()
    return directory


# ----------------------------------------------------------------------- one row per store


@pytest.mark.slow
def test_storing_one_server_in_a_large_store_changes_one_row_and_a_few_pages(
    agent_dir: Path,
) -> None:
    wal_growth: list[int] = []
    for servers in (200, 2000):
        path = agent_dir / f"cache-{servers}.json"
        db = path.with_suffix(".db")
        cache = filled(path, servers)
        before = rows(db)
        checkpoint(db)
        name = f"server-{servers // 2:05d}"

        cache.store(name, entry_of(name), metadata_of(name, version=1))
        cache.flush()

        after = rows(db)
        changed = {n for n in after if after[n] != before.get(n)}
        assert changed == {name}
        assert "version 1" in after[name][0]
        wal_growth.append(Path(f"{db}-wal").stat().st_size)
    small, large = wal_growth
    # The row's pages, the generation counter and the export marker: not the catalog.
    assert large <= small * 1.5, wal_growth
    assert large < 64 * 1024, wal_growth
    assert db.stat().st_size > 10 * large


def test_opening_the_catalog_parses_only_the_entries_asked_for(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    filled(agent_dir / "mcp-cache.json", 300)
    parsed_chars = [0]
    loads = json.loads

    def counted_loads(text: str | bytes, **options: Any) -> Any:
        parsed_chars[0] += len(text)
        return loads(text, **options)

    monkeypatch.setattr(json, "loads", counted_loads)
    cache = MetadataCache(agent_dir / "mcp-cache.json")
    assert cache.load() == "loaded"
    assert len(cache.servers) == 300
    counts = cache.tool_counts()
    assert parsed_chars[0] == 0  # names and counts come from the store's columns
    assert set(counts.values()) == {5}

    assert cache.entry_state("server-00007", entry_of("server-00007")) == "valid"
    metadata = cache.get("server-00007", entry_of("server-00007"))
    assert metadata == metadata_of("server-00007")
    one_entry = len(json.dumps([dict(t) for t in metadata_of("server-00007").tools]))
    assert parsed_chars[0] < 3 * one_entry


@pytest.mark.slow
def test_two_processes_storing_different_servers_at_once_both_land_in_the_store(
    agent_dir: Path,
) -> None:
    path = agent_dir / "mcp-cache.json"
    workers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(path), server, "6", "200"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for server in ("left", "right")
    ]
    try:
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write("go\n")
            worker.stdin.flush()
        for worker in workers:
            _out, err = worker.communicate(timeout=WORKER_DEADLINE_S)
            assert worker.returncode == 0, err
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    stored = rows(path.with_suffix(".db"))
    assert sorted(stored) == ["left", "right"]
    for server in ("left", "right"):
        assert json.loads(stored[server][0])["instructions"] == "round 5"
    assert sorted(json.loads(path.read_bytes())["servers"]) == ["left", "right"]


# --------------------------------------------------------------------- the JSON export


def test_the_export_is_the_reference_format_byte_for_byte(agent_dir: Path) -> None:
    path = agent_dir / "mcp-cache.json"
    cache = filled(path, 3)
    cache.acknowledge_changes("server-00001")

    data = json.loads(path.read_bytes())
    # What JSON.stringify writes: no spaces, non-ASCII as is; the reference's loader accepts
    # an object with version 1 and a "servers" object.
    assert path.read_bytes() == json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
    assert data["version"] == 1
    assert list(data["servers"]) == ["server-00000", "server-00001", "server-00002"]
    for name, entry in data["servers"].items():
        assert entry["configHash"] == config_hash(entry_of(name))
        assert isinstance(entry["cachedAt"], int)
        assert [t["name"] for t in entry["tools"]] == [f"tool_{t}" for t in range(5)]


def test_the_reference_adapter_reads_the_export_as_valid(tmp_path: Path, reference_js: Any) -> None:
    agent_dir = tmp_path / ".pi" / "agent"
    agent_dir.mkdir(parents=True)
    filled(agent_dir / "mcp-cache.json", 2)
    env = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent_dir)}

    [loaded] = reference_js.call("metadata-cache", "loadMetadataCache", [[]], env=env)
    servers = loaded["value"]["servers"]
    assert sorted(servers) == ["server-00000", "server-00001"]
    definition = {"command": "server", "args": ["server-00000"]}
    [valid] = reference_js.call(
        "metadata-cache", "isServerCacheValid", [[servers["server-00000"], definition]], env=env
    )
    assert valid["value"] is True


def test_the_json_is_no_longer_written_above_its_size_limit_and_the_store_keeps_all(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = agent_dir / "mcp-cache.json"
    cache = filled(path, 2)
    small = path.read_bytes()
    monkeypatch.setattr(_cache, "JSON_EXPORT_LIMIT_BYTES", len(small) + 100)

    for name in ("server-00002", "server-00003"):
        cache.store(name, entry_of(name), metadata_of(name))
    cache.flush()

    assert path.read_bytes() == small  # left as it was, for the reference to use what it has
    assert sum("not written" in w for w in cache.warnings) == 1
    reader = MetadataCache(path)
    assert len(reader.servers) == 4
    assert reader.get("server-00003", entry_of("server-00003")) == metadata_of("server-00003")


# ------------------------------------------------------------------------------ import


def reference_entry(name: str, *, cached_at_ms: int, description: str) -> dict[str, Any]:
    """An entry as the TypeScript adapter writes it."""
    return {
        "configHash": config_hash(entry_of(name)),
        "tools": [{"name": "only", "description": description, "inputSchema": {}}],
        "resources": [],
        "cachedAt": cached_at_ms,
    }


def test_an_existing_mcp_cache_json_is_imported_into_a_new_store(agent_dir: Path) -> None:
    path = agent_dir / "mcp-cache.json"
    now_ms = int(time.time() * 1000)
    written = {
        "version": 1,
        "servers": {
            name: reference_entry(name, cached_at_ms=now_ms, description=f"from {name}")
            for name in ("alpha", "beta")
        },
    }
    path.write_text(json.dumps(written))

    cache = MetadataCache(path)
    assert cache.load() == "loaded"
    metadata = cache.get("alpha", entry_of("alpha"))
    assert metadata is not None
    assert metadata.tools[0]["description"] == "from alpha"
    assert sorted(rows(path.with_suffix(".db"))) == ["alpha", "beta"]

    path.unlink()  # the store alone now has them
    assert MetadataCache(path).get("beta", entry_of("beta")) is not None


def test_a_file_the_reference_rewrote_brings_its_newer_entries_and_keeps_the_stores(
    agent_dir: Path,
) -> None:
    path = agent_dir / "mcp-cache.json"
    cache = filled(path, 2)
    exported = json.loads(path.read_bytes())
    stored_at = exported["servers"]["server-00000"]["cachedAt"]
    # The TypeScript adapter lists server-00000 again and adds "gamma"; it also carries an
    # older copy of server-00001 than the store now has.
    cache.store("server-00001", entry_of("server-00001"), metadata_of("server-00001", 2))
    cache.flush()
    exported["servers"]["server-00000"] = reference_entry(
        "server-00000", cached_at_ms=stored_at + 5000, description="relisted by the reference"
    )
    exported["servers"]["gamma"] = reference_entry(
        "gamma", cached_at_ms=stored_at, description="new in the reference"
    )
    path.write_text(json.dumps(exported))

    reader = MetadataCache(path)
    assert reader.load() == "loaded"

    relisted = reader.get("server-00000", entry_of("server-00000"))
    assert relisted is not None
    assert relisted.tools[0]["description"] == "relisted by the reference"
    assert reader.get("gamma", entry_of("gamma")) is not None
    assert reader.get("server-00001", entry_of("server-00001")) == metadata_of("server-00001", 2)


# ------------------------------------------------------------------ a damaged store


def test_a_corrupt_store_is_set_aside_and_rebuilt_from_the_json(agent_dir: Path) -> None:
    path = agent_dir / "mcp-cache.json"
    filled(path, 3)
    db = path.with_suffix(".db")
    checkpoint(db)
    json_before = path.read_bytes()
    db.write_bytes(b"this is not an SQLite database" * 100)

    cache = MetadataCache(path)
    assert cache.load() == "loaded"

    assert any("mcp-cache.db was unreadable" in w for w in cache.warnings), cache.warnings
    (aside,) = (p for p in agent_dir.glob("mcp-cache.db.corrupt-*") if p.name.endswith("Z"))
    assert aside.read_bytes().startswith(b"this is not an SQLite database")
    assert cache.get("server-00002", entry_of("server-00002")) == metadata_of("server-00002")
    assert sorted(rows(db)) == ["server-00000", "server-00001", "server-00002"]
    assert path.read_bytes() == json_before


@pytest.fixture
def short_busy_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # A held lock is reported after the busy timeout; a short one keeps the test short.
    monkeypatch.setattr(_store, "BUSY_TIMEOUT_S", 0.3)


@pytest.mark.usefixtures("short_busy_timeout")
def test_a_locked_store_is_reported_and_the_json_is_kept(agent_dir: Path) -> None:
    path = agent_dir / "mcp-cache.json"
    filled(path, 2)
    json_before = path.read_bytes()
    holder = sqlite3.connect(path.with_suffix(".db"), isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        cache = MetadataCache(path)
        cache.store("server-00005", entry_of("server-00005"), metadata_of("server-00005"))

        assert any("stayed locked" in w for w in cache.warnings), cache.warnings
        assert path.read_bytes() == json_before
        assert cache.get("server-00005", entry_of("server-00005")) is not None  # in the view
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    cache.store("server-00005", entry_of("server-00005"), metadata_of("server-00005", 1))
    cache.flush()
    assert "server-00005" in rows(path.with_suffix(".db"))
    assert "server-00005" in json.loads(path.read_bytes())["servers"]


def test_a_store_is_durable_before_a_large_json_is_exported_in_the_background(
    agent_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = agent_dir / "mcp-cache.json"
    filled(path, 20)
    monkeypatch.setattr(_cache, "SYNC_EXPORT_BYTES", path.stat().st_size // 2)
    exported = path.read_bytes()

    cache = MetadataCache(path)  # a new process: it knows the file's size from the store
    cache.load()
    cache.store("server-00003", entry_of("server-00003"), metadata_of("server-00003", 1))

    assert "version 1" in rows(path.with_suffix(".db"))["server-00003"][0]  # committed
    assert path.read_bytes() == exported  # the export is left to a background thread
    cache.flush()
    written = json.loads(path.read_bytes())["servers"]["server-00003"]
    assert written["instructions"] == "version 1"


# ------------------------------------------------------------------ reading the summaries


def bytes_read() -> int:
    """What this process has read through system calls (SQLite reads its pages so)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def large_entries(path: Path, servers: int) -> MetadataCache:
    """A store whose entries are large (a long description per tool), first stored in an
    order that is not the names' order."""
    cache = MetadataCache(path)
    for s in reversed(range(servers)):
        name = f"server-{s:05d}"
        tools = tuple(
            {"name": f"tool_{t}", "description": f"{name} tool {t} " + "words " * 400}
            for t in range(4)
        )
        cache.store(name, entry_of(name), ServerMetadata(tools=tools))
    cache.flush()
    return cache


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux's /proc/self/io")
def test_reading_every_summary_does_not_read_the_entries(agent_dir: Path) -> None:
    db = agent_dir / "mcp-cache.db"
    large_entries(agent_dir / "mcp-cache.json", 200)
    checkpoint(db)
    entries_size = sum(len(text) for text, _gen in rows(db).values())
    assert entries_size > 1_500_000

    store = _store.CatalogStore(db)
    try:
        store.count()  # the connection opened and its schema checked, outside the count
        before = bytes_read()
        _gen, _removals, summaries = store.summaries()
        read = bytes_read() - before
    finally:
        store.close()

    assert len(summaries) == 200
    # The summaries' index, not the table: a row's entry sits before its summary, and the
    # pages of a long entry were read to reach the summary after it.
    assert read < entries_size / 10, (read, entries_size)
    # Still in the order the servers were first stored, not the index's order.
    assert [row.name for row in summaries] == [f"server-{s:05d}" for s in reversed(range(200))]


def test_a_store_written_without_the_summaries_index_gets_it_and_reads_the_same(
    agent_dir: Path,
) -> None:
    db = agent_dir / "mcp-cache.db"
    large_entries(agent_dir / "mcp-cache.json", 20)
    expected = _store.CatalogStore(db).summaries()[2]
    with sqlite3.connect(db) as connection:  # as a store of an earlier version was written
        connection.execute("DROP INDEX servers_summaries")
    connection.close()

    readonly = _store.CatalogStore(db)
    db.chmod(0o400)
    try:
        if not os.access(db, os.W_OK):  # root writes whatever the mode says
            assert readonly.summaries()[2] == expected  # read without the index
    finally:
        readonly.close()
        db.chmod(0o600)

    holder = sqlite3.connect(db, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        started = time.monotonic()
        busy = _store.CatalogStore(db)
        assert busy.summaries()[2] == expected  # read without the index, not waited for
        busy.close()
        assert time.monotonic() - started < _store.BUSY_TIMEOUT_S / 2
    finally:
        holder.execute("ROLLBACK")
        holder.close()

    store = _store.CatalogStore(db)
    try:
        assert store.summaries()[2] == expected
    finally:
        store.close()
    with sqlite3.connect(db) as connection:
        indexes = {
            name
            for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        }
    connection.close()
    assert "servers_summaries" in indexes
