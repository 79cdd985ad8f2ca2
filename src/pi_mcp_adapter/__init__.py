"""pi-mcp-adapter: give an AI agent hundreds of MCP tools for a few hundred tokens.

General layout (data flows one way, top to bottom: each layer imports only the layers listed
above it; ``config -> servers, catalog -> engine -> surface -> hosts, cli``):

- ``config``   where configuration comes from: files, precedence, merge, host imports,
               interpolation, validation with file/line/field errors.
- ``servers``  talking to servers: one owner task per connection, the manager (dedupe,
               in-flight counts, idle), lifecycle (lazy / eager / keep-alive), npx resolution.
- ``catalog``  what servers offer, without talking to them: tool metadata, naming, filters,
               the on-disk metadata cache, schema rendering, search ranking.
- ``engine``   ``McpAdapter``: owns config, cache, the server manager and the catalog, and
               offers typed operations (status, search, lookup, connect, call, prompts,
               reload) and events; the host protocol it speaks; call statistics. It knows no
               surface's wording.
- ``surface``  what the model sees: the ``mcp`` proxy tool, ``ToolSearch``, direct tools,
               ``/mcp`` commands, content conversion, output limits, TOON. Each renders the
               engine's values itself; ``register_surfaces`` installs them on a host.
- ``hosts``    bindings: the MCP gateway, the Python agent runtimes, plain export.
- ``cli``      the ``pi-mcp`` command.

``McpAdapter`` owns the lifecycle of everything below it; a host binding chooses which surfaces
to register and never reaches past the engine.
"""

from __future__ import annotations

import importlib

# Not `typing.TYPE_CHECKING`: the `pi-mcp` entry point imports this package before it hands a
# command to the warm process, which needs the standard library's sockets and nothing more.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from pi_mcp_adapter.catalog import ToolInfo
    from pi_mcp_adapter.config import ServerEntry, Settings

    from ._errors import (
        AmbiguousToolError,
        ConfigError,
        ConnectionLostError,
        ConnectTimeoutError,
        HttpStatusError,
        McpAdapterError,
        NeedsAuthError,
        NotMcpError,
        RequestTimeoutError,
        ServerBackoffError,
        ServerDisabledError,
        ServerNotConfiguredError,
        ServerReportedError,
        ServerStartError,
        ServerUnavailableError,
        ServerUntrustedError,
        ToolLookupError,
        ToolNotFoundError,
        UsageError,
    )
    from .engine import Host, McpAdapter, Question, ToolDefinition, ToolResult

__version__ = "0.1.0"

# Loaded on first access (PEP 562): `pi-mcp --help` and `--version` import this package and
# must not pay for pydantic models, the engine or the MCP SDK, nor a hand-over to the warm
# process for the errors' imports.
_LAZY = {
    "AmbiguousToolError": "._errors",
    "ConfigError": "._errors",
    "ConnectionLostError": "._errors",
    "ConnectTimeoutError": "._errors",
    "HttpStatusError": "._errors",
    "McpAdapterError": "._errors",
    "NeedsAuthError": "._errors",
    "NotMcpError": "._errors",
    "RequestTimeoutError": "._errors",
    "ServerBackoffError": "._errors",
    "ServerDisabledError": "._errors",
    "ServerNotConfiguredError": "._errors",
    "ServerReportedError": "._errors",
    "ServerStartError": "._errors",
    "ServerUnavailableError": "._errors",
    "ServerUntrustedError": "._errors",
    "ToolLookupError": "._errors",
    "ToolNotFoundError": "._errors",
    "UsageError": "._errors",
    "Host": ".engine",
    "McpAdapter": ".engine",
    "Question": ".engine",
    "ServerEntry": ".config._models",
    "Settings": ".config._models",
    "ToolDefinition": ".engine",
    "ToolInfo": ".catalog._metadata",
    "ToolResult": ".engine",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    # The public names are __all__; helpers imported here (importlib, typing) are not API.
    return sorted({*__all__, *(name for name in globals() if name.startswith("_"))})


__all__ = [
    "AmbiguousToolError",
    "ConfigError",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "Host",
    "HttpStatusError",
    "McpAdapter",
    "McpAdapterError",
    "NeedsAuthError",
    "NotMcpError",
    "Question",
    "RequestTimeoutError",
    "ServerBackoffError",
    "ServerDisabledError",
    "ServerEntry",
    "ServerNotConfiguredError",
    "ServerReportedError",
    "ServerStartError",
    "ServerUnavailableError",
    "ServerUntrustedError",
    "Settings",
    "ToolDefinition",
    "ToolInfo",
    "ToolLookupError",
    "ToolNotFoundError",
    "ToolResult",
    "UsageError",
    "__version__",
]
