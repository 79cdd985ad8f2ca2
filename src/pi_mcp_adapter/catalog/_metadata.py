"""What the adapter knows about one tool, independent of any live connection."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

JsonSchema = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ToolInfo:
    """One tool as the model sees it.

    ``name`` is the prefixed, sanitised, unique name the model calls; ``original_name`` is the
    server's own name, used on the wire. ``resource_uri`` is set for MCP resources exposed as
    tools (calling one reads the resource).
    """

    name: str
    original_name: str
    server: str
    description: str = ""
    input_schema: JsonSchema = field(default_factory=lambda: {"type": "object", "properties": {}})
    output_schema: JsonSchema | None = None
    annotations: Mapping[str, Any] | None = None
    meta: Mapping[str, Any] | None = None
    """The server's ``_meta`` for the tool (MCP Apps' ``ui`` among others), passed on as is."""
    resource_uri: str | None = None
    keywords: tuple[str, ...] = ()
    """Extra words from the server's ``searchKeywords``: searched like the description, never
    shown to the model nor cached."""

    @property
    def is_resource(self) -> bool:
        return self.resource_uri is not None


JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ServerMetadata:
    """Everything one server exposes, in the JSON wire shape the metadata cache stores.

    ``tools`` are dicts with ``name`` and optionally ``description``, ``inputSchema``,
    ``outputSchema``, ``annotations``; ``resources`` have ``uri``, ``name`` and optionally
    ``description``/``mimeType``; ``prompts`` have ``name`` and optionally ``description`` and
    ``arguments``. Keeping the wire shape makes cache round trips lossless and lets a cache
    written by the TypeScript reference be read as is.
    """

    tools: tuple[JsonObject, ...] = ()
    resources: tuple[JsonObject, ...] = ()
    prompts: tuple[JsonObject, ...] = ()
    instructions: str | None = None

    @classmethod
    def from_mcp(
        cls,
        tools: Sequence[Any],
        resources: Sequence[Any] = (),
        prompts: Sequence[Any] = (),
        instructions: str | None = None,
    ) -> ServerMetadata:
        """Build from the SDK's pydantic wire models (``mcp.types.Tool`` and friends)."""

        def dump(item: Any) -> JsonObject:
            data: JsonObject = item.model_dump(by_alias=True, exclude_none=True, mode="json")
            return data

        return cls(
            tools=tuple(dump(t) for t in tools),
            resources=tuple(dump(r) for r in resources),
            prompts=tuple(dump(p) for p in prompts),
            instructions=instructions,
        )
