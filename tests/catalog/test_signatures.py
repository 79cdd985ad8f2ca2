"""Result shapes recorded for signatures hold types and field names, never data."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest

from pi_mcp_adapter.catalog import (
    MetadataCache,
    ServerMetadata,
    ToolInfo,
    observed_result_shape,
    render_call_line,
    value_shape,
)
from pi_mcp_adapter.config._models import ServerEntry


def _text(value: object) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=json.dumps(value))]


def test_an_observed_map_keyed_by_data_shows_neither_its_keys_nor_its_values() -> None:
    files = {
        "/home/alice/diary.txt": {"size": 4096, "owner": "alice@example.org"},
        "/srv/payroll 2026.xlsx": {"size": 77, "owner": "bob@example.org"},
    }
    shape = observed_result_shape(_text(files), None)
    assert shape == 'dict[str, {"size": int, "owner": str}]'


def test_an_observed_record_shows_its_field_names_and_types() -> None:
    rows = [{"id": 1, "name": "x", "tags": ["a"], "parent": None, "ok": True}]
    assert (
        observed_result_shape(_text(rows), None)
        == 'list[{"id": int, "name": str, "tags": list[str], "parent": None, "ok": bool}]'
    )


def test_structured_content_that_carries_more_than_the_text_is_the_observed_shape() -> None:
    content = [types.TextContent(type="text", text="3 repositories")]
    assert observed_result_shape(content, {"count": 3, "names": ["a"]}) == (
        '{"count": int, "names": list[str]}'
    )
    assert observed_result_shape(content, {"result": "3 repositories"}) == "str"


def test_a_result_with_an_image_records_no_shape() -> None:
    image = types.ImageContent(type="image", data="AAAA", mime_type="image/png")
    assert observed_result_shape([image], None) is None
    assert observed_result_shape([], None) is None


def test_the_observed_shape_is_marked_only_where_the_server_declares_no_real_schema() -> None:
    plain = ToolInfo("s_t", "t", "s", input_schema={"type": "object", "properties": {}})
    typed = ToolInfo(
        "s_u",
        "u",
        "s",
        output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    assert render_call_line(plain) == "s_t() -> str | dict | list"
    assert render_call_line(plain, '{"n": int}') == 's_t() -> {"n": int} (observed)'
    assert render_call_line(typed, '{"x": str}') == 's_u() -> {"n": int}'


def test_an_observed_shape_is_kept_beside_the_reference_fields_and_across_a_relisting(
    tmp_path: Path,
) -> None:
    """``observedResults`` is one more entry field: the entry still reads as the reference
    wrote it, a relisting of the same configuration keeps the shapes, a changed tool's shape
    is dropped, and another configuration starts without any."""
    path = tmp_path / "agent" / "mcp-cache.json"
    entry = ServerEntry.model_validate({"command": "npx", "args": ["-y", "some-server"]})
    listing = ServerMetadata(tools=({"name": "read"}, {"name": "write"}))
    cache = MetadataCache(path)
    cache.store("fs", entry, listing)
    cache.record_observed_shape("fs", "read", "str")
    cache.record_observed_shape("fs", "write", '{"ok": bool}')
    cache.record_observed_shape("nowhere", "read", "str")  # never listed: nothing recorded
    cache.flush()
    written = json.loads(path.read_text())["servers"]
    assert set(written) == {"fs"}
    assert written["fs"]["observedResults"] == {"read": "str", "write": '{"ok": bool}'}
    assert [t["name"] for t in MetadataCache(path).get("fs", entry).tools] == ["read", "write"]

    changed = ServerMetadata(tools=({"name": "read"}, {"name": "write", "description": "new"}))
    cache.store("fs", entry, changed)
    assert cache.observed_shapes("fs") == {"read": "str"}
    other = ServerEntry.model_validate({"command": "npx", "args": ["-y", "other-server"]})
    cache.store("fs", other, changed)
    assert cache.observed_shapes("fs") == {}


DATA = Path(__file__).resolve().parent / "data"


def _listed_tool(listing: str, name: str) -> ToolInfo:
    tools = json.loads((DATA / listing).read_text())["tools"]
    (tool,) = [t for t in tools if t["name"] == name]
    return ToolInfo(
        name,
        name,
        "memory",
        input_schema=tool["inputSchema"],
        output_schema=tool.get("outputSchema"),
    )


def test_a_parameter_of_objects_shows_the_keys_each_object_needs() -> None:
    """server-memory's ``entities`` is a list of objects: without their keys a script cannot
    build the argument right the first time."""
    line = render_call_line(_listed_tool("server-memory.json", "create_entities"))
    assert line.startswith(
        "create_entities(entities: list[{name: str, entityType: str, observations: list[str]}])"
    )


@pytest.mark.parametrize(
    "key",
    [
        pytest.param("a94a8fe5ccb19ba61c4c0873d391e987982fbbd3", id="commit-hash"),
        pytest.param("a94a8fe", id="short-hash"),
        pytest.param("e4f1c2a0-1b2c-4d5e-8f90-123456789abc", id="uuid"),
        pytest.param("user12345", id="user-id"),
        pytest.param("sk_live_4eC39HqLyjWDarjtT1zdp7dc", id="api-key"),
        pytest.param("y2026", id="year"),
        pytest.param("2026-11-27", id="date"),
        pytest.param("42", id="number"),
        pytest.param("/srv/notes/a.md", id="path"),
        pytest.param("ada@example.org", id="email"),
    ],
)
def test_an_object_keyed_by_data_that_looks_like_a_field_name_is_a_map(key: str) -> None:
    shape = value_shape({key: {"n": 1}, "b0c4d5e6f7": {"n": 2}})
    assert shape == 'dict[str, {"n": int}]'
    assert key not in shape


@pytest.mark.parametrize("key", ["sha256", "utf8", "accessed", "created_at", "x-request-id"])
def test_field_names_with_a_digit_or_hex_letters_stay_field_names(key: str) -> None:
    assert value_shape({key: 1}) == f'{{"{key}": int}}'
