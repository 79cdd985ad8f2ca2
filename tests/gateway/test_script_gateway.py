"""``mcp_script`` through the gateway: an MCP client runs one script that chains git and time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import FIXTURES, GatewayWorkspace, run_http_gateway, stdio_gateway, text_of

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

CHAIN = """
log = await call("git_log", {"repo_path": REPO, "max_count": 2})
dates = [line[6:] for line in log.splitlines() if line.startswith("Date: ")]
print("commits:", len(dates))
times = []
for date in dates:
    converted = await call("time_convert_time",
        {"source_timezone": "UTC", "time": date[11:16], "target_timezone": "Asia/Tokyo"})
    times.append(date[:10] + " " + converted["target"]["datetime"][11:16])
times
"""


def servers(repo: Path) -> dict[str, Any]:
    return {
        "git": {
            "command": sys.executable,
            "args": ["-m", "mcp_server_git", "--repository", str(repo)],
        },
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    subprocess.run([sys.executable, str(FIXTURES / "git_repo.py"), str(path)], check=True)
    return path


def _expect_chain(result: Any) -> None:
    assert not result.is_error, text_of(result)
    printed, value = text_of(result).splitlines()
    assert printed == "commits: 2"
    assert json.loads(value) == ["2024-04-01 19:00", "2024-03-01 19:00"]


async def test_a_script_chains_two_servers_through_the_stdio_gateway(
    gw_workspace: GatewayWorkspace, repo: Path
) -> None:
    gw_workspace.write_config(servers(repo))
    async with stdio_gateway(gw_workspace) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["mcp_script"].input_schema["required"] == ["code"]
        code = CHAIN.replace("REPO", json.dumps(str(repo)))
        _expect_chain(await client.call_tool("mcp_script", {"code": code}))


async def test_a_script_error_is_an_error_result_over_http(
    gw_workspace: GatewayWorkspace, repo: Path
) -> None:
    gw_workspace.write_config(servers(repo))
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client("auto") as client:
            code = CHAIN.replace("REPO", json.dumps(str(repo)))
            _expect_chain(await client.call_tool("mcp_script", {"code": code}))
            escaped = await client.call_tool("mcp_script", {"code": "import os\nos.environ"})
            assert escaped.is_error
            assert "'os.environ' is not supported" in text_of(escaped)


async def test_a_2026_client_approves_every_tool_of_a_script_in_one_round(
    gw_workspace: GatewayWorkspace, repo: Path
) -> None:
    """A 2026-07-28 client is asked through ``input_required``, before anything runs (a retry
    must not repeat calls that reached a server): the script's two tools under
    ``approveTools`` are asked about together, each question showing the script, and the
    retried call runs it whole."""
    gw_workspace.write_config(
        {name: {**entry, "approveTools": True} for name, entry in servers(repo).items()}
    )
    asked: list[str] = []

    async def elicitation(context: Any, params: Any) -> Any:
        import mcp_types as types

        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    code = CHAIN.replace("REPO", json.dumps(str(repo)))
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client("2026-07-28", elicitation_callback=elicitation) as client:
            _expect_chain(await client.call_tool("mcp_script", {"code": code}))
    assert len(asked) == 2, asked
    assert all("A script wants to run" in message for message in asked)
    assert all('await call("git_log"' in message for message in asked)
