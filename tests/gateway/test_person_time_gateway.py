"""Through the gateway, the time a client's person takes to answer a server's question does
not count against the server's ``requestTimeoutMs``."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import mcp_types as types
import pytest

from .conftest import FIXTURES, GatewayWorkspace, stdio_gateway, text_of

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

ANSWER_AFTER_S = 4.0
"""Twice the server's request timeout below."""


async def test_an_elicitation_answered_after_the_request_timeout_completes_the_call(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config(
        {
            "q": {
                "command": sys.executable,
                "args": [str(FIXTURES / "questions_server.py")],
                "requestTimeoutMs": 2000,
                "directTools": True,
            }
        }
    )

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        await anyio.sleep(ANSWER_AFTER_S)  # the person at the client reads and types
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async with stdio_gateway(gw_workspace, elicitation_callback=elicitation) as client:
        with anyio.fail_after(60):
            result = await client.call_tool("q_book_table", {})
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("action=accept")
