"""A config edit that adds or changes an OAuth server takes effect without a restart, and a
401 (a sign-in is missing) is never remembered as a failure other processes back off from."""

from __future__ import annotations

import json

import anyio
import pytest

from pi_mcp_adapter._errors import NeedsAuthError
from pi_mcp_adapter.engine import McpAdapter

from .conftest import SERVER, Machine, OAuthServer

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

ADDED = "added"
BUDGET_S = 30.0


def _sign_in(machine: Machine, server: str) -> None:
    result = machine.run("auth", server, env={"BROWSER": machine.browser()})
    assert result.returncode == 0, result.stderr


async def test_an_oauth_server_added_by_a_reload_authenticates_without_a_restart(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    first = {SERVER: {"url": oauth_server.url, "auth": "oauth"}}
    config = machine.configure(first)
    adapter = McpAdapter(
        config_path=config,
        agent_dir=machine.agent_dir,
        project_dir=machine.project,
        connect_missing=False,
        environ=machine.base_env(),
    )
    async with adapter:
        with anyio.fail_after(BUDGET_S), pytest.raises(NeedsAuthError):
            await adapter.connect(SERVER)  # the OAuth providers exist from here on
        machine.configure({**first, ADDED: {"url": oauth_server.url, "auth": "oauth"}})
        await anyio.to_thread.run_sync(lambda: _sign_in(machine, ADDED))
        report = await adapter.reload()
        assert ADDED in report.added
        with anyio.fail_after(BUDGET_S):
            metadata = await adapter.connect(ADDED)
        assert metadata.tools
        outcome = await adapter.call(f"{ADDED}_echo", {"message": "reloaded"})
    assert not outcome.is_error, outcome.message
    assert outcome.result.content[0].text == "Echo: reloaded"


async def test_a_401_is_not_remembered_for_other_processes(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    config = machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}})
    adapter = McpAdapter(
        config_path=config,
        agent_dir=machine.agent_dir,
        project_dir=machine.project,
        connect_missing=False,
        environ=machine.base_env(),
    )
    async with adapter:
        with anyio.fail_after(BUDGET_S), pytest.raises(NeedsAuthError):
            await adapter.connect(SERVER)
        assert adapter.status().servers[0].status == "needs-auth"
    failures = machine.agent_dir / "mcp-failures.json"
    remembered = json.loads(failures.read_text())["servers"] if failures.exists() else {}
    assert SERVER not in remembered
