"""Prompt-cache-stable exposure: over a scripted session (5 activations, a server relisted
mid-way), every request a host sends extends the one before it; nothing sent earlier is
reordered or rewritten. Each host runs its real runtime with a scripted model that records the
requests it receives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import FunctionTool, Runner, TResponseInputItem
from agents.testing import ScriptedModel, assistant_message, function_call
from openai.types.responses.response_tool_search_call import ResponseToolSearchCall
from openai.types.responses.response_tool_search_output_item import ResponseToolSearchOutputItem
from pi_agent_core.event_stream import AssistantMessageEventStream
from pi_agent_core.extensions import ExtensionAPI
from pi_agent_core.types import LlmContext, StreamOptions
from pi_agent_core.types import Model as PiModel
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.hosts._export import DeferMode
from pi_mcp_adapter.hosts._formats import ToolFormat
from pi_mcp_adapter.hosts.openai_agents import McpTools
from pi_mcp_adapter.hosts.pi_python import PiHost
from pi_mcp_adapter.hosts.pydantic_ai import McpCapability
from pi_mcp_adapter.surface._exposure import count_cache_breaks

from ._cache_session import (
    ACTIVATIONS,
    RELIST_BEFORE_RUN,
    RUNS,
    configure,
    dumps,
    relist,
    without_timestamps,
)
from .conftest import Workspace
from .pi_support import ScriptedStream, make_harness

pytestmark = [pytest.mark.slow]

Request = tuple[list[str], list[str]]


def steps_of_all_runs() -> list[tuple[str, dict[str, Any]] | str]:
    return [step for run in RUNS for step in run]


class PydanticScript:
    """A FunctionModel body: replays the session's steps and records each request."""

    def __init__(self) -> None:
        self.steps = steps_of_all_runs()
        self.requests: list[Request] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools = [
            dumps([t.name, t.description, t.parameters_json_schema, t.defer_loading])
            for t in info.function_tools
        ]
        history = [
            dumps(without_timestamps(m))
            for m in ModelMessagesTypeAdapter.dump_python(messages, mode="json")
        ]
        self.requests.append((tools, history))
        step = self.steps.pop(0)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        name, args = step
        return ModelResponse(
            parts=[ToolCallPart(name, args, tool_call_id=f"c{len(self.requests)}")]
        )


async def test_pydantic_ai_session_only_ever_appends_to_what_the_model_was_sent(
    workspace: Workspace,
) -> None:
    definitions = configure(workspace)
    script = PydanticScript()
    async with McpCapability.open(**workspace.adapter_kwargs()) as mcp:
        agent = Agent(FunctionModel(script), capabilities=[mcp])
        history: list[ModelMessage] = []
        outputs: list[str] = []
        for index, _ in enumerate(RUNS):
            if index == RELIST_BEFORE_RUN:
                await relist(mcp.adapter, definitions)
            result = await agent.run(f"turn {index}", message_history=history)
            history = result.all_messages()
            outputs.append(repr(history))
    assert len(script.requests) >= 10
    assert count_cache_breaks(script.requests) == 0
    last_tools = script.requests[-1][0]
    # Five activations, each appended; t0 keeps the definition the model was sent first.
    assert len(last_tools) == len(script.requests[0][0]) + ACTIVATIONS
    assert "Tool 0: does task number 0." in last_tools[len(script.requests[0][0])]
    # The t0 the model keeps seeing still reaches the server's current tool.
    assert "called t0" in outputs[2]


class RecordingScriptedModel(ScriptedModel):
    """A ScriptedModel that serializes what each call was offered at the moment it was sent
    (the SDK's own record keeps live tool objects, which later edits would rewrite)."""

    requests: list[Request]

    async def get_response(
        self,
        system_instructions: Any,
        input: Any,
        model_settings: Any,
        tools: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        offered = [
            dumps([t.name, t.description, t.params_json_schema, t.defer_loading])
            if isinstance(t, FunctionTool)
            else dumps([type(t).__name__])
            for t in tools
        ]
        items = [dumps(i) for i in (input if isinstance(input, list) else [input])]
        self.requests.append((offered, items))
        return await super().get_response(
            system_instructions, input, model_settings, tools, *args, **kwargs
        )


def agents_step(step: tuple[str, dict[str, Any]] | str, n: int) -> list[Any]:
    if isinstance(step, str):
        return [assistant_message(step)]
    name, args = step
    import json

    return [function_call(name, json.dumps(args), call_id=f"call_{n}")]


async def test_openai_agents_session_only_ever_appends_to_what_the_model_was_sent(
    workspace: Workspace,
) -> None:
    definitions = configure(workspace)
    model = RecordingScriptedModel([agents_step(s, n) for n, s in enumerate(steps_of_all_runs())])
    model.requests = []
    async with McpTools.open(**workspace.adapter_kwargs()) as mcp:
        agent = AgentsAgent(name="assistant", model=model, tools=mcp.tools)
        history: list[TResponseInputItem] = []
        for index, _ in enumerate(RUNS):
            if index == RELIST_BEFORE_RUN:
                await relist(mcp.adapter, definitions)
            result = await Runner.run(
                agent, [*history, {"role": "user", "content": f"turn {index}"}]
            )
            history = result.to_input_list()
    model.assert_complete()
    requests = model.requests
    assert len(requests) >= 10
    assert count_cache_breaks(requests) == 0
    assert len(requests[-1][0]) == len(requests[0][0]) + ACTIVATIONS


async def run_export_session(
    workspace: Workspace, format: ToolFormat, defer: bool | DeferMode
) -> tuple[list[Request], list[dict[str, Any]]]:
    """The session through the plain export host, as a caller's own loop would run it: each
    turn asks for the tool definitions, sends them with the conversation so far, and answers
    the scripted call with :meth:`ExportHost.result_shape`."""
    definitions = configure(workspace)
    host = ExportHost()
    requests: list[Request] = []
    conversation: list[dict[str, Any]] = []
    async with McpAdapter(host=host, **workspace.adapter_kwargs()) as adapter:
        host.attach(adapter)
        await adapter.ready()
        for index, run in enumerate(RUNS):
            if index == RELIST_BEFORE_RUN:
                await relist(adapter, definitions)
            conversation.append({"role": "user", "content": f"turn {index}"})
            for n, step in enumerate(run):
                tools = host.tool_definitions(format, defer=defer)
                requests.append(([dumps(t) for t in tools], [dumps(m) for m in conversation]))
                if isinstance(step, str):
                    conversation.append({"role": "assistant", "content": step})
                    continue
                name, args = step
                call_id = f"call_{index}_{n}"
                conversation.append({"role": "assistant", "tool_call": [call_id, name, args]})
                if format == "openai-responses" and defer == "client" and name == "ToolSearch":
                    conversation.append(await host.tool_search_output(args, call_id=call_id))
                    continue
                result = await host.execute(name, args)
                conversation.append(host.result_shape(name, result, format, call_id=call_id))
    return requests, conversation


async def test_export_session_appends_activated_tools_and_keeps_sent_definitions(
    workspace: Workspace,
) -> None:
    requests, conversation = await run_export_session(workspace, "openai-chat", False)
    assert len(requests) >= 10
    assert count_cache_breaks(requests) == 0
    assert len(requests[-1][0]) == len(requests[0][0]) + ACTIVATIONS
    assert "called t0" in dumps(conversation)


async def test_anthropic_client_deferral_never_changes_the_tool_list_as_tools_load(
    workspace: Workspace,
) -> None:
    requests, conversation = await run_export_session(workspace, "anthropic", "client")
    assert count_cache_breaks(requests) == 0
    # Nothing is ever appended: the new tool of the relisted server takes a deferred place
    # after the others, and loading tools changes no byte of the list before it.
    first, last = requests[0][0], requests[-1][0]
    assert last[: len(first)] == first
    assert len(last) == len(first) + 1
    assert '"changing_t8"' in last[-1]
    assert '"defer_loading": true' in last[-1]
    # Our ToolSearch answers with tool_reference blocks the API expands in place.
    searches = [
        m
        for m in conversation
        if m.get("type") == "tool_result"
        and any(b.get("type") == "tool_reference" for b in m["content"])
    ]
    assert len(searches) == ACTIVATIONS
    assert searches[0]["content"] == [{"type": "tool_reference", "tool_name": "changing_t0"}]


async def test_openai_responses_client_tool_search_keeps_the_tool_list_byte_identical(
    workspace: Workspace,
) -> None:
    requests, conversation = await run_export_session(workspace, "openai-responses", "client")
    assert count_cache_breaks(requests) == 0
    tool_lists = {tuple(r[0]) for r in requests}
    assert len(tool_lists) == 1  # loaded tools arrive in the conversation, never in the list
    [tools] = tool_lists
    assert '"execution": "client"' in tools[0]
    assert '"type": "tool_search"' in tools[0]
    outputs = [m for m in conversation if m.get("type") == "tool_search_output"]
    assert len(outputs) == ACTIVATIONS
    assert [t["name"] for t in outputs[0]["tools"]] == ["changing_t0"]
    assert "called t8" in dumps(conversation)


async def test_pydantic_ai_native_tool_search_ranks_with_the_adapter_and_never_rewrites_a_tool(
    workspace: Workspace,
) -> None:
    definitions = configure(workspace)
    steps: list[tuple[str, dict[str, Any]] | str] = [
        ("search_tools", {"queries": ["task number 3"]}),
        ("changing_t3", {"text": "x"}),
        "ok",
        ("search_tools", {"queries": ["arrived with the relisting"]}),
        ("changing_t8", {"text": "y"}),
        ("changing_t0", {"text": "z"}),
        "ok",
    ]
    seen: dict[str, str] = {}
    rewritten: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for tool in info.function_tools:
            text = dumps([tool.description, tool.parameters_json_schema])
            if seen.setdefault(tool.name, text) != text:
                rewritten.append(tool.name)
        step = steps.pop(0)
        if isinstance(step, str):
            return ModelResponse(parts=[TextPart(step)])
        return ModelResponse(parts=[ToolCallPart(step[0], step[1], tool_call_id=f"c{len(steps)}")])

    async with McpCapability.open(native_search=True, **workspace.adapter_kwargs()) as mcp:
        agent = Agent(FunctionModel(model), capabilities=[mcp, mcp.tool_search()])
        first = await agent.run("one")
        await relist(mcp.adapter, definitions)
        second = await agent.run("two", message_history=first.all_messages())
    assert not steps
    assert "ToolSearch" not in seen  # pydantic-ai's own search replaces ours
    assert rewritten == []
    returns = dumps(ModelMessagesTypeAdapter.dump_python(second.all_messages(), mode="json"))
    # The adapter's ranking found t8 by its description's words, and the calls ran.
    assert "changing_t8" in returns
    assert "called t8" in returns
    assert "called t3" in returns
    assert "called t0" in returns
    # t0's definition was pinned before the relisting rewrote it.
    assert "rewritten" not in seen["changing_t0"]


def _replay(step: tuple[str, dict[str, Any]] | str) -> Callable[[LlmContext], Any]:
    return lambda ctx: step


class RecordingStream(ScriptedStream):
    """The pi-python scripted stream, recording each request's tools and messages as sent."""

    def __init__(self, steps: list[tuple[str, dict[str, Any]] | str]) -> None:
        super().__init__([_replay(step) for step in steps])
        self.requests: list[Request] = []

    async def __call__(
        self, model: PiModel, context: LlmContext, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        tools = [
            dumps([t.name, t.description, getattr(t, "parameters", None)])
            for t in context.tools or []
        ]
        messages = [dumps(without_timestamps(m.model_dump(mode="json"))) for m in context.messages]
        self.requests.append((tools, messages))
        return await super().__call__(model, context, options)


async def test_pi_python_session_only_ever_appends_to_what_the_model_was_sent(
    workspace: Workspace,
) -> None:
    definitions = configure(workspace)
    stream = RecordingStream(steps_of_all_runs())
    hosts: list[PiHost] = []

    def extension(pi: ExtensionAPI) -> None:
        hosts.append(PiHost(pi))
        hosts[0].install()

    harness = await make_harness(stream, extensions=[extension])
    try:
        for index, _ in enumerate(RUNS):
            if index == RELIST_BEFORE_RUN:
                adapter = hosts[0].adapter
                assert adapter is not None
                await relist(adapter, definitions)
            await harness.prompt(f"turn {index}")
    finally:
        await harness.close()
    assert not stream.steps
    requests = stream.requests
    assert len(requests) >= 10
    assert count_cache_breaks(requests) == 0
    assert len(requests[-1][0]) == len(requests[0][0]) + ACTIVATIONS


def hosted_search_then(step: tuple[str, dict[str, Any]] | str, n: int) -> list[Any]:
    """A scripted reply in which OpenAI's hosted tool search first loads the called tool (a
    server-executed ``tool_search_call`` and its output), as the Responses API answers."""
    if isinstance(step, str):
        return agents_step(step, n)
    name = step[0]
    loaded = {"type": "function", "name": name, "parameters": {"type": "object"}, "strict": False}
    search = ResponseToolSearchCall(
        id=f"ts_{n}",
        call_id=f"ts_{n}",
        arguments={"query": name},
        execution="server",
        status="completed",
        type="tool_search_call",
    )
    output = ResponseToolSearchOutputItem.model_validate(
        {
            "id": f"tso_{n}",
            "call_id": f"ts_{n}",
            "execution": "server",
            "status": "completed",
            "tools": [loaded],
            "type": "tool_search_output",
        }
    )
    # A deferred top-level tool is called back under its own name as namespace (its wire shape).
    [call] = agents_step(step, n)
    return [search, output, call.model_copy(update={"namespace": name})]


async def test_openai_agents_hosted_tool_search_sends_the_same_tool_list_every_call(
    workspace: Workspace,
) -> None:
    definitions = configure(workspace)
    steps: list[tuple[str, dict[str, Any]] | str] = [
        ("changing_t0", {"text": "a"}),  # the provider's tool search loaded it
        ("changing_t5", {"text": "b"}),
        "ok",
        ("changing_t8", {"text": "c"}),
        ("changing_t0", {"text": "d"}),
        "ok",
    ]
    model = RecordingScriptedModel([hosted_search_then(s, n) for n, s in enumerate(steps)])
    model.requests = []
    async with McpTools.open(hosted_search=True, **workspace.adapter_kwargs()) as mcp:
        agent = AgentsAgent(name="assistant", model=model, tools=mcp.tools)
        first = await Runner.run(agent, "one")
        await relist(mcp.adapter, definitions)
        second = await Runner.run(
            agent, [*first.to_input_list(), {"role": "user", "content": "two"}]
        )
    model.assert_complete()
    requests = model.requests
    assert count_cache_breaks(requests) == 0
    before_relist = {tuple(r[0]) for r in requests[:3]}
    assert len(before_relist) == 1  # identical on every call: loading a tool changes nothing
    tools = requests[-1][0]
    assert '"ToolSearch"' not in dumps(tools)
    deferred = [t for t in tools if t.endswith("true]")]
    # Every MCP tool but mcp_script waits for the hosted search, which leads the list.
    assert tools[0] == dumps(["ToolSearchTool"])
    assert len(deferred) == len(tools) - 2
    assert "changing_t8" in tools[-1]  # the relisted server's new tool, appended
    outputs = dumps(second.to_input_list())
    assert "called t5" in outputs
    assert "called t8" in outputs
    assert "called t0" in outputs
