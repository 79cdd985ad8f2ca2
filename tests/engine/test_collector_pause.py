"""While a build pauses the garbage collector, the garbage others make is still freed.

A first build of a large catalog runs for most of a minute with the collector paused, and a
gateway serves requests meanwhile; each leaves cyclic garbage (the MCP SDK's runner and
connection of a request refer to each other). The pause collects the youngest generation a few
times a second, and never an older one: that is where what the build made waits, and walking
it is the stall the pause is for.
"""

from __future__ import annotations

import gc
import threading
import time
import weakref
from collections.abc import Iterator

import pytest

from _large_catalog import collections_counted  # tests/ is on sys.path
from pi_mcp_adapter._collector import YOUNG_COLLECTION_INTERVAL_S, collector_paused

YOUNG_COLLECTOR_NAME = "pi-mcp-young-collections"
WAIT_S = 30.0
"""Bound on every wait: the machine may be busy."""


class Cycle:
    """An object on a reference cycle: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.itself = self


@pytest.fixture
def collections_seen() -> Iterator[list[int]]:
    """The generation of each collection the pause's own thread makes while the test runs
    (not another test's leftover thread collecting for itself)."""
    with collections_counted(YOUNG_COLLECTOR_NAME) as seen:
        yield seen


def _young_collector_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == YOUNG_COLLECTOR_NAME]


def _freed_within(ref: weakref.ref[Cycle], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while ref() is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    return ref() is None


def test_cyclic_garbage_made_during_a_pause_is_freed_before_it_ends(
    collections_seen: list[int],
) -> None:
    assert gc.isenabled()
    with collector_paused():
        built = [Cycle() for _ in range(1000)]  # what the build keeps
        garbage = weakref.ref(Cycle())  # what a request left behind
        assert _freed_within(garbage, WAIT_S)
        assert not gc.isenabled()
        assert all(item.itself is item for item in built)
    # The pause collected only the youngest generation: the older ones, where what the build
    # made moves to, were not walked.
    assert collections_seen
    assert set(collections_seen) == {0}
    assert gc.isenabled()


def test_the_young_collections_stop_with_the_last_pause() -> None:
    with collector_paused():
        with collector_paused():
            assert len(_young_collector_threads()) == 1
        assert len(_young_collector_threads()) == 1  # the outer pause still holds
    assert _young_collector_threads() == []
    assert gc.isenabled()


def test_a_collector_turned_off_by_its_owner_stays_off(collections_seen: list[int]) -> None:
    gc.disable()
    try:
        with collector_paused():
            garbage = weakref.ref(Cycle())
            assert _young_collector_threads() == []
            assert not _freed_within(garbage, 4 * YOUNG_COLLECTION_INTERVAL_S)
        assert not gc.isenabled()
        assert collections_seen == []
    finally:
        gc.enable()
        gc.collect()
