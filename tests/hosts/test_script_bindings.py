"""``mcp_script`` in the Python bindings: a model's one script chains git and time."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import FunctionModel

from pi_mcp_adapter.hosts.pydantic_ai import McpCapability

from .conftest import TESTS_DIR, Workspace, time_entry
from .test_pydantic_ai import Script

pytestmark = [pytest.mark.slow]

CHAIN = """
log = await call("git_log", {"repo_path": REPO, "max_count": 2})
dates = [line[6:] for line in log.splitlines() if line.startswith("Date: ")]
converted = [
    await call("time_convert_time",
               {"source_timezone": "UTC", "time": d[11:16], "target_timezone": "Asia/Tokyo"})
    for d in dates
]
[d[:10] + " " + c["target"]["datetime"][11:16] for d, c in zip(dates, converted)]
"""


def git_servers(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    repo = tmp_path / "repo"
    fixture = TESTS_DIR / "fixtures" / "git_repo.py"
    subprocess.run([sys.executable, str(fixture), str(repo)], check=True)
    git = {"command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repo)]}
    return {"git": git, "time": time_entry()}, repo


def script_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [
        part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart) and part.tool_name == "mcp_script"
    ]


async def test_a_pydantic_ai_agent_chains_two_servers_in_one_script(
    workspace: Workspace, tmp_path: Path
) -> None:
    servers, repo = git_servers(tmp_path)
    workspace.write_config(servers)
    code = CHAIN.replace("REPO", json.dumps(str(repo)))
    script = Script([lambda m: ("mcp_script", {"code": code}), lambda m: "done"])
    async with McpCapability.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(FunctionModel(script), capabilities=[mcp])
        result = await agent.run("Tokyo times of the last two commits")
    (returned,) = script_returns(result.all_messages())
    assert returned.outcome == "success"
    assert json.loads(str(returned.content)) == ["2024-04-01 19:00", "2024-03-01 19:00"]
    assert script.offered[0] == ["mcp", "mcp_script"]


async def test_an_openai_agents_runner_chains_two_servers_in_one_script(
    workspace: Workspace, tmp_path: Path
) -> None:
    from agents import Agent as AgentsAgent
    from agents import Runner, set_tracing_disabled
    from agents.items import ToolCallOutputItem
    from agents.testing import ScriptedModel, assistant_message, function_call

    from pi_mcp_adapter.hosts.openai_agents import McpTools

    set_tracing_disabled(True)  # nothing leaves this machine
    servers, repo = git_servers(tmp_path)
    workspace.write_config(servers)
    code = CHAIN.replace("REPO", json.dumps(str(repo)))
    model = ScriptedModel(
        [
            [function_call("mcp_script", {"code": code}, call_id="call_1")],
            [assistant_message("done")],
        ]
    )
    async with McpTools.open(**workspace.adapter_kwargs()) as mcp:
        agent = AgentsAgent(name="assistant", model=model, tools=mcp.tools)
        result = await Runner.run(agent, "Tokyo times of the last two commits")
    model.assert_complete()
    (output,) = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
    assert json.loads(output) == ["2024-04-01 19:00", "2024-03-01 19:00"]
