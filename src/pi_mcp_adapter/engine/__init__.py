"""The engine: ``McpAdapter`` and the values and host protocol it speaks.

- ``_adapter``   ``McpAdapter``: owns config, cache, the server manager and the catalog; typed
                 operations (status, search, lookup, connect, call, prompts, reload) and events.
- ``_values``    what those operations return: server states, search results, call outcomes.
- ``_host``      the host protocol a binding implements, and the tool definitions and results
                 that cross it.
- ``_validate``  tool arguments checked against the tool's JSON schema before a call.
- ``_arguments`` arguments that can never be sent (lone surrogates, runaway nesting).
- ``_stats``     per-tool call statistics kept across sessions.

The engine imports ``config``, ``servers`` and ``catalog``, never ``surface`` or a host binding.
"""

from __future__ import annotations

from ._adapter import DEFAULT_SEARCH_LIMIT, McpAdapter, ProgressCallback
from ._host import (
    AudioPart,
    CommandHandler,
    ContentPart,
    EventHandler,
    Host,
    HostEvent,
    ImagePart,
    NotifyLevel,
    TextPart,
    ToolDefinition,
    ToolExecute,
    ToolResult,
)
from ._values import (
    CallErrorKind,
    CallOutcome,
    PromptMessages,
    SearchResults,
    ServerStatus,
    StatusReport,
)

__all__ = [
    "DEFAULT_SEARCH_LIMIT",
    "AudioPart",
    "CallErrorKind",
    "CallOutcome",
    "CommandHandler",
    "ContentPart",
    "EventHandler",
    "Host",
    "HostEvent",
    "ImagePart",
    "McpAdapter",
    "NotifyLevel",
    "ProgressCallback",
    "PromptMessages",
    "SearchResults",
    "ServerStatus",
    "StatusReport",
    "TextPart",
    "ToolDefinition",
    "ToolExecute",
    "ToolResult",
]
