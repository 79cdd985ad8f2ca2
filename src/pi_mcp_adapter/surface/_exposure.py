"""What the model has been shown this session, kept byte-stable for the provider's prompt cache.

A provider caches a request's prefix, and tool definitions come first in it (before the system
prompt and the messages). A tool list that is reordered, or a definition that is rewritten,
invalidates everything cached after it, so a long session pays its whole prefix again. The rule,
enforced here once for every host that keeps its own tool list:

- tools the model has been sent keep their place, in the order they were first sent; a tool
  that becomes active later is appended after them;
- a definition once sent is the one the model keeps seeing for the rest of the session, even
  when its server relists it with a new description or schema (the call still reaches the
  server's current tool, whose arguments the engine checks as always; rug-pull detection
  compares the server's own definitions, not this copy);
- a sent tool its server no longer offers stays listed, and calling it answers with an error
  that says so, rather than vanishing from the middle of the list.

A host marks what it hands to the model with :meth:`SessionExposure.mark_sent`; until then a
definition may still change freely (the first listing may land after the host was attached).
The one exception: a ``ToolSearch`` sent while nothing was listed yet is a placeholder and takes
the first real summary; after that its summary is fixed, and servers listed later are found by
searching.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pi_mcp_adapter.engine import ToolDefinition, ToolResult

from ._toolsearch import NO_TOOLS_YET, TOOL_SEARCH_NAME


class SessionExposure:
    """The definitions sent to the model this session, in the order they were first sent."""

    def __init__(self) -> None:
        self._sent: dict[str, ToolDefinition] = {}

    @property
    def sent_names(self) -> list[str]:
        return list(self._sent)

    def was_sent(self, name: str) -> bool:
        return name in self._sent

    def mark_sent(self, definitions: Iterable[ToolDefinition]) -> None:
        """Pin ``definitions`` (as they are now) for the rest of the session."""
        for definition in definitions:
            if definition.name == TOOL_SEARCH_NAME and definition.description.endswith(
                NO_TOOLS_YET
            ):
                continue  # a placeholder: the first listing replaces it
            self._sent.setdefault(definition.name, definition)

    def pinned(self, tool: ToolDefinition) -> ToolDefinition:
        """``tool`` as the model keeps seeing it: the definition first sent under its name,
        running the current ``execute``; ``tool`` itself if it was never sent."""
        sent = self._sent.get(tool.name)
        if sent is None or (
            sent.description == tool.description and sent.parameters == tool.parameters
        ):
            return tool
        return replace(sent, execute=tool.execute)

    def retired(self, name: str) -> ToolDefinition | None:
        """For a sent tool its server no longer offers: the sent definition, whose call
        answers with an error; ``None`` for a tool never sent (it can simply go)."""
        sent = self._sent.get(name)
        if sent is None:
            return None

        async def gone(params: Mapping[str, Any]) -> ToolResult:
            return ToolResult.text(
                f"Tool {name!r} is no longer offered by its server; it stays listed only so "
                "the tool list keeps its order. Search for another tool.",
                is_error=True,
            )

        return replace(sent, execute=gone)

    def order(self, active: Sequence[str]) -> list[str]:
        """``active`` in exposure order: the names sent earlier first, in the order they were
        first sent, then the rest in the order they became active."""
        wanted = dict.fromkeys(active)
        return [n for n in self._sent if n in wanted] + [n for n in wanted if n not in self._sent]


def count_cache_breaks(requests: Sequence[tuple[Sequence[str], Sequence[str]]]) -> int:
    """How many of ``requests`` (each its serialized tool definitions and messages, in the
    order sent) would miss a provider's cached prefix built by the request before: a tool list
    that is not the previous one with tools appended, or messages that are not the previous
    ones with messages appended. Appending tools is how hosts without native deferral load a
    tool; a reordered or rewritten earlier definition, or a rewritten earlier message, breaks.
    """
    breaks = 0
    for (tools_before, messages_before), (tools, messages) in itertools.pairwise(requests):
        tools_kept = list(tools[: len(tools_before)]) == list(tools_before)
        messages_kept = list(messages[: len(messages_before)]) == list(messages_before)
        if not (tools_kept and messages_kept):
            breaks += 1
    return breaks
