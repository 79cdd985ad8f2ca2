"""Routing of prompts, resources, completions and subscriptions, the engine's one rule that
the gateway (and any host) translates."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from pi_mcp_adapter.engine import McpAdapter, UnknownPromptError, UnknownResourceError

from .conftest import Workspace, fixture_entry

pytestmark = [pytest.mark.slow]

EVERYTHING = Path(__file__).resolve().parents[1] / "fixtures" / "conformance_everything.py"


def _everything() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(EVERYTHING)], "lifecycle": "eager"}


async def _touched(adapter: McpAdapter, uri: str) -> str:
    outcome = await adapter.call("conf_touch_resource", {"uri": uri})
    assert outcome.result is not None, outcome.message
    block = outcome.result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def test_an_upstream_subscription_is_held_while_any_subscriber_wants_it(
    workspace: Workspace,
) -> None:
    workspace.write_config({"conf": _everything()})
    async with workspace.adapter() as adapter:
        routes = adapter.routes
        uri = "test://static-text"
        first, second = object(), object()
        await routes.subscribe(first, uri)
        await routes.subscribe(second, uri)
        assert routes.subscribers(uri) == {first, second}
        await routes.unsubscribe(first, uri)
        assert "(subscribed)" in await _touched(adapter, uri)
        await routes.forget(second)
        assert routes.subscribers(uri) == set()
        assert not routes.has_subscriptions
        assert "(not subscribed)" in await _touched(adapter, uri)


async def test_a_template_uri_is_routed_without_listing_templates_first(
    workspace: Workspace,
) -> None:
    workspace.write_config({"conf": _everything(), "other": fixture_entry()})
    async with workspace.adapter() as adapter:
        result = await adapter.routes.read_resource("test://template/42/data")
        assert result.contents[0].uri == "test://template/42/data"
        with pytest.raises(UnknownResourceError, match="no configured server lists it"):
            await adapter.routes.owner("nowhere://at/all")


async def test_prompts_and_completions_go_by_the_catalog_names(workspace: Workspace) -> None:
    workspace.write_config({"conf": _everything()})
    async with workspace.adapter() as adapter:
        listed = [p.name for p in await adapter.routes.list_prompts()]
        assert "conf_test_prompt_with_arguments" in listed
        rendered = await adapter.routes.get_prompt(
            "conf_test_prompt_with_arguments", {"arg1": "a", "arg2": "b"}
        )
        assert rendered.messages
        with pytest.raises(UnknownPromptError):
            await adapter.routes.get_prompt("conf_no_such_prompt")
        completion = await adapter.routes.complete(
            types.CompleteRequestParams(
                ref=types.PromptReference(
                    type="ref/prompt", name="conf_test_prompt_with_arguments"
                ),
                argument=types.CompletionArgument(name="arg1", value="pa"),
            )
        )
        assert completion.completion.values == ["paris", "park", "party"]
