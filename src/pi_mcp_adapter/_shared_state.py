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
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

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
_DELETE: Final = object()


@dataclass(frozen=True, slots=True)
class SharedStateStatus:
    url: str
    """The URL without its password."""
    reachable: bool
    pending_writes: int
    error: str | None


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
        return records

    def record(self, name: str, key: str) -> tuple[bool, Any]:
        """``(answered, value)``: one record of ``name`` (value None when absent)."""
        raw = self._exchange(lambda r: r.hget(KEY_PREFIX + name, key))
        if raw is _UNANSWERED:
            return False, None
        try:
            return True, json.loads(raw) if raw is not None else None
        except ValueError:
            return True, None

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

        def transaction(pipe: redis_lib.client.Pipeline) -> None:
            raw = pipe.hget(full, key)
            current = json.loads(raw) if raw is not None else None
            value = redact(json.dumps(combine(current), ensure_ascii=False, default=str))
            pipe.multi()
            pipe.hset(full, key, value)

        answer = self._exchange(lambda r: r.transaction(transaction, full))
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
            )

    def describe(self) -> str:
        """One line for ``pi-mcp status``."""
        state = self.status()
        if state.reachable:
            return f"shared state: {state.url} (connected)"
        return (
            f"shared state: {state.url} unreachable ({state.error}); serving from local files, "
            f"{state.pending_writes} write(s) queued until it answers"
        )

    def ping(self) -> bool:
        """Whether Redis answers now (and the queue is written)."""
        return self._exchange(lambda r: r.ping(), force=True) is not _UNANSWERED

    # ------------------------------------------------------------------ transport

    def _send(self, changes: Mapping[tuple[str, str], object]) -> None:
        with self._lock:
            self._outbox.update(changes)
        self._exchange(lambda r: True)

    def _exchange(self, operation: Callable[[redis.Redis], Any], *, force: bool = False) -> Any:
        """Write the outbox, then run ``operation``; :data:`_UNANSWERED` when Redis is down."""
        import redis as redis_lib

        with self._lock:
            if self._down_since is not None and not force and self._clock() < self._retry_at:
                return _UNANSWERED
            outbox = dict(self._outbox)
            try:
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
