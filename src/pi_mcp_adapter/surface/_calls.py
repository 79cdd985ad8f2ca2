"""Tool calls as the model sees them: an engine :class:`CallOutcome` rendered as a result.

Every surface that runs a tool (the ``mcp`` proxy's call mode, direct tools, tools activated by
``ToolSearch``, the CLI's ``call``) goes through :func:`call_tool`, so the model reads the same
words for the same outcome wherever it called from: content converted for the host, JSON
TOON-encoded where configured, output cut by the output guard, and errors that say what to do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from pi_mcp_adapter.catalog import ToolInfo, render_parameters
from pi_mcp_adapter.catalog._schema import NO_PARAMETERS
from pi_mcp_adapter.engine import CallOutcome, ContentPart, McpAdapter, TextPart, ToolResult

from ._content import convert_call_result, convert_read_resource_result
from ._output_guard import guard_output, output_guard_limits
from ._toon import encode_if_shorter, should_toon


async def call_tool(
    adapter: McpAdapter,
    name: str,
    arguments: Mapping[str, Any] | None,
    *,
    host_tools: Sequence[str] = (),
    server: str | None = None,
) -> ToolResult:
    """Call ``name`` through the engine and render the outcome; never raises for tool errors.

    ``host_tools`` are the host's own tool names: a model that calls one of them through the
    proxy is told to call it directly. ``server`` restricts ``name`` to that server's tools.
    """
    outcome = await adapter.call(name, arguments, server=server)
    return render_outcome(adapter, outcome, host_tools=host_tools)


def render_outcome(
    adapter: McpAdapter, outcome: CallOutcome, *, host_tools: Sequence[str] = ()
) -> ToolResult:
    """The :class:`ToolResult` a model reads for ``outcome``."""
    tool = outcome.tool
    kind = outcome.error_kind
    if kind == "unknown_tool":
        text = outcome.message
        if outcome.requested in host_tools:
            text += (
                f"\n{outcome.requested!r} is one of your own tools: call it directly, not "
                "through mcp."
            )
        elif not adapter.tools() and "\n" not in text:
            text += "\nNo MCP tools are known yet; mcp({}) shows each server's state."
        return ToolResult.text(
            text,
            is_error=True,
            details={
                "mode": "call",
                "error": "unknown_tool",
                "suggestions": list(outcome.suggestions),
            },
        )
    if kind == "ambiguous_tool":
        return ToolResult.text(
            outcome.message,
            is_error=True,
            details={
                "mode": "call",
                "error": "ambiguous_tool",
                "candidates": list(outcome.candidates),
            },
        )
    assert tool is not None
    if kind == "invalid_arguments":
        text = (
            f"Invalid arguments for {tool.name}:\n"
            + "\n".join(f"- {p}" for p in outcome.problems)
            + "\n\n"
            + parameter_hint(tool)
        )
        return ToolResult.text(
            text,
            is_error=True,
            details={
                "mode": "call",
                "server": tool.server,
                "name": tool.name,
                "error": "invalid_arguments",
                "problems": list(outcome.problems),
            },
        )
    if kind is not None:
        message = outcome.message
        if kind == "server_error":
            message = f"Failed to call tool {tool.name}: {message}"
            if outcome.error_code == -32602:  # invalid params: the schema tells how to fix it
                message += "\n\n" + parameter_hint(tool)
        return ToolResult.text(
            message,
            is_error=True,
            details={"mode": "call", "server": tool.server, "name": tool.name, "error": kind},
        )
    settings = adapter.settings
    raw = outcome.result
    import mcp_types  # a call has loaded the SDK already; importing here keeps search free of it

    if isinstance(raw, mcp_types.ReadResourceResult):
        result = convert_read_resource_result(raw)
    else:
        assert raw is not None
        result = convert_call_result(raw)
    if should_toon(tool.server, settings.toon_encode):
        result = _toon_result(result)
    limits = output_guard_limits(settings)
    if limits is not None:
        result = guard_output(result, limit_bytes=limits[0], limit_lines=limits[1])
    if result.is_error and not tool.is_resource:
        # After the guard, so a long error text never cuts the hint off.
        result = _with_parameter_hint(result, tool)
    details = {
        "mode": "call",
        "server": tool.server,
        "tool": tool.original_name,
        "name": tool.name,
        **result.details,
    }
    return ToolResult(result.content, is_error=result.is_error, details=details)


_HINT_HEADER = "Expected parameters:"


def parameter_hint(tool: ToolInfo) -> str:
    """``Expected parameters:`` and the tool's parameter list (``none.`` when it takes none)."""
    rendered = render_parameters(tool.input_schema)
    if rendered == NO_PARAMETERS:
        return f"{_HINT_HEADER} none."
    lines = rendered.splitlines()
    if lines and lines[0] == "Parameters:":
        lines = lines[1:]
    return "\n".join([_HINT_HEADER, *lines])


def _with_parameter_hint(result: ToolResult, tool: ToolInfo) -> ToolResult:
    """A server's error result, followed once by the parameters the tool expects.

    A model whose call was refused most often passed something the tool does not take; the
    parameter list lets it correct the call without another ``describe`` round trip.
    """
    text = result.text_content
    if _HINT_HEADER in text or not _about_arguments(text, tool):
        return result
    return ToolResult(
        (*result.content, TextPart("\n" + parameter_hint(tool))),
        is_error=True,
        details={**result.details, "parameterHint": True},
    )


_ARGUMENT_WORDS = re.compile(
    r"argument|parameter|\bparams?\b|required|missing|invalid input|validation|"
    r"must be|should be|expected|unexpected|unknown (?:field|key|property)|schema|-32602",
    re.IGNORECASE,
)


def _about_arguments(text: str, tool: ToolInfo) -> bool:
    """Whether a server's error text speaks of the call's arguments: it uses the words of an
    argument error, or names one of the tool's parameters. A "disk full" or "not found" is
    about the world, and a parameter list under it only misleads the model."""
    if _ARGUMENT_WORDS.search(text):
        return True
    properties = tool.input_schema.get("properties")
    if not isinstance(properties, dict):
        return False
    return any(
        isinstance(name, str) and re.search(rf"\b{re.escape(name)}\b", text) for name in properties
    )


def _toon_result(result: ToolResult) -> ToolResult:
    parts: list[ContentPart] = []
    changed = False
    for part in result.content:
        if isinstance(part, TextPart):
            encoded = encode_if_shorter(part.text)
            if encoded is not None:
                parts.append(TextPart(encoded))
                changed = True
                continue
        parts.append(part)
    if not changed:
        return result
    return ToolResult(
        tuple(parts), is_error=result.is_error, details={**result.details, "toon": True}
    )
