"""The engine: ``McpAdapter`` and the values and host protocol it speaks.

- ``_adapter``   ``McpAdapter``: the facade a host creates; owns config, cache and the server
                 manager; typed operations (status, search, lookup, connect, call, prompts,
                 reload, watch_config) over the parts below.
- ``_catalog_state`` what is known per server (live or cached), what is being listed now
                 (readiness: a miss waits for listings in progress), the catalog views.
- ``_pipeline``  one call pipeline: lookup, argument checks, definition-change block,
                 approval, the call, statistics and trace.
- ``_notices``   what the person is told (failures, auth, changes, reloads), the status line.
- ``_server_status`` each server's state, the status report, and why a tool may be missing
                 with what to do about it.
- ``_status_facts`` what a status from the cache reads of the configuration, and keeping it
                 between processes (``mcp-status-facts.json``).
- ``_kept_files`` the files those two keep facts in: written whole, read for current inputs.
- ``_search_facts`` what a search from the cache keeps so that the next one opens the stored
                 index without building the catalog (``mcp-search-facts.json``).
- ``_routes``    which server answers a prompt, resource, completion or subscription.
- ``_values``    what those operations return: server states, search results, call outcomes.
- ``_host``      the host protocol a binding implements, and the tool definitions and results
                 that cross it.
- ``_validate``  tool arguments checked against the tool's JSON schema before a call.
- ``_arguments`` arguments that can never be sent (lone surrogates, runaway nesting).
- ``_stats``     per-tool call statistics kept across sessions.
- ``_approval``  ``approveTools``: questions to the user before a call, and remembered answers.
- ``_questions`` questions servers ask during a call (elicitation, sampling), routed to the
                 host's answerers, with form defaults filled in.
- ``_caller``    who a call is made for (a gateway client) and what its policy allows.
- ``_trace``     one metadata-only JSON line per call (``settings.trace``, ``PI_MCP_TRACE``).
- ``_telemetry`` OpenTelemetry spans and metrics (``settings.telemetry``, ``OTEL_*``), the
                 Prometheus text and what the gateway's status page shows.

The engine imports ``config``, ``servers`` and ``catalog``, never ``surface`` or a host binding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._adapter import (
    DEFAULT_SEARCH_LIMIT,
    McpAdapter,
    ProgressCallback,
    keep_status_facts,
    kept_cached_status,
    status_facts,
)
from ._approval import (
    APPROVAL_OPTIONS,
    ApprovalScope,
    Ask,
    AsksQuestions,
    Question,
    QuestionOption,
)
from ._caller import CallerPolicy, acting_for, current_caller, view_resource_uri
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
from ._questions import (
    Elicit,
    FormValue,
    NoOneToAsk,
    Sample,
    decline_elicitation,
    describe_question,
    form_defaults,
    form_fields,
    with_form_defaults,
)
from ._search_facts import (
    KeptSearch,
    SearchFacts,
    keep_search_facts,
    kept_index_answers,
    kept_search,
)
from ._status_facts import KeptStatus, StatusFacts
from ._values import (
    CallErrorKind,
    CallOutcome,
    PromptMessages,
    ReloadReport,
    SearchResults,
    ServerStatus,
    StatusReport,
)

if TYPE_CHECKING:
    from ._routes import UnknownPromptError, UnknownResourceError, UpstreamRoutes


def __getattr__(name: str) -> Any:
    # Loaded when asked for: routing speaks the MCP SDK's types, which commands answered from
    # the cache never load.
    if name in ("UnknownPromptError", "UnknownResourceError", "UpstreamRoutes"):
        from . import _routes

        return getattr(_routes, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "APPROVAL_OPTIONS",
    "DEFAULT_SEARCH_LIMIT",
    "ApprovalScope",
    "Ask",
    "AsksQuestions",
    "AudioPart",
    "CallErrorKind",
    "CallOutcome",
    "CallerPolicy",
    "CommandHandler",
    "ContentPart",
    "Elicit",
    "EventHandler",
    "FormValue",
    "Host",
    "HostEvent",
    "ImagePart",
    "KeptSearch",
    "KeptStatus",
    "McpAdapter",
    "NoOneToAsk",
    "NotifyLevel",
    "ProgressCallback",
    "PromptMessages",
    "Question",
    "QuestionOption",
    "ReloadReport",
    "Sample",
    "SearchFacts",
    "SearchResults",
    "ServerStatus",
    "StatusFacts",
    "StatusReport",
    "TextPart",
    "ToolDefinition",
    "ToolExecute",
    "ToolResult",
    "UnknownPromptError",
    "UnknownResourceError",
    "UpstreamRoutes",
    "acting_for",
    "current_caller",
    "decline_elicitation",
    "describe_question",
    "form_defaults",
    "form_fields",
    "keep_search_facts",
    "keep_status_facts",
    "kept_cached_status",
    "kept_index_answers",
    "kept_search",
    "status_facts",
    "view_resource_uri",
    "with_form_defaults",
]
