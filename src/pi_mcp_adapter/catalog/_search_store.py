"""The lexical search index kept on disk, so that a process opens a large catalog's index
without building it, and reads only the parts its queries ask for.

Building the inverted index of 100,000 tools takes tens of seconds of tokenising and holds
hundreds of megabytes; a query reads a few dozen of its entries. So after a full build the
index is written to ``<agent dir>/mcp-search-index.sqlite`` (SQLite, which Python ships), one
row per entry (a term's postings, a phrase's tools, a name's tools), and a later process with
the same catalog opens that file and reads each entry the first time a query needs it.

The file is keyed by a hash of everything the index reads of every tool (names, server,
description, search keywords, input schema) and of the index's format and parameters: a file
for any other catalog is never used, and is replaced by the next full build. A missing,
damaged or foreign file is built again silently. The file is replaced whole (a temporary file
in the same folder, renamed in one step), so several processes may share it: a reader keeps
the file it opened until it closes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import marshal
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import TypeVar

from ._metadata import ToolInfo

__all__ = [
    "INDEX_STORE_NAME",
    "LazyTable",
    "StoredIndex",
    "catalog_key",
    "search_index_store_path",
    "write_index",
]

logger = logging.getLogger(__name__)

INDEX_STORE_NAME = "mcp-search-index.sqlite"
_FORMAT = "1"
# A temporary file older than this was left by a process that died while writing.
_STALE_TEMPORARY_S = 600.0

K = TypeVar("K")
V = TypeVar("V")


def search_index_store_path(agent_dir: Path) -> Path:
    """Where the stored lexical index of ``agent_dir``'s catalog lives."""
    return agent_dir / INDEX_STORE_NAME


def catalog_key(tools: Sequence[ToolInfo], parameters: str) -> str | None:
    """A hash of what the index reads of ``tools`` (in order) and of ``parameters`` (the
    index's format and settings); None when a tool holds a value that cannot be hashed this
    way (a schema that is not plain JSON data), and then nothing is stored.

    ``marshal`` writes the fields in one C call (a tenth of a second for 100,000 tools):
    a key that costs as much as the build would save nothing.
    """
    digest = hashlib.blake2b(digest_size=20)
    digest.update(f"{_FORMAT}\0{parameters}\0".encode())
    try:
        digest.update(
            marshal.dumps(
                [
                    (
                        t.name,
                        t.original_name,
                        t.server,
                        t.description,
                        t.keywords,
                        t.resource_uri,
                        t.input_schema,
                    )
                    for t in tools
                ],
                # Version 2: later versions write shared and interned strings as such, so
                # the same tools could give different bytes.
                2,
            )
        )
    except ValueError:
        return None
    return digest.hexdigest()


class StoredIndex:
    """An index file opened for reading: entries by table and key, and named blobs.

    Thread-safe (one connection, used under a lock): queries run on the event loop while a
    worker thread may prepare a relisting.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, path: Path, key: str) -> StoredIndex | None:
        """The index stored at ``path`` for ``key``; None when there is none, it is for
        another catalog, or it cannot be read."""
        if not path.exists():
            return None
        try:
            connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            logger.info("ignoring the stored search index %s: %s", path, exc)
            return None
        stored = cls(connection)
        try:
            if stored.blob("key") != key.encode():
                connection.close()
                return None
        except (sqlite3.Error, KeyError) as exc:
            logger.info("ignoring the stored search index %s: %s", path, exc)
            connection.close()
            return None
        return stored

    def blob(self, name: str) -> bytes:
        """A named blob written with the index.

        Raises:
            KeyError: there is no such blob.
            sqlite3.Error: the file cannot be read.
        """
        with self._lock:
            row = self._connection.execute("SELECT value FROM blobs WHERE name = ?", (name,))
            found = row.fetchone()
        if found is None:
            raise KeyError(name)
        return bytes(found[0])

    def entry(self, table: int, key: str) -> bytes | None:
        """The entry ``key`` of ``table``; None when there is none or the file went bad (a
        query then sees no entry rather than an error)."""
        try:
            with self._lock:
                row = self._connection.execute(
                    "SELECT value FROM entries WHERE tab = ? AND key = ?", (table, key)
                ).fetchone()
        except sqlite3.Error as exc:
            logger.warning("cannot read the stored search index: %s", exc)
            return None
        return None if row is None else bytes(row[0])

    def close(self) -> None:
        with self._lock:
            self._connection.close()


def write_index(
    path: Path,
    key: str,
    tables: Iterable[tuple[int, Iterable[tuple[str, bytes]]]],
    blobs: Iterable[tuple[str, bytes]],
) -> bool:
    """Write an index file for ``key`` whole and put it in place in one step. Returns
    whether it was written (a failure is logged, and costs only a build next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(path)
        fd, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
    except OSError as exc:
        logger.info("cannot write the stored search index %s: %s", path, exc)
        return False
    try:
        connection = sqlite3.connect(temp_name)
        try:
            # A file written once and then only read: no journal needed while writing it
            # (a crash leaves a temporary file that is never opened).
            connection.execute("PRAGMA journal_mode = OFF")
            connection.execute("PRAGMA synchronous = OFF")
            connection.execute(
                "CREATE TABLE entries (tab INTEGER, key TEXT, value BLOB, "
                "PRIMARY KEY (tab, key)) WITHOUT ROWID"
            )
            connection.execute("CREATE TABLE blobs (name TEXT PRIMARY KEY, value BLOB)")
            for table, rows in tables:
                connection.executemany(
                    "INSERT INTO entries VALUES (?, ?, ?)", ((table, k, v) for k, v in rows)
                )
            connection.executemany("INSERT INTO blobs VALUES (?, ?)", blobs)
            # The key last: a file without it is never used.
            connection.execute("INSERT INTO blobs VALUES ('key', ?)", (key.encode(),))
            connection.commit()
        finally:
            connection.close()
        with open(temp_name, "rb+") as written:
            os.fsync(written.fileno())
        os.replace(temp_name, path)
    except (OSError, sqlite3.Error) as exc:
        logger.info("cannot write the stored search index %s: %s", path, exc)
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
        return False
    return True


def _remove_stale_temporaries(path: Path) -> None:
    now = time.time()
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > _STALE_TEMPORARY_S:
                leftover.unlink()


_UNREAD = object()
_MISSING = object()
"""A key known not to be there (never stored, or deleted)."""


class LazyTable(MutableMapping[K, V]):
    """A mapping read from a stored index one key at a time, and changed in memory.

    ``read`` gives a key's stored value (None: not stored). Values read or set are kept;
    deleting a key hides its stored value. Iteration and length cover only what this
    process has read or set: the index never walks a whole table after a build.
    """

    __slots__ = ("_known", "_read")

    def __init__(self, read: Callable[[K], V | None]) -> None:
        self._read = read
        self._known: dict[K, object] = {}

    def _value(self, key: K) -> object:
        value = self._known.get(key, _UNREAD)
        if value is _UNREAD:
            stored = self._read(key)
            value = self._known[key] = _MISSING if stored is None else stored
        return value

    def __getitem__(self, key: K) -> V:
        value = self._value(key)
        if value is _MISSING:
            raise KeyError(key)
        return value  # type: ignore[return-value]

    def get(self, key: K, default: V | None = None) -> V | None:  # type: ignore[override]
        value = self._value(key)
        return default if value is _MISSING else value  # type: ignore[return-value]

    def __contains__(self, key: object) -> bool:
        return self._value(key) is not _MISSING  # type: ignore[arg-type]

    def __setitem__(self, key: K, value: V) -> None:
        self._known[key] = value

    def __delitem__(self, key: K) -> None:
        if self._value(key) is _MISSING:
            raise KeyError(key)
        self._known[key] = _MISSING

    def __iter__(self) -> Iterator[K]:
        return (k for k, v in self._known.items() if v is not _MISSING)

    def __len__(self) -> int:
        return sum(1 for v in self._known.values() if v is not _MISSING)
