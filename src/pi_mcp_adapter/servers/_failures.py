"""Failed connects remembered across processes, so a broken server is not retried by every run.

File ``<agent dir>/mcp-failures.json``::

    {"version": 1,
     "servers": {"<name>": {"failedAt": <ms since epoch>, "reason": "...", "attempts": 3,
                            "configHash": "<sha256 hex>"}}}

A command-line run lives for a second; without this file, a server that hangs at start would
cost every command its whole startup timeout. The manager records each failed connect here and,
when it starts, puts servers with a recent failure straight into backoff: they fail fast until
the backoff ends (doubling with each consecutive failure) or the user retries explicitly.

``reason`` is the first line of the failure message with credentials masked (URL passwords,
``Bearer`` tokens, ``token=`` values); ``configHash`` is one SHA-256 digest of the entry, so a
record is forgotten as soon as the server's configuration changes, and no secret is written.

Concurrency: like the metadata cache, every change is a read-merge-write under an exclusive
lock (``mcp-failures.json.lock``), written to a temporary file and moved into place with
``os.replace``. A change made on an event loop waits for another process's lock only briefly
(:data:`LOOP_LOCK_WAIT_S`); past that a thread of its own writes it, and the changes after it,
in order. The file is only an optimisation: a missing, unreadable or unwritable file is
treated as empty and never stops a connect.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._files import write_atomically

if TYPE_CHECKING:
    import filelock

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.config import ServerEntry
from pi_mcp_adapter.config._masking import mask_text

__all__ = [
    "FAILURES_FILE_NAME",
    "MAX_BACKOFF_S",
    "FailureMemory",
    "FailureRecord",
    "backoff_after_s",
    "entry_digest",
]

logger = logging.getLogger("pi_mcp_adapter.servers")

FAILURES_FILE_NAME = "mcp-failures.json"
FAILURES_VERSION = 1
_SHARED_TABLE = "failures"
DEFAULT_BACKOFF_S = 60.0
"""How long after a first failed connect further attempts fail at once."""
MAX_BACKOFF_S = 600.0
"""Backoff doubles with each consecutive failure up to ten minutes, so a server that is down
for the day costs one connect attempt per ten minutes, not one per command."""

LOCK_TIMEOUT_S = 2.0
"""Writers hold the lock for milliseconds; a failure record is not worth waiting longer."""

LOOP_LOCK_WAIT_S = 0.05
"""How long a change made on an event loop waits for the lock before a thread of its own takes
it over: the loop serves every other server and client meanwhile, and a process stopped while
holding the lock (Ctrl-Z on a command) would otherwise stall it for :data:`LOCK_TIMEOUT_S` at
every connect."""

_MAX_REASON_CHARS = 300


def backoff_after_s(base_s: float, attempts: int) -> float:
    """Backoff after ``attempts`` consecutive failures: ``base_s`` doubling, capped."""
    if attempts <= 0 or base_s <= 0:
        return 0.0
    return float(min(MAX_BACKOFF_S, base_s * 2 ** min(attempts - 1, 16)))


def entry_digest(entry: ServerEntry) -> str:
    """A digest of everything in ``entry`` (secrets only as part of the hash)."""
    dumped = entry.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    text = json.dumps(dumped, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class FailureRecord:
    """The last failed connect of one server: wall-clock time, why, and how many in a row."""

    server: str
    failed_at: float
    """Seconds since the epoch."""
    reason: str
    attempts: int

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a failure record counts at least one attempt")

    @property
    def message(self) -> str:
        """What a server's state shows as its error (a record may hold no reason)."""
        return self.reason or "connect failed"

    def backoff_left_s(self, now: float, *, base_s: float = DEFAULT_BACKOFF_S) -> float:
        """Seconds (at wall-clock ``now``) until the server is tried again; zero or less once
        its backoff is over. The one rule for a manager recalling the record at its start and
        for a status read from the files alone."""
        return backoff_after_s(base_s, self.attempts) - max(0.0, now - self.failed_at)


def _record_of(server: str, raw: object, digest: str) -> FailureRecord | None:
    """The record ``raw`` (one server's value in the file) holds for the configuration whose
    :func:`entry_digest` is ``digest``; ``None`` when it was made for another configuration or
    is malformed."""
    if not isinstance(raw, Mapping) or raw.get("configHash") != digest:
        return None
    failed_at_ms = raw.get("failedAt")
    attempts = raw.get("attempts")
    reason = raw.get("reason")
    if (
        not isinstance(failed_at_ms, int | float)
        or isinstance(failed_at_ms, bool)
        or not isinstance(attempts, int)
        or isinstance(attempts, bool)
        or attempts < 1
    ):
        return None
    return FailureRecord(
        server, failed_at_ms / 1000, reason if isinstance(reason, str) else "", attempts
    )


class FailureMemory:
    """The failures file. ``clock`` returns seconds since the epoch (injectable for tests)."""

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = Path(path)
        self._clock = clock
        self._file_lock: filelock.FileLock | None = None
        self._left_lock = threading.Lock()
        self._left: list[Callable[[dict[str, Any]], object]] = []
        """Changes that found the lock taken on an event loop, written by a thread in order;
        the first stays listed until written, so that later changes queue behind it."""

    def now(self) -> float:
        return self._clock()

    def get(self, server: str, entry: ServerEntry) -> FailureRecord | None:
        """``server``'s record, if there is one for the configuration ``entry``."""
        return _record_of(server, self._read().get(server), entry_digest(entry))

    def get_many(self, entries: Mapping[str, ServerEntry]) -> dict[str, FailureRecord]:
        """What :meth:`get` answers for each of ``entries`` that has a record, from one read
        of the file: a start recalls every configured server's failures, and reading (and
        parsing) the file once per server cost a third of a second at 19,641 servers. Only
        servers named in the file are hashed."""

        def digest_of(server: str) -> str | None:
            entry = entries.get(server)
            return entry_digest(entry) if entry is not None else None

        return self._records(digest_of)

    def get_many_digested(self, digests: Mapping[str, str]) -> dict[str, FailureRecord]:
        """:meth:`get_many` of the servers whose entries have the :func:`entry_digest`
        ``digests`` (worked out before, by a process that loaded them)."""
        return self._records(digests.get)

    def _records(self, digest_of: Callable[[str], str | None]) -> dict[str, FailureRecord]:
        """Each record in the file made for the configuration whose digest ``digest_of``
        gives for its server (None: not asked for)."""
        records: dict[str, FailureRecord] = {}
        for server, raw in self._read().items():
            digest = digest_of(server)
            if digest is not None and (record := _record_of(server, raw, digest)) is not None:
                records[server] = record
        return records

    def backing_off(
        self, server: str, entry: ServerEntry, *, base_s: float = DEFAULT_BACKOFF_S
    ) -> tuple[FailureRecord, float] | None:
        """``server``'s last failure and the seconds until it is retried, while it waits."""
        record = self.get(server, entry)
        if record is None:
            return None
        remaining_s = record.backoff_left_s(self._clock(), base_s=base_s)
        return (record, remaining_s) if remaining_s > 0 else None

    def record(self, server: str, entry: ServerEntry, reason: str) -> FailureRecord:
        """Count one more failed connect of ``server`` and return the updated record."""
        digest = entry_digest(entry)
        now = self._clock()
        line = (reason.splitlines() or [""])[0]
        safe_reason = mask_text(line)[:_MAX_REASON_CHARS]
        result: list[FailureRecord] = []

        def update(servers: dict[str, Any]) -> None:
            previous = servers.get(server)
            attempts = 1
            if isinstance(previous, Mapping) and previous.get("configHash") == digest:
                count = previous.get("attempts")
                if isinstance(count, int) and not isinstance(count, bool) and count >= 1:
                    attempts = count + 1
            servers[server] = {
                "failedAt": int(now * 1000),
                "reason": safe_reason,
                "attempts": attempts,
                "configHash": digest,
            }
            result.append(FailureRecord(server, now, safe_reason, attempts))

        if not self._modify(update):
            # Not written yet (queued behind the lock) or not at all: count from the file as
            # it reads now, so that the backoff still grows.
            update(dict(self._read()))
        return result[-1]

    def clear(self, server: str) -> None:
        """Forget ``server``'s failures (it connected)."""
        with self._left_lock:
            waiting = bool(self._left)  # a record of it may be among the waiting changes
        if not waiting and server not in self._read():
            return
        self._modify(lambda servers: servers.pop(server, None))

    # -- file ---------------------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        shared = shared_state.active()
        if shared is not None and (records := shared.table(_SHARED_TABLE)) is not None:
            return records
        return self._read_file()

    def _read_file(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or data.get("version") != FAILURES_VERSION:
            return {}
        servers = data.get("servers")
        return servers if isinstance(servers, dict) else {}

    def _modify(self, update: Callable[[dict[str, Any]], object]) -> bool:
        """Apply ``update`` to the file now, and say whether it was. On an event loop, a lock
        still taken after :data:`LOOP_LOCK_WAIT_S` leaves the change to a thread of its own."""
        import filelock  # only writers need it; reading the file at every start does not

        on_loop = shared_state.on_event_loop()
        with self._left_lock:
            if self._left:  # an earlier change waits for the lock: this one goes after it
                self._left.append(update)
                return False
        try:
            return self._apply(update, LOOP_LOCK_WAIT_S if on_loop else LOCK_TIMEOUT_S)
        except filelock.Timeout:
            with self._left_lock:
                self._left.append(update)
                if len(self._left) == 1:
                    # Not a daemon: a command that ends meanwhile still writes its failure.
                    threading.Thread(
                        target=self._write_left, name="pi-mcp-failures", daemon=False
                    ).start()
            return False

    def _write_left(self) -> None:
        with self._left_lock:
            update = self._left[0]
        while True:
            try:
                self._apply(update, LOCK_TIMEOUT_S)
            except Exception as exc:  # the lock still taken, or a change that failed
                logger.debug("cannot update %s: %s", self.path, exc)
            with self._left_lock:
                # Whatever became of it, the changes behind it go next. Leaving in the same
                # step as finding none left: a change queued after that starts a new thread,
                # and one queued before it is this thread's to write.
                del self._left[0]
                if not self._left:
                    return
                update = self._left[0]

    def _apply(self, update: Callable[[dict[str, Any]], object], timeout_s: float) -> bool:
        """Apply ``update`` under the lock; ``False`` when the file cannot be written.

        Raises:
            filelock.Timeout: the lock was still taken after ``timeout_s``.
        """
        import filelock

        if self._file_lock is None:
            self._file_lock = filelock.FileLock(f"{self.path}.lock", timeout=LOCK_TIMEOUT_S)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._file_lock.acquire(timeout=timeout_s):
                shared = shared_state.active()
                servers = self._read()
                before = dict(servers)
                update(servers)
                if shared is not None:
                    # Every replica backs off from a server that failed for one of them.
                    shared.sync(_SHARED_TABLE, before, servers)
                self._write(servers)
        except filelock.Timeout:  # an OSError too, which the caller answers differently
            raise
        except OSError as exc:
            logger.debug("cannot update %s: %s", self.path, exc)
            return False
        return True

    def _write(self, servers: Mapping[str, Any]) -> None:
        # Failure messages quote URLs, paths and stderr lines, which may hold secret values.
        data = redact(
            json.dumps(
                {"version": FAILURES_VERSION, "servers": servers}, ensure_ascii=False, indent=1
            )
        ).encode("utf-8")
        write_atomically(self.path, data)
