"""``pi-mcp status`` answers from the metadata store's summaries: at any catalog size it parses
no server's entry and builds no catalog or search index, and one more server costs it a fixed
small number of Python calls, for its configuration, its line and its JSON (counted, not
timed: see ``tests/_large_catalog.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _large_catalog import (
    CALLS_PROBE,
    COUNTS_PROBE,
    TOOLS_PER_SERVER,
    probed_cli,
    write_large_workspace,
)

SERVERS = 400


def probed_status(root: Path, probe: str, label: str, *args: str) -> tuple[str, str]:
    return probed_cli(root, probe, label, "status", *args)


def status_with_counts(root: Path, *args: str) -> tuple[str, dict[str, int]]:
    shown, counted = probed_status(root, COUNTS_PROBE, "COUNTS", *args)
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
