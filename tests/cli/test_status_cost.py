"""``pi-mcp status`` answers from the metadata store's summaries: at any catalog size it parses
no server's entry and builds no catalog or search index, and one more server costs it a fixed
small number of Python calls, for its configuration, its line and its JSON (counted, not
timed: see ``tests/_large_catalog.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from _large_catalog import TOOLS_PER_SERVER, write_large_workspace

# Counts the calls of the functions that read entries or build the catalog, in a real CLI run.
PROBE = """
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

SERVERS = 400


def probed_status(root: Path, probe: str, label: str, *args: str) -> tuple[str, str]:
    """``pi-mcp status *args`` run under ``probe`` in a fresh process: what it printed, and
    what the probe wrote on stderr after ``label``."""
    env = {**os.environ, "HOME": str(root), "PI_MCP_WARM": "0"}
    command = [sys.executable, "-c", probe, "--config", str(root / "mcp.json")]
    command += ["--agent-dir", str(root / "agent"), "--project", str(root), "status", *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith(f"{label} "))
    return done.stdout, line.removeprefix(f"{label} ")


def status_with_counts(root: Path, *args: str) -> tuple[str, dict[str, int]]:
    shown, counted = probed_status(root, PROBE, "COUNTS", *args)
    counts: dict[str, int] = json.loads(counted)
    return shown, counts


@pytest.mark.slow
def test_status_of_a_large_catalog_reads_no_entry_and_builds_no_catalog(tmp_path: Path) -> None:
    write_large_workspace(tmp_path, SERVERS)
    shown, counts = status_with_counts(tmp_path)
    assert counts == dict.fromkeys(counts, 0)
    assert shown.startswith(
        f"MCP: 0/{SERVERS + 1} servers connected, {SERVERS * TOOLS_PER_SERVER} tools\n"
    )
    assert f"○ server-00399 ({TOOLS_PER_SERVER} tools, cached; connects on first call)" in shown


@pytest.mark.slow
def test_status_json_of_a_large_catalog_reads_no_entry_either(tmp_path: Path) -> None:
    write_large_workspace(tmp_path, SERVERS)
    shown, counts = status_with_counts(tmp_path, "--json")
    assert counts == dict.fromkeys(counts, 0)
    report = json.loads(shown)
    assert report["tools"] == SERVERS * TOOLS_PER_SERVER
    rows = {row["name"]: row for row in report["servers"]}
    assert rows["server-00000"]["toolCount"] == TOOLS_PER_SERVER
    assert rows["server-00000"]["status"] == "cached"
    assert rows["fixture"]["status"] == "not-cached"


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

CALLS_PER_SERVER = {"text": 125, "json": 140}
"""Python calls one more server may cost a status, from its configuration to its output:
148 and 410 (--json) when every field went through a validator, the configuration and the
manager were looked up per server, and --json copied each server by asdict, renamed its keys
one by one and wrote it with the pure-Python indenting encoder; 109 and 122 now."""


def status_calls(root: Path, *args: str) -> int:
    return int(probed_status(root, CALLS_PROBE, "CALLS", *args)[1])


@pytest.mark.slow
@pytest.mark.parametrize("output", ["text", "json"])
def test_one_more_server_costs_a_status_a_fixed_small_number_of_python_calls(
    tmp_path: Path, output: str
) -> None:
    small, large = 40, 240
    args = ("--json",) if output == "json" else ()
    calls: dict[int, int] = {}
    for servers in (small, large):
        root = tmp_path / str(servers)
        write_large_workspace(root, servers)
        calls[servers] = status_calls(root, *args)

    per_server = (calls[large] - calls[small]) / (large - small)

    assert per_server <= CALLS_PER_SERVER[output]
