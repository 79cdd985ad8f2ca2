"""Pausing the garbage collector while a large structure is built.

Building a catalog of tens of thousands of tools (its configuration, the cached entries, the
catalog, a search index) allocates millions of objects that live on. Every collection set off
meanwhile walks all of them holding the interpreter lock: at 95,000 tools collections took
three quarters of reading the cached entries, and one set off while an index was built stalled
every request for 0.1-1 s. So builders pause the collector, and what lives as long as the
process is frozen (``gc.freeze``) by its owner afterwards.

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

_paused_lock = threading.Lock()
_paused_builds = 0
_resume_collector = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic collection inside the block (nested and concurrent blocks share one
    pause); the collector runs again as before when the last one ends, unless someone else
    had turned it off."""
    global _paused_builds, _resume_collector
    with _paused_lock:
        if _paused_builds == 0:
            _resume_collector = gc.isenabled()
        _paused_builds += 1
        gc.disable()
    try:
        yield
    finally:
        with _paused_lock:
            _paused_builds -= 1
            if _paused_builds == 0 and _resume_collector:
                gc.enable()


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
