"""Host bindings: adapters from the host protocol to concrete hosts.

- ``_export``         ``ExportHost``: the in-memory host for callers with their own agent loop.
- ``_formats``        tool definitions and results in each provider's exact shape.
- ``_answers``        who answers servers' elicitation in a Python binding (else: declined).
- ``_gateway``        the MCP gateway: the adapter as one MCP server, one host per client.
- ``_gateway_serve``  running the gateway over stdio or Streamable HTTP, token, signals.
  (The server pool a gateway serves beside itself is ``pi_mcp_adapter.servers._pool``: it
  shares server processes, nothing of a host.)
- ``pi_python``       the pi-python extension (``pip install 'pi-mcp-adapter[pi]'``).
- ``pydantic_ai``     a pydantic-ai capability (``pip install 'pi-mcp-adapter[pydantic-ai]'``).
- ``openai_agents``   tools for the OpenAI Agents SDK (extra ``openai-agents``).

Importing this package imports no agent runtime: each runtime binding is its own module,
imported by name, and says which extra to install when its runtime is missing. The gateway
needs only the MCP SDK (and the uvicorn it brings).
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
from ._gateway import GatewayHost, McpGateway
from ._gateway_serve import TOKEN_ENV, GatewayOptions, open_gateway, serve_gateway

__all__ = [
    "TOKEN_ENV",
    "TOOL_FORMATS",
    "ExportHost",
    "GatewayHost",
    "GatewayOptions",
    "McpGateway",
    "ToolFormat",
    "open_gateway",
    "provider_search_tool",
    "result_shape",
    "run_tool",
    "serve_gateway",
    "to_provider_shape",
    "tool_shape",
]
