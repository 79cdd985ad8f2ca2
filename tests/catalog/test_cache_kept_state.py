"""What a search keeps of the metadata cache (``engine/_search_facts.py``): the digest of the
store as a load read it, which any store by any process changes, and when the first of a set
of entries stops being fresh, by the same rules that judge one entry."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata, config_hash
from pi_mcp_adapter.catalog._cache import entry_fresh_until_ms, entry_is_fresh

from .test_cache import DAY_S, ENTRY, METADATA, START_S, Clock

_numbers = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.integers(min_value=-(2**60), max_value=2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 999, 1000, 86_400_000, 2**53 - 1, 2**53]),
)


@given(
    cached_at=st.one_of(_numbers, st.floats(min_value=1e12, max_value=2e12)),
    ttl_ms=_numbers,
    max_age_ms=st.sampled_from([0.0, 1000.0, 7 * DAY_S * 1000]),
    offset_ms=st.floats(min_value=-1e10, max_value=1e10),
)
def test_an_entry_is_fresh_at_every_moment_before_it_stops_being_fresh(
    cached_at: Any, ttl_ms: Any, max_age_ms: float, offset_ms: float
) -> None:
    until = entry_fresh_until_ms(cached_at, ttl_ms, max_age_ms=max_age_ms)
    base = cached_at if isinstance(cached_at, float) and math.isfinite(cached_at) else 1.5e12
    now_ms = base + offset_ms
    if now_ms < until:
        assert entry_is_fresh(cached_at, ttl_ms, now_ms=now_ms, max_age_ms=max_age_ms)
    elif math.isfinite(until) and now_ms > until:
        assert not entry_is_fresh(cached_at, ttl_ms, now_ms=now_ms, max_age_ms=max_age_ms)


def test_the_first_entry_to_go_stale_sets_when_a_set_stops_being_fresh(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    clock = Clock()
    MetadataCache(path, clock=clock).store("old", ENTRY, METADATA)
    clock.now_s = START_S + DAY_S
    MetadataCache(path, clock=clock).store("new", ENTRY, METADATA)

    cache = MetadataCache(path, clock=clock, max_age_s=7 * DAY_S)

    assert cache.fresh_until_ms(["new"]) == (START_S + 8 * DAY_S) * 1000
    assert cache.fresh_until_ms(["old", "new"]) == (START_S + 7 * DAY_S) * 1000
    assert cache.fresh_until_ms(["new", "never-stored"]) == -math.inf


def _loaded_state(path: Path) -> str | None:
    cache = MetadataCache(path)
    cache.load()
    return cache.loaded_state


def test_a_store_by_any_process_changes_what_a_load_reads(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    assert _loaded_state(path) is None  # no store: nothing to vouch for
    writer = MetadataCache(path)
    writer.store("srv", ENTRY, METADATA)
    writer.flush()
    first = _loaded_state(path)

    assert first is not None
    assert _loaded_state(path) == first

    # Another process lists the server again, with the same tools: a new entry all the same.
    other = MetadataCache(path)
    other.store("srv", ENTRY, METADATA)
    other.flush()
    assert _loaded_state(path) not in (None, first)


def test_a_cache_that_stored_since_its_load_vouches_for_nothing(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    MetadataCache(path).store("srv", ENTRY, METADATA)
    cache = MetadataCache(path)
    cache.load()
    assert cache.loaded_state is not None

    cache.store("another", ENTRY, ServerMetadata(tools=({"name": "t"},)))

    assert cache.loaded_state is None


def test_an_export_written_by_another_program_is_read_into_the_state(tmp_path: Path) -> None:
    path = tmp_path / "mcp-cache.json"
    writer = MetadataCache(path)
    writer.store("srv", ENTRY, METADATA)
    writer.flush()
    before = _loaded_state(path)
    # The TypeScript adapter writes the export: the next load imports it.
    entry: dict[str, Any] = {
        "configHash": config_hash(ENTRY),
        "cachedAt": START_S * 1000 + 5,
        "tools": [{"name": "added"}],
        "resources": [],
    }
    document = json.loads(path.read_text())
    document["servers"]["ts"] = entry
    path.write_text(json.dumps(document))

    assert _loaded_state(path) not in (None, before)
