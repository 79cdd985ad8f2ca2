"""pydantic-ai binding: a capability that gives an agent the adapter's surfaces.

``pip install 'pi-mcp-adapter[pydantic-ai]'``, then::

    async with McpCapability.open() as mcp:           # owns the adapter and every server
        agent = Agent(model, capabilities=[mcp])
        result = await agent.run("What time is it in Tokyo?")

or ``McpCapability(adapter)`` over an adapter you opened yourself.
``McpCapability.open(sampling_model=model)`` answers servers' ``sampling/createMessage``
requests with a pydantic-ai model (a ``Model`` or a name such as ``"openai:gpt-5"``), as
pydantic-ai's own MCP client does with its sampling model; without it servers are not told
this client can sample (or pass your own ``sample=`` function).

The capability's toolset lists every tool registered by the surfaces (the ``mcp`` proxy tool,
or ``ToolSearch`` and its deferred tools, and direct tools); its ``prepare_tools`` hook drops
the registered tools that are not active, on every model request. A tool ``ToolSearch``
activates is therefore offered on the next request of the same run. Results keep their
content types: text stays text, images become ``BinaryImage``, audio ``BinaryContent``; an
error result is raised as ``ToolFailed``, which pydantic-ai shows the model as a failed tool
call without spending retries. After each run the engine's turn hook runs (eager servers that
dropped reconnect).
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable, Sequence
from typing import Any

import mcp_types as types

try:
    import pydantic_core
    from pydantic_ai import RunContext
    from pydantic_ai.capabilities import AbstractCapability, ToolSearch
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.messages import (
        BinaryContent,
        BinaryImage,
        ModelMessage,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        UserPromptPart,
    )
    from pydantic_ai.messages import TextPart as PaiTextPart
    from pydantic_ai.models import Model
    from pydantic_ai.run import AgentRunResult
    from pydantic_ai.settings import ModelSettings
    from pydantic_ai.tools import ToolDefinition as PaiToolDefinition
    from pydantic_ai.toolsets import AbstractToolset, ToolsetTool
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "pi_mcp_adapter.hosts.pydantic_ai needs pydantic-ai: "
        "pip install 'pi-mcp-adapter[pydantic-ai]'"
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

__all__ = ["McpCapability", "McpToolset", "sampling_with", "to_pydantic_ai_content"]

_log = logging.getLogger("pi_mcp_adapter")

# MCP tools validate their own arguments against their JSON schema (the engine does, before a
# call); pydantic-ai only has to hand over a JSON object.
_ARGS_VALIDATOR = pydantic_core.SchemaValidator(
    schema=pydantic_core.core_schema.dict_schema(
        pydantic_core.core_schema.str_schema(), pydantic_core.core_schema.any_schema()
    )
)

ToolReturnContent = str | BinaryContent | list[str | BinaryContent]


def _log_notice(message: str, level: NotifyLevel) -> None:
    _log.log({"info": logging.INFO, "warning": logging.WARNING}.get(level, logging.ERROR), message)


class McpToolset(AbstractToolset[Any]):
    """Every tool registered with ``host``; re-read on every step of a run."""

    def __init__(
        self,
        host: ExportHost,
        *,
        id: str = "pi-mcp-adapter",
        max_retries: int = 1,
        native_search: bool = False,
    ):
        self._host = host
        self._id = id
        self._max_retries = max_retries
        self.native_search = native_search
        """Deferred tools go to pydantic-ai's own ``ToolSearch`` (``defer_loading``) instead
        of our ``ToolSearch`` tool, which is then left out."""
        # Built once per registered definition: a large catalog is listed on every step.
        self._built: dict[str, tuple[ToolDefinition, bool, ToolsetTool[Any]]] = {}

    @property
    def id(self) -> str:
        return self._id

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        tools: dict[str, ToolsetTool[Any]] = {}
        # Deferred for the session once listed so: pydantic-ai keeps a revealed tool in place.
        deferred = self._host.deferred_layout if self.native_search else {}
        if self.native_search:
            for name in self._host.exposure.order(self._host.active):
                deferred.setdefault(name, False)
        for name, definition in self._host.tools.items():
            if self.native_search and name == TOOL_SEARCH_NAME:
                continue
            defer = deferred.setdefault(name, True) if self.native_search else False
            built = self._built.get(name)
            if built is None or built[0] is not definition or built[1] != defer:
                tool_def = PaiToolDefinition(
                    name=name,
                    description=definition.description,
                    parameters_json_schema=dict(definition.parameters),
                    defer_loading=defer,
                )
                tool = ToolsetTool[Any](
                    toolset=self,
                    tool_def=tool_def,
                    max_retries=self._max_retries,
                    args_validator=_ARGS_VALIDATOR,
                )
                built = self._built[name] = (definition, defer, tool)
            tools[name] = built[2]
        for name in set(self._built) - set(tools):
            del self._built[name]
        return tools

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> ToolReturnContent:
        if self.native_search and name in self._host.tools:
            # pydantic-ai's ToolSearch revealed it: the model may call it from now on.
            self._host.set_active_tools([*self._host.active, name])
        result = await self._host.execute(name, tool_args)
        if result.is_error:
            raise ToolFailed(result.text_content or f"Tool {name!r} failed.")
        return to_pydantic_ai_content(result)


class McpCapability(AdapterBinding, AbstractCapability[Any]):
    """The adapter's surfaces as a pydantic-ai capability.

    Args:
        adapter: a running adapter; its lifecycle stays with whoever opened it
            (:meth:`open` opens one for you).
        surface: ``"proxy"`` or ``"toolsearch"``; defaults to ``settings.surface``.
        builtin_tools: the agent's own tool names, which MCP tools must not shadow.
        on_notify: receives notices (a server's tools changed, a skipped tool); by default
            they are logged to the ``pi_mcp_adapter`` logger.
        native_search: under the ToolSearch surface, defer MCP tools to pydantic-ai's own
            tool search (see :meth:`tool_search`) instead of offering our ``ToolSearch``.
    """

    def __init__(
        self,
        adapter: McpAdapter,
        *,
        surface: SurfaceKind | None = None,
        builtin_tools: Sequence[str] = (),
        on_notify: Callable[[str, NotifyLevel], None] | None = None,
        native_search: bool = False,
    ) -> None:
        self.adapter = adapter
        self.host = ExportHost(
            builtin_tools=tuple(builtin_tools), on_notify=on_notify or _log_notice
        )
        self.surfaces: Surfaces = self.host.attach(adapter, surface=surface)
        self.toolset = McpToolset(self.host, native_search=native_search)

    def tool_search(self) -> ToolSearch[Any]:
        """pydantic-ai's own ``ToolSearch`` capability, ranking with the adapter's search.

        With ``native_search=True`` (and the ToolSearch surface), deferred MCP tools carry
        ``defer_loading``; pass this next to the capability,
        ``Agent(model, capabilities=[mcp, mcp.tool_search()])``, so discovery uses the same
        ranking as ``mcp({search})`` and ``ToolSearch``, on the provider's client-executed
        search where it has one (Anthropic ``tool_reference``, OpenAI ``execution="client"``)
        and as a local ``search_tools`` elsewhere.
        """
        adapter = self.adapter
        limit = max(1, adapter.settings.tool_search_limit)

        async def rank(
            ctx: RunContext[Any], queries: Sequence[str], tools: Sequence[PaiToolDefinition]
        ) -> list[str]:
            await adapter.ready_to_search()  # servers still being listed may hold the tools
            searchable = {t.name for t in tools}
            found: dict[str, None] = {}
            for query in queries:
                page = adapter.search(query, limit=limit + len(found)).page
                for hit in page.hits:
                    if hit.tool.name in searchable and len(found) < limit:
                        found.setdefault(hit.tool.name)
            return list(found)

        return ToolSearch(strategy=rank, max_results=limit)

    @classmethod
    def sampler(cls, model: Any) -> Sample:
        return sampling_with(model)

    # ------------------------------------------------------------------ capability hooks

    def get_toolset(self) -> McpToolset:
        return self.toolset

    async def before_run(self, ctx: RunContext[Any]) -> None:
        await self.ready()  # the first step's tool list holds the direct tools

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[PaiToolDefinition]
    ) -> list[PaiToolDefinition]:
        # The agent's own tools lead as given; then the active MCP tools in the order the model
        # first saw them, newly activated ones last (surface/_exposure.py): the request's tool
        # list only ever grows at its end, which keeps the provider's cached prefix.
        registered = self.host.tools
        own = [d for d in tool_defs if d.name not in registered]
        mcp = {d.name: d for d in tool_defs if d.name in registered}
        if self.toolset.native_search:
            # pydantic-ai's ToolSearch hides and reveals the deferred tools itself, keeping
            # them in place; they are listed after the ones visible from the start.
            layout = self.host.deferred_layout
            deferred = [mcp[n] for n in layout if n in mcp and mcp[n].defer_loading]
            visible = [mcp[d.name] for d in self.host.send_definitions() if d.name in mcp]
            # A provider with native search is sent every deferred declaration: pin them all.
            self.host.exposure.mark_sent(self.host.tools[d.name] for d in deferred)
            return own + visible + deferred
        return own + [mcp[d.name] for d in self.host.send_definitions() if d.name in mcp]

    async def after_run(
        self, ctx: RunContext[Any], *, result: AgentRunResult[Any]
    ) -> AgentRunResult[Any]:
        await self.adapter.end_turn()
        return result


def sampling_with(model: Model | str) -> Sample:
    """A ``sample`` function (``McpAdapter(sample=...)``) that answers a server's
    ``sampling/createMessage`` with a pydantic-ai model: the server's system prompt and
    messages (text and images) become the model's request, with its ``maxTokens``,
    ``temperature`` and ``stopSequences``; the reply's text is the answer."""
    from pydantic_ai.direct import model_request
    from pydantic_ai.models import infer_model

    chosen = infer_model(model)

    async def sample(
        server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        settings: ModelSettings = {"max_tokens": params.max_tokens}
        if params.temperature is not None:
            settings["temperature"] = params.temperature
        if params.stop_sequences:
            settings["stop_sequences"] = list(params.stop_sequences)
        response = await model_request(chosen, _sampling_messages(params), model_settings=settings)
        text = "".join(part.content for part in response.parts if isinstance(part, PaiTextPart))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=text),
            model=chosen.model_name,
            stop_reason="endTurn",
        )

    return sample


def _sampling_messages(params: types.CreateMessageRequestParams) -> list[ModelMessage]:
    """A server's sampling conversation as pydantic-ai messages."""
    messages: list[ModelMessage] = []
    if params.system_prompt:
        messages.append(ModelRequest(parts=[SystemPromptPart(params.system_prompt)]))
    for message in params.messages:
        contents = message.content if isinstance(message.content, list) else [message.content]
        if message.role == "assistant":
            text = "".join(c.text for c in contents if isinstance(c, types.TextContent))
            messages.append(ModelResponse(parts=[PaiTextPart(text)]))
            continue
        prompt: list[str | BinaryContent] = []
        for content in contents:
            if isinstance(content, types.TextContent):
                prompt.append(content.text)
            elif isinstance(content, types.ImageContent):
                data = base64.b64decode(content.data)
                prompt.append(BinaryImage(data=data, media_type=content.mime_type))
            else:
                prompt.append(f"[{content.type} content: not passed to the model]")
        messages.append(ModelRequest(parts=[UserPromptPart(prompt)]))
    return messages


def to_pydantic_ai_content(result: ToolResult) -> ToolReturnContent:
    """A :class:`ToolResult`'s content as pydantic-ai tool return content.

    One text part is returned as a string; several parts, or any image or audio, as a list of
    strings and binary content the model receives as such.
    """
    parts: list[str | BinaryContent] = []
    for part in result.content:
        if isinstance(part, TextPart):
            parts.append(part.text)
        elif isinstance(part, ImagePart):
            parts.append(BinaryImage(data=base64.b64decode(part.data), media_type=part.mime_type))
        else:
            parts.append(BinaryContent(data=base64.b64decode(part.data), media_type=part.mime_type))
    if len(parts) == 1 and isinstance(parts[0], str):
        return parts[0]
    return parts
