"""The boundary between the model and everything else: no exception escapes a tool execution.

Every tool a surface registers (the ``mcp`` proxy tool, ``ToolSearch``, direct tools) runs
through :func:`guard_execute`. Expected failures already come back as error results; this is the
one place that turns anything unexpected (a bug, a broken setting, an exhausted stack) into an
error result too, so a host never sees a traceback where the model expects an answer.

It also owns the checks every argument object must pass before it is sent to a server
(:func:`argument_problems`): JSON that cannot be encoded (lone surrogates) would break the
connection and blame the server; nesting deep enough to exhaust the stack would crash the
encoder. Both are the caller's mistake and are reported as invalid arguments.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter.config._masking import mask_text

from ._host import ToolExecute, ToolResult

if TYPE_CHECKING:
    from ._engine import McpAdapter

__all__ = ["MAX_ARGUMENT_DEPTH", "argument_problems", "guard_execute", "guarded_call"]

logger = logging.getLogger("pi_mcp_adapter.surface")

MAX_ARGUMENT_DEPTH = 100
"""Deepest nesting of arrays and objects accepted in tool arguments. Real tool schemas nest a
handful of levels; Python's JSON encoder and jsonschema recurse once per level."""

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def argument_problems(arguments: Mapping[str, Any]) -> list[str]:
    """Why ``arguments`` cannot be sent as JSON-RPC, as messages naming where; empty if fine.

    Walks the value without recursion, so any depth is checked safely.
    """
    problems: list[str] = []
    stack: list[tuple[object, str, int]] = [(arguments, "", 1)]
    while stack and len(problems) < 5:
        value, where, depth = stack.pop()
        if isinstance(value, Mapping | list | tuple) and depth > MAX_ARGUMENT_DEPTH:
            problems.append(
                f"{where or 'arguments'}: nested more than {MAX_ARGUMENT_DEPTH} levels deep"
            )
            continue
        if isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                problems.append(
                    f"{where or 'arguments'}: text contains a lone surrogate "
                    "(not valid Unicode, cannot be sent as JSON)"
                )
        elif isinstance(value, Mapping):
            for key, item in value.items():
                name = str(key)
                path = f"{where}.{name}" if where else name
                if _LONE_SURROGATE.search(name):
                    problems.append(f"{where or 'arguments'}: a key contains a lone surrogate")
                    continue
                stack.append((item, path, depth + 1))
        elif isinstance(value, list | tuple):
            for index, item in enumerate(value):
                stack.append((item, f"{where}[{index}]", depth + 1))
    return problems


def guard_execute(tool_name: str, execute: ToolExecute) -> ToolExecute:
    """``execute`` that returns an error result instead of raising (cancellation still
    propagates: it is the host's, not an error)."""

    async def guarded(params: Mapping[str, Any]) -> ToolResult:
        try:
            return await execute(params)
        except McpAdapterError as exc:
            return ToolResult.text(str(exc), is_error=True, details={"error": "adapter_error"})
        except Exception as exc:
            logger.exception("tool %r failed inside the adapter", tool_name)
            message = mask_text(str(exc)) if not isinstance(exc, RecursionError) else ""
            text = f"Tool {tool_name} failed inside the adapter ({type(exc).__name__}"
            text += f": {message})" if message else ")"
            return ToolResult.text(
                text + ". This is a bug in pi-mcp-adapter, not in the server.",
                is_error=True,
                details={"error": "internal_error", "exception": type(exc).__name__},
            )

    return guarded


async def guarded_call(adapter: McpAdapter, name: str, arguments: Mapping[str, Any]) -> ToolResult:
    """``adapter.call`` behind the same guard as the surfaces' tools."""

    async def execute(params: Mapping[str, Any]) -> ToolResult:
        return await adapter.call(name, params)

    return await guard_execute(name, execute)(arguments)
