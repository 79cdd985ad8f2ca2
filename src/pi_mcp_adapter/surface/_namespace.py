"""Namespace tools: one ``mcp__<server>`` tool per server, called with ``{tool, args}``.

With ``settings.namespaceProxyTools`` every enabled server whose tools are known (live or from
the metadata cache) and that has no direct tools gets one wrapper tool. It reaches that
server's tools only, by their catalog name or the server's own name for them, through the
engine's one call pipeline (lookup, argument checks, approval, the call, statistics), so a call
through ``mcp__github`` is refused, approved, recorded and rendered exactly as the same call
through ``mcp``. A host that groups tools by server can offer a server as one tool without
registering each of its tools.

Names are the TypeScript adapter's, so a reference to ``mcp__<server>`` means the same tool in
both: ``-`` becomes ``_``; a name with other characters outside ``[A-Za-z0-9_]`` is encoded
(``_`` doubled, any other character as ``_<hex code point>_``) behind the marker ``_mcpns_``;
a namespace longer than 59 characters (64, the providers' limit for tool names, minus
``mcp__``) keeps its start and ends in 16 hex digits of its SHA-256. Two servers that come out
with the same name get no wrapper (with a warning), rather than one of them silently.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.config._validate import json_type
from pi_mcp_adapter.engine import Host, McpAdapter, ToolDefinition, ToolResult

from ._calls import render_outcome
from ._direct import DIRECT_TOOLS_ENV, resolve_direct_selection
from ._guard import guard_execute
from ._proxy import parse_args
from ._toolsearch import search_activated_servers

NAMESPACE_TOOL_PREFIX = "mcp__"
_ENCODED_MARKER = "_mcpns_"
_MAX_NAMESPACE_CHARS = 59
"""64 (the tool-name limit of Anthropic, OpenAI and Bedrock) minus ``mcp__``."""
_DIGEST_CHARS = 16
_SAFE_NAME = re.compile(r"[A-Za-z0-9_]*")
_ALNUM = re.compile(r"[A-Za-z0-9]")
_NAMES_IN_DESCRIPTION_CHARS = 160
_NAMES_IN_ERROR_CHARS = 600
_NOT_OFFERED = ("disabled", "untrusted", "invalid")

NAMESPACE_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {"type": "string", "description": "Tool name on this server"},
        "args": {
            "type": "object",
            "description": "The tool's arguments (or a JSON string)",
            "additionalProperties": True,
        },
    },
    "required": ["tool"],
}


def namespace_tool_name(server: str) -> str:
    """``mcp__<namespace>`` for ``server``, as the TypeScript adapter names it."""
    normalized = server.replace("-", "_")
    safe = _SAFE_NAME.fullmatch(normalized) is not None and not normalized.startswith(
        _ENCODED_MARKER
    )
    body = normalized if safe else _encode(normalized)
    namespace = body if safe else _ENCODED_MARKER + body
    if len(namespace) > _MAX_NAMESPACE_CHARS:
        # The namespace is ASCII by now, so the digest does not depend on how a lone
        # surrogate would be encoded.
        digest = hashlib.sha256(namespace.encode("ascii")).hexdigest()[:_DIGEST_CHARS]
        # `_h_` cannot start an encoded body: `h` is neither `_` nor a hexadecimal digit.
        hash_prefix = f"{_ENCODED_MARKER}_h_"
        head = body[: _MAX_NAMESPACE_CHARS - len(hash_prefix) - _DIGEST_CHARS - 1]
        namespace = f"{hash_prefix}{head}_{digest}"
    return NAMESPACE_TOOL_PREFIX + namespace


def _encode(name: str) -> str:
    # `_` becomes `__`, so `__` and `_<hex>_` form a prefix code: distinct names stay distinct.
    return "".join(
        "__" if ch == "_" else ch if _ALNUM.fullmatch(ch) else f"_{ord(ch):x}_" for ch in name
    )


def _names_within(names: Sequence[str], limit: int) -> str:
    shown: list[str] = []
    used = 0
    for i, name in enumerate(names):
        if shown and used + len(name) + 2 > limit:
            return f"{', '.join(shown)}, … and {len(names) - i} more"
        shown.append(name)
        used += len(name) + 2
    return ", ".join(shown)


def namespace_tool_definition(
    adapter: McpAdapter, server: str, *, host_tools: Sequence[str] = ()
) -> ToolDefinition:
    """The ``mcp__<server>`` tool: ``{tool, args}`` calls one of ``server``'s tools."""
    name = namespace_tool_name(server)
    own_names = [t.original_name for t in adapter.tools(server)]

    async def execute(params: Mapping[str, Any]) -> ToolResult:
        return await call_in_namespace(adapter, server, params, host_tools=host_tools)

    count = f"{len(own_names)} tool{'s' if len(own_names) != 1 else ''}"
    description = (
        f'Calls a tool of MCP server "{server}" ({count}): pass its name as tool and its '
        f"arguments as args. Tools: {_names_within(own_names, _NAMES_IN_DESCRIPTION_CHARS)}"
    )
    return ToolDefinition(
        name=name,
        description=description,
        parameters=NAMESPACE_PARAMETERS,
        execute=guard_execute(name, execute),
    )


async def call_in_namespace(
    adapter: McpAdapter,
    server: str,
    params: object,
    *,
    host_tools: Sequence[str] = (),
) -> ToolResult:
    """Run ``{tool, args}`` against ``server``'s tools; never raises."""
    name = namespace_tool_name(server)
    if not isinstance(params, Mapping):
        return ToolResult.text(
            f"Invalid parameters: expected an object, got {json_type(params)}",
            is_error=True,
            details={"mode": "call", "error": "invalid_parameters", "server": server},
        )
    tool = params.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        return ToolResult.text(
            f"{name} needs tool: the name of one of {server}'s tools "
            f"({_server_tool_names(adapter, server)}).",
            is_error=True,
            details={"mode": "call", "error": "missing_tool", "server": server},
        )
    try:
        arguments = parse_args(params.get("args"))
    except UsageError as exc:
        return ToolResult.text(
            str(exc), is_error=True, details={"mode": "call", "error": "invalid_arguments"}
        )
    outcome = await adapter.call(tool, arguments, server=server)
    result = render_outcome(adapter, outcome, host_tools=host_tools)
    if outcome.error_kind == "unknown_tool" and adapter.tools(server):
        # The reference's hint: the names that would have worked.
        listing = f"{server} has: {_server_tool_names(adapter, server)}"
        return ToolResult.text(
            f"{result.text_content}\n{listing}",
            is_error=True,
            details={**result.details, "server": server},
        )
    return result


def _server_tool_names(adapter: McpAdapter, server: str) -> str:
    names = [t.original_name for t in adapter.tools(server)]
    if not names:
        return f'none known yet; mcp({{connect: "{server}"}}) lists them'
    return _names_within(names, _NAMES_IN_ERROR_CHARS)


def choose_namespace_tools(
    adapter: McpAdapter, taken: Collection[str] = ()
) -> tuple[dict[str, str], dict[str, str]]:
    """Wrapper name -> server for every server that gets one now (none unless the setting is
    on), and name -> why for the wrappers left out (a shared name, or one ``taken``)."""
    if not adapter.settings.namespace_proxy_tools:
        return {}, {}
    enabled = {n: e for n, e in adapter.servers.items() if e.is_enabled}
    direct = resolve_direct_selection(enabled, os.environ.get(DIRECT_TOOLS_ENV)).servers
    searched = search_activated_servers(adapter)
    by_name: dict[str, list[str]] = {}
    for server in enabled:
        if server in direct or server in searched or not adapter.tools(server):
            continue
        if adapter.server_status(server).status in _NOT_OFFERED:
            continue
        by_name.setdefault(namespace_tool_name(server), []).append(server)
    wanted: dict[str, str] = {}
    problems: dict[str, str] = {}
    for name, servers in by_name.items():
        if len(servers) > 1:
            problems[name] = (
                f"MCP namespace tool {name!r} is not offered: servers "
                f"{', '.join(repr(s) for s in sorted(servers))} have the same namespace"
            )
        elif name in taken:
            problems[name] = (
                f"MCP namespace tool {name!r} is not offered: a tool of that name exists"
            )
        else:
            wanted[name] = servers[0]
    return wanted, problems


class NamespaceTools:
    """Keeps a host's ``mcp__<server>`` registrations in step with the catalog and the
    ``namespaceProxyTools`` setting (read at each sync, so a reload can turn them on or off).

    ``taken`` gives the names already registered (host tools, the surface tool, direct tools);
    a wrapper never replaces one of them.
    """

    def __init__(
        self,
        adapter: McpAdapter,
        host: Host,
        *,
        taken: Callable[[], Collection[str]],
    ) -> None:
        self._adapter = adapter
        self._host = host
        self._taken = taken
        self._registered: dict[str, tuple[str, ToolDefinition]] = {}
        self._warned: set[str] = set()

    @property
    def names(self) -> list[str]:
        return list(self._registered)

    def wanted(self) -> dict[str, str]:
        """Wrapper name -> server, for every server that should have one now."""
        wanted, problems = choose_namespace_tools(
            self._adapter, set(self._taken()) - set(self._registered)
        )
        for name, message in problems.items():
            self._warn(name, message)
        return wanted

    def _warn(self, name: str, message: str) -> None:
        if name not in self._warned:
            self._warned.add(name)
            self._host.notify(message, "warning")

    def sync(self) -> tuple[list[str], list[str]]:
        """Register the wrappers now wanted; returns the names added and removed."""
        host = self._host
        wanted = self.wanted()
        removed = [n for n in self._registered if n not in wanted]
        for name in removed:
            host.unregister_tool(name)
            del self._registered[name]
        added: list[str] = []
        host_tools = host.host_tool_names()
        for name, server in wanted.items():
            definition = namespace_tool_definition(self._adapter, server, host_tools=host_tools)
            current = self._registered.get(name)
            if current is not None and _same(current[1], definition):
                continue
            host.register_tool(definition)
            if current is None:
                added.append(name)
            self._registered[name] = (server, definition)
        return added, removed


def _same(a: ToolDefinition, b: ToolDefinition) -> bool:
    return a.description == b.description and a.parameters == b.parameters
