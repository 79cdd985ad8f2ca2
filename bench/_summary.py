"""One row per headline number, collected by ``bench/run`` into a single table.

A benchmark script calls :func:`record` for each of its headline comparisons. When
``PI_MCP_BENCH_SUMMARY`` names a file (``bench/run`` sets it), the row is appended there as one
JSON line; otherwise nothing happens and the script prints only its own table.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SUMMARY_ENV = "PI_MCP_BENCH_SUMMARY"


def record(
    benchmark: str,
    metric: str,
    ours: float,
    baseline: float | None,
    *,
    unit: str,
    baseline_name: str,
    lower_is_better: bool = True,
) -> None:
    """Add one row: ``ours`` against ``baseline`` (both in ``unit``), measured in this run."""
    target = os.environ.get(SUMMARY_ENV)
    if not target:
        return
    row = {
        "benchmark": benchmark,
        "metric": metric,
        "ours": ours,
        "baseline": baseline,
        "unit": unit,
        "baselineName": baseline_name,
        "lowerIsBetter": lower_is_better,
    }
    with Path(target).open("a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
