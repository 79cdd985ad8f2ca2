"""Large catalogs, and the count that tells whether work grows with them.

The cost tests (``catalog/test_catalog_scale.py``, ``engine/test_relisting_cost.py``,
``gateway/test_catalog_scale.py``) make the same request at two catalog sizes and compare the
Python function calls it makes: a busy machine makes each call slower, not more numerous, so a
ratio of calls holds under load where a ratio of seconds does not. The catalogs are servers
``server-NNNNN`` with :data:`TOOLS_PER_SERVER` tools each, known from the metadata cache and
never started (lazy, ``/bin/false``), beside the real fixture server.

Imported as ``_large_catalog``: ``tests/`` is on ``sys.path`` (it has no ``__init__.py``).
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry

TOOLS_PER_SERVER = 5
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "mcp_fixture.py"
"""The real fixture server every workspace runs beside its cached servers (``echo``)."""


@contextmanager
def counted_calls(under: Path | None = None) -> Iterator[list[int]]:
    """Count every Python function call made in this thread inside the block (with
    ``under``, only calls of functions defined in files below that directory)."""
    count = [0]
    prefix = None if under is None else f"{under}{os.sep}"

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call" and (prefix is None or frame.f_code.co_filename.startswith(prefix)):
            count[0] += 1

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


@contextmanager
def collections_counted(thread_name: str | None = None) -> Iterator[list[int]]:
    """The generation of every garbage collection set off inside the block (with
    ``thread_name``, only those made by threads of that name)."""
    collections: list[int] = []

    def record(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and (
            thread_name is None or threading.current_thread().name == thread_name
        ):
            collections.append(info["generation"])

    gc.callbacks.append(record)
    try:
        yield collections
    finally:
        gc.callbacks.remove(record)


def server_name(index: int) -> str:
    return f"server-{index:05d}"


def server_metadata(server: str, version: int = 0, *, prompts: bool = False) -> ServerMetadata:
    """``server``'s tools (``tool_0`` ...), whose descriptions name ``version``; with
    ``prompts``, one prompt named after the version too (a relisting then changes prompts)."""
    return ServerMetadata(
        tools=tuple(
            {
                "name": f"tool_{t}",
                "description": f"Tool {t} of {server}, version {version}.",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
            for t in range(TOOLS_PER_SERVER)
        ),
        prompts=({"name": f"prompt_v{version}"},) if prompts else (),
    )


def write_large_workspace(
    root: Path,
    servers: int,
    *,
    metadata: Callable[[str], ServerMetadata] = server_metadata,
) -> Path:
    """``root/mcp.json`` with ``servers`` lazy servers known from ``root/agent``'s metadata
    cache (``metadata(name)`` each) and the real fixture server (eager, ``echo`` as a direct
    tool); returns the config file."""
    agent_dir = root / "agent"
    agent_dir.mkdir(parents=True)
    config: dict[str, Any] = {
        "fixture": {
            "command": sys.executable,
            "args": [str(FIXTURE)],
            "lifecycle": "eager",
            "directTools": ["echo"],
        }
    }
    cache = MetadataCache(agent_dir / "mcp-cache.json")
    for s in range(servers):
        name = server_name(s)
        config[name] = {"command": "/bin/false", "args": [name]}
        cache.store(name, ServerEntry(command="/bin/false", args=(name,)), metadata(name))
    cache.flush()
    config_file = root / "mcp.json"
    config_file.write_text(json.dumps({"mcpServers": config}), encoding="utf-8")
    return config_file


# Counts the calls of the functions that read entries or build the catalog, in a real CLI run.
COUNTS_PROBE = """
import atexit, json, sys
from pi_mcp_adapter.catalog import Catalog
from pi_mcp_adapter.catalog import _cache, _naming
from pi_mcp_adapter.catalog._search import SearchIndex
watched = {
    _cache._metadata_from_entry.__code__: "entry parsed",
    _cache.MetadataCache._view_entry.__code__: "entry read",
    Catalog.build.__func__.__code__: "catalog built",
    _naming.build_tool_infos.__code__: "tools named",
    SearchIndex.__init__.__code__: "search index built",
}
counts = dict.fromkeys(watched.values(), 0)
def profile(frame, event, arg):
    if event == "call" and frame.f_code in watched:
        counts[watched[frame.f_code]] += 1
atexit.register(lambda: sys.stderr.write("COUNTS " + json.dumps(counts) + "\\n"))
sys.setprofile(profile)
from pi_mcp_adapter.cli import main
main(sys.argv[1:])
"""


# Counts every Python call the command makes, in a real CLI run.
CALLS_PROBE = """
import atexit, sys
calls = [0]
def profile(frame, event, arg):
    if event == "call":
        calls[0] += 1
atexit.register(lambda: sys.stderr.write(f"CALLS {calls[0]}\\n"))
from pi_mcp_adapter.cli import main
sys.setprofile(profile)
main(sys.argv[1:])
"""


def probed_cli(root: Path, probe: str, label: str, *args: str) -> tuple[str, str]:
    """``pi-mcp *args`` on the workspace at ``root``, run under ``probe`` (one of the probes
    above) in a fresh process: what it printed, and what the probe wrote after ``label``."""
    env = {**os.environ, "HOME": str(root), "PI_MCP_WARM": "0"}
    command = [sys.executable, "-c", probe, "--config", str(root / "mcp.json")]
    command += ["--agent-dir", str(root / "agent"), "--project", str(root), *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith(f"{label} "))
    return done.stdout, line.removeprefix(f"{label} ")
