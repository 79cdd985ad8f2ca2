"""Run every benchmark in this directory, one after the other, and print their tables.

Each ``bench_*.py`` measures its own baseline in the same run, so the tables stand alone.
Exits with status 1 when a benchmark failed (the others still run).

Usage: .venv/bin/python bench/run_all.py   (or `make bench`)
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent


def main() -> int:
    scripts = sorted(BENCH_DIR.glob("bench_*.py"))
    failed: list[str] = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        started = time.perf_counter()
        completed = subprocess.run([sys.executable, str(script)], check=False)
        elapsed = time.perf_counter() - started
        if completed.returncode != 0:
            failed.append(script.name)
            print(f"--- {script.name} failed (exit {completed.returncode})", flush=True)
        else:
            print(f"--- {script.name} done in {elapsed:.1f} s", flush=True)
    print(f"\n{len(scripts) - len(failed)} of {len(scripts)} benchmarks ran.")
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
