"""Pausing the garbage collector while a large structure is built.

Building a catalog of tens of thousands of tools (its configuration, the cached entries, the
catalog, a search index) allocates millions of objects that live on. Every collection set off
meanwhile walks all of them holding the interpreter lock: at 95,000 tools collections took
three quarters of reading the cached entries, and one set off while an index was built stalled
every request for 0.1-1 s. So builders pause the collector, and what lives as long as the
process is frozen (``gc.freeze``) by its owner afterwards.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]

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
