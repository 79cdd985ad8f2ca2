"""What the model sees: the ``mcp`` proxy tool, ToolSearch, direct tools and ``/mcp`` commands.

Each surface renders the engine's typed values in its own words and depends on the engine one
way; :func:`register_surfaces` is how a host binding installs them.

- ``_proxy``        the ``mcp`` tool: modes, parameter parsing, text for each engine value.
- ``_toolsearch``   ``ToolSearch``: deferred tools, the catalog summary, activation.
- ``_direct``       direct tools: selection (config and ``MCP_DIRECT_TOOLS``), definitions.
- ``_commands``     ``/mcp`` and ``/mcp-auth``.
- ``_exposure``     what the model was sent this session, kept stable for prompt caches.
- ``_register``     registering surfaces with a host and following catalog changes.
- ``_calls``        a call outcome rendered as a tool result (content, TOON, output guard).
- ``_script``       ``mcp_script``: a script's ``call``/``search``/``describe``, its result.
- ``_sandbox``      running a script in the ``pydantic-monty`` sandbox within its budgets.
- ``_content``, ``_output_guard``, ``_toon``, ``_tokens``, ``_render``: the pieces.
"""

from __future__ import annotations

from pi_mcp_adapter.engine import (
    AudioPart,
    Host,
    ImagePart,
    McpAdapter,
    TextPart,
    ToolDefinition,
    ToolResult,
)

from ._calls import call_tool, render_outcome
from ._commands import McpCommands
from ._direct import DirectTools, tool_definition, wait_for_up_front_tools
from ._exposure import SessionExposure
from ._proxy import PROXY_TOOL_NAME, ProxyTool, search_results_result
from ._register import SurfaceKind, Surfaces, register_surfaces
from ._sandbox import ScriptLimits, ScriptRun
from ._script import SCRIPT_TOOL_NAME, ScriptTool
from ._toolsearch import TOOL_SEARCH_NAME, ToolSearchSurface

__all__ = [
    "PROXY_TOOL_NAME",
    "SCRIPT_TOOL_NAME",
    "TOOL_SEARCH_NAME",
    "AudioPart",
    "DirectTools",
    "Host",
    "ImagePart",
    "McpAdapter",
    "McpCommands",
    "ProxyTool",
    "ScriptLimits",
    "ScriptRun",
    "ScriptTool",
    "SessionExposure",
    "SurfaceKind",
    "Surfaces",
    "TextPart",
    "ToolDefinition",
    "ToolResult",
    "ToolSearchSurface",
    "call_tool",
    "register_surfaces",
    "render_outcome",
    "search_results_result",
    "tool_definition",
    "wait_for_up_front_tools",
]
