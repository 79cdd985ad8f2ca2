"""Tool lists are cached with the client capabilities they were listed under: a host never
sees a tool offered only to clients that can do what it cannot, and a listing that differs
only because the clients differ is not reported as a change of the server's definitions."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest

from pi_mcp_adapter import McpAdapter

from .conftest import RecordingHost, Workspace

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_fixture.py"
SAMPLING_ONLY = "fx_ask_model"


async def _sample(
    server: str, params: types.CreateMessageRequestParams
) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text="ok"), model="test"
    )


def _names(adapter: McpAdapter) -> set[str]:
    return {t.name for t in adapter.tools()}


async def test_a_host_that_cannot_sample_never_sees_a_tool_listed_for_one_that_can(
    workspace: Workspace,
) -> None:
    workspace.write_config(
        {"fx": {"command": sys.executable, "args": [str(FIXTURE), "--sampling-tool"]}}
    )
    async with workspace.adapter(sample=_sample) as sampler:
        with anyio.fail_after(30):
            await sampler.connect("fx")
        assert SAMPLING_ONLY in _names(sampler)

    # A host without sampling reads the same cache: the entry is not its own to use.
    host = RecordingHost()
    async with workspace.adapter(host=host, connect_missing=False) as plain:
        assert SAMPLING_ONLY not in _names(plain)
        with anyio.fail_after(30):
            await plain.connect("fx")
        assert SAMPLING_ONLY not in _names(plain)
        assert "fx_echo" in _names(plain)
        assert host.notices_with("changed its tool definitions") == []
        assert plain.server_status("fx").changed_tools == ()

    # Back to the host that can sample: its own listing is no change either.
    host = RecordingHost()
    async with workspace.adapter(host=host, sample=_sample) as sampler:
        with anyio.fail_after(30):
            await sampler.connect("fx")
        assert SAMPLING_ONLY in _names(sampler)
        assert host.notices_with("changed its tool definitions") == []
        assert sampler.server_status("fx").changed_tools == ()
