"""What each model-facing surface costs in tokens, against registering every tool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._host import ToolDefinition
from ._tokens import count_tool_definition_tokens

if TYPE_CHECKING:
    from ._engine import McpAdapter


@dataclass(frozen=True, slots=True)
class TokenReport:
    """Token counts (o200k_base) of tool definitions as a provider would receive them."""

    proxy_tokens: int
    toolsearch_tokens: int
    direct_tokens: int
    direct_tool_count: int
    all_tools_tokens: int
    tool_count: int

    @property
    def proxy_saving_ratio(self) -> float:
        return self.all_tools_tokens / self.proxy_tokens if self.proxy_tokens else 0.0


def definition_tokens(definition: ToolDefinition) -> int:
    return count_tool_definition_tokens(
        definition.name, definition.description, definition.parameters
    )


def measure_tokens(adapter: McpAdapter) -> TokenReport:
    direct = adapter.direct
    every = [direct.definition(tool) for tool in adapter.tools()]
    chosen = [direct.definition(tool) for tool in direct.chosen_tools()]
    return TokenReport(
        proxy_tokens=definition_tokens(adapter.proxy.definition()),
        toolsearch_tokens=definition_tokens(adapter.toolsearch.definition()),
        direct_tokens=sum(definition_tokens(d) for d in chosen),
        direct_tool_count=len(chosen),
        all_tools_tokens=sum(definition_tokens(d) for d in every),
        tool_count=len(every),
    )
