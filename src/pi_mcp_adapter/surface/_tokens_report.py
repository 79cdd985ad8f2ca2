"""What each model-facing surface costs in tokens, against registering every tool.

Besides tool definitions it counts what the model reads on asking: the ``mcp({})`` status
(bounded, and as it would be with every server listed), and the host's status line.
"""

from __future__ import annotations

from dataclasses import dataclass

from pi_mcp_adapter.engine import McpAdapter, ToolDefinition

from ._direct import choose_direct_tools, tool_definition
from ._namespace import choose_namespace_tools, namespace_tool_definition
from ._proxy import PROXY_TOOL_NAME, ProxyTool
from ._render import STATUS_BUDGET_CHARS, render_status
from ._tokens import count_tokens, count_tool_definition_tokens
from ._toolsearch import TOOL_SEARCH_NAME, toolsearch_definition


@dataclass(frozen=True, slots=True)
class TokenReport:
    """Token counts (o200k_base) of tool definitions as a provider would receive them."""

    proxy_tokens: int
    toolsearch_tokens: int
    direct_tokens: int
    direct_tool_count: int
    all_tools_tokens: int
    tool_count: int
    server_count: int = 0
    status_tokens: int = 0
    """``mcp({})`` as the model reads it (bounded whatever the number of servers)."""
    status_unbounded_tokens: int = 0
    """The same status with one line for every server (what ``pi-mcp status`` prints)."""
    status_line_tokens: int = 0
    namespace_tokens: int = 0
    """The ``mcp__<server>`` tools (``settings.namespaceProxyTools``)."""
    namespace_tool_count: int = 0

    @property
    def proxy_saving_ratio(self) -> float:
        return self.all_tools_tokens / self.proxy_tokens if self.proxy_tokens else 0.0


def definition_tokens(definition: ToolDefinition) -> int:
    return count_tool_definition_tokens(
        definition.name, definition.description, definition.parameters
    )


def measure_tokens(adapter: McpAdapter) -> TokenReport:
    """Token costs of the proxy tool, ToolSearch, the direct tools and every tool."""
    every = [tool_definition(adapter, tool) for tool in adapter.tools()]
    chosen_tools, _ = choose_direct_tools(adapter, [PROXY_TOOL_NAME, TOOL_SEARCH_NAME])
    chosen = [tool_definition(adapter, tool) for tool in chosen_tools]
    direct_names = {tool.name for tool in chosen_tools}
    status = adapter.status()
    taken = {PROXY_TOOL_NAME, TOOL_SEARCH_NAME, *direct_names}
    namespace = [
        namespace_tool_definition(adapter, server)
        for server in choose_namespace_tools(adapter, taken)[0].values()
    ]
    return TokenReport(
        proxy_tokens=definition_tokens(ProxyTool(adapter).definition()),
        toolsearch_tokens=definition_tokens(
            toolsearch_definition(
                adapter,
                tools=[t for t in adapter.tools() if t.name not in direct_names],
                execute=None,
            )
        ),
        direct_tokens=sum(definition_tokens(d) for d in chosen),
        direct_tool_count=len(chosen),
        all_tools_tokens=sum(definition_tokens(d) for d in every),
        tool_count=len(every),
        server_count=len(status.servers),
        status_tokens=count_tokens(render_status(status, max_chars=STATUS_BUDGET_CHARS)),
        status_unbounded_tokens=count_tokens(render_status(status)),
        status_line_tokens=count_tokens(adapter.status_line()),
        namespace_tokens=sum(definition_tokens(d) for d in namespace),
        namespace_tool_count=len(namespace),
    )
