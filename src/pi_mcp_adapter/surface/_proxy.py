"""The ``mcp`` proxy tool: one small, constant tool that reaches every server's tools.

Mode is chosen by which parameter is present, in this priority order (a promise to users):
``tool`` > ``prompt`` > ``connect`` > ``describe`` > ``instructions`` > ``search`` > ``server``
> ``servers`` > status. ``describe`` of one tool shows it in full; of a server, or of several
names (a list, or one string separated by commas), one signature line per tool.
Every outcome, including bad input, is a :class:`ToolResult`; nothing here raises to the host.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pi_mcp_adapter._errors import (
    AmbiguousToolError,
    McpAdapterError,
    ToolNotFoundError,
    UsageError,
)
from pi_mcp_adapter.catalog import ToolInfo, one_line, render_call_line
from pi_mcp_adapter.config._validate import json_type
from pi_mcp_adapter.engine import (
    CallOutcome,
    McpAdapter,
    SearchResults,
    TextPart,
    ToolDefinition,
    ToolResult,
)

from ._calls import call_tool, render_outcome
from ._guard import guard_execute
from ._prompts import render_prompt_line, run_prompt
from ._render import (
    STATUS_BUDGET_CHARS,
    describe_server,
    render_describe,
    render_list,
    render_search_hits,
    render_servers,
    render_signatures,
    render_status,
)

PROXY_TOOL_NAME = "mcp"

# Kept short on purpose: this text is paid for on every turn of every conversation. A parameter
# the description already explains (tool, prompt, describe) carries no description of its own.
# `pi-mcp tokens` measures it; the test suite holds it under 250 o200k tokens.
PROXY_DESCRIPTION = (
    "Gateway to MCP server tools. mcp({}) status; mcp({server}) list tools; "
    "mcp({search}) find tools; mcp({describe}) signatures (tools 'a,b' or server); "
    "mcp({tool, args}) call; "
    "mcp({prompt, args}) render a prompt; mcp({connect}) refresh a server; "
    "mcp({instructions}) server notes."
)

PROXY_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {"type": "string"},
        "args": {"type": "object", "description": "Object or JSON string"},
        "prompt": {"type": "string"},
        "connect": {"type": "string", "description": "Server to connect/refresh"},
        "describe": {"type": "string"},
        "instructions": {"type": "string", "description": "Server"},
        "search": {"type": "string", "description": "Words (OR'd, ranked)"},
        "regex": {"type": "boolean", "description": "Treat search as a regex"},
        "server": {"type": "string", "description": "List this server, or filter search"},
        "servers": {"type": "string", "description": "List servers: all or a state"},
        "includeSchemas": {"type": "boolean", "description": "Default true"},
        "limit": {"type": "integer"},
        "offset": {"type": "integer"},
    },
}

_MODES = (
    "tool",
    "prompt",
    "connect",
    "describe",
    "instructions",
    "search",
    "server",
    "servers",
)


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


_WAITS_FOR_LISTINGS = frozenset({"search", "describe", "list", "instructions", "prompt"})
MAX_SIGNATURE_NAMES = 100
"""Names one ``describe`` may ask for: a whole server each, so enough for any task."""


def _names(params: Mapping[str, Any], key: str) -> list[str]:
    """A list of names, or one string of names separated by commas or spaces."""
    value = params.get(key)
    if isinstance(value, str):
        value = value.replace(",", " ").split()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UsageError(f"{key} must be a list of tool or server names, got {json_type(value)}")
    names = list(dict.fromkeys(v.strip() for v in value if v.strip()))
    if not names:
        raise UsageError(f'{key} names no tool or server; e.g. {key}: ["server", "tool"]')
    if len(names) > MAX_SIGNATURE_NAMES:
        raise UsageError(f"{key} may name at most {MAX_SIGNATURE_NAMES}, got {len(names)}")
    return names


def observed_shape(adapter: McpAdapter, tool: ToolInfo) -> str | None:
    """The shape of ``tool``'s earlier results, as its cache entry records it."""
    return adapter.cache.observed_shapes(tool.server).get(tool.original_name)


def search_results_result(
    query: str, results: SearchResults, *, server: str | None, include_schemas: bool
) -> ToolResult:
    """The proxy tool's answer to a search: the page of ``results`` for the model, with its
    hits in ``details``."""
    page = results.page
    details: dict[str, Any] = {
        "mode": "search",
        "query": query,
        "matches": [
            {
                "server": h.tool.server,
                "tool": h.tool.original_name,
                "name": h.tool.name,
                "score": h.score,
            }
            for h in page.hits
        ],
        "count": page.total,
        "nextOffset": page.next_offset,
        "confident": page.confident,
    }
    if not page.hits:
        where = f" in {server!r}" if server else ""
        lines = [f'No tools matching "{query}"{where}.']
        if results.unavailable:
            lines += ["Not searchable right now:"]
            lines += [f"  {describe_server(u)}" for u in results.unavailable]
        return ToolResult.text("\n".join(lines), details=details)
    text = render_search_hits(query, page, include_schemas=include_schemas, server=server)
    if page.servers:
        details["servers"] = [
            {"server": m.server, "tools": m.tools, "score": m.best_score} for m in page.servers
        ]
    return ToolResult.text(text, details=details)


class ProxyTool:
    """Dispatches ``mcp(...)`` calls to the engine and renders the answers as text.

    ``host_tools`` names the host's own tools, so a model that calls one through ``mcp`` is
    told to call it directly.
    """

    def __init__(self, adapter: McpAdapter, *, host_tools: Sequence[str] = ()) -> None:
        self._adapter = adapter
        self._host_tools = tuple(host_tools)
        self.activate: Callable[[Sequence[str]], list[str]] | None = None
        """Turns on the inactive tools among search hits (``directTools: "search"``)."""

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
        if mode == "search":
            # As below, and the search index is made off the event loop.
            await self._adapter.ready_to_search()
        elif mode in _WAITS_FOR_LISTINGS:
            # Answers from the catalog wait for servers still being listed (bounded), so a
            # request right after start sees the same tools as one a minute later.
            await self._adapter.ready()
        if mode == "call":
            name = _opt_str(params, "tool") or ""
            return await call_tool(
                self._adapter, name, parse_args(params.get("args")), host_tools=self._host_tools
            )
        if mode == "prompt":
            name = _opt_str(params, "prompt") or ""
            return await run_prompt(self._adapter, name, parse_args(params.get("args")))
        if mode == "connect":
            return await self.connect_result(_opt_str(params, "connect") or "")
        if mode == "describe":
            names = _names(params, "describe")
            one = isinstance(params["describe"], str) and len(names) == 1
            if one and names[0] not in self._adapter.servers:
                return self.describe_result(names[0])
            return self.signatures_result(names)
        if mode == "instructions":
            return self.instructions_result(_opt_str(params, "instructions") or "")
        if mode == "search":
            found = self.search_result(
                _opt_str(params, "search") or "",
                server=_opt_str(params, "server"),
                regex=_opt_bool(params, "regex", False),
                include_schemas=_opt_bool(params, "includeSchemas", True),
                limit=_opt_int(params, "limit", minimum=1),
                offset=_opt_int(params, "offset", minimum=0) or 0,
            )
            return self._with_activated(found)
        if mode == "list":
            return self.list_result(_opt_str(params, "server") or "")
        if mode == "servers":
            which = "all" if params.get("servers") is True else _opt_str(params, "servers")
            return self.servers_result(
                which or "all",
                offset=_opt_int(params, "offset", minimum=0) or 0,
                limit=_opt_int(params, "limit", minimum=1),
            )
        return self.status_result()

    # ------------------------------------------------------------------ mode results

    def status_result(self) -> ToolResult:
        """``mcp({})``: within :data:`STATUS_BUDGET_CHARS` whatever the number of servers."""
        report = self._adapter.status()
        return ToolResult.text(
            render_status(report, max_chars=STATUS_BUDGET_CHARS),
            details={
                "mode": "status",
                "servers": [
                    {
                        "name": r.name,
                        "status": r.status,
                        "tools": r.tool_count,
                        "changedTools": list(r.changed_tools),
                    }
                    for r in report.servers
                ],
            },
        )

    def servers_result(
        self, which: str, *, offset: int = 0, limit: int | None = None
    ) -> ToolResult:
        """``mcp({servers})``: one page of servers (all, unavailable, changed or one state),
        largest first, in the order the status's "and N more" line counts from."""
        text = render_servers(self._adapter.status(), which, offset=offset, limit=limit)
        return ToolResult.text(text, details={"mode": "servers", "servers": which})

    def list_result(self, server: str) -> ToolResult:
        adapter = self._adapter
        try:
            adapter.require_server(server)
        except McpAdapterError as exc:
            return ToolResult.text(str(exc), is_error=True, details={"mode": "list"})
        row = adapter.server_status(server)
        tools = adapter.tools(server)
        if not tools and not row.is_searchable:
            return ToolResult.text(
                f"{server}: no tools to show.\n{describe_server(row)}", details={"mode": "list"}
            )
        text = render_list(
            server,
            tools,
            connected=row.status == "connected",
            instructions=adapter.instructions(server),
            prompts=[render_prompt_line(p) for p in adapter.prompts(server)],
        )
        return ToolResult.text(
            text, details={"mode": "list", "server": server, "count": len(tools)}
        )

    def search_result(
        self,
        query: str,
        *,
        server: str | None = None,
        regex: bool = False,
        include_schemas: bool = True,
        limit: int | None = None,
        offset: int = 0,
    ) -> ToolResult:
        results = self._adapter.search(
            query, server=server, regex=regex, limit=limit, offset=offset
        )
        return search_results_result(query, results, server=server, include_schemas=include_schemas)

    def _with_activated(self, result: ToolResult) -> ToolResult:
        """Search hits of ``directTools: "search"`` servers become callable directly."""
        matches = result.details.get("matches") or []
        if self.activate is None or not matches:
            return result
        loaded = self.activate([m["name"] for m in matches if isinstance(m, Mapping)])
        if not loaded:
            return result
        note = (
            f"\n\nLoaded {len(loaded)} tool{'s' if len(loaded) != 1 else ''} you can call "
            f"directly from your next turn: {', '.join(loaded)}"
        )
        return ToolResult(
            (*result.content, TextPart(note)),
            is_error=result.is_error,
            details={**result.details, "loaded": loaded},
        )

    def describe_result(self, name: str) -> ToolResult:
        try:
            tool = self._adapter.lookup_explained(name)
        except ToolNotFoundError as exc:
            outcome = CallOutcome(
                name, error_kind="unknown_tool", message=str(exc), suggestions=exc.suggestions
            )
            return render_outcome(self._adapter, outcome, host_tools=self._host_tools)
        except AmbiguousToolError as exc:
            return ToolResult.text(str(exc), is_error=True, details={"mode": "describe"})
        return ToolResult.text(
            render_describe(tool, observed_shape(self._adapter, tool)),
            details={"mode": "describe", "server": tool.server, "name": tool.name},
        )

    def signatures_result(self, names: Sequence[str]) -> ToolResult:
        """``mcp({describe: "a,b"})`` or of a server: one ``name(params) -> result`` line per
        tool, for tools and whole servers at once. A name that is neither says so in a comment
        line, with the close names a describe would suggest; the others are still shown."""
        adapter = self._adapter
        by_server: dict[str, list[str]] = {}
        shown: set[str] = set()
        missing: list[str] = []
        for name in names:
            if name in adapter.servers:
                tools: Sequence[ToolInfo] = adapter.tools(name)
                if not tools:
                    missing.append(f"# {name}: {describe_server(adapter.server_status(name))}")
            else:
                try:
                    tools = [adapter.lookup_explained(name)]
                except (ToolNotFoundError, AmbiguousToolError) as exc:
                    missing.append(f"# {name}: {one_line(str(exc), 300)}")
                    continue
            for tool in tools:
                if tool.name not in shown:
                    shown.add(tool.name)
                    line = render_call_line(tool, observed_shape(adapter, tool))
                    by_server.setdefault(tool.server, []).append(line)
        text = "\n\n".join(part for part in (render_signatures(by_server), *missing) if part)
        return ToolResult.text(
            text,
            is_error=not by_server,
            details={"mode": "describe", "names": sorted(shown)},
        )

    def instructions_result(self, server: str) -> ToolResult:
        try:
            text = self._adapter.instructions(server)
        except McpAdapterError as exc:
            return ToolResult.text(str(exc), is_error=True, details={"mode": "instructions"})
        if text is None:
            known = self._adapter.state.is_known(server)
            note = (
                "has no instructions"
                if known
                else (f"has not been connected yet; mcp({{connect: {server!r}}}) loads them")
            )
            return ToolResult.text(f"{server} {note}.", details={"mode": "instructions"})
        return ToolResult.text(
            f"{server} instructions:\n\n{text}", details={"mode": "instructions", "server": server}
        )

    async def connect_result(self, server: str) -> ToolResult:
        try:
            metadata = await self._adapter.connect(server)
        except McpAdapterError as exc:
            return ToolResult.text(
                str(exc), is_error=True, details={"mode": "connect", "server": server}
            )
        tools = self._adapter.tools(server)
        text = render_list(
            server,
            tools,
            connected=True,
            instructions=metadata.instructions,
            prompts=[render_prompt_line(p) for p in self._adapter.prompts(server)],
        )
        return ToolResult.text(
            f"Connected to {server}.\n\n{text}",
            details={"mode": "connect", "server": server, "count": len(tools)},
        )
