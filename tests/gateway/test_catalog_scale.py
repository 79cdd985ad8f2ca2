"""A gateway request costs what it returns, not what the catalog holds.

A real gateway (``McpAdapter`` + ``McpGateway``, a real SDK client in-process) in front of the
fixture server, whose ``echo`` is a direct tool, and of thousands of servers known from the
metadata cache (never started: they are lazy). The same ``tools/list`` and ``tools/call`` are
made at two catalog sizes, ten times apart, and the Python function calls they make in the
gateway's thread are counted: work that walks the catalog shows up as calls, on a busy machine
as on an idle one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

from _large_catalog import (  # tests/ is on sys.path
    TOOLS_PER_SERVER,
    counted_calls,
    write_large_workspace,
)
from pi_mcp_adapter import catalog as catalog_package
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.hosts._gateway import McpGateway

from .conftest import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

REQUESTS = 5
COST_RATIO_LIMIT = 1.5
"""A request at ten times the catalog may make at most this many times the calls."""


@asynccontextmanager
async def gateway_client(
    root: Path, servers: int, *, relay_server_requests: bool = False
) -> AsyncIterator[Client]:
    """A client of a gateway in front of a large workspace at ``root``, after a first
    ``tools/list`` (every server known from the cache, the fixture server listed)."""
    config_file = write_large_workspace(root, servers)
    async with McpAdapter(
        agent_dir=root / "agent",
        project_dir=root,
        config_path=config_file,
        background_listing=True,
        relay_server_requests=relay_server_requests,
        use_pool=False,
    ) as adapter:
        assert len(adapter.catalog) >= servers * TOOLS_PER_SERVER
        gateway = McpGateway(adapter)
        async with gateway.running(), Client(gateway.server) as client:
            assert "fixture_echo" in [t.name for t in (await client.list_tools()).tools]
            yield client


async def request_cost(root: Path, servers: int) -> int:
    async with gateway_client(root, servers, relay_server_requests=True) as client:
        # The first requests build what every later one reads.
        assert text_of(await client.call_tool("fixture_echo", {"message": "warm"}))
        with counted_calls() as count:
            for _ in range(REQUESTS):
                await client.list_tools()
                echoed = await client.call_tool("fixture_echo", {"message": "hi"})
                assert "hi" in text_of(echoed)
        return count[0]


async def test_a_gateway_list_and_call_cost_the_same_at_ten_times_the_catalog(
    tmp_path: Path,
) -> None:
    small = await request_cost(tmp_path / "small", 200)
    large = await request_cost(tmp_path / "large", 2000)
    assert large <= small * COST_RATIO_LIMIT, (small, large)


CATALOG_CODE = Path(catalog_package.__file__).resolve().parent
"""Where the catalog and its search index are made and queried."""


async def first_search_cost(root: Path, servers: int) -> int:
    """The calls of catalog code the gateway's thread makes for a client's first search: the
    search index is made then (built whole: nothing of it is stored yet). Only that code's
    calls count: what the loop runs meanwhile (timers, a server's exit watch) grows with how
    long the index takes to make elsewhere."""
    async with gateway_client(root, servers) as client:
        with counted_calls(under=CATALOG_CODE) as count:
            found = await client.call_tool("mcp", {"search": "echo a message"})
        assert "fixture_echo" in text_of(found)
        return count[0]


async def test_a_first_search_makes_its_index_off_the_gateways_thread(tmp_path: Path) -> None:
    # Made on the thread that serves every client, the index of a large catalog held up all
    # of them for as long as it took (tens of seconds at 95,000 tools): about 130 calls of
    # catalog code per tool there, where the query alone makes some 200 at any size.
    small = await first_search_cost(tmp_path / "small", 200)
    large = await first_search_cost(tmp_path / "large", 2000)
    assert large <= small * COST_RATIO_LIMIT, (small, large)
