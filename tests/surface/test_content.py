from __future__ import annotations

import base64
import json
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.server import Server
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolRequestParams,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceResult,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
)

from pi_mcp_adapter.engine import AudioPart, ImagePart, TextPart, ToolResult
from pi_mcp_adapter.surface import _output_guard
from pi_mcp_adapter.surface._content import (
    EMPTY_RESULT_TEXT,
    MAX_BLOB_BYTES,
    convert_call_result,
    convert_read_resource_result,
)

PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(3000)).decode()
WAV_B64 = base64.b64encode(b"RIFF" + bytes(2044)).decode()
EVERYTHING = (
    Path(__file__).parents[1]
    / "npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)

ContentItem = TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


def image(data: str = PNG_B64, mime_type: str = "image/png") -> ImageContent:
    return ImageContent(type="image", data=data, mime_type=mime_type)


def audio() -> AudioContent:
    return AudioContent(type="audio", data=WAV_B64, mime_type="audio/wav")


def blob(data: bytes | str, mime_type: str | None = "application/pdf") -> EmbeddedResource:
    encoded = data if isinstance(data, str) else base64.b64encode(data).decode()
    return EmbeddedResource(
        type="resource",
        resource=BlobResourceContents(uri="file:///report.pdf", blob=encoded, mime_type=mime_type),
    )


def call(*items: ContentItem, structured: Any = None, is_error: bool = False) -> CallToolResult:
    return CallToolResult(content=list(items), structured_content=structured, is_error=is_error)


def texts(result: ToolResult) -> list[str]:
    return [p.text for p in result.content if isinstance(p, TextPart)]


def saved_path(note: str) -> Path:
    return Path(note.rsplit(" saved to ", 1)[1])


def test_text_stays_text() -> None:
    result = convert_call_result(call(text("Echo: hi")))
    assert result == ToolResult((TextPart("Echo: hi"),))


def test_parts_keep_their_order() -> None:
    result = convert_call_result(call(text("a"), image(), text("b")))
    assert [p.type for p in result.content] == ["text", "image", "text"]


def test_an_image_stays_an_image_for_a_host_that_accepts_images() -> None:
    result = convert_call_result(call(image(mime_type="image/jpeg")))
    assert result.content == (ImagePart(PNG_B64, "image/jpeg"),)


def test_an_image_without_a_mime_type_is_taken_as_png() -> None:
    result = convert_call_result(call(image(mime_type="")))
    assert result.content == (ImagePart(PNG_B64, "image/png"),)


def test_an_image_becomes_a_note_for_a_host_without_images() -> None:
    result = convert_call_result(call(image()), accepts_images=False)
    assert texts(result) == [
        "[Image content: image/png, 2.9 KiB; not shown: this host does not take image input]"
    ]


def test_audio_becomes_a_note_unless_the_host_accepts_audio() -> None:
    assert texts(convert_call_result(call(audio()))) == [
        "[Audio content: audio/wav, 2.0 KiB; not shown: this host does not take audio input]"
    ]
    kept = convert_call_result(call(audio()), accepts_audio=True)
    assert kept.content == (AudioPart(WAV_B64, "audio/wav"),)


def test_an_embedded_text_resource_is_shown_under_its_uri() -> None:
    resource = TextResourceContents(uri="demo://doc.md", text="# Title", mime_type="text/markdown")
    result = convert_call_result(call(EmbeddedResource(type="resource", resource=resource)))
    assert texts(result) == ["[Resource: demo://doc.md]\n# Title"]


def test_an_embedded_blob_is_saved_to_a_private_file(tmp_path: Path) -> None:
    data = b"%PDF-1.7 binary \x00\xff"
    result = convert_call_result(call(blob(data)), blob_dir=tmp_path / "blobs")
    [note] = texts(result)
    assert note.startswith("[Resource: file:///report.pdf]\nBinary content (application/pdf, 18 B)")
    path = saved_path(note)
    assert path.read_bytes() == data
    assert path.suffix == ".pdf"
    assert path.parent == tmp_path / "blobs"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert result.details == {"savedFiles": [str(path)]}


def test_blobs_go_to_a_private_temp_dir_by_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # so the file is cleaned up
    monkeypatch.setattr(_output_guard, "_default_dir", None)
    [note] = texts(convert_call_result(call(blob(b"x", mime_type=None))))
    path = saved_path(note)
    assert path.parent.parent == tmp_path
    assert path.suffix == ".bin"
    assert path.parent.name.startswith("pi-mcp-output-")
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_base64_with_line_breaks_is_decoded(tmp_path: Path) -> None:
    data = bytes(range(256))
    wrapped = base64.encodebytes(data).decode()  # 76-character lines
    [note] = texts(convert_call_result(call(blob(wrapped)), blob_dir=tmp_path))
    assert saved_path(note).read_bytes() == data


def test_a_blob_over_the_size_cap_is_not_saved(tmp_path: Path) -> None:
    oversized = base64.b64encode(bytes(MAX_BLOB_BYTES + 1)).decode()
    result = convert_call_result(call(blob(oversized)), blob_dir=tmp_path)
    assert texts(result) == [
        "[Resource: file:///report.pdf]\nBinary content (application/pdf, 10.0 MiB) was not "
        "saved: it is larger than the 10.0 MiB limit."
    ]
    assert list(tmp_path.iterdir()) == []
    assert "savedFiles" not in result.details


def test_a_blob_exactly_at_the_size_cap_is_saved(tmp_path: Path) -> None:
    exact = base64.b64encode(bytes(MAX_BLOB_BYTES)).decode()
    [note] = texts(convert_call_result(call(blob(exact)), blob_dir=tmp_path))
    assert saved_path(note).stat().st_size == MAX_BLOB_BYTES


def test_a_blob_that_is_not_base64_is_described(tmp_path: Path) -> None:
    result = convert_call_result(call(blob("not base64!")), blob_dir=tmp_path)
    assert texts(result) == [
        "[Resource: file:///report.pdf]\nBinary content (application/pdf) could not be "
        "decoded: it is not valid base64."
    ]


def test_a_blob_that_cannot_be_written_is_described(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    [note] = texts(convert_call_result(call(blob(b"abc")), blob_dir=not_a_dir))
    assert note.startswith("[Resource: file:///report.pdf]\nBinary content (application/pdf, 3 B)")
    assert "could not be saved" in note


@pytest.mark.parametrize(
    ("link", "expected"),
    [
        pytest.param(
            ResourceLink(type="resource_link", name="readme", uri="file:///README.md"),
            "[Resource Link: readme]\nURI: file:///README.md",
            id="bare",
        ),
        pytest.param(
            ResourceLink(
                type="resource_link",
                name="report",
                uri="demo://report",
                description="Monthly report",
                mime_type="text/csv",
            ),
            "[Resource Link: report]\nURI: demo://report\nType: text/csv\nMonthly report",
            id="with-description-and-type",
        ),
    ],
)
def test_a_resource_link_names_its_uri(link: ResourceLink, expected: str) -> None:
    assert texts(convert_call_result(call(link))) == [expected]


def test_structured_content_is_kept_in_details_next_to_text() -> None:
    structured = {"temperature": 33, "conditions": "Cloudy"}
    result = convert_call_result(call(text(json.dumps(structured)), structured=structured))
    assert texts(result) == [json.dumps(structured)]
    assert result.details == {"structuredContent": structured}


@pytest.mark.parametrize(
    "items",
    [pytest.param((), id="alone"), pytest.param((image(),), id="with-an-image-only")],
)
def test_structured_content_is_shown_as_json_when_there_is_no_text(
    items: Sequence[ContentItem],
) -> None:
    structured = {"rows": [{"id": 1, "name": "Zoë"}]}
    result = convert_call_result(call(*items, structured=structured))
    assert texts(result) == [json.dumps(structured, indent=2, ensure_ascii=False)]
    assert result.details["structuredContent"] == structured


@pytest.mark.parametrize("is_error", [False, True])
def test_an_empty_result_says_so_and_keeps_its_error_flag(is_error: bool) -> None:
    result = convert_call_result(call(is_error=is_error))
    assert result == ToolResult((TextPart(EMPTY_RESULT_TEXT),), is_error=is_error)


def test_an_error_result_stays_an_error() -> None:
    result = convert_call_result(call(text("No such file"), is_error=True))
    assert result.is_error
    assert result.text_content == "No such file"


def test_a_read_resource_result_shows_each_content_under_its_uri(tmp_path: Path) -> None:
    result = convert_read_resource_result(
        ReadResourceResult(
            contents=[
                TextResourceContents(uri="demo://a.md", text="A"),
                BlobResourceContents(uri="demo://b.bin", blob=base64.b64encode(b"B").decode()),
            ]
        ),
        blob_dir=tmp_path,
    )
    first, second = texts(result)
    assert first == "[Resource: demo://a.md]\nA"
    assert second.startswith("[Resource: demo://b.bin]\nBinary content (application/octet-stream")
    assert saved_path(second).read_bytes() == b"B"
    assert not result.is_error


def test_an_empty_read_resource_result_says_so() -> None:
    result = convert_read_resource_result(ReadResourceResult(contents=[]))
    assert result.text_content == EMPTY_RESULT_TEXT


async def test_a_result_that_crossed_the_wire_converts_the_same(tmp_path: Path) -> None:
    sent = call(
        text("report:"),
        image(),
        blob(b"%PDF"),
        ResourceLink(type="resource_link", name="more", uri="demo://more"),
        structured={"pages": 1},
    )

    async def list_tools(ctx: Any, params: PaginatedRequestParams | None) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="report", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        return sent

    server = Server("content-test", on_list_tools=list_tools, on_call_tool=call_tool)
    with anyio.fail_after(10):
        async with Client(server, cache=None) as client:
            received = await client.call_tool("report", {})
    local = convert_call_result(sent, blob_dir=tmp_path)
    remote = convert_call_result(received, blob_dir=tmp_path)
    assert [p.type for p in remote.content] == ["text", "image", "text", "text"]
    assert remote.content[:2] == local.content[:2]
    assert remote.content[3] == local.content[3]
    assert saved_path(texts(remote)[1]).read_bytes() == b"%PDF"
    assert remote.details["structuredContent"] == {"pages": 1}


@pytest.mark.slow
@pytest.mark.npm
async def test_server_everything_results_convert(tmp_path: Path) -> None:
    if not EVERYTHING.exists():
        pytest.skip("npm test servers are not installed (run `make test`)")
    params = StdioServerParameters(command="node", args=[str(EVERYTHING)])
    with anyio.fail_after(60):
        async with Client(params, mode="legacy", cache=None) as client:
            tiny_image = await client.call_tool("get-tiny-image", {})
            links = await client.call_tool("get-resource-links", {"count": 2})
            reference = await client.call_tool(
                "get-resource-reference", {"resourceType": "Blob", "resourceId": 2}
            )
            structured = await client.call_tool("get-structured-content", {"location": "New York"})
            document = await client.read_resource("demo://resource/static/document/architecture.md")

    image_result = convert_call_result(tiny_image, accepts_images=False)
    assert any(t.startswith("[Image content: image/png, ") for t in texts(image_result))
    assert any(isinstance(p, ImagePart) for p in convert_call_result(tiny_image).content)

    assert "[Resource Link: " in convert_call_result(links).text_content
    assert "URI: demo://resource/dynamic/" in convert_call_result(links).text_content

    note = next(
        t for t in texts(convert_call_result(reference, blob_dir=tmp_path)) if " saved " in t
    )
    assert saved_path(note).read_bytes().startswith(b"Resource 2: This is a base64 blob")

    assert "temperature" in convert_call_result(structured).details["structuredContent"]

    doc_text = convert_read_resource_result(document).text_content
    assert doc_text.startswith("[Resource: demo://resource/static/document/architecture.md]\n# ")
