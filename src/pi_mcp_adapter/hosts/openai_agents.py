"""OpenAI Agents SDK binding: the adapter's surfaces as ``FunctionTool`` objects.

``pip install 'pi-mcp-adapter[openai-agents]'``, then::

    async with McpTools.open() as mcp:                # owns the adapter and every server
        agent = Agent(name="assistant", model=model, tools=mcp.tools)
        result = await Runner.run(agent, "What time is it in Tokyo?")

or ``McpTools(adapter)`` over an adapter you opened yourself.

``mcp.tools`` is a live list: every tool the surfaces register (the ``mcp`` proxy tool, or
``ToolSearch`` and its deferred tools, and direct tools) is in it once, and each tool's
``is_enabled`` reads the adapter's active set, which the Runner evaluates before every model
call. A tool ``ToolSearch`` activates is therefore offered on the next model call of the same
run, after every tool the model has already seen (the list is reordered between model calls,
so the request's tool list only grows at its end and the provider's prompt cache holds). Tools
that appear later (a server's tools changed) are appended to the same list; a tool that
disappears stays in it, disabled, so the list never shrinks under a running agent, unless the
model was already sent it: then it stays enabled, as sent, and a call says it is gone. A tool the
model was sent keeps that definition for the session even if its server relists it. Pass your
own tools as ``own_tools``: they lead the list, stay enabled, and MCP tools never shadow them.

Results keep images (``ToolOutputImage`` with a data URL) next to text; an error result comes
back as its text (``"Error: ..."``), which is how the SDK shows a failure to the model.
``McpTools.open(sampling_model=model)`` answers servers' ``sampling/createMessage`` requests
with an Agents SDK model (a ``Model`` or a model name); without it servers are not told this
client can sample (or pass your own ``sample=`` function).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

import mcp_types as types

try:
    from agents import (
        FunctionTool,
        ItemHelpers,
        Model,
        ModelSettings,
        ModelTracing,
        RunContextWrapper,
        ToolOutputImage,
        ToolOutputText,
        ToolSearchTool,
    )
    from agents.models.multi_provider import MultiProvider
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "pi_mcp_adapter.hosts.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'pi-mcp-adapter[openai-agents]'"
    ) from exc

from pi_mcp_adapter.engine import (
    ImagePart,
    McpAdapter,
    NotifyLevel,
    Sample,
    TextPart,
    ToolDefinition,
    ToolResult,
)
from pi_mcp_adapter.surface import TOOL_SEARCH_NAME, SurfaceKind, Surfaces

from ._attach import AdapterBinding
from ._export import ExportHost

__all__ = ["McpTools", "sampling_with", "to_agents_output"]

_log = logging.getLogger("pi_mcp_adapter")

AgentsOutput = str | list[ToolOutputText | ToolOutputImage]


def _log_notice(message: str, level: NotifyLevel) -> None:
    _log.log({"info": logging.INFO, "warning": logging.WARNING}.get(level, logging.ERROR), message)


class _AgentsHost(ExportHost):
    """The in-memory host, mirrored into one live list of ``FunctionTool`` objects."""

    def __init__(
        self, on_notify: Callable[[str, NotifyLevel], None], *, hosted_search: bool = False
    ) -> None:
        super().__init__(on_notify=on_notify)
        self.function_tools: list[Any] = []
        self._by_name: dict[str, FunctionTool] = {}
        self.hosted_search = hosted_search
        """Deferred tools carry ``defer_loading`` and OpenAI's hosted ``tool_search`` finds
        them (Responses API only); our ``ToolSearch`` is left out and the list never moves."""
        self.provider_search = hosted_search

    def register_tool(self, tool: ToolDefinition) -> None:
        super().register_tool(tool)
        tool = self.tools[tool.name]  # as the model was sent it, if it was
        existing = self._by_name.get(tool.name)
        if existing is not None:
            # Updated in place: the list and its entries stay the ones a running agent holds.
            existing.description = tool.description
            existing.params_json_schema = dict(tool.parameters)
            return
        function_tool = FunctionTool(
            name=tool.name,
            description=tool.description,
            params_json_schema=dict(tool.parameters),
            on_invoke_tool=self._invoker(tool.name),
            # MCP schemas are not written for strict mode (optional properties, open objects).
            strict_json_schema=False,
            is_enabled=self._enabled(tool.name),
        )
        self._by_name[tool.name] = function_tool
        self.function_tools.append(function_tool)

    def host_tool_names(self) -> Sequence[str]:
        mine = set(self._by_name)
        return [
            name
            for t in self.function_tools
            if isinstance(name := getattr(t, "name", None), str) and name not in mine
        ]

    def set_active_tools(self, names: Sequence[str]) -> None:
        # The caller's own tools are always enabled; only MCP tools are gated.
        before = set(self.active)
        kept = [n for n in self.active if n in self.retired]  # see ExportHost.set_active_tools
        self.active = list(dict.fromkeys([*(n for n in names if n in self.tools), *kept]))
        if self.hosted_search:
            return  # every tool is listed from the start, in place; the provider loads them
        # The Runner sends enabled tools in list order: a tool activated now moves to the end,
        # after every tool the model has seen, so the request's tool list only grows at its
        # end and the provider's cached prefix holds (surface/_exposure.py).
        newly = [self._by_name[n] for n in self.active if n not in before and n in self._by_name]
        if newly:
            moved = {id(t) for t in newly}
            self.function_tools[:] = [t for t in self.function_tools if id(t) not in moved]
            self.function_tools.extend(newly)

    def _enabled(self, name: str) -> Callable[[RunContextWrapper[Any], Any], bool]:
        def is_enabled(ctx: RunContextWrapper[Any], agent: Any) -> bool:
            if self.hosted_search:
                return self._hosted_enabled(name)
            enabled = name in self.tools and name in self.active
            if enabled:
                # Read just before each model call: what is enabled now is sent.
                self.exposure.mark_sent([self.tools[name]])
            return enabled

        return is_enabled

    def _hosted_enabled(self, name: str) -> bool:
        """Under hosted search: every registered tool but ``ToolSearch`` is sent, each marked
        deferred or not the first time it is listed (not active then: deferred), and kept so."""
        definition = self.tools.get(name)
        if definition is None or name == TOOL_SEARCH_NAME:
            return False
        deferred = self.deferred_layout.setdefault(name, name not in self.active)
        self._by_name[name].defer_loading = deferred
        self.exposure.mark_sent([definition])
        return True

    def _invoker(self, name: str) -> Callable[[ToolContext[Any], str], Any]:
        async def invoke(ctx: ToolContext[Any], arguments_json: str) -> AgentsOutput:
            try:
                arguments = json.loads(arguments_json) if arguments_json.strip() else {}
            except json.JSONDecodeError as exc:
                return f"Error: the arguments are not valid JSON ({exc.msg})."
            if not isinstance(arguments, dict):
                return "Error: the arguments must be a JSON object."
            return to_agents_output(await self.execute(name, arguments))

        return invoke


class McpTools(AdapterBinding):
    """The adapter's surfaces as tools for the OpenAI Agents SDK.

    Args:
        adapter: a running adapter; its lifecycle stays with whoever opened it
            (:meth:`open` opens one for you).
        surface: ``"proxy"`` or ``"toolsearch"``; defaults to ``settings.surface``.
        own_tools: the agent's own tools, placed first in :attr:`tools`.
        on_notify: receives notices; by default they are logged to the ``pi_mcp_adapter``
            logger.
        hosted_search: (Responses API models, ToolSearch surface) list every deferred tool
            with ``defer_loading`` behind OpenAI's hosted ``ToolSearchTool`` instead of our
            ``ToolSearch``: the tool list is then identical on every model call.
    """

    def __init__(
        self,
        adapter: McpAdapter,
        *,
        surface: SurfaceKind | None = None,
        own_tools: Sequence[Any] = (),
        on_notify: Callable[[str, NotifyLevel], None] | None = None,
        hosted_search: bool = False,
    ) -> None:
        self.adapter = adapter
        self.agents_host = _AgentsHost(on_notify or _log_notice, hosted_search=hosted_search)
        self.host = self.agents_host
        self.agents_host.function_tools.extend(own_tools)
        if hosted_search:
            self.agents_host.function_tools.append(ToolSearchTool())
        self.surfaces: Surfaces = self.host.attach(adapter, surface=surface)

    @property
    def tools(self) -> list[Any]:
        """The live list to pass as ``Agent(tools=...)``."""
        return self.agents_host.function_tools

    @classmethod
    def sampler(cls, model: Any) -> Sample:
        return sampling_with(model)


def sampling_with(model: Model | str) -> Sample:
    """A ``sample`` function (``McpAdapter(sample=...)``) that answers a server's
    ``sampling/createMessage`` with an Agents SDK model: the server's system prompt becomes the
    instructions and its messages the input (text; other content is named, not passed), with
    its ``maxTokens`` and ``temperature``; the reply's text is the answer."""
    chosen = MultiProvider().get_model(model) if isinstance(model, str) else model

    async def sample(
        server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        response = await chosen.get_response(
            params.system_prompt,
            _sampling_input(params),
            ModelSettings(max_tokens=params.max_tokens, temperature=params.temperature),
            [],
            None,
            [],
            ModelTracing.DISABLED,
            previous_response_id=None,
            conversation_id=None,
            prompt=None,
        )
        text = "".join(ItemHelpers.extract_text(item) or "" for item in response.output)
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model=model if isinstance(model, str) else type(model).__name__,
            stop_reason="endTurn",
        )

    return sample


def _sampling_input(params: types.CreateMessageRequestParams) -> list[Any]:
    """A server's sampling conversation as Responses-style input items."""
    items: list[Any] = []
    for message in params.messages:
        contents = message.content if isinstance(message.content, list) else [message.content]
        text = "\n".join(
            c.text if isinstance(c, types.TextContent) else f"[{c.type} content: not passed]"
            for c in contents
        )
        items.append({"role": message.role, "content": text})
    return items


def to_agents_output(result: ToolResult) -> AgentsOutput:
    """A :class:`ToolResult` as a function tool's output: text, or text and images."""
    if result.is_error:
        return f"Error: {result.text_content}"
    if all(isinstance(p, TextPart) for p in result.content):
        return result.text_content
    outputs: list[ToolOutputText | ToolOutputImage] = []
    for part in result.content:
        if isinstance(part, TextPart):
            outputs.append(ToolOutputText(text=part.text))
        elif isinstance(part, ImagePart):
            url = f"data:{part.mime_type};base64,{part.data}"
            outputs.append(ToolOutputImage(image_url=url))
        else:
            note = f"[audio content: {part.mime_type}; not shown: function tools take no audio]"
            outputs.append(ToolOutputText(text=note))
    return outputs
