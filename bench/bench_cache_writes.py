"""Storing a large catalog in the metadata cache: coalesced writes against one rewrite per server.

The catalog is the development set's (491 servers, 2,375 tools, from
``../shared/eval/etom-dev/etom_dev.json``); when that file is absent, a generated catalog of
the same shape. Each row stores every server once into an empty ``mcp-cache.json``, as a first
listing pass does, and counts the time until the last store is on disk:

- "one rewrite per server" (the baseline): each store is written before the next one starts
  (``store`` then ``flush``), the whole file rewritten each time, as every store was before
  writes were coalesced;
- "coalesced (ours)": every store one after the other, then ``flush``; stores that follow each
  other closely reach the file together.

Both write the same file (checked). Target: the whole catalog stored in at most 1 s.

A second table times the engine's side of the same pass: every server published to the
engine's catalog state (``CatalogState.publish``, which stores into the cache) while all of
them are being listed, with a listener that reads the catalog as the registered surfaces do.
The baseline tells listeners after every listing (``NOTIFY_INTERVAL_S = 0``), so the catalog is
rebuilt once per server; ours tells them at most every 0.25 s and once when the pass ends.

Usage: .venv/bin/python bench/bench_cache_writes.py [--rounds N] [--set FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.engine import _catalog_state

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

REPO = Path(__file__).resolve().parents[1]
DEV_SET = REPO.parent / "shared" / "eval" / "etom-dev" / "etom_dev.json"
TARGET_S = 1.0

Catalog = dict[str, ServerMetadata]


def development_catalog(path: Path) -> tuple[Catalog, str] | None:
    if not path.exists():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    tools: dict[str, list[dict[str, Any]]] = {}
    for tool in data["tools"]:
        definition = {
            "name": tool["name"],
            "description": tool.get("description") or "",
            "inputSchema": tool.get("input_schema") or {"type": "object"},
        }
        tools.setdefault(tool["server"], []).append(definition)
    catalog = {server: ServerMetadata(tools=tuple(found)) for server, found in tools.items()}
    return catalog, "development set"


def generated_catalog(servers: int = 491, tools_per_server: int = 5) -> tuple[Catalog, str]:
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to look for."}},
        "required": ["query"],
    }
    catalog = {
        f"server-{s:03d}": ServerMetadata(
            tools=tuple(
                {
                    "name": f"tool_{t}",
                    "description": f"Tool {t} of server {s}: does one thing well. " * 8,
                    "inputSchema": schema,
                }
                for t in range(tools_per_server)
            )
        )
        for s in range(servers)
    }
    return catalog, "generated"


def store_all(catalog: Catalog, *, flush_each: bool) -> tuple[float, bytes]:
    """Seconds to store ``catalog`` into a new cache until all is on disk, and the file."""
    with tempfile.TemporaryDirectory(prefix="pi-mcp-bench-cache-") as tmp:
        path = Path(tmp) / "mcp-cache.json"
        cache = MetadataCache(path, clock=lambda: 1_700_000_000.0)
        entries = {name: ServerEntry(command="server", args=(name,)) for name in catalog}
        started = time.perf_counter()
        for name, metadata in catalog.items():
            cache.store(name, entries[name], metadata)
            if flush_each:
                cache.flush()
        cache.flush()
        elapsed = time.perf_counter() - started
        assert not cache.warnings, cache.warnings
        return elapsed, path.read_bytes()


def publish_all(catalog: Catalog, *, interval_s: float) -> tuple[float, int]:
    """Seconds to publish ``catalog`` to the engine's state during one listing pass (a
    listener reading the catalog each time it hears), and how many tools it ends with."""
    saved = _catalog_state.NOTIFY_INTERVAL_S
    _catalog_state.NOTIFY_INTERVAL_S = interval_s
    try:
        with tempfile.TemporaryDirectory(prefix="pi-mcp-bench-state-") as tmp:
            entries = {name: ServerEntry(command="server", args=(name,)) for name in catalog}
            state = _catalog_state.CatalogState(
                cache=MetadataCache(Path(tmp) / "mcp-cache.json"),
                agent_dir=Path(tmp),
                entries=lambda: entries,
                settings=Settings,
            )
            state.on_changed(lambda: len(state.catalog.tools()))
            started = time.perf_counter()
            state.begin_listing(list(catalog))
            for name, metadata in catalog.items():
                state.publish(name, metadata)
                state.end_listing(name)
            tools = len(state.catalog.tools())
            state.cache.flush()
            return time.perf_counter() - started, tools
    finally:
        _catalog_state.NOTIFY_INTERVAL_S = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="coalesced runs (median)")
    parser.add_argument("--set", type=Path, default=DEV_SET, help="labelled set with the tools")
    options = parser.parse_args()
    catalog, source = development_catalog(options.set) or generated_catalog()
    tools = sum(len(m.tools) for m in catalog.values())

    baseline_s, baseline_file = store_all(catalog, flush_each=True)
    ours: list[float] = []
    files: list[bytes] = []
    for _ in range(options.rounds):
        elapsed, written = store_all(catalog, flush_each=False)
        ours.append(elapsed)
        files.append(written)
    assert all(f == baseline_file for f in files), "both ways must write the same file"
    ours_s = statistics.median(ours)

    print(
        f"Storing {len(catalog)} servers ({tools:,} tools, {source}; "
        f"{len(baseline_file) / 1e6:.1f} MB file) into an empty metadata cache"
    )
    rows: list[tuple[str, float, Callable[[float], str]]] = [
        ("one rewrite per server (baseline)", baseline_s, lambda _s: ""),
        (
            f"coalesced (ours, median of {options.rounds})",
            ours_s,
            lambda s: f"<= {TARGET_S:.0f} s: {'met' if s <= TARGET_S else 'NOT met'}",
        ),
    ]
    print(f"{'how':<36} {'total s':>8} {'per server ms':>14} {'vs baseline':>12}  target")
    for name, seconds, verdict in rows:
        print(
            f"{name:<36} {seconds:8.2f} {seconds / len(catalog) * 1000:14.2f} "
            f"{seconds / baseline_s:11.3f}x  {verdict(seconds)}"
        )
    rebuild_s, rebuild_tools = publish_all(catalog, interval_s=0.0)
    coalesced_s, coalesced_tools = publish_all(catalog, interval_s=_catalog_state.NOTIFY_INTERVAL_S)
    assert rebuild_tools == coalesced_tools, "both ways must end with the same catalog"
    print(f"\nPublishing the same {len(catalog)} servers to the engine during one listing pass")
    print(f"{'how':<36} {'total s':>8} {'vs baseline':>12}")
    for name, seconds in (
        ("catalog rebuilt per listing (baseline)", rebuild_s),
        ("listeners told every 0.25 s (ours)", coalesced_s),
    ):
        print(f"{name:<36} {seconds:8.2f} {seconds / rebuild_s:11.3f}x")
    record(
        "Metadata cache writes",
        f"publish {len(catalog)} servers to the engine in one listing pass",
        coalesced_s,
        rebuild_s,
        unit="s",
        baseline_name="catalog rebuilt after every listing",
    )
    record(
        "Metadata cache writes",
        f"store {len(catalog)} servers ({tools:,} tools) (target <= {TARGET_S:g} s)",
        ours_s,
        baseline_s,
        unit="s",
        baseline_name="one rewrite of the file per server",
    )


if __name__ == "__main__":
    main()
