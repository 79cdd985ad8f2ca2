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
a fraction of a millisecond, far below the cost of the tool call around it.

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
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
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
_DELETE: Final = object()

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
        self._lock = threading.Lock()
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
        self._exchange(lambda r: True)

    # ------------------------------------------------------------------ transport

    def _send(self, changes: Mapping[tuple[str, str], object]) -> None:
        with self._lock:
            self._outbox.update(changes)
            for item, value in changes.items():
                if isinstance(value, str):
                    self._held[item] = value
                else:
                    self._held.pop(item, None)
        self._exchange(lambda r: True)

    def _hold(self, name: str, key: str, value: str) -> None:
        with self._lock:
            self._held[(name, key)] = value

    def _keep_published(self, client: redis.Redis) -> None:
        """Publish the held records again when Redis lost them (the sentinel is missing or
        changed). Call with ``self._lock`` held, Redis answering."""
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
        if self._epoch is not None and self._held:
            logger.warning(
                "shared state %s lost its records (restarted empty?): publishing the %d "
                "this replica holds again",
                _without_password(self.url),
                len(self._held),
            )
            pipe = client.pipeline(transaction=False)
            for (name, key), value in self._held.items():
                pipe.hsetnx(KEY_PREFIX + name, key, value)
            pipe.execute()
        self._epoch = epoch

    def _exchange(self, operation: Callable[[redis.Redis], Any], *, force: bool = False) -> Any:
        """Write the outbox, then run ``operation``; :data:`_UNANSWERED` when Redis is down."""
        import redis as redis_lib

        with self._lock:
            if self._down_since is not None and not force and self._clock() < self._retry_at:
                return _UNANSWERED
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
                    for item, value in outbox.items():
                        if self._outbox.get(item) is value:
                            del self._outbox[item]
                result = operation(self._client)
            except (redis_lib.RedisError, OSError) as exc:
                if self._down_since is None:
                    logger.warning(
                        "shared state %s does not answer (%s): serving from local files",
                        _without_password(self.url),
                        exc,
                    )
                    self._down_since = self._clock()
                self._error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                self._epoch_check_at = 0.0  # it may come back empty: look first when it answers
                self._retry_at = self._clock() + RETRY_AFTER_S
                return _UNANSWERED
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
