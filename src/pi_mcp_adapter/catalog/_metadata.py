"""What the adapter knows about one tool, independent of any live connection."""

from __future__ import annotations

from collections.abc import Mapping
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
    resource_uri: str | None = None

    @property
    def is_resource(self) -> bool:
        return self.resource_uri is not None
