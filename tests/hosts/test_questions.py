"""Servers' questions in the Python bindings: a tool that elicits a form, or asks for sampling,
called by a scripted model through each binding; the caller's callbacks answer, and without
them the form is declined with a notice that says which server asked what."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from agents import Agent, Runner, set_tracing_disabled
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call
from pi_agent_harness.types import NoticeEvent
from pydantic_ai import Agent as PaiAgent
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.messages import ToolReturnPart as PaiToolReturn
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pi_mcp_adapter.engine import NotifyLevel
from pi_mcp_adapter.hosts.openai_agents import McpTools
from pi_mcp_adapter.hosts.pi_python import activate
from pi_mcp_adapter.hosts.pydantic_ai import McpCapability

from .conftest import Workspace
from .pi_support import ScriptedStream, last_tool_result, make_harness, result_text

set_tracing_disabled(True)

pytestmark = pytest.mark.slow

QUESTIONS = {
    "command": sys.executable,
    "args": [str(Path(__file__).resolve().parents[1] / "fixtures" / "questions_server.py")],
}
BOOK = {"tool": "q_book_table", "args": {}}
SUMMARIZE = {"tool": "q_summarize", "args": {"text": "a long story"}}


class Answers:
    """An ``elicit`` and a ``sample`` callback that record what they were asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    async def elicit(self, server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.asked.append((server, params.message))
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def sample(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        assert isinstance(content, types.TextContent)
        self.asked.append((server, content.text))
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="short"), model="m"
        )


BOOKED = {"highchair": False, "name": "Ada", "party": 2, "seating": "inside"}


def _booking(text: str) -> Any:
    assert text.startswith("action=accept"), text
    return json.loads(text.split("content=", 1)[1])


# ------------------------------------------------------------------ pydantic-ai


def _pai_script(*calls: dict[str, Any]) -> FunctionModel:
    steps = list(calls)

    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if steps:
            return ModelResponse(parts=[ToolCallPart("mcp", steps.pop(0), tool_call_id="c")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(reply)


def _pai_returns(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, PaiToolReturn)
    ]


async def test_pydantic_ai_elicit_and_sample_answer_the_server(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})
    answers = Answers()
    async with McpCapability.open(
        elicit=answers.elicit, sample=answers.sample, **workspace.adapter_kwargs()
    ) as mcp:
        agent = PaiAgent(_pai_script(BOOK, SUMMARIZE), capabilities=[mcp])
        result = await agent.run("book a table, then summarize")
    booked, summary = _pai_returns(result.all_messages())
    assert _booking(booked) == BOOKED
    assert summary == "model said: short"
    assert answers.asked == [("q", "Book a table at Chez Fixture"), ("q", "a long story")]


async def test_pydantic_ai_answers_sampling_with_its_sampling_model(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})
    seen: list[list[ModelMessage]] = []

    def summarizer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("brief")])

    async with McpCapability.open(
        sampling_model=FunctionModel(summarizer), **workspace.adapter_kwargs()
    ) as mcp:
        agent = PaiAgent(_pai_script(SUMMARIZE), capabilities=[mcp])
        result = await agent.run("summarize")
    [summary] = _pai_returns(result.all_messages())
    assert summary == "model said: brief"
    [request] = seen
    prompt = [p for m in request if isinstance(m, ModelRequest) for p in m.parts]
    assert "a long story" in repr(prompt)


async def test_pydantic_ai_without_elicit_declines_and_notifies(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})
    notices: list[tuple[str, NotifyLevel]] = []
    async with McpCapability.open(
        on_notify=lambda text, level: notices.append((text, level)), **workspace.adapter_kwargs()
    ) as mcp:
        agent = PaiAgent(_pai_script(BOOK), capabilities=[mcp])
        result = await agent.run("book a table")
    [booked] = _pai_returns(result.all_messages())
    assert booked == "action=decline content=null"
    [(text, level)] = [n for n in notices if "asked for input" in n[0]]
    assert level == "warning"
    assert text == (
        "MCP server 'q' asked for input (Book a table at Chez Fixture); declined: "
        "McpCapability.open(elicit=...) answers it"
    )


# ------------------------------------------------------------------ openai-agents


def _agents_outputs(result: Any) -> list[str]:
    return [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]


async def test_openai_agents_elicit_and_sample_answer_the_server(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})
    answers = Answers()
    model = ScriptedModel(
        [
            [function_call("mcp", BOOK, call_id="c1")],
            [function_call("mcp", SUMMARIZE, call_id="c2")],
            [assistant_message("done")],
        ]
    )
    async with McpTools.open(
        elicit=answers.elicit, sample=answers.sample, **workspace.adapter_kwargs()
    ) as mcp:
        result = await Runner.run(Agent(name="a", model=model, tools=mcp.tools), "go")
    booked, summary = _agents_outputs(result)
    assert _booking(booked) == BOOKED
    assert summary == "model said: short"
    assert answers.asked == [("q", "Book a table at Chez Fixture"), ("q", "a long story")]


async def test_openai_agents_answers_sampling_with_its_sampling_model(
    workspace: Workspace,
) -> None:
    workspace.write_config({"q": QUESTIONS})
    summarizer = ScriptedModel([[assistant_message("brief")]])
    model = ScriptedModel(
        [[function_call("mcp", SUMMARIZE, call_id="c1")], [assistant_message("done")]]
    )
    async with McpTools.open(sampling_model=summarizer, **workspace.adapter_kwargs()) as mcp:
        result = await Runner.run(Agent(name="a", model=model, tools=mcp.tools), "go")
    [summary] = _agents_outputs(result)
    assert summary == "model said: brief"
    assert summarizer.first_call is not None
    assert "a long story" in repr(summarizer.first_call.input)


async def test_openai_agents_without_elicit_declines_and_notifies(workspace: Workspace) -> None:
    workspace.write_config({"q": QUESTIONS})
    notices: list[str] = []
    model = ScriptedModel([[function_call("mcp", BOOK, call_id="c1")], [assistant_message("ok")]])
    async with McpTools.open(
        on_notify=lambda text, level: notices.append(text), **workspace.adapter_kwargs()
    ) as mcp:
        result = await Runner.run(Agent(name="a", model=model, tools=mcp.tools), "go")
    assert _agents_outputs(result) == ["action=decline content=null"]
    assert any(
        n == "MCP server 'q' asked for input (Book a table at Chez Fixture); declined: "
        "McpTools.open(elicit=...) answers it"
        for n in notices
    ), notices


# ------------------------------------------------------------------ pi-python


async def test_pi_python_declines_forms_with_a_notice(workspace: Workspace) -> None:
    """pi-python's extension API can notify but not ask: the form is declined, visibly."""
    workspace.write_config({"q": QUESTIONS})
    results: list[str] = []
    stream = ScriptedStream(
        [
            lambda ctx: ("mcp", BOOK),
            lambda ctx: results.append(result_text(last_tool_result(ctx))) or "done",
        ]
    )
    harness = await make_harness(stream, extensions=[activate])
    notices: list[str] = []

    def listener(event: Any, signal: Any = None) -> None:
        if isinstance(event, NoticeEvent):
            notices.append(event.text)

    harness.subscribe(listener)
    try:
        await harness.prompt("book a table")
    finally:
        await harness.close()
    assert results == ["action=decline content=null"]
    assert any(
        "MCP server 'q' asked for input (Book a table at Chez Fixture); declined: pi-python "
        "has no input dialog to answer it" in n
        for n in notices
    ), notices
