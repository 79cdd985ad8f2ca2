"""What the model sees: the ``mcp`` proxy tool, ToolSearch and direct tools, host-neutral."""

from __future__ import annotations

from ._engine import McpAdapter
from ._host import AudioPart, Host, ImagePart, TextPart, ToolDefinition, ToolResult

__all__ = [
    "AudioPart",
    "Host",
    "ImagePart",
    "McpAdapter",
    "TextPart",
    "ToolDefinition",
    "ToolResult",
]
