"""The ``mcp`` proxy tool: one small, constant tool that reaches every server's tools.

Mode is chosen by which parameter is present, in this priority order (a promise to users):
``tool`` > ``connect`` > ``describe`` > ``instructions`` > ``search`` > ``server`` > status.
Every outcome, including bad input, is a :class:`ToolResult`; nothing here raises to the host.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pi_mcp_adapter._errors import McpAdapterError, UsageError
from pi_mcp_adapter.config._validate import json_type

from ._guard import guard_execute
from ._host import ToolDefinition, ToolResult

if TYPE_CHECKING:
    from ._engine import McpAdapter

PROXY_TOOL_NAME = "mcp"

# Kept short on purpose: this text is paid for on every turn of every conversation.
# `pi-mcp tokens` measures it; the test suite holds it under 250 o200k tokens.
PROXY_DESCRIPTION = (
    "Gateway to MCP server tools. mcp({}) status; mcp({server}) list tools; "
    "mcp({search}) find tools; mcp({describe}) show parameters; mcp({tool, args}) call; "
    "mcp({connect}) refresh a server; mcp({instructions}) server notes."
)

PROXY_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {"type": "string", "description": "Tool to call"},
        "args": {"type": "object", "description": "Arguments for tool (or a JSON string)"},
        "connect": {"type": "string", "description": "Server to connect/refresh"},
        "describe": {"type": "string", "description": "Tool to describe"},
        "instructions": {"type": "string", "description": "Server"},
        "search": {"type": "string", "description": "Words to search for (OR'd, ranked)"},
        "regex": {"type": "boolean", "description": "Treat search as a regex"},
        "server": {"type": "string", "description": "List this server, or filter search"},
        "includeSchemas": {"type": "boolean", "description": "Default true"},
        "limit": {"type": "integer", "description": "Max results"},
        "offset": {"type": "integer", "description": "Paging offset"},
    },
}

_MODES = ("tool", "connect", "describe", "instructions", "search", "server")


def select_mode(params: Mapping[str, Any]) -> str:
    """The mode a parameter object asks for, by the documented priority."""
    for mode in _MODES:
        value = params.get(mode)
        if value is not None and value != "":
            return "call" if mode == "tool" else ("list" if mode == "server" else mode)
    return "status"


def parse_args(raw: object) -> dict[str, Any]:
    """Accept an object or a JSON string holding an object; anything else is a UsageError."""
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"Invalid args: not valid JSON ({exc.msg} at column {exc.colno}); "
                'pass an object, e.g. args: {"query": "..."}'
            ) from exc
        except RecursionError:
            raise UsageError(
                "Invalid args: the JSON is nested too deeply to read; pass a flatter object"
            ) from None
        if isinstance(value, dict):
            return value
        raise UsageError(f"Invalid args: expected a JSON object, got {json_type(value)}")
    raise UsageError(f"Invalid args: expected a JSON object, got {json_type(raw)}")


def _opt_str(params: Mapping[str, Any], key: str) -> str | None:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise UsageError(f"{key} must be a string, got {json_type(value)}")
    return value


def _opt_bool(params: Mapping[str, Any], key: str, default: bool) -> bool:
    value = params.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise UsageError(f"{key} must be a boolean, got {json_type(value)}")


def _opt_int(params: Mapping[str, Any], key: str, *, minimum: int) -> int | None:
    value = params.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UsageError(f"{key} must be an integer, got {json_type(value)}")
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{key} must be an integer, got {value!r}") from None
    if number < minimum:
        raise UsageError(f"{key} must be at least {minimum}, got {number}")
    return number


class ProxyTool:
    """Dispatches ``mcp(...)`` calls to the engine and renders the answers as text."""

    def __init__(self, adapter: McpAdapter) -> None:
        self._adapter = adapter

    def definition(self) -> ToolDefinition:
        return ToolDefinition(
            name=PROXY_TOOL_NAME,
            description=PROXY_DESCRIPTION,
            parameters=PROXY_PARAMETERS,
            execute=guard_execute(PROXY_TOOL_NAME, self.execute),
        )

    async def execute(self, params: object) -> ToolResult:
        if not isinstance(params, Mapping):
            return ToolResult.text(
                f"Invalid parameters: expected an object, got {json_type(params)}",
                is_error=True,
                details={"mode": "error"},
            )
        mode = select_mode(params)
        try:
            return await self._dispatch(mode, params)
        except McpAdapterError as exc:
            return ToolResult.text(str(exc), is_error=True, details={"mode": mode})

    async def _dispatch(self, mode: str, params: Mapping[str, Any]) -> ToolResult:
        adapter = self._adapter
        if mode == "call":
            name = _opt_str(params, "tool") or ""
            return await adapter.call(name, parse_args(params.get("args")))
        if mode == "connect":
            return await adapter.connect_result(_opt_str(params, "connect") or "")
        if mode == "describe":
            return adapter.describe_result(_opt_str(params, "describe") or "")
        if mode == "instructions":
            return adapter.instructions_result(_opt_str(params, "instructions") or "")
        if mode == "search":
            return adapter.search_result(
                _opt_str(params, "search") or "",
                server=_opt_str(params, "server"),
                regex=_opt_bool(params, "regex", False),
                include_schemas=_opt_bool(params, "includeSchemas", True),
                limit=_opt_int(params, "limit", minimum=1),
                offset=_opt_int(params, "offset", minimum=0) or 0,
            )
        if mode == "list":
            return adapter.list_result(_opt_str(params, "server") or "")
        return adapter.status_result()
