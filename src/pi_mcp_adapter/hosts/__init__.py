"""Host bindings: adapters from the host protocol to concrete hosts.

- ``_export``        ``ExportHost``: the in-memory host for callers with their own agent loop.
- ``_formats``       tool definitions and results in each provider's exact shape.
- ``pi_python``      the pi-python extension (``pip install 'pi-mcp-adapter[pi]'``).
- ``pydantic_ai``    a pydantic-ai capability (``pip install 'pi-mcp-adapter[pydantic-ai]'``).
- ``openai_agents``  tools for the OpenAI Agents SDK (extra ``openai-agents``).

Importing this package imports no agent runtime: each runtime binding is its own module,
imported by name, and says which extra to install when its runtime is missing.
"""

from __future__ import annotations

from ._export import ExportHost, run_tool, to_provider_shape
from ._formats import (
    TOOL_FORMATS,
    ToolFormat,
    provider_search_tool,
    result_shape,
    tool_shape,
)

__all__ = [
    "TOOL_FORMATS",
    "ExportHost",
    "ToolFormat",
    "provider_search_tool",
    "result_shape",
    "run_tool",
    "to_provider_shape",
    "tool_shape",
]
