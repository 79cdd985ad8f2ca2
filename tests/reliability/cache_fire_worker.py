"""A process that keeps connecting and writing the metadata cache, for the cache-under-fire test.

    python cache_fire_worker.py PATH SERVER ROUNDS STOP_FILE

Waits for one line on stdin, then acts like an adapter process whose server reconnects again and
again: each round reloads the cache, reads every entry it knows (as search does), and stores
SERVER's metadata with the round number in its instructions. Where this build has OAuth token
files, each round also saves SERVER's tokens (the round number in the access token) and the
tokens of one server all workers share (as processes refreshing the same sign-in would), and
reads both back. With ``ROUNDS`` >= 0 it does that
many rounds; with -1 it goes on until STOP_FILE exists, then does one last round. It never
expects the file to be valid: another process corrupts it. It prints ``saw <n>`` whenever the
number of entries it knows changes, and at the end one JSON line:
``{"rounds": n, "set_aside": k, "warnings": [...]}``. Any exception is a crash (exit code 1).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config._models import ServerEntry

SHARED_SIGN_IN = "shared-sign-in"


def entry_of(server: str) -> ServerEntry:
    return ServerEntry(command="worker", args=(server,))


def metadata(server: str, round_number: int) -> ServerMetadata:
    tools = tuple(
        {"name": f"tool_{i}", "description": f"{server} round {round_number} " + "x" * 200}
        for i in range(20)
    )
    return ServerMetadata(tools=tools, instructions=f"round {round_number}")


def token_writer(agent_dir: Path, server: str) -> Any:
    """A function storing this round's tokens, or None when this build has no token files."""
    try:
        from mcp.shared.auth import OAuthToken

        from pi_mcp_adapter.servers._token_store import AuthRecord, FileTokenStore
    except ImportError:
        return None
    store = FileTokenStore(agent_dir)

    def write(round_number: int) -> None:
        for name in (server, SHARED_SIGN_IN):
            token = OAuthToken(access_token=f"{server} round {round_number}", token_type="Bearer")
            record = AuthRecord(server_url=f"https://{name}.test/mcp", tokens=token)
            store.save(name, record)
            loaded = store.load(name)
            if loaded.tokens is None:
                raise RuntimeError(f"tokens of {name} unreadable after a save")

    return write


def main() -> int:
    path, server, rounds, stop_file = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    cache = MetadataCache(path)
    write_tokens = token_writer(path.parent, server)
    sys.stdin.readline()
    done = 0
    set_aside = 0
    seen = 0
    last_round = False
    while True:
        if cache.load() == "set-aside":
            set_aside += 1
        if len(cache.servers) != seen:
            seen = len(cache.servers)
            print(f"saw {seen}", flush=True)
        for name in cache.servers:
            cache.get(name, entry_of(name))
        cache.store(server, entry_of(server), metadata(server, done))
        if write_tokens is not None:
            write_tokens(done)
        done += 1
        if last_round or (rounds >= 0 and done >= rounds):
            break
        last_round = rounds < 0 and Path(stop_file).exists()
        # A pause between reconnects, as a real server gives; it also leaves the two CI cores
        # to the corrupter and the other writers.
        time.sleep(0.02)
    print(json.dumps({"rounds": done, "set_aside": set_aside, "warnings": cache.warnings}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
