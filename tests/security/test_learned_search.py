"""Search that learns from use, shared by a team: what one engine learns on a real
``redis-server``, another engine (its own agent dir, opened before) ranks by; what is learned,
in the team's table and in the agent dir, never holds a call's arguments or a known secret."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from gateway._team_services import RedisServer, team_redis
from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._secrets import register_secret
from pi_mcp_adapter.hosts import ExportHost
from surface.conftest import Workspace, make_workspace

pytestmark = [pytest.mark.slow]

CHANGING = Path(__file__).resolve().parents[1] / "fixtures" / "changing_server.py"
ARGUMENT_VALUE = "quarterly-numbers-7731"
SECRET = "zanzibarquokka"  # letters only: it would pass every other test of a plain word
LEARN_WITHIN_S = 60.0  # the other engine reads the team's table every SHARED_REFRESH_S (5 s)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    with team_redis(tmp_path / "redis", activate=False) as server:
        yield server


def engine_workspace(root: Path, redis_url: str) -> Workspace:
    workspace = make_workspace(root)
    definitions = root / "tools.json"
    definitions.write_text(
        json.dumps(
            [
                {
                    "name": f"t{i}",
                    "description": f"Tool {i}: does task number {i}.",
                    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
                }
                for i in range(8)
            ]
        )
    )
    workspace.write_config(
        {"changing": {"command": sys.executable, "args": [str(CHANGING), str(definitions)]}},
        settings={
            "surface": "toolsearch",
            "captureStats": True,
            "toolSearchLimit": 2,
            "sharedState": redis_url,
        },
    )
    return workspace


async def found_by(host: ExportHost, query: str) -> list[str]:
    result = await host.tools["ToolSearch"].execute({"query": query})
    return list(result.details["matches"])


async def test_what_one_engine_learns_through_redis_another_engine_ranks_by(
    redis: RedisServer, tmp_path: Path
) -> None:
    one = engine_workspace(tmp_path / "one", redis.url)
    two = engine_workspace(tmp_path / "two", redis.url)
    register_secret(SECRET)
    host_one, host_two = ExportHost(), ExportHost()
    async with one.attached(host_one) as adapter_one, two.attached(host_two) as adapter_two:
        await adapter_one.ready()
        await adapter_two.ready()
        cold = await found_by(host_two, "frobnicate the gizmo")
        target = next(f"changing_t{i}" for i in range(8) if f"changing_t{i}" not in cold)
        # The first engine finds the tool by other words (one of them a secret it knows),
        # then calls it with an argument value: the search's plain words are learned.
        words = f"frobnicate the gizmo {SECRET}: tool {target[-1]}"
        assert target in await found_by(host_one, words)
        ran = await host_one.execute(target, {"text": ARGUMENT_VALUE})
        assert not ran.is_error

        # The second engine, opened before and with its own agent dir, ranks by what the
        # first learned, read from the team's table.
        deadline = time.monotonic() + LEARN_WITHIN_S
        while target not in await found_by(host_two, "frobnicate the gizmo"):
            assert time.monotonic() < deadline, "the second engine never used the team's words"
            await anyio.sleep(0.5)
        assert_learned_nothing_private(one)
        assert_learned_nothing_private(two)


def assert_learned_nothing_private(workspace: Workspace) -> None:
    state = shared_state.active()
    assert state is not None
    table = state.table("search-learned")
    assert table, "nothing was learned in the team's table"
    stored = json.dumps(table)
    local = workspace.agent_dir / "mcp-search-learned.json"
    if local.exists():
        stored += local.read_text()
    assert "gizmo" in stored
    for private in (ARGUMENT_VALUE, "quarterly", "7731", SECRET):
        assert private not in stored
