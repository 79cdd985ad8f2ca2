"""State shared by every replica of a gateway, kept in Redis (``settings.sharedState``).

Files under the agent directory stay the embedded default. With ``sharedState`` set to a
``redis://`` (or ``rediss://``) URL, the stores that are documents of independent records
(failure memory, approvals granted for always, trust records, the metadata cache) keep one
Redis hash each, one field per record (a server, a file), holding the record's JSON. Their
files are still written: they are what a replica serves from while Redis is unreachable.

Reads take the Redis hash while Redis answers; writes go to the file and to Redis. When Redis
does not answer, the replica keeps serving from its files and memory, queues its writes
(latest value per record) and says so in ``pi-mcp status``; the first exchange that succeeds
again writes the queue first (catching up), then reads Redis again. Redis is tried again at
most every :data:`RETRY_AFTER_S`, so an outage costs one short timeout, not one per call.

Calls are synchronous (the stores they serve are): on loopback or in a cluster a round trip is
a fraction of a millisecond, far below the cost of the tool call around it. A thread that runs
an event loop (a gateway's, a host's) never waits for Redis longer than one exchange: while
Redis is known not to answer it gets the files' answer at once, and the next try is made in a
thread of its own; a write never waits for another thread's exchange (that thread writes the
queue after its own); a read waits for one at most :data:`TIMEOUT_S`. So an outage costs such
a thread at most one timeout, when it is the first to find Redis gone, not one every
:data:`RETRY_AFTER_S` for as long as the outage lasts.

Every value sent to Redis passes through :func:`~pi_mcp_adapter._secrets.redact`, as the
files' contents do.

Redis that comes back empty (restarted without persistence, flushed, failed over to an empty
copy) would leave a replica that joins without tools or tokens: the replicas still hold the
records in memory and files, but write them only as they change. Each replica therefore
remembers every record it wrote or read (its *held* records) and the value of a sentinel key,
``pi-mcp:epoch``, written by the first replica that finds it missing. The sentinel is read at
most every :data:`EPOCH_CHECK_S` with the other exchanges (and by a serving gateway's
:meth:`SharedState.refresh`); when it is missing or changed, the replica writes its held
records back with ``HSETNX``, so a record another replica published meanwhile is not
overwritten. ``pi-mcp status`` says when Redis is configured to keep nothing on restart.

A table too large to read whole at every start (the metadata cache: 98 MB at 95,000 tools) is
*digested*: each record's text is written with a digest of it in a second hash,
``<table>#digests`` (:meth:`SharedState.put_digested`). A replica that joins reads the digests
and the records whose digest differs from what it has (:meth:`SharedState.changed_digested`),
not every record, and it holds none of them: their owner gives them again when Redis lost them
(:meth:`SharedState.publish_digested_from`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter._secrets import redact, register_secret

if TYPE_CHECKING:
    import redis

logger = logging.getLogger("pi_mcp_adapter.shared_state")

ENV_URL: Final = "PI_MCP_SHARED_STATE"
"""Overrides ``settings.sharedState`` and is in effect from the first configuration read
(trust records are consulted while the configuration loads)."""
KEY_PREFIX: Final = "pi-mcp:"
RETRY_AFTER_S: Final = 2.0
TIMEOUT_S: Final = 0.5
EPOCH_CHECK_S: Final = 5.0
"""How often a replica looks whether Redis lost its records (one ``GET``): a replica that joins
after a restart waits at most this long for the others to publish again."""
EPOCH_KEY: Final = KEY_PREFIX + "epoch"
DIGESTS_SUFFIX: Final = "#digests"
"""A digested table ``t`` keeps its records' digests in the hash ``pi-mcp:t#digests``."""
_DELETE: Final = object()
_FETCH_BATCH: Final = 512
"""Records read per ``HMGET``: a round trip per record would cost more than the records, one
for all of them would hold Redis (and every other replica) for the whole transfer."""

Persistence = Literal["persistent", "volatile", "unknown"]


@dataclass(frozen=True, slots=True)
class SharedStateStatus:
    url: str
    """The URL without its password."""
    reachable: bool
    pending_writes: int
    error: str | None
    persistence: Persistence | None = None
    """Whether Redis keeps its data on restart (``CONFIG GET save appendonly``, else ``INFO
    persistence``); None when it was not asked (unreachable)."""


class SharedState:
    """A Redis connection for the shared stores, with an outbox for when it is down."""

    def __init__(
        self,
        url: str,
        *,
        client: redis.Redis | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            raise UsageError(
                f"settings.sharedState must be a redis://, rediss:// or unix:// URL, got {url!r}"
            )
        self.url = url
        password = _password(url)
        if password:
            register_secret(password)  # whatever quotes the URL (an error) is redacted
        self._clock = clock
        self._client = client if client is not None else _connect(url)
        # Two locks, so that no caller waits for Redis to read or queue what is in memory:
        # ``_lock`` guards the outbox, the held records and whether Redis answers, and is never
        # held across a Redis call; ``_io`` is held by the one exchange talking to Redis (and
        # guards the epoch, which only an exchange reads and writes).
        self._lock = threading.Lock()
        self._io = threading.Lock()
        self._retrier: threading.Thread | None = None
        self._outbox: dict[tuple[str, str], object] = {}
        self._down_since: float | None = None
        self._retry_at = 0.0
        self._error: str | None = None
        # What this replica would publish again if Redis came back empty (see the module
        # docstring): each record's last value as written to or read from Redis.
        self._held: dict[tuple[str, str], str] = {}
        self._epoch: str | None = None
        self._epoch_check_at = 0.0
        self._persistence: Persistence | None = None
        # Digested tables' owners, which give their records again when Redis lost them (see
        # publish_digested_from); weakly, so an owner that is gone gives nothing.
        self._publishers: dict[
            tuple[str, int], weakref.WeakMethod[Callable[[], Iterable[tuple[str, str]]]]
        ] = {}

    # ------------------------------------------------------------------ records

    def table(self, name: str) -> dict[str, Any] | None:
        """Every record of table ``name``; None when Redis does not answer (use the file)."""
        raw = self._exchange(lambda r: r.hgetall(KEY_PREFIX + name))
        if raw is _UNANSWERED:
            return None
        records: dict[str, Any] = {}
        for field, value in dict(raw).items():
            try:
                records[_text(field)] = json.loads(value)
            except ValueError:
                continue  # a record another version wrote; the file format stays the judge
            self._hold(name, _text(field), _text(value))
        return records

    def record(self, name: str, key: str) -> tuple[bool, Any]:
        """``(answered, value)``: one record of ``name`` (value None when absent)."""
        raw = self._exchange(lambda r: r.hget(KEY_PREFIX + name, key))
        if raw is _UNANSWERED:
            return False, None
        if raw is None:
            return True, None
        try:
            value = json.loads(raw)
        except ValueError:
            return True, None
        self._hold(name, key, _text(raw))
        return True, value

    def put(self, name: str, key: str, value: Any) -> None:
        """Store one record (queued while Redis does not answer)."""
        self._send({(name, key): redact(json.dumps(value, ensure_ascii=False, default=str))})

    def delete(self, name: str, key: str) -> None:
        self._send({(name, key): _DELETE})

    def sync(self, name: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> None:
        """Send the records that differ between two versions of a whole table."""
        changes: dict[tuple[str, str], object] = {}
        for key, value in after.items():
            if key not in before or before[key] != value:
                changes[(name, key)] = redact(json.dumps(value, ensure_ascii=False, default=str))
        for key in before:
            if key not in after:
                changes[(name, key)] = _DELETE
        if changes:
            self._send(changes)

    def put_digested(self, name: str, key: str, text: str) -> None:
        """Store one record of the digested table ``name`` (see the module docstring), given as
        its JSON text, and its digest (:func:`text_digest`); queued while Redis does not
        answer. The record is not held: the table's publisher gives it again."""
        text = redact(text)
        digests = name + DIGESTS_SUFFIX
        # The record before its digest: a reader that sees the new digest finds the new record.
        self._send({(name, key): text, (digests, key): text_digest(text)}, hold=False)

    def delete_digested(self, name: str, key: str) -> None:
        self._send({(name, key): _DELETE, (name + DIGESTS_SUFFIX, key): _DELETE}, hold=False)

    def changed_digested(self, name: str, known: Mapping[str, str]) -> Iterator[dict[str, str]]:
        """The texts of the records of the digested table ``name`` whose digest is not
        ``known[key]``, a few hundred at a time; nothing more once Redis does not answer.

        A record without a digest (one a version that kept none wrote) is read too, and the
        digest of the text read is written for it unless a writer wrote one meanwhile: a writer
        sets its digest after its record, so the digest left in place is always that of the
        record in place. A replica whose files match Redis reads the keys and digests only: 2
        MB, not the table's 98 MB, at 95,000 tools. One that has none of them holds one batch
        at a time."""

        def keys_and_digests(client: redis.Redis) -> list[Any]:
            pipe = client.pipeline(transaction=True)  # both of one moment
            pipe.hkeys(KEY_PREFIX + name)
            pipe.hgetall(KEY_PREFIX + name + DIGESTS_SUFFIX)
            return list(pipe.execute())

        answer = self._exchange(keys_and_digests)
        if answer is _UNANSWERED:
            return
        keys, raw_digests = answer
        digests = {_text(k): _text(v) for k, v in dict(raw_digests).items()}
        wanted = [
            key
            for key in map(_text, keys)
            if (digest := digests.get(key)) is None or digest != known.get(key)
        ]
        for start in range(0, len(wanted), _FETCH_BATCH):
            batch = wanted[start : start + _FETCH_BATCH]
            values = self._exchange(lambda r: r.hmget(KEY_PREFIX + name, batch))  # noqa: B023
            if values is _UNANSWERED:
                return
            # A record deleted since the keys were read is None: left out.
            texts = {k: _text(v) for k, v in zip(batch, values, strict=True) if v is not None}
            undigested = [(k, text) for k, text in texts.items() if k not in digests]
            if undigested:
                self._exchange(lambda r: _set_digests_unless_present(r, name, undigested))  # noqa: B023
            yield texts

    def publish_digested_from(
        self, name: str, publisher: Callable[[], Iterable[tuple[str, str]]]
    ) -> None:
        """Have ``publisher``, a bound method, give every ``(key, text)`` of the digested table
        ``name`` it has, when Redis comes back without its records (see the module docstring);
        every live publisher of the table is asked, each in a thread of its own (see
        :meth:`_publish_digested`)."""
        owner = id(getattr(publisher, "__self__", publisher))
        with self._lock:
            self._publishers[(name, owner)] = weakref.WeakMethod(publisher)

    def merge(self, name: str, key: str, combine: Callable[[Any], Any]) -> bool:
        """Replace one record with ``combine(current value or None)`` atomically (a Redis
        transaction watching the hash; retried when another replica wrote meanwhile).

        Returns False when Redis does not answer: nothing was written and nothing is queued
        (a merge cannot be replayed as a plain value); the caller keeps its part for later.
        """
        import redis as redis_lib

        full = KEY_PREFIX + name

        written: list[str] = []

        def transaction(pipe: redis_lib.client.Pipeline) -> None:
            raw = pipe.hget(full, key)
            current = json.loads(raw) if raw is not None else None
            value = redact(json.dumps(combine(current), ensure_ascii=False, default=str))
            written[:] = [value]
            pipe.multi()
            pipe.hset(full, key, value)

        answer = self._exchange(lambda r: r.transaction(transaction, full))
        if answer is _UNANSWERED:
            return False
        if written:
            self._hold(name, key, written[0])
        return True

    def claim(self, name: str, key: str, value: Any, *, ttl_s: float) -> tuple[bool, Any]:
        """Record ``value`` under ``name``/``key`` unless a record is there (``SET NX`` with
        an expiry of ``ttl_s``): ``(True, None)`` when this call wrote it, ``(False, the
        record there)`` when another did, ``(False, None)`` when Redis does not answer.
        Such records are not held: they are not published again after a restart."""
        full = f"{KEY_PREFIX}{name}:{key}"
        encoded = redact(json.dumps(value, ensure_ascii=False, default=str))

        def set_unless_present(r: redis.Redis) -> list[Any]:
            pipe = r.pipeline(transaction=True)
            pipe.set(full, encoded, nx=True, px=max(1, round(ttl_s * 1000)))
            pipe.get(full)
            return list(pipe.execute())

        answer = self._exchange(set_unless_present)
        if answer is _UNANSWERED:
            return False, None
        created, current = answer
        if created:
            return True, None
        try:
            return False, json.loads(current) if current is not None else None
        except ValueError:
            return False, None

    def settle(self, name: str, key: str, value: Any, *, ttl_s: float) -> bool:
        """Replace the record of :meth:`claim` with ``value``, expiring after ``ttl_s``;
        False when Redis does not answer (not queued: a late record would mislead)."""
        full = f"{KEY_PREFIX}{name}:{key}"
        encoded = redact(json.dumps(value, ensure_ascii=False, default=str))
        answer = self._exchange(lambda r: r.set(full, encoded, px=max(1, round(ttl_s * 1000))))
        return answer is not _UNANSWERED

    def lock(self, name: str, *, timeout_s: float) -> SharedLock:
        """A lock every replica sees (Redis ``SET NX`` with an expiry of ``timeout_s``, so a
        replica that dies holding it frees it). While Redis does not answer, acquiring it
        succeeds at once: each replica then only has its own locks."""
        return SharedLock(self, KEY_PREFIX + "lock:" + name, timeout_s)

    # ------------------------------------------------------------------ status

    def status(self) -> SharedStateStatus:
        with self._lock:
            return SharedStateStatus(
                url=_without_password(self.url),
                reachable=self._down_since is None,
                pending_writes=len(self._outbox),
                error=self._error,
                persistence=self._persistence,
            )

    def describe(self) -> str:
        """One line for ``pi-mcp status`` (two when Redis keeps nothing on restart)."""
        state = self.status()
        if not state.reachable:
            return (
                f"shared state: {state.url} unreachable ({state.error}); serving from local "
                f"files, {state.pending_writes} write(s) queued until it answers"
            )
        line = f"shared state: {state.url} (connected)"
        if state.persistence == "volatile":
            line += (
                "\nwarning: this Redis keeps nothing on restart (no save points, appendonly "
                "no): a restart forgets every shared record (tokens, cache, failures) until "
                "the replicas publish theirs again. Run it with --appendonly yes."
            )
        elif state.persistence == "unknown":
            line += (
                "\nnote: whether this Redis keeps its data on restart is unknown (CONFIG GET "
                "is not allowed and AOF is off); make sure it persists (RDB snapshots or "
                "appendonly yes)."
            )
        return line

    def ping(self) -> bool:
        """Whether Redis answers now (and the queue is written); asks once whether Redis
        keeps its data on restart (see :attr:`SharedStateStatus.persistence`)."""
        answered = self._exchange(lambda r: r.ping(), force=True) is not _UNANSWERED
        if answered and self._persistence is None:
            persistence = self._exchange(_persistence_of, force=True)
            if persistence is not _UNANSWERED:
                with self._lock:
                    self._persistence = persistence
        return answered

    def refresh(self) -> None:
        """Write queued records and, when it is time, look whether Redis came back empty and
        publish the held records again (a serving gateway calls this every few seconds, so a
        replica that joins after a restart finds the records without waiting for a change)."""
        self._exchange(_nothing)

    # ------------------------------------------------------------------ transport

    def _send(self, changes: Mapping[tuple[str, str], object], *, hold: bool = True) -> None:
        with self._lock:
            self._outbox.update(changes)
            for item, value in changes.items():
                if isinstance(value, str) and hold:
                    self._held[item] = value
                else:
                    self._held.pop(item, None)
        # Queued first, so that an exchange in progress in another thread writes it when it
        # is done (see _write_left_behind), if this one does not get to.
        self._exchange(_nothing, wait=False)

    def _hold(self, name: str, key: str, value: str) -> None:
        with self._lock:
            self._held[(name, key)] = value

    def _keep_published(self, client: redis.Redis) -> None:
        """Publish the held records again when Redis lost them (the sentinel is missing or
        changed). Call with ``self._io`` held, Redis answering."""
        now = self._clock()
        if self._epoch is not None and now < self._epoch_check_at:
            return
        self._epoch_check_at = now + EPOCH_CHECK_S
        current = client.get(EPOCH_KEY)
        if current is None:
            client.set(EPOCH_KEY, uuid.uuid4().hex, nx=True)
            current = client.get(EPOCH_KEY)
        epoch = _text(current) if current is not None else None
        if epoch == self._epoch:
            return
        with self._lock:
            held = dict(self._held)
            publishers = list(self._publishers.items())
        if self._epoch is not None and (held or publishers):
            logger.warning(
                "shared state %s lost its records (restarted empty?): publishing the %d "
                "this replica holds and its digested tables (%s) again",
                _without_password(self.url),
                len(held),
                ", ".join(sorted({name for (name, _owner), _p in publishers})) or "none",
            )
            pipe = client.pipeline(transaction=False)
            for (name, key), value in held.items():
                pipe.hsetnx(KEY_PREFIX + name, key, value)
            pipe.execute()
            for (name, owner), publisher in publishers:
                give = publisher()
                if give is None:
                    with self._lock:
                        self._publishers.pop((name, owner), None)  # its owner is gone
                else:
                    threading.Thread(
                        target=self._publish_digested,
                        args=(name, give),
                        name=f"pi-mcp shared {name}",
                        daemon=True,
                    ).start()
        self._epoch = epoch

    def _publish_digested(self, name: str, give: Callable[[], Iterable[tuple[str, str]]]) -> None:
        """Write each record ``give`` gives unless another replica wrote it meanwhile, then
        its digest unless that replica's is there (a writer sets its digest after its record,
        so the digest left in place is always that of the record left in place).

        In a thread of its own: at 95,000 tools reading the store and writing 98 MB takes about
        2 s, which the exchange that noticed the loss (on any thread, an event loop's too) does
        not wait for. A replica that reads the table meanwhile finds fewer records: less to
        take, nothing wrong."""
        import redis as redis_lib

        try:
            texts = [(key, redact(text)) for key, text in give()]
            for start in range(0, len(texts), _FETCH_BATCH):
                batch = texts[start : start + _FETCH_BATCH]
                pipe = self._client.pipeline(transaction=False)
                for key, text in batch:
                    pipe.hsetnx(KEY_PREFIX + name, key, text)
                written = pipe.execute()
                _set_digests_unless_present(
                    self._client,
                    name,
                    [item for item, was in zip(batch, written, strict=True) if was],
                )
        except (redis_lib.RedisError, OSError) as exc:
            logger.warning(
                "shared state %s: publishing %s again stopped (%s); its records come back as "
                "replicas store them",
                _without_password(self.url),
                name,
                exc,
            )

    def _exchange(
        self,
        operation: Callable[[redis.Redis], Any],
        *,
        force: bool = False,
        wait: bool = True,
    ) -> Any:
        """Write the outbox, then run ``operation``; :data:`_UNANSWERED` when Redis is down.

        ``force`` tries Redis even while it is known not to answer. ``wait=False``: return at
        once (unanswered) when another thread's exchange is in progress; that thread writes
        the outbox when it is done. A thread running an event loop never tries a Redis known
        not to answer (a thread of its own does, see :meth:`_retry_in_background`) and waits
        for another thread's exchange at most :data:`TIMEOUT_S` (see the module docstring)."""
        on_loop = on_event_loop()
        if not force and self._gone(on_loop=on_loop):
            return _UNANSWERED
        if not wait:
            if not self._io.acquire(blocking=False):
                return _UNANSWERED
        elif not self._io.acquire(timeout=TIMEOUT_S if on_loop else -1):
            return _UNANSWERED
        try:
            # Another thread may have found Redis gone while this one waited.
            if not force and self._gone(on_loop=on_loop):
                return _UNANSWERED
            answer = self._exchange_holding_io(operation)
        finally:
            self._io.release()
        self._write_left_behind()
        return answer

    def _gone(self, *, on_loop: bool) -> bool:
        """Whether to answer without trying Redis: it does not answer, and it is not yet time
        to try again, or the caller runs an event loop (then a thread tries, when it is time)."""
        with self._lock:
            if self._down_since is None:
                return False
            if self._clock() < self._retry_at:
                return True
            if on_loop:
                self._retry_in_background()
                return True
            return False

    def _retry_in_background(self) -> None:
        """Try Redis again in a thread of its own (once: the next try is at the next
        :data:`RETRY_AFTER_S`). Call with ``self._lock`` held."""
        if self._retrier is not None and self._retrier.is_alive():
            return
        self._retry_at = self._clock() + RETRY_AFTER_S
        self._retrier = threading.Thread(
            target=self._exchange,
            args=(_nothing,),
            kwargs={"force": True},
            name="pi-mcp shared state retry",
            daemon=True,
        )
        self._retrier.start()

    def _write_left_behind(self) -> None:
        """Write what callers queued while this thread's exchange was in progress (they do not
        wait for it, see ``wait`` in :meth:`_exchange`)."""
        while True:
            with self._lock:
                if not self._outbox or self._down_since is not None:
                    return
            if not self._io.acquire(blocking=False):
                return  # the thread holding it writes them when it is done
            try:
                self._exchange_holding_io(_nothing)
            finally:
                self._io.release()

    def _exchange_holding_io(self, operation: Callable[[redis.Redis], Any]) -> Any:
        import redis as redis_lib

        with self._lock:
            outbox = dict(self._outbox)
        try:
            # Before anything is read: a read of a Redis that came back empty would
            # otherwise take "no records" for the truth.
            self._keep_published(self._client)
            if outbox:
                pipe = self._client.pipeline(transaction=False)
                for (name, key), value in outbox.items():
                    if value is _DELETE:
                        pipe.hdel(KEY_PREFIX + name, key)
                    else:
                        pipe.hset(KEY_PREFIX + name, key, value)  # type: ignore[arg-type]
                pipe.execute()
                with self._lock:
                    for item, value in outbox.items():
                        if self._outbox.get(item) is value:
                            del self._outbox[item]
            result = operation(self._client)
        except (redis_lib.RedisError, OSError) as exc:
            self._epoch_check_at = 0.0  # it may come back empty: look first when it answers
            with self._lock:
                if self._down_since is None:
                    logger.warning(
                        "shared state %s does not answer (%s): serving from local files",
                        _without_password(self.url),
                        exc,
                    )
                    self._down_since = self._clock()
                self._error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self._retry_at = self._clock() + RETRY_AFTER_S
            return _UNANSWERED
        with self._lock:
            if self._down_since is not None:
                logger.warning("shared state %s answers again", _without_password(self.url))
            self._down_since = None
            self._error = None
        return result


class SharedLock:
    """See :meth:`SharedState.lock`; ``acquire`` and ``release`` block (call them in a thread)."""

    def __init__(self, shared: SharedState, key: str, timeout_s: float) -> None:
        self._shared = shared
        self._key = key
        self._timeout_s = timeout_s
        self._lock: Any = None

    def acquire(self) -> bool:
        """Whether the lock is held across replicas (False: Redis is away, or waiting for the
        holder took longer than ``timeout_s``; the caller goes on with its own locks)."""
        lock = self._shared._exchange(
            lambda r: r.lock(self._key, timeout=self._timeout_s, thread_local=False)
        )
        if lock is _UNANSWERED:
            return False
        # Waiting happens in Redis calls of their own, each bounded by the socket timeout.
        deadline = time.monotonic() + self._timeout_s
        while time.monotonic() < deadline:
            got = self._shared._exchange(lambda r: lock.acquire(blocking=False), force=True)
            if got is _UNANSWERED:
                return False
            if got:
                self._lock = lock
                return True
            time.sleep(0.05)
        return False

    def release(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            self._shared._exchange(lambda r: lock.release(), force=True)


class _Unanswered:
    def __repr__(self) -> str:
        return "<unanswered>"


_UNANSWERED: Final = _Unanswered()


def _nothing(client: redis.Redis) -> bool:
    """An exchange's operation when only the outbox is to be written."""
    return True


def on_event_loop() -> bool:
    """Whether the calling thread runs an event loop (asyncio's, which the hosts run on)."""
    asyncio = sys.modules.get("asyncio")  # not imported: no loop runs (a one-shot command)
    return asyncio is not None and asyncio._get_running_loop() is not None


def _connect(url: str) -> redis.Redis:
    try:
        import redis
    except ImportError as exc:
        raise UsageError(
            "settings.sharedState needs the redis extra: pip install 'pi-mcp-adapter[redis]'"
        ) from exc
    return redis.Redis.from_url(
        url,
        socket_timeout=TIMEOUT_S,
        socket_connect_timeout=TIMEOUT_S,
        health_check_interval=30,
    )


def _persistence_of(client: redis.Redis) -> Persistence:
    """Whether ``client``'s Redis keeps its data on restart. Managed services often disable
    CONFIG; then INFO says at least whether AOF is on (RDB save points are not in INFO)."""
    import redis as redis_lib

    try:
        raw = {**client.config_get("save"), **client.config_get("appendonly")}
    except redis_lib.ResponseError:  # CONFIG renamed away, or not allowed for this user
        info = client.info("persistence")
        return "persistent" if str(info.get("aof_enabled")) == "1" else "unknown"
    config = {_text(k): _text(v) for k, v in raw.items() if k is not None and v is not None}
    save = config.get("save", "").strip()
    appendonly = config.get("appendonly", "no").strip().lower()
    return "persistent" if save or appendonly == "yes" else "volatile"


def _set_digests_unless_present(
    client: redis.Redis, name: str, records: Iterable[tuple[str, str]]
) -> None:
    pipe = client.pipeline(transaction=False)
    for key, text in records:
        pipe.hsetnx(KEY_PREFIX + name + DIGESTS_SUFFIX, key, text_digest(text))
    pipe.execute()


def text_digest(text: str) -> str:
    """The digest a digested table keeps of a record's text (see the module docstring)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).hexdigest()


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def _password(url: str) -> str | None:
    credentials, at, _ = url.partition("://")[2].rpartition("@")
    return credentials.partition(":")[2] or None if at else None


def _without_password(url: str) -> str:
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at:
        return url
    user = credentials.partition(":")[0]
    return f"{scheme}{sep}{user + ':***' if user else '***'}@{host}"


# ---------------------------------------------------------------------- the process's state

_active: SharedState | None = None
_active_url: str | None = None
_active_lock = threading.Lock()


def activate(url: str | None, *, environ: Mapping[str, str] | None = None) -> SharedState | None:
    """The process's shared state for ``url`` (``PI_MCP_SHARED_STATE`` wins); None: files only.

    One connection per process: every store of every adapter in it uses the same one.
    """
    global _active, _active_url
    env = os.environ if environ is None else environ
    url = env.get(ENV_URL) or url
    with _active_lock:
        if not url:
            return None
        if _active is None or _active_url != url:
            _active, _active_url = SharedState(url), url
        return _active


def active() -> SharedState | None:
    """The shared state in effect, if any (activating ``PI_MCP_SHARED_STATE`` on first use)."""
    if _active is not None:
        return _active
    return activate(None) if os.environ.get(ENV_URL) else None


def deactivate() -> None:
    """Back to files only (tests)."""
    global _active, _active_url
    with _active_lock:
        _active, _active_url = None, None
