"""``pi-mcp search`` from what the last search kept (``engine/_search_facts.py``) opens the
stored index by it: at any catalog size it parses no server's entry, names no tool and builds
no catalog, and one more server costs it a fixed small number of Python calls, for the
cache's summaries and the index's layout (counted, not timed: see ``tests/_large_catalog.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _large_catalog import (
    CALLS_PROBE,
    COUNTS_PROBE,
    probed_cli,
    server_metadata,
    server_name,
    write_large_workspace,
)
from pi_mcp_adapter.catalog import ServerMetadata

QUERY = ("find", "zebra", "crossings")
"""Words of one tool only, whatever the catalog's size (every other tool's words are shared
by all: their matches grow with the catalog, and ranking them with it)."""


def with_one_zebra(server: str) -> ServerMetadata:
    if server != server_name(7):
        return server_metadata(server)
    tool = {"name": "zebra_crossings", "description": "Find the zebra crossings of a town."}
    return ServerMetadata(tools=(tool,))


CALLS_PER_SERVER = 20
"""Python calls one more server may cost a search from kept facts: 5 (the cache's summaries,
the index's layout); 115 for a search that loads the configuration and builds the catalog
(5 tools a server)."""


def searched(root: Path, probe: str, label: str) -> tuple[str, str]:
    return probed_cli(root, probe, label, "search", *QUERY, "--json")


def kept_workspace(root: Path, servers: int) -> Path:
    """A workspace whose every server is cached (the fixture server listed by a first
    search), and a search that kept what its catalog was made from."""
    write_large_workspace(root, servers, metadata=with_one_zebra)
    for _ in range(2):  # the first lists the fixture server, the second searches the cache
        searched(root, COUNTS_PROBE, "COUNTS")
    assert (root / "agent" / "mcp-search-facts.json").exists()
    return root


@pytest.mark.slow
def test_a_kept_search_of_a_large_catalog_reads_no_entry_and_builds_no_catalog(
    tmp_path: Path,
) -> None:
    root = kept_workspace(tmp_path, 400)

    shown, counted = searched(root, COUNTS_PROBE, "COUNTS")

    counts = json.loads(counted)
    assert counts.pop("search index built") == 1  # opened by its kept catalog
    assert counts == dict.fromkeys(counts, 0)
    matches = json.loads(shown)["details"]["matches"]
    assert matches[0]["name"] == f"{server_name(7)}_zebra_crossings"


@pytest.mark.slow
def test_one_more_server_costs_a_kept_search_a_fixed_small_number_of_python_calls(
    tmp_path: Path,
) -> None:
    small, large = 40, 240
    calls = {
        servers: int(
            searched(kept_workspace(tmp_path / str(servers), servers), CALLS_PROBE, "CALLS")[1]
        )
        for servers in (small, large)
    }

    per_server = (calls[large] - calls[small]) / (large - small)

    assert per_server <= CALLS_PER_SERVER
