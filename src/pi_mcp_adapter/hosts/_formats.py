"""Provider-shaped tool definitions and tool results, for callers with their own agent loop.

One :class:`~pi_mcp_adapter.engine.ToolDefinition` (or :class:`ToolResult`) becomes exactly what
a provider's API takes:

- ``openai-chat``: Chat Completions ``tools`` entries and ``role: "tool"`` messages;
- ``openai-responses``: Responses API function tools and ``function_call_output`` items;
- ``anthropic``: Messages API ``tools`` entries and ``tool_result`` blocks;
- ``mcp``: MCP ``Tool`` objects and ``CallToolResult`` payloads (camelCase, as on the wire).

Providers with native deferred loading (Anthropic, OpenAI Responses) can run their own tool
search over deferred tools: :func:`tool_shape` marks one ``defer_loading: true`` and
:func:`provider_search_tool` is the search tool that must accompany deferred tools there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.engine import AudioPart, ImagePart, TextPart, ToolDefinition, ToolResult

ToolFormat = Literal["openai-chat", "openai-responses", "anthropic", "mcp"]
TOOL_FORMATS: tuple[ToolFormat, ...] = get_args(ToolFormat)
DEFERRING_FORMATS: frozenset[ToolFormat] = frozenset({"openai-responses", "anthropic"})
"""Formats whose provider hides ``defer_loading`` tools until its own tool search loads them."""

ANTHROPIC_SEARCH_TOOL: Mapping[str, str] = {
    "type": "tool_search_tool_bm25_20251119",
    "name": "tool_search_tool_bm25",
}
"""Anthropic's server-side tool search (natural-language queries), required next to deferred
tools; the regex variant is ``tool_search_tool_regex_20251119``."""

OPENAI_RESPONSES_SEARCH_TOOL: Mapping[str, str] = {"type": "tool_search"}
"""OpenAI's hosted tool search over ``defer_loading`` function tools (Responses API only)."""


def check_format(format: str) -> ToolFormat:
    """``format`` if it is a known :data:`ToolFormat`.

    Raises:
        UsageError: an unknown format (the message lists the known ones).
    """
    for known in TOOL_FORMATS:
        if format == known:
            return known
    raise UsageError(f"Unknown tool format {format!r}; use one of: {', '.join(TOOL_FORMATS)}")


def tool_shape(
    tool: ToolDefinition, format: ToolFormat, *, deferred: bool = False
) -> dict[str, Any]:
    """``tool`` as one entry of the provider's ``tools`` list.

    ``deferred=True`` adds ``defer_loading: true`` (only for :data:`DEFERRING_FORMATS`).

    Raises:
        UsageError: ``deferred`` for a format without native deferred loading.
    """
    if deferred and format not in DEFERRING_FORMATS:
        raise UsageError(
            f"Format {format!r} has no deferred loading; use one of "
            f"{', '.join(sorted(DEFERRING_FORMATS))}, or the ToolSearch surface"
        )
    parameters = dict(tool.parameters)
    shape: dict[str, Any]
    if format == "openai-chat":
        shape = {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": parameters,
            },
        }
    elif format == "openai-responses":
        # MCP schemas are not written for OpenAI's strict mode (optional properties, open
        # objects), so strict validation stays off.
        shape = {
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters,
            "strict": False,
        }
    elif format == "anthropic":
        shape = {"name": tool.name, "description": tool.description, "input_schema": parameters}
    else:
        shape = {"name": tool.name, "description": tool.description, "inputSchema": parameters}
    if deferred:
        shape["defer_loading"] = True
    return shape


def provider_search_tool(format: ToolFormat) -> dict[str, Any]:
    """The provider's own tool search tool, which must come with deferred tools.

    Raises:
        UsageError: a format without native deferred loading.
    """
    if format == "anthropic":
        return dict(ANTHROPIC_SEARCH_TOOL)
    if format == "openai-responses":
        return dict(OPENAI_RESPONSES_SEARCH_TOOL)
    raise UsageError(f"Format {format!r} has no provider-side tool search")


def client_search_tool(search: ToolDefinition) -> dict[str, Any]:
    """OpenAI Responses' client-executed ``tool_search`` tool, worded and shaped as our
    ``ToolSearch``: the model's ``tool_search_call`` is answered by our ranking."""
    return {
        "type": "tool_search",
        "execution": "client",
        "description": search.description,
        "parameters": dict(search.parameters),
    }


def result_shape(
    result: ToolResult,
    format: ToolFormat,
    *,
    call_id: str,
    tool_references: Sequence[str] = (),
) -> dict[str, Any]:
    """``result`` as the message or item that answers tool call ``call_id`` in ``format``.

    Images go where the API takes them (Responses ``input_image``, Anthropic ``image`` blocks,
    MCP ``image`` content); Chat Completions tool messages take text only, so there an image
    or audio part is described in a line of text. ``call_id`` is ignored for ``mcp``, whose
    result is the ``CallToolResult`` payload itself. ``tool_references`` (Anthropic only) are
    deferred tools the result loads: the answer is then those ``tool_reference`` blocks, which
    the API expands into the tools' definitions where the result stands.
    """
    if tool_references and format == "anthropic":
        references = [{"type": "tool_reference", "tool_name": n} for n in tool_references]
        return {"type": "tool_result", "tool_use_id": call_id, "content": references}
    if format == "openai-chat":
        return {"role": "tool", "tool_call_id": call_id, "content": _joined_text(result)}
    if format == "openai-responses":
        items: list[dict[str, Any]] = []
        for part in result.content:
            if isinstance(part, ImagePart):
                url = f"data:{part.mime_type};base64,{part.data}"
                items.append({"type": "input_image", "image_url": url})
            else:
                items.append({"type": "input_text", "text": _part_text(part)})
        only_text = all(i["type"] == "input_text" for i in items)
        output: str | list[dict[str, Any]] = _joined_text(result) if only_text else items
        if result.is_error and isinstance(output, str):
            # The Responses API has no error flag on outputs; say it in the text.
            output = f"Error: {output}"
        return {"type": "function_call_output", "call_id": call_id, "output": output}
    if format == "anthropic":
        blocks: list[dict[str, Any]] = []
        for part in result.content:
            if isinstance(part, ImagePart):
                source = {"type": "base64", "media_type": part.mime_type, "data": part.data}
                blocks.append({"type": "image", "source": source})
            else:
                blocks.append({"type": "text", "text": _part_text(part)})
        shape: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": blocks}
        if result.is_error:
            shape["is_error"] = True
        return shape
    content: list[dict[str, Any]] = []
    for part in result.content:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        else:
            content.append({"type": part.type, "data": part.data, "mimeType": part.mime_type})
    return {"content": content, "isError": result.is_error}


def _part_text(part: TextPart | ImagePart | AudioPart) -> str:
    if isinstance(part, TextPart):
        return part.text
    return f"[{part.type} content: {part.mime_type}; not shown: this API takes text only here]"


def _joined_text(result: ToolResult) -> str:
    return "\n".join(_part_text(p) for p in result.content)
