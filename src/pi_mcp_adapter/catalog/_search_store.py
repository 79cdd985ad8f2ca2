"""The lexical search index kept on disk, so that a process opens a large catalog's index
without building it, reads only the parts its queries ask for, and patches in the servers
whose tools changed since it was written.

Building the inverted index of 100,000 tools takes tens of seconds of tokenising and holds
hundreds of megabytes; a query reads a few dozen of its entries. So the index is kept in
``<agent dir>/mcp-search-index.sqlite`` (SQLite, which Python ships):

- ``entries``: one row per entry of the index (a term's postings, a phrase's tools, a name's
  tools), read the first time a query needs it;
- ``servers``: one row per server, with the fingerprint of what the index read of its tools
  (names, description, search keywords, input schema, in order), its document ids, and those
  tools' indexed fields, so that its documents can be taken out again;
- ``blobs``: the index's format and parameters (``key``) and its totals (``meta``: average
  field lengths, the next free document id, a generation counted up by every write).

A process opening the file compares each server's fingerprint with its catalog's: a server
that changed, appeared or disappeared is patched in (its old documents out, its new ones in,
exactly as a relisting updates the index in memory), and the rows that patch changed are
written back in one transaction, so the next process opens the file as it is. A file of
another format, other parameters or that cannot be read is written again whole, silently.

Several processes share the file. It is in WAL mode: each reader keeps one read transaction
open for as long as it uses the file, so the entries it reads later are those of the snapshot
it opened, whatever other processes commit meanwhile; a writer changes the file only inside
one transaction, so a reader never sees half a patch and a writer killed mid-write leaves the
file as it was before that transaction. What this costs: while a reader stays open, the WAL
cannot be folded back into the file and grows by what the patches write.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import marshal
import os
import sqlite3
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ._metadata import StoredToolInfo, ToolInfo, schema_digest

__all__ = [
    "INDEX_STORE_NAME",
    "LazyTable",
    "ServerRow",
    "StoreActivity",
    "StoredIndex",
    "StoredLayout",
    "StoredServer",
    "search_index_store_path",
    "server_fingerprint",
]

logger = logging.getLogger(__name__)

INDEX_STORE_NAME = "mcp-search-index.sqlite"
_FORMAT = "2"
# How long a process waits for another one's write before it patches its own index in
# memory only: a patch writes one server's rows in milliseconds, a first full write of
# 100,000 tools a few seconds.
_BUSY_TIMEOUT_S = 10.0
_WAL_KEPT_BYTES = 8 << 20

K = TypeVar("K")
V = TypeVar("V")


def search_index_store_path(agent_dir: Path) -> Path:
    """Where the stored lexical index of ``agent_dir``'s catalog lives."""
    return agent_dir / INDEX_STORE_NAME


def _indexed_fields(tool: ToolInfo) -> tuple[Any, ...]:
    """What the index reads of a tool (and all it needs to take the tool out again)."""
    return (
        tool.name,
        tool.original_name,
        tool.description,
        tool.keywords,
        tool.resource_uri,
        tool.input_schema,
    )


def server_fingerprint(tools: Sequence[ToolInfo]) -> str | None:
    """A hash of what the index reads of one server's ``tools`` (in order); None when a tool
    holds a value that cannot be hashed this way (a schema that is not plain JSON data), and
    then nothing is stored.

    ``marshal`` writes the fields in one C call, each input schema by its
    :func:`~._metadata.schema_digest` (a cached listing's tools carry theirs, so opening a
    catalog from the store reads no schema): a fingerprint that costs as much as the build
    would save nothing.
    """
    try:
        # Version 2: later versions write shared and interned strings as such, so the same
        # tools could give different bytes. The fields are those of _indexed_fields, written
        # out: a call per tool is a tenth of the cost of opening a stored index.
        data = marshal.dumps(
            [
                (
                    t.name,
                    t.original_name,
                    t.description,
                    t.keywords,
                    t.resource_uri,
                    # The schema by its digest, which a cached listing's tool carries
                    # (reading the schema would parse every entry opening a catalog skips).
                    t.schema_digest
                    if type(t) is StoredToolInfo and t.schema_digest is not None
                    else schema_digest(t.input_schema),
                )
                for t in tools
            ],
            2,
        )
    except ValueError:
        return None
    return hashlib.blake2b(data, digest_size=20).hexdigest()


def _encode_tools(tools: Sequence[ToolInfo]) -> bytes:
    fields = [list(_indexed_fields(t)) for t in tools]
    return zlib.compress(json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode())


def _decode_tools(server: str, data: bytes) -> list[ToolInfo]:
    """The tools a server row holds. JSON only: nothing in the file is read back with a
    decoder that could build objects of its choosing.

    Raises:
        ValueError: the row is damaged.
    """
    try:
        fields = json.loads(zlib.decompress(data))
        return [
            ToolInfo(
                name=str(name),
                original_name=str(original),
                server=server,
                description=str(description),
                keywords=tuple(str(k) for k in keywords),
                resource_uri=None if uri is None else str(uri),
                input_schema=schema if isinstance(schema, dict) else {"type": "object"},
            )
            for name, original, description, keywords, uri, schema in fields
        ]
    except (zlib.error, TypeError, UnicodeDecodeError) as exc:
        raise ValueError(f"a damaged server row: {exc}") from exc


@dataclass(frozen=True, slots=True)
class StoredServer:
    """One server as the stored index has it."""

    fingerprint: str
    docs: Sequence[int]
    words: Sequence[str]
    name_terms: Sequence[tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class StoredLayout:
    """What a process reads of the stored index when it opens it: everything but the entries
    and the servers' tools. ``servers`` is in the index's own order."""

    generation: int
    meta: Mapping[str, Any]
    servers: Mapping[str, StoredServer]


@dataclass(frozen=True, slots=True)
class ServerRow:
    """One server's row, as written."""

    server: str
    fingerprint: str
    docs: Sequence[int]
    words: Sequence[str]
    name_terms: Sequence[Sequence[str]]
    tools: Sequence[ToolInfo]


@dataclass(slots=True)
class StoreActivity:
    """What opening an index did with the stored file: for tests and diagnostics."""

    full_build: bool = False
    """The index was built from every tool (no usable file, or it drifted too far)."""
    patched_servers: tuple[str, ...] = ()
    """Servers whose documents were taken out and added again on open (re-tokenised)."""
    rows_written: int = 0
    """Rows (entries, servers, blobs) written to the file, deletions included."""


class StoredIndex:
    """The index file, opened: one connection, used under a lock (queries run on the event
    loop while a worker thread may prepare a relisting), in a read transaction from
    :meth:`read_layout` on, or in a write transaction from :meth:`begin_write` to a write."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._connection = connection
        self._lock = threading.RLock()
        self.rows_written = 0
        # Closed when this object is freed (the ranking reading it was replaced) as well as by
        # close(): an unclosed sqlite3 connection is part of a reference cycle (its statement
        # cache), so it would stay open, with its read snapshot keeping the WAL from being
        # folded back, until a collection that a frozen index never gets.
        self._close_connection = weakref.finalize(self, connection.close)

    @classmethod
    def open(cls, path: Path) -> StoredIndex | None:
        """The file at ``path``, created empty when missing; a file SQLite cannot read is
        replaced by an empty one. None when the folder cannot hold it."""
        for attempt in range(2):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                # Owner-only, like the metadata it indexes; SQLite gives its -wal and -shm
                # files the database's mode.
                os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))
                connection = sqlite3.connect(
                    path, timeout=_BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
                )
            except (OSError, sqlite3.Error) as exc:
                logger.info("cannot open the stored search index %s: %s", path, exc)
                return None
            try:
                connection.execute("PRAGMA journal_mode = WAL")
                # WAL commits are atomic at NORMAL: a crash may lose the last patch, never
                # mix it with the one before.
                connection.execute("PRAGMA synchronous = NORMAL")
                # A full write passes the whole index through the WAL; once folded back
                # into the file, the WAL is cut back to this size rather than kept as large.
                connection.execute(f"PRAGMA journal_size_limit = {_WAL_KEPT_BYTES}")
                connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
                return cls(path, connection)
            except sqlite3.Error as exc:
                connection.close()
                # Locked (another process converting or writing it) is not damaged: never
                # delete a file someone is using.
                if attempt or isinstance(exc, sqlite3.OperationalError):
                    logger.info("cannot open the stored search index %s: %s", path, exc)
                    return None
                logger.info("replacing the unreadable stored search index %s: %s", path, exc)
                _remove_database(path)
        return None

    # -- transactions -----------------------------------------------------------------------

    def _end(self) -> None:
        if self._connection.in_transaction:
            self._connection.execute("ROLLBACK")

    def begin_read(self) -> None:
        """Start the read transaction every later read is made in (its snapshot is taken by
        the first read)."""
        with self._lock:
            self._end()
            self._connection.execute("BEGIN")

    def begin_write(self) -> bool:
        """Take the file's write lock (waiting for another writer a bounded time); False
        when it stays taken or the file cannot be written."""
        with self._lock:
            try:
                self._end()
                self._connection.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                logger.info("cannot write the stored search index %s: %s", self.path, exc)
                return False
        return True

    def rollback(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._end()

    # -- reading ------------------------------------------------------------------------------

    def read_layout(self, parameters: str) -> StoredLayout | None:
        """The index's layout, read in the current transaction (a read transaction is begun
        when none is open); None when the file holds no index of this format and
        ``parameters``, or cannot be read."""
        try:
            with self._lock:
                if not self._connection.in_transaction:
                    self._connection.execute("BEGIN")
                execute = self._connection.execute
                blobs = dict(execute("SELECT name, value FROM blobs").fetchall())
                if bytes(blobs.get("key", b"")) != _parameters_key(parameters):
                    return None
                meta = json.loads(bytes(blobs["meta"]))
                rows = execute(
                    "SELECT server, fingerprint, docs, words, names FROM servers ORDER BY position"
                ).fetchall()
            servers: dict[str, StoredServer] = {}
            for server, fingerprint, docs, words, names in rows:
                ids = _id_array(bytes(docs))
                name_terms = [tuple(n) for n in json.loads(names)]
                if len(name_terms) != len(ids):
                    raise ValueError(f"server {server!r}: {len(ids)} documents, other names")
                servers[str(server)] = StoredServer(
                    fingerprint=str(fingerprint),
                    docs=ids,
                    words=list(json.loads(words)),
                    name_terms=name_terms,
                )
            return StoredLayout(int(meta["generation"]), meta, servers)
        except (sqlite3.Error, KeyError, ValueError, TypeError) as exc:
            logger.info("ignoring the stored search index %s: %s", self.path, exc)
            return None

    def generation(self) -> int | None:
        """The generation of the index in the current transaction (a read transaction is
        begun when none is open); None when it cannot be read."""
        try:
            with self._lock:
                if not self._connection.in_transaction:
                    self._connection.execute("BEGIN")
                row = self._connection.execute(
                    "SELECT value FROM blobs WHERE name = 'meta'"
                ).fetchone()
            return None if row is None else int(json.loads(bytes(row[0]))["generation"])
        except (sqlite3.Error, KeyError, ValueError, TypeError):
            return None

    def server_tools(self, server: str) -> list[ToolInfo] | None:
        """The tools the index holds of ``server``; None when the row is missing or damaged."""
        try:
            with self._lock:
                row = self._connection.execute(
                    "SELECT tools FROM servers WHERE server = ?", (server,)
                ).fetchone()
            return None if row is None else _decode_tools(server, bytes(row[0]))
        except (sqlite3.Error, ValueError) as exc:
            logger.info("cannot read server %r of the stored search index: %s", server, exc)
            return None

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

    # -- writing (inside begin_write) --------------------------------------------------------

    def write_all(
        self,
        parameters: str,
        tables: Iterable[tuple[int, Iterable[tuple[str, bytes]]]],
        servers: Iterable[ServerRow],
        meta: Mapping[str, Any],
    ) -> bool:
        """Replace the whole index and commit. Returns whether it was written (a failure is
        logged, and costs only a build next time)."""

        def write(execute: Callable[..., sqlite3.Cursor]) -> int:
            for table in ("entries", "servers", "blobs"):
                execute(f"DROP TABLE IF EXISTS {table}")
            execute(
                "CREATE TABLE entries (tab INTEGER, key TEXT, value BLOB, "
                "PRIMARY KEY (tab, key)) WITHOUT ROWID"
            )
            execute(
                "CREATE TABLE servers (server TEXT PRIMARY KEY, position INTEGER, "
                "fingerprint TEXT, docs BLOB, words TEXT, names TEXT, tools BLOB)"
            )
            execute("CREATE TABLE blobs (name TEXT PRIMARY KEY, value BLOB)")
            written = 0
            for number, rows in tables:
                cursor = self._connection.executemany(
                    "INSERT INTO entries VALUES (?, ?, ?)", ((number, k, v) for k, v in rows)
                )
                written += cursor.rowcount
            written += self._write_servers(servers, first_position=0)
            execute(
                "INSERT INTO blobs VALUES ('key', ?), ('meta', ?)",
                (_parameters_key(parameters), _meta_blob(meta, generation=0)),
            )
            return written + 2

        return self._commit(write)

    def write_patch(
        self,
        entries: Iterable[tuple[int, str, bytes | None]],
        servers: Sequence[ServerRow],
        removed: Iterable[str],
        meta: Mapping[str, Any],
        generation: int,
    ) -> bool:
        """Write the rows a patch changed (``None``: the entry is gone), ``servers``' rows
        after every other server, drop the ``removed`` servers' rows, and commit."""

        def write(execute: Callable[..., sqlite3.Cursor]) -> int:
            written = 0
            for table, key, value in entries:
                if value is None:
                    execute("DELETE FROM entries WHERE tab = ? AND key = ?", (table, key))
                else:
                    execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", (table, key, value))
                written += 1
            for server in removed:
                execute("DELETE FROM servers WHERE server = ?", (server,))
                written += 1
            (last,) = execute("SELECT coalesce(max(position), -1) FROM servers").fetchone()
            written += self._write_servers(servers, first_position=int(last) + 1)
            execute(
                "UPDATE blobs SET value = ? WHERE name = 'meta'",
                (_meta_blob(meta, generation=generation),),
            )
            return written + 1

        return self._commit(write)

    def _write_servers(self, servers: Iterable[ServerRow], *, first_position: int) -> int:
        cursor = self._connection.executemany(
            "INSERT OR REPLACE INTO servers VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    row.server,
                    first_position + n,
                    row.fingerprint,
                    _id_bytes(row.docs),
                    json.dumps(list(row.words), ensure_ascii=False),
                    json.dumps([list(t) for t in row.name_terms], ensure_ascii=False),
                    _encode_tools(row.tools),
                )
                for n, row in enumerate(servers)
            ),
        )
        return max(0, cursor.rowcount)

    def _commit(self, write: Callable[[Callable[..., sqlite3.Cursor]], int]) -> bool:
        with self._lock:
            try:
                if not self._connection.in_transaction:
                    self._connection.execute("BEGIN IMMEDIATE")
                written = write(self._connection.execute)
                self._connection.execute("COMMIT")
            except (sqlite3.Error, OSError, TypeError, ValueError) as exc:
                # TypeError, ValueError: a schema JSON cannot write.
                logger.info("cannot write the stored search index %s: %s", self.path, exc)
                with contextlib.suppress(sqlite3.Error):
                    self._end()
                return False
        self.rows_written += written
        return True

    def close(self) -> None:
        with self._lock:
            self._close_connection()


def _parameters_key(parameters: str) -> bytes:
    return f"{_FORMAT}\0{parameters}".encode()


def _meta_blob(meta: Mapping[str, Any], *, generation: int) -> bytes:
    return json.dumps({**meta, "generation": generation}, separators=(",", ":")).encode()


def _id_bytes(ids: Sequence[int]) -> bytes:
    from array import array

    return array("i", ids).tobytes()


def _id_array(data: bytes) -> list[int]:
    from array import array

    ids = array("i")
    ids.frombytes(data)
    return ids.tolist()


def _remove_database(path: Path) -> None:
    for name in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(OSError):
            name.unlink()


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
