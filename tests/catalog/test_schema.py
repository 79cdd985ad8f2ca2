from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_mcp_adapter.catalog import render_parameters, render_shape

DATA = Path(__file__).with_name("data")


def real_schema(server: str, tool: str) -> Any:
    tools = json.loads((DATA / f"{server}.json").read_text("utf-8"))["tools"]
    (found,) = [t for t in tools if t["name"] == tool]
    return found["inputSchema"]


# ------------------------------------------------------------------ real servers' schemas


@pytest.mark.parametrize(
    ("server", "tool", "shape"),
    [
        pytest.param("server-everything", "echo", "{ message: string }", id="everything-echo"),
        pytest.param("server-everything", "get-sum", "{ a: number; b: number }", id="get-sum"),
        pytest.param(
            "server-everything",
            "get-annotated-message",
            '{ messageType: "error" | "success" | "debug"; includeImage?: boolean }',
            id="enum-and-optional",
        ),
        pytest.param("server-everything", "get-env", "{}", id="no-parameters"),
        pytest.param(
            "server-filesystem", "read_multiple_files", "{ paths: string[] }", id="string-array"
        ),
        pytest.param(
            "server-filesystem",
            "edit_file",
            "{ path: string; edits: { oldText: string; newText: string }[]; dryRun?: boolean }",
            id="array-of-objects",
        ),
        pytest.param(
            "mcp-server-time",
            "convert_time",
            "{ source_timezone: string; time: string; target_timezone: string }",
            id="python-server",
        ),
    ],
)
def test_real_schemas_render_as_compact_shapes(server: str, tool: str, shape: str) -> None:
    assert render_shape(real_schema(server, tool)) == shape


def test_a_real_schema_lists_types_requirements_descriptions_and_defaults() -> None:
    assert render_parameters(real_schema("server-everything", "get-annotated-message")) == (
        "Parameters:\n"
        '  messageType ("error" | "success" | "debug") *required* - Type of message to'
        " demonstrate different annotation patterns\n"
        "  includeImage (boolean) - Whether to include an example image [default: false]"
    )


def test_a_real_schema_shows_constraints() -> None:
    assert render_parameters(real_schema("server-everything", "get-resource-links")) == (
        "Parameters:\n"
        "  count (number) - Number of resource links to return (1-10)"
        " [minimum: 1] [maximum: 10] [default: 3]"
    )
    rendered = render_parameters(real_schema("server-everything", "gzip-file-as-resource"))
    assert "  data (string) - URL or data URI of the file content to compress [format: uri]" in (
        rendered
    )


def test_a_real_array_of_objects_lists_the_item_fields_indented() -> None:
    assert render_parameters(real_schema("server-filesystem", "edit_file")) == (
        "Parameters:\n"
        "  path (string) *required*\n"
        "  edits (array of object) *required*\n"
        "    oldText (string) *required* - Text to search for - must match exactly\n"
        "    newText (string) *required* - Text to replace with\n"
        "  dryRun (boolean) - Preview changes using git-style diff format [default: false]"
    )


def test_a_real_array_of_strings_keeps_its_constraints() -> None:
    rendered = render_parameters(real_schema("server-filesystem", "read_multiple_files"))
    assert rendered.startswith("Parameters:\n  paths (array of string) *required* - Array of")
    assert rendered.endswith("[minItems: 1]")


def test_a_real_tool_without_parameters_says_so() -> None:
    assert render_parameters(real_schema("server-everything", "get-env")) == "No parameters."


def test_every_real_schema_renders_both_ways() -> None:
    for fixture in DATA.glob("*.json"):
        for tool in json.loads(fixture.read_text("utf-8"))["tools"]:
            assert render_parameters(tool["inputSchema"])
            shape = render_shape(tool["inputSchema"])
            assert shape is not None, f"{fixture.name}: {tool['name']}"


# ----------------------------------------------------------------------- constructed cases

RECURSIVE = {
    "type": "object",
    "$defs": {
        "Node": {
            "type": "object",
            "description": "A tree node",
            "properties": {
                "value": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["value"],
        }
    },
    "properties": {"root": {"$ref": "#/$defs/Node"}},
    "required": ["root"],
}


def test_local_refs_are_followed_and_cycles_are_named_not_expanded() -> None:
    assert render_parameters(RECURSIVE) == (
        "Parameters:\n"
        "  root (object) *required* - A tree node\n"
        "    value (string) *required*\n"
        "    children (array of Node (recursive))"
    )
    assert render_shape(RECURSIVE) is None


def test_definitions_refs_are_inlined_in_the_shape() -> None:
    schema = {
        "type": "object",
        "definitions": {"Unit": {"type": "string", "enum": ["c", "f"]}},
        "properties": {"unit": {"$ref": "#/definitions/Unit", "description": "Which scale"}},
    }
    assert render_shape(schema) == '{ unit?: "c" | "f" }'
    assert render_parameters(schema) == 'Parameters:\n  unit ("c" | "f") - Which scale'


def test_an_external_ref_is_shown_but_has_no_shape() -> None:
    schema = {"type": "object", "properties": {"x": {"$ref": "https://example.test/s.json"}}}
    assert render_parameters(schema) == "Parameters:\n  x (see https://example.test/s.json)"
    assert render_shape(schema) is None


def test_simple_unions_are_inline_and_complex_ones_list_their_variants() -> None:
    schema = {
        "type": "object",
        "properties": {
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "target": {
                "oneOf": [
                    {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}}},
                    {"type": "string", "description": "A name"},
                ]
            },
            "tags": {"type": ["array", "null"], "items": {"type": "string"}},
        },
    }
    assert render_parameters(schema) == (
        "Parameters:\n"
        "  limit (integer | null) [default: null]\n"
        "  target (one of)\n"
        "    - object\n"
        "      id (integer) [minimum: 1]\n"
        "    - string - A name\n"
        "  tags (array of string | null)"
    )
    assert render_shape(schema) == (
        "{ limit?: number | null; target?: { id?: number } | string; tags?: string[] | null }"
    )


def test_consts_maps_and_odd_keys() -> None:
    schema = {
        "type": "object",
        "properties": {
            "kind": {"const": "fixed"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "content-type": {"type": "string"},
            "anything": {},
        },
        "required": ["kind"],
    }
    assert render_parameters(schema) == (
        "Parameters:\n"
        '  kind (const "fixed") *required*\n'
        "  labels (object of string values)\n"
        "  content-type (string)\n"
        "  anything (any)"
    )
    assert render_shape(schema) == (
        '{ kind: "fixed"; labels?: Record<string, string>; "content-type"?: string;'
        " anything?: unknown }"
    )


@pytest.mark.parametrize(
    "keyword",
    [
        pytest.param({"allOf": [{"type": "string"}]}, id="allOf"),
        pytest.param({"not": {"type": "string"}}, id="not"),
        pytest.param({"if": {}, "then": {}}, id="conditional"),
        pytest.param({"type": "object", "patternProperties": {"^x": {}}}, id="patternProperties"),
        pytest.param(
            {"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}},
            id="properties-plus-typed-extras",
        ),
        pytest.param({"type": "string", "enum": [{"a": 1}]}, id="object-enum"),
        pytest.param({"type": "frobnicate"}, id="unknown-type"),
    ],
)
def test_keywords_a_one_line_shape_cannot_carry_give_no_shape(keyword: dict[str, Any]) -> None:
    schema = {"type": "object", "properties": {"p": keyword}}
    assert render_shape(schema) is None
    assert render_parameters(schema).startswith("Parameters:\n  p")


def test_a_shape_longer_than_200_characters_is_not_given() -> None:
    props = {f"parameter_number_{i}": {"type": "string"} for i in range(12)}
    schema = {"type": "object", "properties": props}
    assert render_shape(schema) is None
    assert render_parameters(schema).count("\n") == 12


@pytest.mark.parametrize(
    ("schema", "rendered"),
    [
        pytest.param(None, "No parameters.", id="none"),
        pytest.param({}, "No parameters.", id="empty-object"),
        pytest.param({"type": "object"}, "No parameters.", id="object-without-properties"),
        pytest.param({"type": "object", "properties": {}}, "No parameters.", id="no-properties"),
        pytest.param([1, 2], "No parameters.", id="a-list"),
        pytest.param(
            {"type": "object", "additionalProperties": {"type": "number"}},
            "Parameters: any names, each number",
            id="free-form-map",
        ),
        pytest.param({"type": "string"}, "Parameters: a single string value", id="not-an-object"),
        pytest.param(
            {"anyOf": [{"type": "object", "properties": {"a": {"type": "string"}}}]},
            "Parameters, one of:\n  - object\n    a (string)",
            id="top-level-union",
        ),
        pytest.param(
            {"type": "object", "properties": {"a": "junk", "b": {"type": 7}}},
            "Parameters:\n  a (any)\n  b (any)",
            id="junk-property-schemas",
        ),
    ],
)
def test_schemas_without_ordinary_parameters_render_clearly(schema: Any, rendered: str) -> None:
    assert render_parameters(schema) == rendered


def test_deep_nesting_is_summarised() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for level in range(30):
        schema = {"type": "object", "properties": {f"level{level}": schema}}
    rendered = render_parameters(schema)
    assert rendered.startswith("Parameters:\n  level29 (object)")
    assert "…" in rendered
    assert len(rendered.splitlines()) < 12
    assert render_shape(schema) is None


def test_long_enums_are_cut() -> None:
    schema = {"type": "object", "properties": {"n": {"enum": list(range(50))}}}
    assert render_parameters(schema).endswith("| 19 | …)")


# ----------------------------------------------------------------------- never raises

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=30,
)
schema_keys = st.sampled_from(
    [
        "type", "properties", "required", "items", "enum", "const", "anyOf", "oneOf", "allOf",
        "$ref", "$defs", "definitions", "additionalProperties", "default", "description",
        "minimum", "format", "not", "patternProperties",
    ]
)  # fmt: skip
schema_values = st.sampled_from(
    [
        "object", "string", "array", "integer", "null", ["string", "null"], "#/$defs/a",
        "#/definitions/b", "#", "#/properties/x", "#/$defs/a/items",
    ]
)  # fmt: skip
schemas = st.recursive(
    json_values | schema_values,
    lambda children: (
        st.dictionaries(schema_keys | st.text(max_size=3), children, max_size=6)
        | st.lists(children, max_size=3)
    ),
    max_leaves=40,
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(schemas)
def test_rendering_never_raises_on_arbitrary_json(schema: Any) -> None:
    rendered = render_parameters(schema)
    assert isinstance(rendered, str)
    assert rendered
    shape = render_shape(schema)
    assert shape is None or (isinstance(shape, str) and len(shape) <= 200)


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"$ref": "#"}, id="root-refers-to-itself"),
        pytest.param({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, id="self-loop"),
        pytest.param(
            {
                "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                "$ref": "#/$defs/a",
            },
            id="two-cycle",
        ),
        pytest.param(
            {"type": "object", "properties": {"x": {"$ref": "#"}}}, id="property-refers-to-root"
        ),
        pytest.param(
            {
                "$defs": {"a": {"items": {"$ref": "#/$defs/a"}}},
                "properties": {"p": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}},
            },
            id="recursive-array-in-union",
        ),
    ],
)
def test_reference_cycles_terminate(schema: Any) -> None:
    assert isinstance(render_parameters(schema), str)
    render_shape(schema)
