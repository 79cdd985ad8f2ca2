"""The boundary between the model and everything else: no exception escapes a tool execution.

Every tool a surface registers (the ``mcp`` proxy tool, ``ToolSearch``, direct tools) runs
through :func:`guard_execute`. Expected failures already come back as error results; this is the
one place that turns anything unexpected (a bug, a broken setting, an exhausted stack) into an
error result too, so a host never sees a traceback where the model expects an answer.

The checks on arguments before they are sent live in the engine (``engine/_arguments.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter.config._masking import mask_text
from pi_mcp_adapter.engine import ToolExecute, ToolResult

if TYPE_CHECKING:
    from pi_mcp_adapter.engine import McpAdapter

__all__ = ["guard_execute", "guarded_call"]

logger = logging.getLogger("pi_mcp_adapter.surface")


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

    from ._calls import call_tool

    async def execute(params: Mapping[str, Any]) -> ToolResult:
        return await call_tool(adapter, name, params)

    return await guard_execute(name, execute)(arguments)
