"""One data shape: a script's ``call`` returns what the ``mcp`` proxy shows, for every server.

Real servers: server-filesystem (structured content that wraps the text), server-everything
(plain text, structured content with JSON text, an embedded resource, an image) and
mcp-server-time (JSON text).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.surface import McpAdapter
from pi_mcp_adapter.surface._calls import call_tool
from pi_mcp_adapter.surface._script import ScriptTool

from .conftest import Workspace, time_entry

NPM_BIN = Path(__file__).resolve().parents[1] / "npm" / "node_modules" / ".bin"

pytestmark = [pytest.mark.slow]


@pytest.fixture
async def adapter(workspace: Workspace, tmp_path: Path) -> AsyncIterator[McpAdapter]:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("buy milk\ncall Ann\n")
    workspace.write_config(
        {
            "fs": {"command": str(NPM_BIN / "mcp-server-filesystem"), "args": [str(notes)]},
            "every": {"command": str(NPM_BIN / "mcp-server-everything"), "args": ["stdio"]},
            "time": time_entry(),
        }
    )
    async with workspace.adapter() as adapter:
        adapter.notes_dir = notes  # type: ignore[attr-defined]
        yield adapter


async def script_value(adapter: McpAdapter, code: str) -> Any:
    one_expression = "\n" not in code.strip()
    result = await ScriptTool(adapter).execute(
        {"code": f"result = {code}" if one_expression else code}
    )
    assert not result.is_error, result.text_content
    return (
        json.loads(result.text_content)
        if result.text_content[:1] in "[{"
        else (result.text_content)
    )


async def test_a_file_read_is_its_text_in_a_script_as_through_the_proxy(
    adapter: McpAdapter,
) -> None:
    path = str(adapter.notes_dir / "todo.txt")  # type: ignore[attr-defined]
    shown = await call_tool(adapter, "fs_read_text_file", {"path": path})
    code = f"await call('fs_read_text_file', {{'path': {path!r}}})"
    # It was {"content": "buy milk\ncall Ann\n"}: the structured copy of the text.
    assert await script_value(adapter, code) == shown.text_content == "buy milk\ncall Ann\n"


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        pytest.param("every_get-sum", {"a": 2, "b": 3}, "The sum of 2 and 3 is 5.", id="text"),
        pytest.param(
            "every_get-structured-content",
            {"location": "New York"},
            {"temperature": 33, "conditions": "Cloudy", "humidity": 82},
            id="structured-with-json-text",
        ),
        pytest.param(
            "time_convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"},
            "dict",
            id="json-text",
        ),
    ],
)
async def test_a_call_returns_the_proxys_text_parsed_when_it_is_json(
    adapter: McpAdapter, tool: str, args: dict[str, Any], expected: Any
) -> None:
    shown = await call_tool(adapter, tool, args)
    value = await script_value(adapter, f"await call({tool!r}, {args!r})")
    if expected == "dict":
        assert value == json.loads(shown.text_content)
        assert set(value) == {"source", "target", "time_difference"}
    else:
        assert value == expected
        assert shown.text_content == (value if isinstance(value, str) else shown.text_content)


async def test_an_embedded_resource_and_an_image_read_as_the_proxy_shows_them(
    adapter: McpAdapter,
) -> None:
    resource = await script_value(
        adapter,
        "await call('every_get-resource-reference', {'resourceType': 'Text', 'resourceId': 1})",
    )
    assert isinstance(resource, list)
    assert any(part.startswith("[Resource: ") for part in resource if isinstance(part, str))
    image = await script_value(adapter, "await call('every_get-tiny-image', {})")
    assert any("[Image content: image/png" in part for part in image if isinstance(part, str))


async def test_one_script_finds_a_tool_by_search_and_calls_it_from_its_compact_signature(
    adapter: McpAdapter,
) -> None:
    path = str(adapter.notes_dir / "todo.txt")  # type: ignore[attr-defined]
    code = f"""
hit = (await search("read the text of a file", server="fs", limit=1))[0]
text = await call(hit["name"], {{"path": {path!r}}})
[hit["signature"], text.splitlines()[0]]
"""
    signature, first_line = await script_value(adapter, code)
    assert signature.startswith("fs_read_text_file(path: str, ")
    assert signature.endswith(") -> str")
    assert first_line == "buy milk"


async def test_describe_gives_the_result_shape_from_the_output_schema(adapter: McpAdapter) -> None:
    described = await script_value(adapter, "await describe('time_convert_time')")
    assert described["returns"].startswith('{"source": {"timezone": str, "datetime": str, ')
    assert described["signature"].endswith(
        "# await call('time_convert_time', {...}) -> " + described["returns"]
    )
    # A one-string wrapper is the text the call returns.
    assert (await script_value(adapter, "await describe('fs_list_directory')"))["returns"] == "str"


async def test_a_script_that_misreads_a_results_shape_is_told_the_shape(
    adapter: McpAdapter,
) -> None:
    path = str(adapter.notes_dir / "todo.txt")  # type: ignore[attr-defined]
    code = f"r = await call('fs_read_text_file', {{'path': {path!r}}})\nr['content']"
    result = await ScriptTool(adapter).execute({"code": code})
    assert result.is_error
    assert result.text_content.startswith("Script failed: TypeError: ")
    assert "The calls returned: fs_read_text_file -> str." in result.text_content
    assert "buy milk" not in result.text_content  # a shape, never the values


async def test_describe_in_a_script_is_a_typed_signature_without_the_json_schema(
    adapter: McpAdapter,
) -> None:
    """The signature carries the parameters, so describe() leaves out the raw schema a script
    that prints it would pay for twice."""
    described = await script_value(adapter, "await describe('time_convert_time')")
    assert set(described) == {"name", "server", "description", "signature", "returns"}
    assert "    target_timezone: str  # Target IANA timezone name" in described["signature"]
