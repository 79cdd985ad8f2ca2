"""Call tracing and the output-guard switch, through a real adapter and a real server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.surface._calls import call_tool

from .conftest import Workspace, workbench_entry

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

SECRET_ARGUMENT = "argument-that-must-not-be-traced"


def _trace_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


async def test_settings_trace_writes_one_metadata_line_per_call(workspace: Workspace) -> None:
    trace = workspace.root / "trace.jsonl"
    workspace.write_config(
        {"workbench": workbench_entry(), "quiet": {**workbench_entry(), "trace": False}},
        settings={"trace": {"enabled": True, "file": str(trace)}},
    )
    async with workspace.adapter() as adapter:
        await adapter.call("workbench_echo", {"message": SECRET_ARGUMENT})
        await adapter.call("workbench_fail", {"message": "boom"})
        await adapter.call("quiet_echo", {"message": "not traced"})
    lines = _trace_lines(trace)
    assert [(e["server"], e["tool"], e["outcome"]) for e in lines] == [
        ("workbench", "echo", "ok"),
        ("workbench", "fail", "error"),
    ]
    assert set(lines[0]) == {"time", "server", "tool", "durationMs", "bytes", "outcome"}
    assert lines[0]["bytes"] == len(f"Echo: {SECRET_ARGUMENT}")
    assert SECRET_ARGUMENT not in trace.read_text()


async def test_pi_mcp_trace_names_the_file_and_turns_tracing_on(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = workspace.root / "env-trace.jsonl"
    monkeypatch.setenv("PI_MCP_TRACE", str(trace))
    workspace.write_config({"workbench": workbench_entry()})
    async with workspace.adapter() as adapter:
        await adapter.call("workbench_echo", {"message": "hi"})
    assert [e["tool"] for e in _trace_lines(trace)] == ["echo"]


async def test_without_settings_nothing_is_traced(workspace: Workspace) -> None:
    workspace.write_config({"workbench": workbench_entry()})
    async with workspace.adapter() as adapter:
        await adapter.call("workbench_echo", {"message": "hi"})
    assert not (workspace.project_dir / ".pi" / "mcp-traces").exists()


@pytest.mark.parametrize(
    ("settings", "env", "truncated"),
    [
        pytest.param({}, None, True, id="default-on"),
        pytest.param({"outputGuard": False}, None, False, id="setting-false"),
        pytest.param({}, "0", False, id="env-0"),
        pytest.param({"outputGuard": {"maxLines": 10}}, None, True, id="object-limits"),
    ],
)
async def test_the_output_guard_follows_the_setting_and_mcp_output_guard(
    workspace: Workspace,
    monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, Any],
    env: str | None,
    truncated: bool,
) -> None:
    if env is not None:
        monkeypatch.setenv("MCP_OUTPUT_GUARD", env)
    workspace.write_config({"workbench": workbench_entry()}, settings=settings)
    async with workspace.adapter() as adapter:
        result = await call_tool(adapter, "workbench_big_output", {"lines": 3000})
    assert bool(result.details.get("truncated")) is truncated
    if not truncated:
        assert result.text_content.count("\n") >= 2999
