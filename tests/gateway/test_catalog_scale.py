"""A gateway request costs what it returns, not what the catalog holds.

A real gateway (``McpAdapter`` + ``McpGateway``, a real SDK client in-process) in front of the
fixture server, whose ``echo`` is a direct tool, and of thousands of servers known from the
metadata cache (never started: they are lazy). The same ``tools/list`` and ``tools/call`` are
made at two catalog sizes, ten times apart, and the Python function calls they make in the
gateway's thread are counted: work that walks the catalog shows up as calls, on a busy machine
as on an idle one.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

import pytest
from mcp import Client

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import ServerEntry
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.hosts._gateway import McpGateway

from .conftest import MCP_FIXTURE, text_of

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

TOOLS_PER_SERVER = 5
REQUESTS = 5
COST_RATIO_LIMIT = 1.5
"""A request at ten times the catalog may make at most this many times the calls."""


@contextmanager
def counted_calls() -> Iterator[list[int]]:
    count = [0]

    def profile(_frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        yield count
    finally:
        sys.setprofile(None)


def write_workspace(root: Path, servers: int) -> Path:
    """A config with the fixture server and ``servers`` cached lazy ones; returns its file."""
    agent_dir = root / "agent"
    agent_dir.mkdir(parents=True)
    config: dict[str, dict[str, object]] = {
        "fixture": {
            "command": sys.executable,
            "args": [str(MCP_FIXTURE)],
            "lifecycle": "eager",
            "directTools": ["echo"],
        }
    }
    cache = MetadataCache(agent_dir / "mcp-cache.json")
    for s in range(servers):
        name = f"cached-{s:05d}"
        config[name] = {"command": "/bin/false", "args": [name]}
        tools = tuple(
            {"name": f"tool_{t}", "description": f"Tool {t} of {name}.", "inputSchema": {}}
            for t in range(TOOLS_PER_SERVER)
        )
        cache.store(
            name, ServerEntry(command="/bin/false", args=(name,)), ServerMetadata(tools=tools)
        )
    cache.flush()
    config_file = root / "mcp.json"
    config_file.write_text(json.dumps({"mcpServers": config}))
    return config_file


async def request_cost(root: Path, servers: int) -> int:
    config_file = write_workspace(root, servers)
    async with McpAdapter(
        agent_dir=root / "agent",
        project_dir=root,
        config_path=config_file,
        background_listing=True,
        relay_server_requests=True,
        use_pool=False,
    ) as adapter:
        assert len(adapter.catalog) >= servers * TOOLS_PER_SERVER
        gateway = McpGateway(adapter)
        async with gateway.running(), Client(gateway.server) as client:
            # The first requests build what every later one reads.
            assert "fixture_echo" in [t.name for t in (await client.list_tools()).tools]
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
