"""A scripted model for pi-python: a plain async stream function, as the runtime takes."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from pi_agent_core.event_stream import AssistantMessageEventStream
from pi_agent_core.messages import AssistantMessage, ToolResultMessage
from pi_agent_core.types import DoneEvent, LlmContext, Model, StartEvent, StreamOptions
from pi_agent_harness import AgentHarness, MemorySessionStorage, Session

Reply = str | tuple[str, dict[str, Any]]
"""Text to end the run, or ``(tool name, arguments)`` to call a tool."""
Step = Callable[[LlmContext], Reply]


class ScriptedStream:
    """Answers each provider request with the next step; records what each request offered."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.offered: list[list[str]] = []
        self.seen: list[str] = []
        self._ids = itertools.count(1)

    async def __call__(
        self, model: Model, context: LlmContext, options: StreamOptions | None = None
    ) -> AssistantMessageEventStream:
        tools = list(context.tools or [])
        self.offered.append(sorted(t.name for t in tools))
        self.seen.append(
            repr([(t.name, t.description, getattr(t, "parameters", None)) for t in tools])
            + repr(context.messages)
        )
        assert self.steps, "the model was asked more often than scripted"
        reply = self.steps.pop(0)(context)
        if isinstance(reply, str):
            content: list[Any] = [{"type": "text", "text": reply}]
            reason = "stop"
        else:
            name, arguments = reply
            call = {"type": "toolCall", "id": f"call_{next(self._ids)}", "name": name}
            content = [{**call, "arguments": arguments}]
            reason = "toolUse"
        message = AssistantMessage(
            content=content, provider=model.provider, model=model.model_id, stopReason=reason
        )
        stream = AssistantMessageEventStream()
        stream.push(StartEvent(partial=message.model_copy(deep=True)))
        stream.push(DoneEvent(partial=message.model_copy(deep=True), reason=reason))
        stream.set_final_message(message)
        stream.end()
        return stream


def last_tool_result(context: LlmContext) -> ToolResultMessage:
    results = [m for m in context.messages if isinstance(m, ToolResultMessage)]
    assert results, "no tool result in the context"
    return results[-1]


def result_text(message: ToolResultMessage) -> str:
    return "\n".join(str(c.get("text", "")) for c in message.content if c.get("type") == "text")


async def make_harness(stream: ScriptedStream, **kwargs: Any) -> AgentHarness:
    session = Session(await MemorySessionStorage.create())
    return AgentHarness(
        session=session,
        model=Model(provider="scripted", model_id="scripted-1"),
        stream_fn=stream,
        **kwargs,
    )
