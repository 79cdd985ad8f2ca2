"""The lexical search index kept on disk, so that a process opens a large catalog's index
without building it, reads only the parts its queries ask for, and patches in the servers
whose tools changed since it was written.

Building the inverted index of 100,000 tools takes tens of seconds of tokenising and holds
hundreds of megabytes; a query reads a few dozen of its entries. So the index is kept in
``<agent dir>/mcp-search-index.sqlite`` (SQLite, which Python ships):

- ``entries``: one row per entry of the index (a term's postings, a phrase's tools, a name's
  tools), read the first time a query needs it;
- ``layout``: one row per server, in the index's own order (``position``): its document ids
  (``first`` and ``count`` when they follow each other, as they always do in an index this
  code wrote, else the ids themselves in ``docs``), its tools' name terms, and the fingerprint
  of what the index read of its tools (names, description, search keywords, input schema, in
  order). Opening the index reads every row's names, ids and name terms in one aggregate
  query, each column joined by SQLite (a few C calls for 20,000 servers, not two JSON
  documents per server);
- ``tools``: the indexed fields of each server's tools, so that its documents can be taken
  out again (read only by a patch);
- ``blobs``: the index's format and parameters (``key``) and its totals (``meta``: average
  field lengths, the next free document id, a generation counted up by every write, and the
  fingerprint of the whole catalog it indexes).

A process opening the file first compares the fingerprint of its whole catalog with the one
stored: equal, the index is taken as it is, with no fingerprint per server worked out nor
read. Otherwise it compares each server's fingerprint with its catalog's: a server
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
import operator
import os
import sqlite3
import tempfile
import threading
import weakref
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from pathlib import Path
from typing import IO, Any, TypeVar

from ._metadata import StoredToolInfo, ToolInfo, schema_digest

__all__ = [
    "INDEX_STORE_NAME",
    "KeptCatalog",
    "LazyTable",
    "ServerRow",
    "StoreActivity",
    "StoredIndex",
    "StoredLayout",
    "catalog_fingerprint",
    "pack_names",
    "search_index_store_path",
    "server_fingerprint",
    "texts_fingerprint",
    "unpack_names",
]

logger = logging.getLogger(__name__)

INDEX_STORE_NAME = "mcp-search-index.sqlite"
_FORMAT = "3"
# How long a process waits for another one's write before it patches its own index in
# memory only: a patch writes one server's rows in milliseconds, a first full write of
# 100,000 tools a few seconds.
_BUSY_TIMEOUT_S = 10.0
_WAL_KEPT_BYTES = 8 << 20
# Tools fingerprinted per C call: one call over 95,000 tools spends half again as long
# growing its output as writing it.
_DIGEST_SLICE = 4096
# A tool's name terms are stored joined by _NAME_SEPARATOR, a server's tools by
# _TOOL_SEPARATOR: search terms are runs of letters and digits (_search_text.split_words),
# which hold neither control character.
_NAME_SEPARATOR = "\x1f"
_TOOL_SEPARATOR = "\x1e"
# Every server's names, first document ids, counts and name terms, each column joined by
# SQLite in one pass over the table (so in the same order for every column): what opening
# the index reads. ``label`` is the server's name as a JSON string.
_LAYOUT_QUERY = (
    "SELECT count(*), '[' || group_concat(label, ',') || ']', "
    "'[' || group_concat(first, ',') || ']', '[' || group_concat(count, ',') || ']', "
    "group_concat(names, char(30)), count(docs) FROM layout"
)

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


def texts_fingerprint(tools: Sequence[ToolInfo]) -> str:
    """A hash of what the semantic model reads of every tool (its original name,
    description and keywords: ``_search_semantic.embedding_text``), in order: the key of the
    vectors' file, and part of :func:`catalog_fingerprint`, so that opening both costs it
    once."""
    digest = hashlib.sha256()
    for start in range(0, len(tools), _DIGEST_SLICE):
        piece = tools[start : start + _DIGEST_SLICE]
        digest.update(_strings_bytes([t.original_name for t in piece]))
        # Descriptions are written one by one: joined, one character past ASCII in a slice
        # widens all of it, and encoding that back costs twice as long. Version 2: later
        # versions write shared and interned strings as references, so equal tools could
        # give different bytes.
        digest.update(
            marshal.dumps(([t.description for t in piece], [t.keywords for t in piece]), 2)
        )
    return digest.hexdigest()


def catalog_fingerprint(tools: Sequence[ToolInfo], texts: str) -> str | None:
    """A hash of everything the index reads of ``tools``, servers included, in order: two
    catalogs have the same one exactly when they list the same servers in the same order,
    each with the same :func:`server_fingerprint`. ``texts`` is :func:`texts_fingerprint` of
    the same tools. None as for :func:`server_fingerprint`.

    A column of a slice of tools at a time: at 95,000 tools this and
    :func:`texts_fingerprint` cost 0.07 s, the fingerprints of their 20,000 servers and the
    vectors' own hash 0.16 s, and an index opened for the catalog it was written for needs
    no other. SHA-256, which most processors made since 2017 compute in hardware, hashes the
    catalog's 20 MB in half the time of BLAKE2b.
    """
    digest = hashlib.sha256(texts.encode())
    try:
        for start in range(0, len(tools), _DIGEST_SLICE):
            piece = tools[start : start + _DIGEST_SLICE]
            digest.update(_strings_bytes([t.server for t in piece]))
            digest.update(_strings_bytes([t.name for t in piece]))
            schemas = [
                t.schema_digest
                if type(t) is StoredToolInfo and t.schema_digest is not None
                else schema_digest(t.input_schema)
                for t in piece
            ]
            # Version 2, as in server_fingerprint.
            digest.update(marshal.dumps(([t.resource_uri for t in piece], schemas), 2))
    except ValueError:
        return None
    return digest.hexdigest()


def _strings_bytes(strings: list[str]) -> bytes:
    """``strings`` as bytes that differ for any other list: their lengths (``marshal``
    delimits them), then the strings end to end. For names, which are short and almost
    always ASCII, half the cost of ``marshal`` writing them one by one (95,000 names: 4 ms
    against 7)."""
    return marshal.dumps(list(map(len, strings)), 2) + "".join(strings).encode(
        "utf-8", "surrogatepass"
    )


def pack_names(names: Sequence[str]) -> str:
    """One tool's name terms as the layout stores them (see :func:`unpack_names`).

    Raises:
        ValueError: a term holds a separator (search terms never do), so it would not
            unpack as it was.
    """
    packed = _NAME_SEPARATOR.join(names)
    if packed.count(_NAME_SEPARATOR) != max(0, len(names) - 1) or _TOOL_SEPARATOR in packed:
        raise ValueError(f"name terms holding a separator: {names!r}")
    return packed


def unpack_names(packed: str) -> tuple[str, ...]:
    """The name terms :func:`pack_names` joined: split when a query first reads a tool's
    names, not for every tool when the index is opened."""
    return tuple(packed.split(_NAME_SEPARATOR)) if packed else ()


def encode_tools(tools: Sequence[ToolInfo]) -> bytes:
    """A server row's tools, as written.

    Raises:
        TypeError, ValueError: a schema is not JSON data.
    """
    fields = [list(_indexed_fields(t)) for t in tools]
    return zlib.compress(json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode())


class EncodedTools:
    """Each server's :func:`encode_tools`, made while an index is built and taken back once,
    as its row is written: set aside in an unnamed temporary file in ``directory`` (the
    stored index's, so on the same disk), else held in memory. Held, they were 17 MB at
    the top of a 95,000-tool build's peak."""

    def __init__(self, directory: Path) -> None:
        self._spans: dict[str, tuple[int, int]] = {}
        self._held: dict[str, bytes] = {}
        self._file: IO[bytes] | None = None
        with contextlib.suppress(OSError):  # a folder not made yet, or not writable
            # Open until close(): the build writes it a server at a time, the store reads it.
            self._file = tempfile.TemporaryFile(dir=directory, prefix=".pi-mcp-index-")  # noqa: SIM115

    def put(self, server: str, encoded: bytes) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):  # a full disk: this server's are held
                offset = self._file.seek(0, os.SEEK_END)
                self._file.write(encoded)
                self._spans[server] = (offset, len(encoded))
                return
        self._held[server] = encoded

    def pop(self, server: str) -> bytes | None:
        """``server``'s encoded tools, forgotten here; None when it has none (or they cannot
        be read back: its row then encodes them again)."""
        span = self._spans.pop(server, None)
        if span is None:
            return self._held.pop(server, None)
        assert self._file is not None  # a span is kept only once written to it
        try:
            self._file.seek(span[0])
            data = self._file.read(span[1])
        except OSError:
            return None
        return data if len(data) == span[1] else None

    def close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
        self._spans.clear()
        self._held.clear()


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
class StoredLayout:
    """What a process reads of the stored index when it opens it: everything but the entries,
    the servers' fingerprints and their tools, placed by document id."""

    generation: int
    meta: Mapping[str, Any]
    server_docs: Mapping[str, Sequence[int]]
    """Each server's document ids, in the order of its tools (a ``range`` for ids that follow
    each other); servers in the order of their first ids."""
    server_of: list[str | None]
    """Each document id's server; None for the id of a removed document."""
    names: list[str]
    """Each document id's name terms, packed (see :func:`unpack_names`)."""

    @property
    def catalog(self) -> str | None:
        """The fingerprint of the catalog the index was written for (see
        :func:`catalog_fingerprint`); None in a file that has none."""
        found = self.meta.get("catalog")
        return found if isinstance(found, str) else None


@dataclass(frozen=True, slots=True)
class KeptCatalog:
    """A catalog known by what an earlier process stored of it, for a search that does not
    build it (``engine/_search_facts.py``): the fingerprint of the stored index written for
    it (:func:`catalog_fingerprint`) and the digest under which the vector file holds its
    tools' vectors (None for a ranking without vectors)."""

    index: str
    vectors: str | None


@dataclass(frozen=True, slots=True)
class ServerRow:
    """One server's row, as written."""

    server: str
    fingerprint: str
    docs: Sequence[int]
    names: Sequence[str]
    """Each of its documents' name terms, packed (see :func:`pack_names`)."""
    tools: Sequence[ToolInfo]
    encoded: bytes | None = None
    """:func:`encode_tools` of ``tools``, where the builder made it already."""


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
        ``parameters``, or cannot be read, or does not add up (every document id once,
        under one server, within the ids the index counts)."""
        try:
            with self._lock:
                if not self._connection.in_transaction:
                    self._connection.execute("BEGIN")
                execute = self._connection.execute
                if not execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    return None  # a new file: nothing to ignore, nothing to say
                blobs = dict(execute("SELECT name, value FROM blobs").fetchall())
                if bytes(blobs.get("key", b"")) != _parameters_key(parameters):
                    return None
                meta = json.loads(bytes(blobs["meta"]))
                generation, slots = int(meta["generation"]), int(meta["next"])
                rows, labels, firsts, counts, names, listed = execute(_LAYOUT_QUERY).fetchone()
                placed = None
                if not listed:
                    placed = _consecutive_layout(
                        int(rows), labels, firsts, counts, names or "", slots
                    )
                if placed is None:
                    # Ids listed one by one (a catalog whose servers' tools were interleaved),
                    # or rows that do not follow each other: every id is checked.
                    placed = _listed_layout(
                        execute(
                            "SELECT label, first, count, docs, names FROM layout ORDER BY position"
                        ).fetchall(),
                        slots,
                    )
            return StoredLayout(generation, meta, *placed)
        except (sqlite3.Error, KeyError, ValueError, TypeError) as exc:
            logger.info("ignoring the stored search index %s: %s", self.path, exc)
            return None

    def fingerprints(self) -> dict[str, str] | None:
        """Each stored server's fingerprint, read in the current transaction; None when they
        cannot be read. Read only when the catalog differs from the one stored."""
        try:
            with self._lock:
                rows = self._connection.execute("SELECT server, fingerprint FROM layout").fetchall()
        except sqlite3.Error as exc:
            logger.info("ignoring the stored search index %s: %s", self.path, exc)
            return None
        return {str(server): str(fingerprint) for server, fingerprint in rows}

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
                    "SELECT tools FROM tools WHERE server = ?", (server,)
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
            # "servers": the table of format 2, which held the layout and the tools.
            for table in ("entries", "servers", "layout", "tools", "blobs"):
                execute(f"DROP TABLE IF EXISTS {table}")
            execute(
                "CREATE TABLE entries (tab INTEGER, key TEXT, value BLOB, "
                "PRIMARY KEY (tab, key)) WITHOUT ROWID"
            )
            # The layout apart from the tools, whose large rows a scan would read through.
            execute(
                "CREATE TABLE layout (position INTEGER PRIMARY KEY, server TEXT NOT NULL UNIQUE, "
                "label TEXT NOT NULL, fingerprint TEXT NOT NULL, first INTEGER NOT NULL, "
                "count INTEGER NOT NULL, docs BLOB, names TEXT NOT NULL)"
            )
            execute("CREATE TABLE tools (server TEXT PRIMARY KEY, tools BLOB)")
            execute("CREATE TABLE blobs (name TEXT PRIMARY KEY, value BLOB)")
            # The servers first: what the builder holds for their rows goes as they are
            # written, and the entries are made in the memory that frees.
            written = self._write_servers(servers, first_position=0)
            for number, rows in tables:
                cursor = self._connection.executemany(
                    "INSERT INTO entries VALUES (?, ?, ?)", ((number, k, v) for k, v in rows)
                )
                written += cursor.rowcount
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
                execute("DELETE FROM layout WHERE server = ?", (server,))
                execute("DELETE FROM tools WHERE server = ?", (server,))
                written += 1
            (last,) = execute("SELECT coalesce(max(position), -1) FROM layout").fetchone()
            written += self._write_servers(servers, first_position=int(last) + 1)
            execute(
                "UPDATE blobs SET value = ? WHERE name = 'meta'",
                (_meta_blob(meta, generation=generation),),
            )
            return written + 1

        return self._commit(write)

    def _write_servers(self, servers: Iterable[ServerRow], *, first_position: int) -> int:
        """Write each server's layout and tools, taking ``servers`` one at a time: a server's
        row is made only as it is written (at 95,000 tools, made all at once they were
        10 MB at the top of the index build's peak)."""
        layout: list[tuple[Any, ...]] = []

        def tools_rows() -> Iterator[tuple[str, bytes]]:
            for n, row in enumerate(servers):
                names = _TOOL_SEPARATOR.join(row.names)
                if names.count(_TOOL_SEPARATOR) != max(0, len(row.docs) - 1):
                    raise ValueError(f"server {row.server!r}: name terms with a separator")
                first = row.docs[0] if row.docs else 0
                consecutive = all(d == first + i for i, d in enumerate(row.docs))
                layout.append(
                    (
                        first_position + n,
                        row.server,
                        json.dumps(row.server),
                        row.fingerprint,
                        first,
                        len(row.docs),
                        None if consecutive else _id_bytes(row.docs),
                        names,
                    )
                )
                yield row.server, row.encoded or encode_tools(row.tools)

        self._connection.executemany("INSERT OR REPLACE INTO tools VALUES (?, ?)", tools_rows())
        cursor = self._connection.executemany(
            "INSERT OR REPLACE INTO layout VALUES (?, ?, ?, ?, ?, ?, ?, ?)", layout
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
    return array("i", ids).tobytes()


def _id_array(data: bytes) -> list[int]:
    ids = array("i")
    ids.frombytes(data)
    return ids.tolist()


_Placed = tuple[dict[str, Sequence[int]], list[str | None], list[str]]
"""Each server's document ids, each document id's server, and its packed name terms."""


def _check_total(live: int, slots: int) -> None:
    # Removed documents are at most rebuild_removed_share of the ids (see
    # FieldRanking.prepare): a file claiming many more ids is damaged, and its lists are
    # never allocated.
    if not live <= slots <= 4 * live + 1024:
        raise ValueError(f"{slots} document ids for {live} documents")


def _consecutive_layout(
    rows: int,
    labels: str | None,
    firsts: str | None,
    counts: str | None,
    names: str,
    slots: int,
) -> _Placed | None:
    """The layout of an index whose servers' document ids each follow each other, servers in
    increasing order of ids (every index this code writes): placed a server at a time. None
    when the rows are not so (then every id is checked, see :func:`_listed_layout`).

    Raises:
        ValueError: the ids claimed are out of proportion with the documents.
    """
    if not rows:
        _check_total(0, slots)
        return {}, [None] * slots, [""] * slots
    if labels is None or firsts is None or counts is None:
        return None
    servers: list[Any] = json.loads(labels)
    tool_names = names.split(_TOOL_SEPARATOR)
    try:
        # One C call each checks a column's types: ids are whole numbers (a float or a
        # string fails), names strings (joining anything else fails).
        first_ids = array("q", json.loads(firsts))
        sizes = array("q", json.loads(counts))
        "".join(servers)
    except (TypeError, OverflowError):
        return None
    if not len(servers) == len(first_ids) == len(sizes) == rows:
        return None
    live = len(tool_names)
    _check_total(live, slots)
    ends = array("q", map(operator.add, first_ids, sizes))
    # Each server's ids follow the previous server's, at least one each, all below slots.
    if (
        min(sizes) < 1
        or first_ids[0] < 0
        or ends[-1] > slots
        or not all(map(operator.ge, first_ids[1:], ends[:-1]))
        or sum(sizes) != live
    ):
        return None
    server_docs: dict[str, Sequence[int]] = dict(
        zip(servers, map(range, first_ids, ends), strict=True)
    )
    if len(server_docs) != rows:
        return None  # a server twice
    if ends[-1] == live == slots:
        # No removed documents: the servers' tools end to end.
        return server_docs, list(chain.from_iterable(map(repeat, servers, sizes))), tool_names
    server_of: list[str | None] = [None] * slots
    placed_names = [""] * slots
    at = 0
    for server, first, size in zip(servers, first_ids, sizes, strict=True):
        server_of[first : first + size] = [server] * size
        placed_names[first : first + size] = tool_names[at : at + size]
        at += size
    return server_docs, server_of, placed_names


def _listed_layout(rows: Sequence[tuple[Any, ...]], slots: int) -> _Placed:
    """The layout read row by row, each document id checked.

    Raises:
        ValueError, TypeError: the rows do not add up.
    """
    listed: list[tuple[str, Sequence[int], list[str]]] = []
    live = 0
    for label, first, count, docs, names in rows:
        server = json.loads(label)
        if not isinstance(server, str) or not isinstance(names, str):
            raise ValueError("a layout row of the wrong shape")
        ids: Sequence[int] = (
            _id_array(bytes(docs))
            if docs is not None
            else range(int(first), int(first) + int(count))
        )
        tool_names = names.split(_TOOL_SEPARATOR)
        # Compared before any id is read: a row claiming billions of ids has as many names.
        if len(tool_names) != len(ids):
            raise ValueError(f"server {server!r}: {len(ids)} documents, other names")
        listed.append((server, ids, tool_names))
        live += len(ids)
    _check_total(live, slots)
    server_docs: dict[str, Sequence[int]] = {}
    server_of: list[str | None] = [None] * slots
    placed_names = [""] * slots
    for server, ids, tool_names in listed:
        for doc, packed in zip(ids, tool_names, strict=True):
            # Every document once, under one server: a file that says otherwise is not
            # used (a query would read past the catalog).
            if not 0 <= doc < slots or server_of[doc] is not None:
                raise ValueError("its tools do not add up")
            server_of[doc] = server
            placed_names[doc] = packed
        if server in server_docs:
            raise ValueError(f"server {server!r} twice")
        server_docs[server] = ids
    # In the order of their first ids, as a layout read a server at a time has them.
    ordered = dict(sorted(server_docs.items(), key=lambda item: min(item[1], default=slots)))
    return ordered, server_of, placed_names


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
