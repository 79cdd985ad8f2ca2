"""Servers' questions during a call (elicitation, sampling) reach the adapter's answerers."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.engine import NoOneToAsk, form_defaults

from .conftest import RecordingHost, Workspace

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUESTIONS = {"command": sys.executable, "args": [str(FIXTURES / "questions_server.py")]}
CONFORMANCE = {"command": sys.executable, "args": [str(FIXTURES / "conformance_everything.py")]}


def _text(outcome: Any) -> str:
    assert outcome.error_kind is None, outcome.message
    return "".join(c.text for c in outcome.result.content if isinstance(c, types.TextContent))


def _adapter(workspace: Workspace, **options: Any) -> McpAdapter:
    return McpAdapter(
        agent_dir=workspace.agent_dir,
        project_dir=workspace.project_dir,
        home=workspace.home,
        connect_eager=False,
        **options,
    )


async def test_accepting_an_empty_form_sends_the_sep1034_defaults(workspace: Workspace) -> None:
    workspace.write_config({"conf": CONFORMANCE})
    asked: list[tuple[str, types.ElicitRequestParams]] = []

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append((server, params))
        return types.ElicitResult(action="accept", content={})

    async with _adapter(workspace, elicit=elicit) as adapter:
        outcome = await adapter.call("test_elicitation_sep1034_defaults", {})
    text = _text(outcome)
    assert text.startswith("Elicitation completed: action=accept")
    assert json.loads(text.split("content=", 1)[1]) == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }
    [(server, params)] = asked
    assert server == "conf"
    assert params.mode == "form"
    assert form_defaults(params)["name"] == "John Doe"


async def test_an_answer_keeps_its_own_values_over_the_defaults(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"name": "Ada", "party": 5})

    async with _adapter(workspace, elicit=elicit) as adapter:
        text = _text(await adapter.call("book_table", {}))
    assert text == (
        'action=accept content={"highchair": false, "name": "Ada", "party": 5, "seating": "inside"}'
    )


async def test_url_mode_reaches_the_answerer_with_its_url(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})
    urls: list[str] = []

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert params.mode == "url"
        urls.append(params.url)
        return types.ElicitResult(action="decline")

    async with _adapter(workspace, elicit=elicit) as adapter:
        text = _text(await adapter.call("open_payment", {}))
    assert text == "action=decline"
    assert urls == ["https://pay.example/checkout/42"]


async def test_an_answerer_with_no_one_to_ask_declines_and_the_host_is_told(
    workspace: Workspace,
) -> None:
    workspace.write_config({"q": QUESTIONS})

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise NoOneToAsk("run at a terminal to answer")

    host = RecordingHost()
    async with _adapter(workspace, elicit=elicit, host=host) as adapter:
        text = _text(await adapter.call("book_table", {}))
    assert text == "action=decline content=null"
    [(level, message)] = host.notices_with("asked for input")
    assert level == "warning"
    assert "'q'" in message
    assert "Book a table at Chez Fixture" in message
    assert "run at a terminal to answer" in message


async def test_sampling_goes_to_the_sample_callback(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})
    prompts: list[str] = []

    async def sample(server: str, params: types.CreateMessageRequestParams) -> Any:
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        prompts.append(content.text)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="short"),
            model="scripted",
        )

    async with _adapter(workspace, sample=sample) as adapter:
        assert _text(await adapter.call("can_sample", {})) == "yes"
        assert _text(await adapter.call("summarize", {"text": "a long story"})) == (
            "model said: short"
        )
    assert prompts == ["a long story"]


async def test_without_sample_servers_are_not_told_the_client_can_sample(
    workspace: Workspace,
) -> None:
    workspace.write_config({"q": QUESTIONS})

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="cancel")

    async with _adapter(workspace, elicit=elicit) as adapter:
        assert _text(await adapter.call("can_sample", {})) == "no"
        assert _text(await adapter.call("summarize", {"text": "x"})).startswith("sampling failed:")


async def test_without_answerers_nothing_is_advertised(workspace: Workspace) -> None:
    workspace.write_config({"conf": CONFORMANCE})
    async with _adapter(workspace) as adapter:
        outcome = await adapter.call("test_elicitation_sep1034_defaults", {})
    assert outcome.is_error
    assert "does not support elicitation" in _text_any(outcome)


def _text_any(outcome: Any) -> str:
    return "".join(c.text for c in outcome.result.content if isinstance(c, types.TextContent))


async def test_a_sampler_with_no_one_to_ask_refuses_with_its_reason(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})

    async def sample(server: str, params: types.CreateMessageRequestParams) -> Any:
        raise NoOneToAsk("the model budget is spent")

    host = RecordingHost()
    async with _adapter(workspace, sample=sample, host=host) as adapter:
        text = _text(await adapter.call("summarize", {"text": "x"}))
    assert text == "sampling failed: Sampling declined: the model budget is spent"
    [(_, message)] = host.notices_with("LLM completion")
    assert message == (
        "MCP server 'q' asked for an LLM completion; declined: the model budget is spent"
    )


async def test_an_answerer_that_fails_gets_the_server_an_error_not_a_hang(
    workspace: Workspace,
) -> None:
    workspace.write_config({"conf": CONFORMANCE})

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise RuntimeError("dialog crashed")

    async with _adapter(workspace, elicit=elicit) as adapter:
        outcome = await adapter.call("test_elicitation_sep1034_defaults", {})
    # This fixture does not catch the elicitation's error: the call fails with it.
    assert outcome.error_kind == "server_error"
    assert "The client failed to ask its user: dialog crashed" in (outcome.message or "")
