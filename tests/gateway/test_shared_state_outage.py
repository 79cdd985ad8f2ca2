"""A Redis that stops answering (a real ``redis-server`` stopped with SIGSTOP, as behind a
network partition) never holds up an event loop for longer than one exchange: the thread that
runs a gateway's or a host's loop gets the files' answer at once while Redis is known to be
away, never waits for another thread's exchange to write, and the next try is made in a thread
of its own.

The client's socket timeout is made long (:data:`SLOW_TIMEOUT_S`), so that a call that waited
for Redis is told apart from one that did not by seconds, not milliseconds."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest
import redis as redis_client

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter.engine._learned import Lesson, SearchMemory

from ._team_services import RedisServer, team_redis

SLOW_TIMEOUT_S = 4.0
"""The socket timeout these tests give Redis calls: a call that waits for it takes this long."""
NOT_WAITED_S = 1.5
"""Longer than any call that does not wait for Redis takes on a busy machine, far shorter than
:data:`SLOW_TIMEOUT_S`."""


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with team_redis(tmp_path / "redis", activate=False) as server:
        yield server


def slow_shared_state(url: str) -> shared_state.SharedState:
    client = redis_client.Redis.from_url(
        url, socket_timeout=SLOW_TIMEOUT_S, socket_connect_timeout=SLOW_TIMEOUT_S
    )
    return shared_state.SharedState(url, client=client)


def timed(call: Callable[..., object], *args: object) -> float:
    mark = time.monotonic()
    call(*args)
    return time.monotonic() - mark


def test_an_event_loop_pays_one_timeout_per_outage_and_a_thread_of_its_own_tries_again(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_state, "RETRY_AFTER_S", 0.2)
    shared = slow_shared_state(redis.url)
    shared.put("notes", "before", {"n": 0})
    redis.pause()
    resumed = False
    try:

        async def on_the_loop() -> list[float]:
            first = timed(lambda: shared.table("notes"))  # finds Redis gone: one timeout
            assert first >= SLOW_TIMEOUT_S * 0.9
            # Ten retry periods: before, the first call after each one waited a timeout.
            durations: list[float] = []
            deadline = time.monotonic() + 10 * shared_state.RETRY_AFTER_S
            count = 0
            while time.monotonic() < deadline:
                count += 1
                durations.append(timed(shared.put, "notes", f"k{count}", {"n": count}))
                durations.append(timed(lambda: shared.table("notes")))
                durations.append(timed(lambda: shared.record("notes", "before")))
                await anyio.sleep(0.05)
            return durations

        durations = anyio.run(on_the_loop)
        assert max(durations) < NOT_WAITED_S, durations
        assert shared.status().reachable is False
        assert shared.status().pending_writes > 0
        redis.resume()
        resumed = True

        async def until_it_answers() -> dict[str, object] | None:
            # The loop's calls never try Redis themselves: the retry thread finds it back.
            with anyio.fail_after(30):
                while (table := shared.table("notes")) is None:
                    await anyio.sleep(0.05)
            return table

        table = anyio.run(until_it_answers)
    finally:
        if not resumed:
            redis.resume()
    assert table is not None
    # What was queued meanwhile was written before the read that answered.
    assert table["before"] == {"n": 0}
    assert len(table) > 2
    assert shared.status().reachable is True
    assert shared.status().pending_writes == 0


def test_a_write_never_waits_for_another_threads_exchange(redis: RedisServer) -> None:
    shared = slow_shared_state(redis.url)
    assert shared.table("notes") == {}
    redis.pause()
    blocked = threading.Thread(target=shared.table, args=("notes",))
    try:
        blocked.start()
        time.sleep(0.3)  # the thread is now waiting for Redis, in its exchange
        assert blocked.is_alive()
        # From a plain thread and from an event loop, a write is queued, not made to wait.
        assert timed(lambda: shared.put("notes", "off-loop", {"n": 1})) < NOT_WAITED_S

        async def on_the_loop() -> tuple[float, float]:
            wrote = timed(lambda: shared.put("notes", "on-loop", {"n": 2}))
            # A read on the loop waits for the exchange in progress one TIMEOUT_S at most.
            read = timed(lambda: shared.table("notes"))
            return wrote, read

        wrote, read = anyio.run(on_the_loop)
        assert wrote < NOT_WAITED_S
        assert read < shared_state.TIMEOUT_S + NOT_WAITED_S
        assert blocked.is_alive()  # all of that happened while the other exchange waited
    finally:
        redis.resume()
        blocked.join(timeout=30)
    # Redis answered the waiting exchange once resumed (or it timed out, and the next one
    # tries): either way the queued writes follow.
    table: dict[str, object] | None = None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        table = shared.table("notes")  # off the loop: tries again once its time comes
        if table is not None:
            break
        time.sleep(0.1)
    assert table == {"off-loop": {"n": 1}, "on-loop": {"n": 2}}


def test_a_value_queued_during_an_exchange_that_writes_an_older_one_is_written_after_it(
    redis: RedisServer,
) -> None:
    shared = slow_shared_state(redis.url)
    assert shared.table("notes") == {}
    redis.pause()
    # This thread's exchange takes the queue ({"n": 1}) and waits for Redis with it.
    older = threading.Thread(target=shared.put, args=("notes", "k", {"n": 1}))
    try:
        older.start()
        time.sleep(0.3)
        assert older.is_alive()
        assert timed(shared.put, "notes", "k", {"n": 2}) < NOT_WAITED_S  # queued behind it
    finally:
        redis.resume()
        older.join(timeout=30)
    # The exchange wrote {"n": 1} once Redis answered, then what was queued meanwhile.
    deadline = time.monotonic() + 30
    while shared.status().pending_writes and time.monotonic() < deadline:
        shared.refresh()
        time.sleep(0.1)
    assert shared.record("notes", "k") == (True, {"n": 2})


def test_learned_words_are_read_from_the_team_in_a_thread_of_their_own(
    redis: RedisServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shared_state, "TIMEOUT_S", SLOW_TIMEOUT_S)
    shared_state.activate(redis.url)
    try:
        now = [1_000_000.0]
        searcher = SearchMemory(tmp_path / "one" / "learned.json", clock=lambda: now[0])
        teacher = SearchMemory(tmp_path / "two" / "learned.json", clock=lambda: now[0])
        teacher.learn(Lesson(("github", "search_issues"), ("ticket",), int(now[0] * 1000)))
        redis.pause()
        try:
            now[0] += 60
            # The team's table is due to be read again; a search does not wait for it.
            assert timed(lambda: searcher.words) < NOT_WAITED_S
        finally:
            redis.resume()
        now[0] += 60
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if ("github", "search_issues") in searcher.words.scores("ticket"):
                break
            now[0] += 60
            time.sleep(0.2)
        assert ("github", "search_issues") in searcher.words.scores("ticket")
    finally:
        shared_state.deactivate()


@pytest.mark.slow
def test_writers_on_threads_and_a_loop_through_outages_lose_nothing_and_never_deadlock(
    redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four threads and an event loop write and read at once while Redis stops and answers
    again three times: every record ends up in Redis with the value written last, and no
    caller is left waiting."""
    monkeypatch.setattr(shared_state, "RETRY_AFTER_S", 0.1)
    shared = shared_state.SharedState(
        redis.url,
        client=redis_client.Redis.from_url(
            redis.url, socket_timeout=0.3, socket_connect_timeout=0.3
        ),
    )
    stop = threading.Event()
    last: dict[str, int] = {}
    last_lock = threading.Lock()
    errors: list[BaseException] = []

    def write_and_read(writer: str) -> None:
        try:
            count = 0
            while not stop.is_set():
                count += 1
                key = f"{writer}-{count % 7}"
                with last_lock:  # the order of puts of one key is the order of this lock
                    last[key] = count
                    shared.put("notes", key, {"n": count})
                shared.table("notes")
                shared.record("notes", key)
                time.sleep(0.005)
        except BaseException as exc:
            errors.append(exc)

    async def on_the_loop() -> None:
        count = 0
        while not stop.is_set():
            count += 1
            key = f"loop-{count % 7}"
            with last_lock:
                last[key] = count
                shared.put("notes", key, {"n": count})
            shared.table("notes")
            await anyio.sleep(0.005)

    threads = [threading.Thread(target=write_and_read, args=(f"t{i}",)) for i in range(4)]
    loop = threading.Thread(target=anyio.run, args=(on_the_loop,))
    for thread in [*threads, loop]:
        thread.start()
    try:
        for _ in range(3):
            time.sleep(0.7)
            redis.pause()
            time.sleep(1.0)
            redis.resume()
        time.sleep(0.7)
    finally:
        redis.resume()
        stop.set()
        for thread in [*threads, loop]:
            thread.join(timeout=30)
    assert not [t for t in [*threads, loop] if t.is_alive()], "a caller was left waiting"
    assert not errors
    deadline = time.monotonic() + 30
    while shared.status().pending_writes and time.monotonic() < deadline:
        shared.refresh()
        time.sleep(0.1)
    assert shared.status().pending_writes == 0
    stored = redis_client.Redis.from_url(redis.url).hgetall("pi-mcp:notes")
    found = {key.decode(): json.loads(value)["n"] for key, value in stored.items()}
    assert found == last
