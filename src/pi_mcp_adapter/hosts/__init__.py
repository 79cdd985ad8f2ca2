"""Host bindings: adapters from the host protocol to concrete hosts.

- ``_export``         plain export: the caller's own agent loop asks for tool definitions.
- ``_gateway``        the MCP gateway: the adapter as one MCP server, one host per client.
- ``_gateway_serve``  running the gateway over stdio or Streamable HTTP, token, signals.
"""

from __future__ import annotations

from ._export import ExportHost, to_provider_shape
from ._gateway import GatewayHost, McpGateway
from ._gateway_serve import TOKEN_ENV, GatewayOptions, open_gateway, serve_gateway

__all__ = [
    "TOKEN_ENV",
    "ExportHost",
    "GatewayHost",
    "GatewayOptions",
    "McpGateway",
    "open_gateway",
    "serve_gateway",
    "to_provider_shape",
]
