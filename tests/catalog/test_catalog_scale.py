"""A relisting costs what the relisted server offers, at any catalog size.

The catalog and each caller's view are derived from the previous ones when one server's tools
change (``Catalog.replacing_server``); these tests pin that the derived catalog is the one a
full build gives, and count the Python function calls a relisting makes at two catalog sizes:
work that grows with the catalog shows up as calls, on a busy machine as on an idle one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from pi_mcp_adapter.catalog import Catalog, MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.engine import CallerPolicy, acting_for
from pi_mcp_adapter.engine._catalog_state import CatalogState

TOOLS_PER_SERVER = 5
COST_RATIO_LIMIT = 1.5
"""A request at ten times the catalog may make at most this many times the calls."""


def server_metadata(server: str, version: int = 0) -> ServerMetadata:
    return ServerMetadata(
        tools=tuple(
            {
                "name": f"tool_{t}",
                "description": f"Tool {t} of {server}, version {version}: does one thing well.",
                "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
            }
            for t in range(TOOLS_PER_SERVER)
        )
    )


def entry(**fields: Any) -> ServerEntry:
    return ServerEntry(command="server", **fields)


@contextmanager
def counted_calls() -> Iterator[list[int]]:
    """Count every Python function call made in this thread inside the block."""
    count = [0]

    def profile(_frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


def catalog_state(tmp_path: Path, servers: int) -> tuple[CatalogState, dict[str, ServerEntry]]:
    entries = {f"server-{s:05d}": entry() for s in range(servers)}
    state = CatalogState(
        cache=MetadataCache(tmp_path / f"cache-{servers}.json"),
        agent_dir=tmp_path,
        entries=lambda: entries,
        settings=Settings,
    )
    for name in entries:
        state.publish(name, server_metadata(name))
    return state, entries


def relisting_cost(state: CatalogState, server: str, read: Callable[[], object]) -> int:
    """Calls made by one relisting of ``server`` followed by ``read`` of the views."""
    read()  # the views exist before the relisting, as in a running gateway
    with counted_calls() as count:
        state.publish(server, server_metadata(server, version=1))
        read()
    return count[0]


def full_build(state: CatalogState, entries: dict[str, ServerEntry]) -> Catalog:
    metadata = {n: m for n in entries if (m := state.metadata(n)) is not None}
    return Catalog.build(metadata, entries, Settings())


def test_replacing_one_servers_tools_gives_the_catalog_a_full_build_gives() -> None:
    entries = {name: entry() for name in ("alpha", "beta", "gamma")}
    metadata = {name: server_metadata(name) for name in entries}
    before = Catalog.build(metadata, entries, Settings())
    changed = ServerMetadata(
        tools=({"name": "fresh", "description": "new"}, *server_metadata("beta", 1).tools[1:])
    )
    expected = Catalog.build({**metadata, "beta": changed}, entries, Settings())
    tools = Catalog.build({"beta": changed}, {"beta": entries["beta"]}, Settings()).tools()

    derived = before.replacing_server("beta", tools, servers=list(entries))

    assert derived is not None
    assert derived.servers == expected.servers
    assert [t.name for t in derived.tools()] == [t.name for t in expected.tools()]
    assert derived.lookup("fresh").name == "beta_fresh"
    assert derived.lookup("Beta-Fresh").name == "beta_fresh"
    assert derived.get("beta_tool_0") is None
    assert before.lookup("beta_tool_0").server == "beta"  # the previous snapshot is intact
    assert len(derived) == len(expected)


def test_a_server_listed_for_the_first_time_takes_its_configured_place() -> None:
    entries = {name: entry() for name in ("alpha", "beta", "gamma")}
    metadata = {name: server_metadata(name) for name in ("alpha", "gamma")}
    before = Catalog.build(metadata, entries, Settings())
    tools = Catalog.build({"beta": server_metadata("beta")}, entries, Settings()).tools()

    derived = before.replacing_server("beta", tools, servers=list(entries))

    assert derived is not None
    assert derived.servers == ("alpha", "beta", "gamma")
    assert derived.lookup("beta_tool_1").server == "beta"
    assert derived.lookup("beta_tool_1", server="beta").original_name == "tool_1"


def test_a_contested_name_is_left_to_a_full_build() -> None:
    entries = {"alpha": entry(toolPrefix="none"), "beta": entry(toolPrefix="none")}
    before = Catalog.build(
        {"alpha": server_metadata("alpha"), "beta": ServerMetadata(tools=({"name": "own"},))},
        entries,
        Settings(),
    )
    wants_taken_name = Catalog.build(
        {"beta": ServerMetadata(tools=({"name": "tool_0"},))}, entries, Settings()
    ).tools()

    assert before.replacing_server("beta", wants_taken_name, servers=list(entries)) is None


@pytest.mark.slow
def test_a_relisting_costs_the_same_at_ten_times_the_catalog(tmp_path: Path) -> None:
    costs: list[int] = []
    for servers in (300, 3000):
        state, entries = catalog_state(tmp_path, servers)
        server = f"server-{servers // 2:05d}"

        def read(state: CatalogState = state, server: str = server) -> object:
            return state.catalog.lookup(f"{server}_tool_3")

        costs.append(relisting_cost(state, server, read))
        assert state.catalog.get(f"{server}_tool_3") is not None
        assert len(state.catalog) == full_build(state, entries).__len__()
        assert "version 1" in (state.catalog.lookup(f"{server}_tool_3").description or "")
        state.cache.flush()
    small, large = costs
    assert large <= small * COST_RATIO_LIMIT, costs


@pytest.mark.slow
def test_a_callers_view_follows_a_relisting_at_the_cost_of_that_server(tmp_path: Path) -> None:
    policy = CallerPolicy("model", deny=("*tool_4",))
    costs: list[int] = []
    for servers in (300, 3000):
        state, _entries = catalog_state(tmp_path, servers)
        server = f"server-{servers // 2:05d}"

        def read(state: CatalogState = state, server: str = server) -> object:
            with acting_for(policy):
                return state.catalog.lookup(f"{server}_tool_3")

        costs.append(relisting_cost(state, server, read))
        with acting_for(policy):
            view = state.catalog
            assert f"{server}_tool_4" not in view
            assert "version 1" in (view.lookup(f"{server}_tool_3").description or "")
            assert len(view) == servers * (TOOLS_PER_SERVER - 1)
        state.cache.flush()
    small, large = costs
    assert large <= small * COST_RATIO_LIMIT, costs
