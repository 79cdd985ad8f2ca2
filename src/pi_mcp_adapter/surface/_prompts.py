"""Upstream prompts as the model (or a user) reads them: arguments in, messages out as text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pi_mcp_adapter._errors import (
    AmbiguousToolError,
    McpAdapterError,
    ToolNotFoundError,
    UsageError,
)
from pi_mcp_adapter.catalog import PromptInfo
from pi_mcp_adapter.engine import ContentPart, McpAdapter, PromptMessages, TextPart, ToolResult

from ._content import convert_call_result


def prompt_arguments(raw: Mapping[str, Any]) -> dict[str, str]:
    """MCP prompt arguments are strings: other JSON values are passed as their JSON text."""
    return {
        str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
        for k, v in raw.items()
    }


def render_prompt_line(prompt: PromptInfo) -> str:
    """``- github_review - Review a pull request (args: pr*, focus)``; ``*`` marks required."""
    line = f"- {prompt.name}"
    if prompt.description:
        line += f" - {prompt.description.strip().splitlines()[0]}"
    if prompt.arguments:
        line += f" (args: {_argument_list(prompt)})"
    return line


def _argument_list(prompt: PromptInfo) -> str:
    return ", ".join(a.name + ("*" if a.required else "") for a in prompt.arguments)


def render_messages(prompt: PromptInfo, rendered: PromptMessages) -> ToolResult:
    """Each message under a ``[role]`` line; images stay images where the host takes them."""
    parts: list[ContentPart] = [TextPart(f"Prompt {prompt.name} (server {prompt.server}):")]
    if rendered.description:
        parts.append(TextPart(rendered.description))
    for message in rendered.messages:
        parts.append(TextPart(f"\n[{message.role}]"))
        # Rendering a prompt needs the SDK's types; listing prompts (search, status) must not.
        import mcp_types as types

        converted = convert_call_result(types.CallToolResult(content=[message.content]))
        parts += converted.content
    return ToolResult(
        tuple(parts),
        details={
            "mode": "prompt",
            "server": prompt.server,
            "prompt": prompt.original_name,
            "name": prompt.name,
            "messages": len(rendered.messages),
        },
    )


async def run_prompt(adapter: McpAdapter, name: str, arguments: Mapping[str, Any]) -> ToolResult:
    """Resolve, check and render a prompt; every failure is an error result, never a raise."""
    details: dict[str, Any] = {"mode": "prompt"}
    try:
        prompt = adapter.lookup_prompt(name)
    except (ToolNotFoundError, AmbiguousToolError) as exc:
        return ToolResult.text(str(exc), is_error=True, details=details)
    details |= {"server": prompt.server, "name": prompt.name}
    args = prompt_arguments(arguments)
    missing = [a for a in prompt.required_arguments if a not in args]
    if missing:
        return ToolResult.text(
            f"Prompt {prompt.name} needs argument(s): {', '.join(missing)}. "
            f"It takes: {_argument_list(prompt)} (* = required).",
            is_error=True,
            details=details,
        )
    try:
        rendered = await adapter.render_prompt(prompt.name, args)
    except McpAdapterError as exc:
        message = str(exc)
        if isinstance(exc, UsageError):
            message = f"Invalid prompt request: {message}"
        return ToolResult.text(
            f"Failed to render prompt {prompt.name}: {message}", is_error=True, details=details
        )
    return render_messages(prompt, rendered)
