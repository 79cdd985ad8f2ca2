"""Readiness: a request that misses while servers are being listed waits for them, and a
miss that remains says why and how to retry."""

from __future__ import annotations

import json

import anyio
import pytest

from .conftest import Workspace, fixture_entry

pytestmark = [pytest.mark.slow]


async def test_a_miss_on_a_cached_server_says_the_cache_may_be_stale(
    workspace: Workspace,
) -> None:
    workspace.write_config({"keep": fixture_entry()})
    async with workspace.adapter() as adapter:  # the first run lists and caches the server
        assert adapter.tools("keep")
    async with workspace.adapter(connect_missing=False) as adapter:
        assert adapter.server_status("keep").status == "cached"
        with anyio.fail_after(30):
            outcome = await adapter.call("keep_added_since", {})
    assert outcome.error_kind == "unknown_tool"
    assert "come from the metadata cache and may be stale" in outcome.message
    assert 'mcp({connect: "keep"})' in outcome.message


async def test_a_call_made_before_a_background_listing_ends_waits_for_it(
    workspace: Workspace,
) -> None:
    workspace.write_config({"slow": fixture_entry("--start-delay", "1")})
    async with workspace.adapter(background_listing=True) as adapter:
        assert adapter.server_status("slow").status == "connecting"
        assert not adapter.tools()
        with anyio.fail_after(30):
            outcome = await adapter.call("slow_echo", {"message": "waited"})
    assert outcome.error_kind is None, outcome.message
    assert outcome.result is not None
    assert outcome.result.content[0].text == "Echo: waited"  # type: ignore[union-attr]


async def test_a_miss_names_only_the_server_whose_prefix_the_name_carries(
    workspace: Workspace,
) -> None:
    # "fix_nope" starts with "fi" too, but a tool of "fi" would be written "fi_...".
    workspace.write_config(
        {"fix": fixture_entry(), "fi": {"command": "/nonexistent/fi-server", "lifecycle": "eager"}}
    )
    async with workspace.adapter() as adapter:
        assert adapter.server_status("fi").status == "failed"
        with anyio.fail_after(30):
            fix_miss = await adapter.call("fix_nope", {})
            fi_miss = await adapter.call("fi_nope", {})
    assert fix_miss.error_kind == "unknown_tool"
    assert "'fi'" not in fix_miss.message
    assert "MCP server 'fi' failed" in fi_miss.message


async def test_a_miss_on_an_untrusted_project_server_says_how_to_trust_it(
    workspace: Workspace,
) -> None:
    workspace.write_config({})
    marker = workspace.root / "ran"
    (workspace.project_dir / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"repo": {"command": "sh", "args": ["-c", f"touch {marker}"]}}})
    )
    async with workspace.adapter(environ={"PI_MCP_PROJECT_TRUST": "ask"}) as adapter:
        assert adapter.server_status("repo").status == "untrusted"
        with anyio.fail_after(30):
            outcome = await adapter.call("repo_build", {})
    assert outcome.error_kind == "unknown_tool"
    assert f"pi-mcp trust --project {workspace.project_dir}" in outcome.message
    assert not marker.exists()
