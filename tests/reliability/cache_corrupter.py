"""A process that corrupts the metadata cache now and then, as a foreign program would.

    python cache_corrupter.py PATH COUNT SEED

Waits for one line on stdin, then COUNT times, at random intervals of 5-40 ms, damages the file
without taking the cache's lock: cuts it short in place (a writer that died half way), overwrites
it with random bytes, empties it, or writes JSON of another format version or shape. Prints
``corrupted <n>`` after each damage and exits 0.
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

FOREIGN_DOCUMENTS = (
    b'{"version": 2, "servers": {}}',
    b'{"version": 1, "servers": []}',
    b"[1, 2, 3]",
    b"",
)


def damage(path: Path, rng: random.Random) -> None:
    action = rng.choice(("truncate", "random-bytes", "foreign"))
    try:
        if action == "truncate":
            with open(path, "r+b") as handle:
                size = os.fstat(handle.fileno()).st_size
                handle.truncate(rng.randrange(max(1, size)))
        elif action == "random-bytes":
            path.write_bytes(rng.randbytes(rng.randrange(1, 4096)))
        else:
            path.write_bytes(rng.choice(FOREIGN_DOCUMENTS))
    except FileNotFoundError:
        # Set aside by an adapter this very moment: damage the next version instead.
        path.write_bytes(b"{broken")


def main() -> int:
    path, count, seed = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    sys.stdin.readline()
    for number in range(count):
        # A sleep is the point here: the damage must land at scattered moments.
        time.sleep(rng.uniform(0.005, 0.04))
        damage(path, rng)
        print(f"corrupted {number}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
