"""The metadata store: ``<agent dir>/mcp-cache.db``, one SQLite row per server.

Why SQLite: a catalog of tens of thousands of tools makes a single JSON file the wrong unit of
work (every store rewrote 63 MB at 95,000 tools, every process parsed all of it). Here a store
of one server is one ``INSERT ... ON CONFLICT`` in one transaction; a reader opens the catalog
by reading each server's name and a small summary (config hash, timestamps, capabilities, tool
count) and parses a server's entry only when it asks for it.

Schema (``user_version`` 1)::

    servers(name TEXT UNIQUE, key TEXT, entry TEXT, summary TEXT, tools INTEGER, gen INTEGER)
    meta(key TEXT PRIMARY KEY, value TEXT)
    listings(name TEXT PRIMARY KEY, gen INTEGER, listing TEXT, digest TEXT)

``entry`` is the entry's JSON text exactly as ``mcp-cache.json`` carries it (redacted), so an
export joins texts without serialising anything; ``key`` is the name's JSON text (redacted).
``gen`` is the store's generation when the row last changed (``meta.gen`` counts commits), so a
process catches up with what others stored by reading the rows newer than the generation it
saw; ``meta.removals`` counts deletions, which a reader notices and answers with a full reread
of the names. The rowid keeps the order servers were first stored in. An index of every column
but ``entry`` (``servers_summaries``) is what reading all the summaries reads.

``listings`` holds what a catalog is built from without the tools' schemas (two thirds of the
entries at 95,000 tools), written in the same transaction as the entry and valid while its
``gen`` is the entry's: a process opening the catalog parses these, and a tool's schemas are
read from its server's entry when first asked for (see ``MetadataCache.get_listings``).

Concurrency: WAL journal (readers never wait for a writer), ``busy_timeout`` for writers
waiting on each other, ``synchronous=FULL`` (a commit is on disk when it returns: the row
survives a power loss, not only a crash). Each thread uses its own connection. A killed
process leaves an intact database: SQLite rolls back the unfinished transaction on next open.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from pi_mcp_adapter._shared_state import text_digest

from ._naming import named_counts

__all__ = [
    "BUSY_TIMEOUT_S",
    "STORE_FILE_NAME",
    "CatalogStore",
    "StoreLockedError",
    "StoreUnreadableError",
    "SummaryRow",
    "summary_of",
]

STORE_FILE_NAME = "mcp-cache.db"
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 10.0
"""A writer holds the database for one transaction (milliseconds); ten seconds means stuck."""

EXPORT_ROWS_PER_BATCH = 256
"""Rows the export takes at a time (a few hundred kilobytes to a megabyte of entries)."""
_NAMES_PER_QUERY = 500
"""Names bound in one ``IN (...)`` query (SQLite allows 32,766 variables since 3.32; older
ones 999)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS servers (
    name TEXT NOT NULL UNIQUE,
    key TEXT NOT NULL,
    entry TEXT NOT NULL,
    summary TEXT NOT NULL,
    tools INTEGER NOT NULL DEFAULT 0,
    gen INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS servers_by_gen ON servers(gen);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

_SUMMARIES_INDEX = "servers_summaries"
_SUMMARIES_INDEX_SQL = (
    f"CREATE INDEX IF NOT EXISTS {_SUMMARIES_INDEX} ON servers(name, summary, tools, gen)"
)
"""Every column but the entry, so that reading every server's summary (each status, each
start) reads this index (6 MB at 19,641 servers) and not the table: a row holds its entry
before its summary, and SQLite walks an entry's overflow pages to reach the columns after it,
so a scan of the table read all 130 MB (0.12-0.33 s with the file out of the page cache, where
the index takes 0.03-0.05 s). Added to stores of schema version 1 without changing it: SQLite
keeps an index up to date whatever program writes the rows."""

_LISTINGS_SCHEMA = """
CREATE TABLE IF NOT EXISTS listings (
    name TEXT PRIMARY KEY,
    gen INTEGER NOT NULL,
    listing TEXT NOT NULL,
    digest TEXT NOT NULL
);
"""
"""What opening a catalog reads of a server instead of its entry (see :meth:`CatalogStore.
listings`). Added to a store of schema version 1 without changing its version: a program that
does not know the table leaves it alone, and a row it did not write itself is told apart by its
generation."""


def _add_summaries_index(connection: sqlite3.Connection) -> None:
    """Give a store written before it the summaries' index (once: 0.2 s at 19,641 servers).
    A store this process cannot write now (read-only, another process writing, a full disk)
    is read without it: the index only makes reading faster, and a later open adds it."""
    if connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (_SUMMARIES_INDEX,)
    ).fetchone():
        return
    connection.execute("PRAGMA busy_timeout = 0")
    try:
        connection.execute(_SUMMARIES_INDEX_SQL)
    except sqlite3.OperationalError:
        pass
    finally:
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")


_by_rowid = itemgetter(0)


class StoreUnreadableError(Exception):
    """The database file is not a metadata store (corrupt, or another program's)."""


class StoreLockedError(Exception):
    """Another process held the database longer than :data:`BUSY_TIMEOUT_S`."""


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """What a reader needs of a server without parsing its entry."""

    name: str
    summary: str
    """JSON object with the entry's ``configHash``, ``cachedAt``, ``ttlMs`` and
    ``clientCapabilities`` as written, its ``named`` counts, whether ``changes`` await review
    and the ``entryDigest`` of the entry's text (see :func:`summary_of`; ``null`` for an entry
    that is not an object)."""
    tools: int
    gen: int


def _translate(exc: sqlite3.Error) -> Exception:
    text = str(exc)
    if "locked" in text or "busy" in text:
        return StoreLockedError(text)
    # SQLite's NOTADB and CORRUPT codes arrive as DatabaseError itself (its subclasses are
    # other trouble: a closed connection is no reason to set a database aside).
    if type(exc) is sqlite3.DatabaseError or "malformed" in text or "not a database" in text:
        return StoreUnreadableError(text)
    # Anything else (a file SQLite cannot open or create, a full disk) is the file system's.
    return OSError(text)


class Transaction:
    """One write transaction (``BEGIN IMMEDIATE``): reads see the latest commit."""

    def __init__(self, connection: sqlite3.Connection, gen: int) -> None:
        self._connection = connection
        self.gen = gen
        """The generation this transaction's rows get."""
        self.rows_written = 0
        self.removed = 0

    def entry_text(self, name: str) -> str | None:
        row = self._connection.execute(
            "SELECT entry FROM servers WHERE name = ?", (name,)
        ).fetchone()
        return None if row is None else str(row[0])

    def put(
        self,
        name: str,
        key: str,
        entry: str,
        summary: str,
        tools: int,
        listing: tuple[str, str] | None = None,
    ) -> None:
        """Store ``name``'s entry; ``listing`` is its ``(listing, digest)`` (see
        :meth:`CatalogStore.listings`), ``None`` for an entry that has none."""
        self._connection.execute(
            "INSERT INTO servers(name, key, entry, summary, tools, gen) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT(name) DO UPDATE SET key = excluded.key, entry = excluded.entry,"
            " summary = excluded.summary, tools = excluded.tools, gen = excluded.gen",
            (name, key, entry, summary, tools, self.gen),
        )
        if listing is None:
            self._connection.execute("DELETE FROM listings WHERE name = ?", (name,))
        else:
            self._connection.execute(
                "INSERT INTO listings(name, gen, listing, digest) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(name) DO UPDATE SET gen = excluded.gen,"
                " listing = excluded.listing, digest = excluded.digest",
                (name, self.gen, *listing),
            )
        self.rows_written += 1

    def delete(self, name: str) -> None:
        cursor = self._connection.execute("DELETE FROM servers WHERE name = ?", (name,))
        self._connection.execute("DELETE FROM listings WHERE name = ?", (name,))
        self.removed += cursor.rowcount

    def set_meta(self, key: str, value: str) -> None:
        self._connection.execute(
            "INSERT INTO meta(key, value) VALUES (?, ?)"
            " ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


class CatalogStore:
    """The database at ``path`` (``None``: a private in-memory one, when the file cannot be
    used), opened per thread. Every method may raise :class:`StoreUnreadableError`,
    :class:`StoreLockedError` or :class:`OSError`."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._local = threading.local()
        self._inherited: list[threading.local] = []
        self._memory: sqlite3.Connection | None = None
        self._memory_lock = threading.RLock()
        if path is None:
            # One connection for every thread: a memory database exists once per connection.
            self._memory = sqlite3.connect(":memory:", check_same_thread=False)
            self._memory.isolation_level = None
            self._memory.executescript(_SCHEMA + _LISTINGS_SCHEMA)
            self._memory.execute(_SUMMARIES_INDEX_SQL)

    @property
    def in_memory(self) -> bool:
        return self.path is None

    def reset_after_fork(self) -> None:
        # A connection must not cross a fork: the child opens its own on first use. The
        # parent's are kept referenced, never closed here: closing one in the child could
        # checkpoint or unlock on the parent's behalf.
        self._inherited.append(self._local)
        self._local = threading.local()
        self._memory_lock = threading.RLock()

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._memory is not None:
            with self._memory_lock:
                yield self._memory
            return
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._open()
            self._local.connection = connection
        yield connection

    def _open(self) -> sqlite3.Connection:
        # Two processes opening a new store at once: switching it to WAL needs it to
        # themselves, and SQLite answers "locked" at once rather than through the busy
        # timeout. The setup is tried again until the timeout has passed.
        deadline = time.monotonic() + BUSY_TIMEOUT_S
        delay_s = 0.01
        while True:
            try:
                return self._open_once()
            except StoreLockedError:
                if time.monotonic() + delay_s > deadline:
                    raise
                time.sleep(delay_s)
                delay_s = min(delay_s * 2, 0.2)

    def _open_once(self) -> sqlite3.Connection:
        assert self.path is not None
        try:
            connection = sqlite3.connect(
                self.path, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise OSError(f"cannot open {self.path}: {exc}") from exc
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA_VERSION):
                raise StoreUnreadableError(f"schema version {version}, expected {SCHEMA_VERSION}")
            if version == 0:
                connection.executescript(_SCHEMA + _LISTINGS_SCHEMA)
                connection.execute(_SUMMARIES_INDEX_SQL)
                connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            else:
                if not connection.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'listings'"
                ).fetchone():
                    connection.execute(_LISTINGS_SCHEMA)  # a store written before listings
                _add_summaries_index(connection)
        except sqlite3.Error as exc:
            connection.close()
            raise _translate(exc) from exc
        except StoreUnreadableError:
            connection.close()
            raise
        return connection

    def close(self) -> None:
        connection = getattr(self._local, "connection", None)
        if connection is not None:
            connection.close()
            self._local.connection = None

    # ------------------------------------------------------------------ reading

    def summaries(self, *, since_gen: int = -1) -> tuple[int, int, list[SummaryRow]]:
        """``(gen, removals, rows)``: the rows changed after ``since_gen`` (all by default),
        in the order servers were first stored, with the generation they were read at."""
        if since_gen < 0:
            # From the summaries' index (see _SUMMARIES_INDEX_SQL), which SQLite reads only
            # without an ORDER BY; sorted here.
            gen, removals, indexed = self._read_counted(
                "SELECT rowid, name, summary, tools, gen FROM servers"
            )
            rows = [row[1:] for row in sorted(indexed, key=_by_rowid)]
        else:
            # Through the generation index, sorted here: with ORDER BY rowid SQLite scanned
            # the whole table (35 ms at 19,641 servers) for the handful of rows a write's
            # catch-up reads, while the writer held the cache's state lock that every call
            # takes to record a result shape.
            gen, removals, indexed = self._read_counted(
                "SELECT rowid, name, summary, tools, gen FROM servers WHERE gen > ? ORDER BY gen",
                (since_gen,),
            )
            rows = [row[1:] for row in sorted(indexed, key=_by_rowid)]
        return gen, removals, [SummaryRow(str(n), str(s), int(t), int(g)) for n, s, t, g in rows]

    def entry_text(self, name: str) -> str | None:
        with self._connection() as connection:
            try:
                row = connection.execute(
                    "SELECT entry FROM servers WHERE name = ?", (name,)
                ).fetchone()
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
        return None if row is None else str(row[0])

    def entries(self) -> list[tuple[str, str]]:
        """Every server's ``(name, entry)``, in the order first stored."""
        _gen, _removals, rows = self._read_counted("SELECT name, entry FROM servers ORDER BY rowid")
        return [(str(name), str(entry)) for name, entry in rows]

    def entry_texts(self, names: Sequence[str]) -> dict[str, str]:
        """The entries of ``names`` that exist, read a batch of names per query (opening a
        catalog reads thousands: one query each cost more than parsing them)."""
        rows = self._rows_named("SELECT name, entry FROM servers WHERE name IN ({})", names)
        return {str(n): str(e) for n, e in rows}

    def listings(self, names: Sequence[str]) -> dict[str, tuple[str, str]]:
        """``name -> (listing, digest)`` for those of ``names`` whose listing was written with
        their current entry. A listing is the entry's tools (without their input and output
        schemas), resources, prompts and instructions, a third of the entry's size at most;
        the digest is a hash of the entry's tools, schemas included. Names without one (an
        entry written by a program that keeps no listing) are left out: read their entries."""
        query = (
            "SELECT l.name, l.listing, l.digest FROM listings l"
            " JOIN servers s ON s.name = l.name AND s.gen = l.gen"
        )
        with self._connection() as connection:
            try:
                (stored,) = connection.execute("SELECT count(*) FROM listings").fetchone()
                # Most of the table (opening a catalog asks for every server): one pass over
                # it, the unwanted rows skipped here, takes half the time of the batches of
                # IN (...) at 19,641 servers.
                whole = len(names) * 2 >= int(stored)
                rows = connection.execute(query).fetchall() if whole else None
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
        if rows is None:
            rows = self._rows_named(query + " WHERE l.name IN ({})", names)
            return {str(n): (str(t), str(d)) for n, t, d in rows}
        wanted = set(names)
        return {str(n): (str(t), str(d)) for n, t, d in rows if n in wanted}

    def _rows_named(self, query: str, names: Sequence[str]) -> list[tuple[Any, ...]]:
        """``query``'s rows for ``names``, bound :data:`_NAMES_PER_QUERY` at a time into the
        ``IN ({})`` it ends with."""
        found: list[tuple[Any, ...]] = []
        with self._connection() as connection:
            try:
                for start in range(0, len(names), _NAMES_PER_QUERY):
                    batch = tuple(names[start : start + _NAMES_PER_QUERY])
                    marks = ",".join("?" * len(batch))
                    found += connection.execute(query.format(marks), batch).fetchall()
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
        return found

    @contextlib.contextmanager
    def export_rows(self) -> Iterator[tuple[int, Iterator[list[tuple[str, str]]]]]:
        """``(gen, batches)``: every server's ``(key, entry)`` in the order first stored, read
        in one transaction and handed over :data:`EXPORT_ROWS_PER_BATCH` rows at a time
        rather than fetched whole: at tens of megabytes, materialising and joining every row
        at once held the interpreter lock long enough to stall the event loop."""
        with self._connection() as connection:
            try:
                connection.execute("BEGIN")
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
            try:
                gen, _removals = self._counters(connection)
                cursor = connection.execute("SELECT key, entry FROM servers ORDER BY rowid")

                def batches() -> Iterator[list[tuple[str, str]]]:
                    try:
                        while batch := cursor.fetchmany(EXPORT_ROWS_PER_BATCH):
                            yield batch
                    except sqlite3.Error as exc:
                        raise _translate(exc) from exc

                yield gen, batches()
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
            finally:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("COMMIT")

    def export_size(self) -> tuple[int, int]:
        """``(gen, bytes)``: the UTF-8 size of what :meth:`export_rows` would write, counted
        by SQLite without reading the rows into Python."""
        gen, _removals, rows = self._read_counted(
            "SELECT coalesce(sum(length(CAST(key AS BLOB))"
            " + length(CAST(entry AS BLOB)) + 2), 0) FROM servers"
        )
        return gen, int(rows[0][0])

    def _read_counted(
        self, query: str, parameters: tuple[Any, ...] = ()
    ) -> tuple[int, int, list[Any]]:
        """``(gen, removals, rows)``: the store's counters and ``query``'s rows, read in one
        transaction so the rows are those of that generation."""
        with self._connection() as connection:
            try:
                connection.execute("BEGIN")
                try:
                    gen, removals = self._counters(connection)
                    rows = connection.execute(query, parameters).fetchall()
                finally:
                    connection.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
        return gen, removals, rows

    def meta(self, key: str) -> str | None:
        with self._connection() as connection:
            try:
                row = connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
        return None if row is None else str(row[0])

    def count(self) -> int:
        with self._connection() as connection:
            try:
                return int(connection.execute("SELECT count(*) FROM servers").fetchone()[0])
            except sqlite3.Error as exc:
                raise _translate(exc) from exc

    def tool_counts(self, names: Sequence[str] | None = None) -> dict[str, int]:
        """Each server's number of tools, from the summary column (no entry is parsed)."""
        with self._connection() as connection:
            try:
                rows = connection.execute("SELECT name, tools FROM servers").fetchall()
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
        wanted = None if names is None else set(names)
        return {str(n): int(t) for n, t in rows if wanted is None or n in wanted}

    @staticmethod
    def _counters(connection: sqlite3.Connection) -> tuple[int, int]:
        found = dict(
            connection.execute(
                "SELECT key, value FROM meta WHERE key IN ('gen', 'removals')"
            ).fetchall()
        )
        return int(found.get("gen", 0)), int(found.get("removals", 0))

    # ------------------------------------------------------------------ writing

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """A write transaction, committed (durably) when the block ends without an error."""
        with self._connection() as connection:
            try:
                connection.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _translate(exc) from exc
            try:
                gen, removals = self._counters(connection)
                txn = Transaction(connection, gen + 1)
                yield txn
                if txn.rows_written or txn.removed:
                    txn.set_meta("gen", str(txn.gen))
                if txn.removed:
                    txn.set_meta("removals", str(removals + 1))
                connection.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise _translate(exc) from exc
                raise


def summary_of(raw: Any, text: str | None = None) -> tuple[str, int]:
    """The summary column's text and the tool count of an entry (see :class:`SummaryRow`);
    with ``text``, the entry column's text, the summary keeps its digest (``entryDigest``):
    what a replica compares with the team's shared copy of the entry without reading it."""
    if not isinstance(raw, dict):
        return "null", 0
    summary: dict[str, Any] = {
        k: raw[k] for k in ("configHash", "cachedAt", "ttlMs", "clientCapabilities") if k in raw
    }
    tools = raw.get("tools")
    # What ``status`` shows without parsing the entry: the tools and resources the catalog
    # would name (see ``named_counts``) and whether definition changes await review.
    summary["named"] = named_counts(raw)
    summary["changes"] = bool(raw.get("definitionChanges"))
    if text is not None:
        summary["entryDigest"] = text_digest(text)
    return json.dumps(summary, ensure_ascii=False), len(tools) if isinstance(tools, list) else 0
