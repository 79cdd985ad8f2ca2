"""A separate process that writes to a metadata cache, for the multi-process cache tests.

    python cache_worker.py PATH SERVER ROUNDS PAYLOAD_KB [--freeze-in-write[=N]] [--burst=K]

Waits for one line on stdin (so the test can start many workers at once), then stores
``ROUNDS`` versions of SERVER's metadata (round number in the instructions, ``PAYLOAD_KB`` of
tool descriptions), checking after each write that the file parses as a version-1 cache.
Prints ``writing <round>`` before each store. ``ROUNDS`` < 0 means forever.

With ``--burst=K`` each round stores K servers, ``SERVER-0`` to ``SERVER-<K-1>``, one right
after the other, as a listing pass does: most of these stores are coalesced into later
writes, so only that the file parses is checked after each; the last writes happen when the
process exits normally.

With ``--freeze-in-write`` the process stops inside its first write (or its N-th), after the
temporary file holds all the data and before it replaces the cache file: it prints ``frozen``
and blocks on stdin, so the test can kill it at exactly that point.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
from pathlib import Path

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config._models import ServerEntry


def metadata(server: str, round_number: int, payload_kb: int) -> ServerMetadata:
    filler = "x" * 1000
    tools = tuple(
        {"name": f"tool_{i}", "description": f"{server} round {round_number} {filler}"}
        for i in range(max(1, payload_kb))
    )
    return ServerMetadata(tools=tools, instructions=f"round {round_number}")


def main() -> int:
    path, server, rounds, payload_kb = Path(sys.argv[1]), sys.argv[2], *map(int, sys.argv[3:5])
    options = dict(arg.partition("=")[::2] for arg in sys.argv[5:])
    burst = int(options["--burst"]) if "--burst" in options else None
    names = [server] if burst is None else [f"{server}-{i}" for i in range(burst)]
    cache = MetadataCache(path)
    if "--freeze-in-write" in options:
        freeze_at = int(options["--freeze-in-write"] or 1)
        writes = itertools.count(1)
        real_fsync = os.fsync

        def fsync_then_freeze(fd: int) -> None:
            real_fsync(fd)
            if next(writes) == freeze_at:
                print("frozen", flush=True)
                sys.stdin.readline()

        os.fsync = fsync_then_freeze
    sys.stdin.readline()
    counter = range(rounds) if rounds >= 0 else itertools.count()
    for round_number in counter:
        print(f"writing {round_number}", flush=True)
        for name in names:
            entry = ServerEntry(command="worker", args=(name,))
            cache.store(name, entry, metadata(name, round_number, payload_kb))
            data = json.loads(path.read_bytes())
            if data.get("version") != 1 or (burst is None and name not in data["servers"]):
                print(f"bad cache after round {round_number}", file=sys.stderr)
                return 1
    if cache.warnings:
        print("\n".join(cache.warnings), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
