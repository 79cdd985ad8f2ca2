"""Search that learns from use, measured honestly: half of each labelled set is replayed as
history (its words led to a call of its gold tool), the other half is scored, with and without
what was learned. The learned figure is reported beside the cold one on the same half, never in
its place (``pi-mcp eval-search --history`` prints the same).

A split in half leaves many scored requests asking for tools the history half never called;
learning cannot help those, so each set is also reported on the scored requests whose gold
tool was called in history ("gold called in history"), beside the whole half.

Sets: the development set beside the repository (``../shared/eval/etom-dev/etom_dev.json``,
skipped when absent) and the two held-out sets in ``bench/data``.

Usage: .venv/bin/python bench/bench_search_learned.py [--ranking lexical|hybrid|default]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record
from pi_mcp_adapter.catalog import (
    evaluate,
    gold_called_in_history,
    load_labelled_set,
    split_history,
)

REPO = Path(__file__).resolve().parents[1]
SETS = {
    "etom-dev": REPO.parent / "shared" / "eval" / "etom-dev" / "etom_dev.json",
    "real servers, held out": REPO / "bench" / "data" / "real_servers_held_out.json",
    "other servers, held out": REPO / "bench" / "data" / "other_servers_held_out.json",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranking", default="default")
    args = parser.parse_args()
    print(f"{'set':<26}{'scored requests':<52}{'metric':<22}{'cold':>8}{'history':>9}")
    for name, path in SETS.items():
        if not path.exists():
            print(f"{name:<26}(not found: {path})")
            continue
        learned, scored = split_history(load_labelled_set(path))
        halves = (
            ("half replayed as history", scored),
            ("gold called in history", gold_called_in_history(scored, learned)),
        )
        for half, queries in halves:
            cold = evaluate(queries, ranking=args.ranking)
            warm = evaluate(queries, ranking=args.ranking, learned=learned)
            single = sum(1 for q in queries.queries if q.match == "any")
            steps = sum(1 for q in queries.queries if q.match == "all")
            rows = (
                ("single-tool hit@5", cold.overall.hit_at_5, warm.overall.hit_at_5),
                ("single-tool hit@1", cold.overall.hit_at_1, warm.overall.hit_at_1),
                ("gold sets in top 5", cold.overall.sets_at_5, warm.overall.sets_at_5),
            )
            label = f"{half} ({single} single-tool, {steps} multi-step)"
            for metric, before, after in rows:
                if before is None or after is None:
                    continue
                print(f"{name:<26}{label:<52}{metric:<22}{before:>8.3f}{after:>9.3f}")
                if metric == "single-tool hit@1":
                    continue  # printed; the summary keeps the headline rows
                record(
                    "learned search",
                    f"{metric}, {name}, {half}: {single} single-tool and {steps} multi-step "
                    f"requests ({cold.ranking})",
                    after,
                    before,
                    unit="share",
                    baseline_name="cold ranking, same requests",
                    lower_is_better=False,
                )


if __name__ == "__main__":
    main()
