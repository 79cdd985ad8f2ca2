"""Upstream prompts under model-facing names, resolved by the same rules as tools.

A prompt named ``review`` on server ``github`` is ``github_review`` (prefix and separator as
for tools); a model or user may type any form :meth:`Catalog.lookup` accepts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pi_mcp_adapter._errors import ToolNotFoundError
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.config._models import ToolPrefixMode

from ._catalog import Catalog
from ._metadata import ServerMetadata, ToolInfo
from ._naming import format_tool_name

__all__ = ["PromptArgument", "PromptCatalog", "PromptInfo"]


@dataclass(frozen=True, slots=True)
class PromptArgument:
    name: str
    description: str = ""
    required: bool = False


@dataclass(frozen=True, slots=True)
class PromptInfo:
    """One upstream prompt: its catalog name, the server's own name, what it takes."""

    name: str
    original_name: str
    server: str
    description: str = ""
    arguments: tuple[PromptArgument, ...] = ()

    @property
    def required_arguments(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments if a.required)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _arguments(raw: Any) -> tuple[PromptArgument, ...]:
    found: list[PromptArgument] = []
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, Mapping) and _text(item.get("name")):
            found.append(
                PromptArgument(
                    item["name"], _text(item.get("description")), item.get("required") is True
                )
            )
    return tuple(found)


class PromptCatalog:
    """Every enabled server's prompts, each under one unique name."""

    def __init__(self, prompts: Sequence[PromptInfo]) -> None:
        # The tool catalog's index gives prompts the same names, renames and lookup rules.
        stand_ins = [
            ToolInfo(name=p.name, original_name=p.original_name, server=p.server) for p in prompts
        ]
        by_identity = {(p.server, p.original_name): p for p in prompts}
        self._names = Catalog(stand_ins)
        self._prompts = {
            t.name: by_identity[(t.server, t.original_name)] for t in self._names.tools()
        }

    @classmethod
    def build(
        cls,
        metadata: Mapping[str, ServerMetadata],
        entries: Mapping[str, ServerEntry],
        settings: Settings,
    ) -> PromptCatalog:
        prompts: list[PromptInfo] = []
        for server in [s for s in entries if s in metadata]:
            entry = entries[server]
            if not entry.is_enabled:
                continue
            mode: ToolPrefixMode = entry.tool_prefix or settings.tool_prefix
            for raw in metadata[server].prompts:
                own = _text(raw.get("name"))
                if not own:
                    continue
                prompts.append(
                    PromptInfo(
                        name=format_tool_name(
                            own, server, mode=mode, separator=settings.tool_separator
                        ),
                        original_name=own,
                        server=server,
                        description=_text(raw.get("description")) or _text(raw.get("title")),
                        arguments=_arguments(raw.get("arguments")),
                    )
                )
        return cls(prompts)

    def prompts(self, server: str | None = None) -> list[PromptInfo]:
        """All prompts, or ``server``'s, in server order then the server's own order."""
        return [self._prompts[t.name] for t in self._names.tools(server)]

    def lookup(self, name: str) -> PromptInfo:
        """Resolve a typed prompt name as :meth:`Catalog.lookup` resolves tool names.

        Raises:
            ToolNotFoundError: no such prompt (with suggestions).
            AmbiguousToolError: several prompts match.
        """
        try:
            return self._prompts[self._names.lookup(name).name]
        except ToolNotFoundError as exc:
            hint = (
                f" Did you mean: {', '.join(exc.suggestions)}?"
                if exc.suggestions
                else " List a server's prompts with mcp({server: ...})."
            )
            raise ToolNotFoundError(
                name, f'Prompt "{name}" not found.{hint}', suggestions=exc.suggestions
            ) from None
