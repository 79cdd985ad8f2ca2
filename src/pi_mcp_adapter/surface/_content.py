"""Turn what an MCP server returns into a host-neutral :class:`ToolResult`.

MCP results mix text, images, audio, embedded resources (text or base64 blobs) and links to
resources, plus optional structured JSON. Hosts show text to the model and, some of them,
images or audio. Everything else is turned into text that tells the model what it got: a
blob is saved to a private file and referred to by path rather than pasted as base64, which
would cost many tokens and mean nothing to the model.
"""

from __future__ import annotations

import base64
import binascii
import json
import mimetypes
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pi_mcp_adapter.engine import AudioPart, ContentPart, ImagePart, TextPart, ToolResult

from ._output_guard import format_size, write_private_file

if TYPE_CHECKING:
    # At run time these come from the SDK inside the functions that need them: the SDK takes
    # most of a second to import and the CLI answers cache-only commands without it.
    from mcp.types import (
        AudioContent,
        BlobResourceContents,
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ReadResourceResult,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

__all__ = [
    "EMPTY_RESULT_TEXT",
    "MAX_BLOB_BYTES",
    "convert_call_result",
    "convert_read_resource_result",
]

EMPTY_RESULT_TEXT = "(empty result)"
MAX_BLOB_BYTES = 10 * 1024 * 1024
"""Blobs larger than this (decoded) are not written to disk; the model is told so."""

_DEFAULT_IMAGE_MIME = "image/png"
_DEFAULT_AUDIO_MIME = "audio/wav"
_DEFAULT_BLOB_MIME = "application/octet-stream"


class _Converter:
    """The state of one conversion: the host's abilities and the files written so far."""

    def __init__(self, *, accepts_images: bool, accepts_audio: bool, blob_dir: Path | None):
        self.accepts_images = accepts_images
        self.accepts_audio = accepts_audio
        self.blob_dir = blob_dir
        self.saved_files: list[str] = []

    def part(
        self,
        item: TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource,
    ) -> ContentPart:
        from mcp.types import AudioContent, ImageContent, ResourceLink, TextContent

        if isinstance(item, TextContent):
            return TextPart(item.text)
        if isinstance(item, ImageContent):
            mime = item.mime_type or _DEFAULT_IMAGE_MIME
            if self.accepts_images:
                return ImagePart(item.data, mime)
            return TextPart(_media_note("Image", mime, item.data))
        if isinstance(item, AudioContent):
            mime = item.mime_type or _DEFAULT_AUDIO_MIME
            if self.accepts_audio:
                return AudioPart(item.data, mime)
            return TextPart(_media_note("Audio", mime, item.data))
        if isinstance(item, ResourceLink):
            return TextPart(_link_text(item))
        return self.resource(item.resource)

    def resource(self, resource: TextResourceContents | BlobResourceContents) -> TextPart:
        from mcp.types import TextResourceContents

        if isinstance(resource, TextResourceContents):
            return TextPart(f"[Resource: {resource.uri}]\n{resource.text}")
        return TextPart(f"[Resource: {resource.uri}]\n{self.blob(resource)}")

    def blob(self, resource: BlobResourceContents) -> str:
        mime = resource.mime_type or _DEFAULT_BLOB_MIME
        encoded = "".join(resource.blob.split())  # MIME-style base64 may wrap lines
        if _decoded_size(encoded) > MAX_BLOB_BYTES:  # decided before decoding it all
            return (
                f"Binary content ({mime}, {format_size(_decoded_size(encoded))}) was not saved: "
                f"it is larger than the {format_size(MAX_BLOB_BYTES)} limit."
            )
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return f"Binary content ({mime}) could not be decoded: it is not valid base64."
        what = f"Binary content ({mime}, {format_size(len(data))})"
        try:
            path = write_private_file(
                data, directory=self.blob_dir, prefix="resource-", suffix=_extension(mime)
            )
        except OSError as exc:
            return f"{what} could not be saved: {exc.strerror or exc}."
        self.saved_files.append(str(path))
        return f"{what} saved to {path}"

    def result(
        self,
        parts: Sequence[ContentPart],
        *,
        is_error: bool,
        structured: Any = None,
        has_structured: bool = False,
    ) -> ToolResult:
        content = list(parts)
        details: dict[str, Any] = {}
        if has_structured:
            details["structuredContent"] = structured
            if not any(isinstance(p, TextPart) for p in content):
                content.append(TextPart(_pretty_json(structured)))
        if not content:
            content.append(TextPart(EMPTY_RESULT_TEXT))
        if self.saved_files:
            details["savedFiles"] = list(self.saved_files)
        return ToolResult(tuple(content), is_error=is_error, details=details)


def convert_call_result(
    result: CallToolResult,
    *,
    accepts_images: bool = True,
    accepts_audio: bool = False,
    blob_dir: Path | None = None,
) -> ToolResult:
    """A ``tools/call`` result as the model should see it.

    - text stays text;
    - an image (audio) stays an :class:`ImagePart` (:class:`AudioPart`) when the host accepts
      it, otherwise becomes a note with its MIME type and size;
    - an embedded text resource becomes ``[Resource: <uri>]`` and its text;
    - an embedded blob is written to a private file (0600, in a 0700 directory: ``blob_dir``
      or one made for this process under the system temp dir) and referred to by path; blobs
      over :data:`MAX_BLOB_BYTES`, or not valid base64, are described and not saved;
    - a resource link becomes ``[Resource Link: <name>]``, ``URI: <uri>`` and its description;
    - ``structured_content`` is kept in ``details["structuredContent"]``, and shown as
      indented JSON when no text part came with it;
    - nothing at all becomes ``(empty result)``.

    ``is_error`` is kept. ``details["savedFiles"]`` lists the files written, if any. Never
    raises: a blob that cannot be saved is described instead.
    """
    converter = _Converter(
        accepts_images=accepts_images, accepts_audio=accepts_audio, blob_dir=blob_dir
    )
    parts = [converter.part(item) for item in result.content]
    return converter.result(
        parts,
        is_error=result.is_error,
        structured=result.structured_content,
        has_structured=result.structured_content is not None,
    )


def convert_read_resource_result(
    result: ReadResourceResult, *, blob_dir: Path | None = None
) -> ToolResult:
    """A ``resources/read`` result (for a resource exposed as a tool) as the model sees it.

    Each content item is shown as an embedded resource is by :func:`convert_call_result`: text
    under a ``[Resource: <uri>]`` line, blobs saved to a private file. Never raises.
    """
    converter = _Converter(accepts_images=False, accepts_audio=False, blob_dir=blob_dir)
    parts = [converter.resource(item) for item in result.contents]
    return converter.result(parts, is_error=False)


def _media_note(kind: str, mime: str, data: str) -> str:
    return (
        f"[{kind} content: {mime}, {format_size(_decoded_size(data))}; "
        f"not shown: this host does not take {kind.lower()} input]"
    )


def _link_text(link: ResourceLink) -> str:
    lines = [f"[Resource Link: {link.name}]", f"URI: {link.uri}"]
    if link.mime_type:
        lines.append(f"Type: {link.mime_type}")
    if link.description:
        lines.append(link.description)
    return "\n".join(lines)


def _decoded_size(data: str) -> int:
    """Bytes that base64 ``data`` decodes to, without decoding it."""
    stripped = data.strip()
    return max(0, len(stripped) * 3 // 4 - stripped[-2:].count("="))


def _extension(mime: str) -> str:
    return mimetypes.guess_extension(mime.split(";", 1)[0].strip(), strict=False) or ".bin"


def _pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
