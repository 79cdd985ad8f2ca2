"""Search latency and index build time: our ranking against seed 004's and plain BM25.

Usage: ``.venv/bin/python bench/bench_search.py [--set FILE] [--queries N] [--sizes A,B]``

The catalog is the labelled set's (2,375 tools in the development set); larger sizes replicate
it under renamed servers (``<server> copy 2``...), so the vocabulary of tool text stays the
same while server names and posting lists grow. Queries are an evenly spaced sample of the
set's queries (every level), the same sample for every ranking and size. Query time is
:meth:`SearchIndex.search` with ``limit=20``, as ``eval-search`` and the model-facing tools
call it. Ratios compare with BM25 measured in the same run.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pi_mcp_adapter.catalog._eval import load_labelled_set
from pi_mcp_adapter.catalog._metadata import ToolInfo
from pi_mcp_adapter.catalog._search import RANKINGS, SearchIndex

DEV_SET = Path(__file__).resolve().parents[2] / "shared" / "eval" / "etom-dev" / "etom_dev.json"
RANKING_ORDER = ("default", "seed004", "bm25")


def replicate(tools: tuple[ToolInfo, ...], size: int) -> list[ToolInfo]:
    """``size`` tools: the catalog, then copies of it whose servers are renamed."""
    out: list[ToolInfo] = list(tools[:size])
    copy = 2
    while len(out) < size:
        for tool in tools:
            if len(out) >= size:
                break
            server = f"{tool.server} copy {copy}"
            out.append(dataclasses.replace(tool, server=server, name=f"{tool.name}_copy{copy}"))
        copy += 1
    return out


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=DEV_SET, help="labelled set (JSON)")
    parser.add_argument("--queries", type=int, default=120, help="queries sampled per run")
    parser.add_argument("--sizes", default="2375,25000", help="catalog sizes, comma-separated")
    args = parser.parse_args()
    console = Console()
    if not args.set.exists():
        console.print(
            f"The labelled set {args.set} is not here; nothing to measure. "
            "Pass --set FILE to use another one."
        )
        return 0

    labelled = load_labelled_set(args.set)
    texts = [q.query for q in labelled.queries if q.query.strip()]
    step = max(1, len(texts) // max(1, args.queries))
    sample = texts[::step][: args.queries]
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    table = Table(title=f"Tool search: {len(sample)} queries per run, limit 20 (2-core machine)")
    for column in ("tools", "ranking", "build s", "query p50 ms", "query p95 ms", "p95 vs bm25"):
        table.add_column(column, justify="right" if column != "ranking" else "left")
    for size in sizes:
        catalog = replicate(labelled.tools, size)
        rows: dict[str, tuple[float, float, float]] = {}
        for name in RANKING_ORDER:
            if name not in RANKINGS:
                continue
            gc.collect()
            started = time.perf_counter()
            index = SearchIndex(catalog, ranking=name)
            build_s = time.perf_counter() - started
            index.search(sample[0], limit=20)  # warm the stemmer's cache like a live process
            latencies: list[float] = []
            for query in sample:
                started = time.perf_counter()
                index.search(query, limit=20)
                latencies.append((time.perf_counter() - started) * 1000.0)
            rows[name] = (build_s, statistics.median(latencies), percentile(latencies, 0.95))
            console.print(f"  measured {name} at {size} tools", style="dim")
        base_p95 = rows["bm25"][2] if "bm25" in rows else None
        for name, (build_s, p50, p95) in rows.items():
            ratio = f"{p95 / base_p95:.2f}x" if base_p95 else "-"
            table.add_row(
                f"{len(catalog):,}", name, f"{build_s:.2f}", f"{p50:.2f}", f"{p95:.2f}", ratio
            )
        table.add_section()
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
