"""Pausing the garbage collector while a large structure is built.

Building a catalog of tens of thousands of tools (its configuration, the cached entries, the
catalog, a search index) allocates millions of objects that live on. Every collection set off
meanwhile walks all of them holding the interpreter lock: at 95,000 tools collections took
three quarters of reading the cached entries, and one set off while an index was built stalled
every request for 0.1-1 s. So builders pause the collector, and what lives as long as the
process is frozen (``gc.freeze``) by its owner afterwards.

A pause stops only the collections that walk what the build made. The requests a process
serves meanwhile leave cyclic garbage (the MCP SDK's runner and connection of each request
refer to each other: about 3.5 KB a call), and a first build of 95,000 tools takes most of a
minute: paused whole, a gateway calling throughout ended the build 40-150 MB above one left
alone. So while a pause lasts, a thread collects the youngest generation twice a second:
each collection walks only what was allocated since the last one (the survivors move on to an
older generation, which no collection looks at until the pause ends), and the requests'
garbage is freed within half a second of being made. At 95,000 tools, with a gateway client
calling throughout a first start's build, the process peaked at 400-412 MB against 431-434
before, and the client's longest wait fell from 0.4 s to 0.1-0.14 s (the collection at the
build's end walks less). What is left above a build with no calls, about 20 MB, is memory
the allocator holds in part-used arenas: requests and the build allocated side by side.

Building also leaves memory the allocator keeps: the C library's allocator returns freed
blocks to the system only from the top of its heaps, so the temporaries of a build (and the
allocations of a build in a worker thread, which gets an arena of its own) stay resident
after they are freed. After a large build the owner hands them back
(:func:`return_freed_memory`): 60-70 MB at 95,000 tools.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["collector_paused", "return_freed_memory"]

YOUNG_COLLECTION_INTERVAL_S = 0.5
"""How often the youngest generation is collected while the collector is paused."""

_paused_lock = threading.Lock()
_paused_builds = 0
_resume_collector = False
_young_collections: _YoungCollections | None = None


class _YoungCollections:
    """A daemon thread that collects the youngest generation every
    :data:`YOUNG_COLLECTION_INTERVAL_S` until stopped (see the module)."""

    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="pi-mcp-young-collections", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(YOUNG_COLLECTION_INTERVAL_S):
            gc.collect(0)

    def stop(self) -> None:
        self._stopped.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection of what the block builds (nested and concurrent blocks share
    one pause; the youngest generation is still collected, see the module); the collector
    runs again as before when the last one ends, unless someone else had turned it off."""
    global _paused_builds, _resume_collector, _young_collections
    with _paused_lock:
        if _paused_builds == 0:
            _resume_collector = gc.isenabled()
            if _resume_collector:
                _young_collections = _YoungCollections()
        _paused_builds += 1
        gc.disable()
    stopping: _YoungCollections | None = None
    try:
        yield
    finally:
        with _paused_lock:
            _paused_builds -= 1
            if _paused_builds == 0:
                stopping, _young_collections = _young_collections, None
                if _resume_collector:
                    gc.enable()
        if stopping is not None:  # joined outside the lock: a finalizer may pause again
            stopping.stop()


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (``None`` elsewhere: musl, macOS and others lack it)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def return_freed_memory() -> None:
    """Give the memory freed since the last large build back to the system, where the C
    library can (a few milliseconds at 95,000 tools; nothing elsewhere)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
