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
    result = await ScriptTool(adapter).execute({"code": f"result = {code}"})
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
