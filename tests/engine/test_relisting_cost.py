"""Nothing on the event loop walks the catalog when one server is relisted.

A running adapter follows every relisting with its host's surfaces (direct tools), the status
line and, in a gateway, the listing signature that decides whether clients hear of changed
prompts or resources. Each must cost what the relisted server offers: these tests count the
Python function calls they make at two catalog sizes (a busy machine slows calls, it does not
add any), with a real fixture server connected beside cached ones.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anyio
import pytest

from _large_catalog import (  # tests/ is on sys.path
    TOOLS_PER_SERVER,
    counted_calls,
    server_metadata,
    write_large_workspace,
)
from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.surface import register_surfaces

COST_RATIO_LIMIT = 1.5
"""A relisting at ten times the catalog may make at most this many times the calls."""
CONNECT_TIMEOUT_S = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def cached_metadata(server: str, version: int = 0) -> ServerMetadata:
    # With a prompt named after the version: the listing signature sees a relisting.
    return server_metadata(server, version, prompts=True)


def write_workspace(root: Path, servers: int) -> None:
    write_large_workspace(root, servers, metadata=cached_metadata)


async def relisting_cost(root: Path, servers: int) -> int:
    """Calls made by one relisting and everything that follows it on the event loop: the
    host's surfaces, the status line and the listing signature."""
    write_workspace(root, servers)
    host = ExportHost()
    async with McpAdapter(
        agent_dir=root / "agent",
        project_dir=root,
        config_path=root / "mcp.json",
        use_pool=False,
        host=host,
    ) as adapter:
        with anyio.fail_after(CONNECT_TIMEOUT_S):
            await adapter.ready(["fixture"])
        surfaces = register_surfaces(adapter, host)
        assert "fixture_echo" in surfaces.direct.names
        signature = adapter.routes.listing_signature()
        tools = servers * TOOLS_PER_SERVER + len(adapter.tools("fixture"))
        assert adapter.status_line() == f"MCP: 1/{servers + 1} servers, {tools} tools"
        server = f"server-{servers // 2:05d}"
        with counted_calls() as count:
            adapter.state.publish(server, cached_metadata(server, version=1))
            line = adapter.status_line()
            relisted_signature = adapter.routes.listing_signature()
        # What the relisting changed is seen: a new prompt, the same counts, the direct tool.
        assert relisted_signature[1] != signature[1]
        assert relisted_signature[0] == signature[0]
        assert adapter.routes.listing_signature() == relisted_signature
        assert line.startswith(f"MCP: 1/{servers + 1} servers")
        assert "fixture_echo" in surfaces.direct.names
        assert "version 1" in adapter.catalog.lookup(f"{server}_tool_2").description
        return count[0]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_relisting_costs_the_same_at_ten_times_the_catalog(tmp_path: Path) -> None:
    small = await relisting_cost(tmp_path / "small", 300)
    large = await relisting_cost(tmp_path / "large", 3000)
    assert large <= small * COST_RATIO_LIMIT, (small, large)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_relisting_that_drops_a_servers_prompts_is_announced_once(tmp_path: Path) -> None:
    write_workspace(tmp_path, 20)
    async with McpAdapter(
        agent_dir=tmp_path / "agent",
        project_dir=tmp_path,
        config_path=tmp_path / "mcp.json",
        use_pool=False,
    ) as adapter:
        before = adapter.routes.listing_signature()
        metadata = adapter.metadata("server-00007")
        assert metadata is not None
        adapter.state.publish("server-00007", dataclasses.replace(metadata, prompts=()))
        after = adapter.routes.listing_signature()
        assert after[1] != before[1]
        assert adapter.routes.listing_signature() == after
        adapter.state.rebuild()  # a full rebuild finds nothing new to announce
        assert adapter.routes.listing_signature() == after


@pytest.mark.slow
def test_a_large_catalogs_index_is_kept_out_of_the_garbage_collectors_view(
    tmp_path: Path,
) -> None:
    # A full collection walks every tracked object holding the interpreter lock: with the
    # index in view, one set off by a rebuild stalled every request for most of a second.
    import gc

    from pi_mcp_adapter.engine._catalog_state import LONG_LIVED_FROM_TOOLS, CatalogState

    servers = LONG_LIVED_FROM_TOOLS // TOOLS_PER_SERVER
    entries = {f"server-{s:05d}": ServerEntry(command="server") for s in range(servers)}
    state = CatalogState(
        cache=MetadataCache(tmp_path / "mcp-cache.json"),
        agent_dir=tmp_path,
        entries=lambda: entries,
        settings=Settings,
    )
    for name in entries:
        state.publish(name, cached_metadata(name))
    gc.unfreeze()
    try:
        index = state.index
        assert gc.get_freeze_count() > len(state.catalog)
        assert gc.isenabled()  # paused while building only
        assert index.search("tool 3 of server-00007", limit=5).hits
    finally:
        gc.unfreeze()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_relisting_updates_the_search_index_in_place_instead_of_building_it_again(
    tmp_path: Path,
) -> None:
    # Building the index again is work proportional to the catalog, done holding the
    # interpreter lock in a worker thread: every request on the event loop stalled meanwhile.
    write_workspace(tmp_path, 200)
    async with McpAdapter(
        agent_dir=tmp_path / "agent",
        project_dir=tmp_path,
        config_path=tmp_path / "mcp.json",
        use_pool=False,
    ) as adapter:
        with anyio.fail_after(CONNECT_TIMEOUT_S):
            await adapter.ready(["fixture"])
        index = adapter.state.index
        assert adapter.search("tool 3 of server-00042").page.hits
        server = "server-00042"
        adapter.state.begin_listing([server])
        relisted = cached_metadata(server, version=1)
        relisted = dataclasses.replace(
            relisted,
            tools=(
                {"name": "tool_quokka", "description": "Count the quokkas on an island."},
                *relisted.tools[1:],
            ),
        )
        adapter.state.publish(server, relisted)
        adapter.state.end_listing(server)
        with anyio.fail_after(CONNECT_TIMEOUT_S):
            await adapter.ready([server])  # the relisting is searchable
        assert adapter.state.index is index
        page = adapter.search("count quokkas", limit=1).page
        assert page.hits[0].tool.name == f"{server}_tool_quokka"
        assert not adapter.search(f"select:{server}_tool_0").page.hits
        assert len(adapter.state.index) == len(adapter.catalog)
