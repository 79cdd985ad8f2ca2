from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import MappingProxyType
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_mcp_adapter.engine._validate import MAX_PROBLEMS, validate_arguments

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

SEARCH = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1},
        "limit": {"type": "integer", "minimum": 1},
        "sort": {"enum": ["stars", "updated"]},
        "filters": {
            "type": "object",
            "properties": {"language": {"type": "string"}},
            "required": ["language"],
        },
        "repos": {"type": "array", "items": {"type": "string"}},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["query"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("args", "problems"),
    [
        pytest.param({"query": "mcp"}, [], id="valid"),
        pytest.param({"query": "mcp", "limit": 5, "sort": "stars"}, [], id="valid-with-options"),
        pytest.param({}, ["missing required property 'query'"], id="missing-required"),
        pytest.param(
            {"query": "mcp", "limit": "x"},
            ["limit: 'x' is not of type 'integer'"],
            id="wrong-type",
        ),
        pytest.param(
            {"query": "mcp", "limit": 0},
            ["limit: 0 is less than the minimum of 1"],
            id="below-minimum",
        ),
        pytest.param(
            {"query": "mcp", "sort": "best"},
            ["sort: 'best' is not one of ['stars', 'updated']"],
            id="not-in-enum",
        ),
        pytest.param(
            {"query": "mcp", "filters": {}},
            ["filters: missing required property 'language'"],
            id="nested-required",
        ),
        pytest.param(
            {"query": "mcp", "repos": ["a", 2]},
            ["repos[1]: 2 is not of type 'string'"],
            id="array-item",
        ),
        pytest.param(
            {"query": "mcp", "headers": {"x.trace": 1}},
            ["headers[\"x.trace\"]: 1 is not of type 'string'"],
            id="key-that-is-not-an-identifier-is-quoted",
        ),
        pytest.param(
            {"query": "mcp", "qurey": "typo"},
            ["unexpected property 'qurey'"],
            id="unexpected-property",
        ),
        pytest.param(
            {"limit": "x", "extra": 1},
            [
                "missing required property 'query'",
                "unexpected property 'extra'",
                "limit: 'x' is not of type 'integer'",
            ],
            id="several-problems-sorted-by-path",
        ),
    ],
)
def test_problems_are_reported_with_their_json_path(
    args: dict[str, Any], problems: list[str]
) -> None:
    assert validate_arguments(SEARCH, args) == problems


def test_a_type_list_is_named_in_full() -> None:
    schema = {"type": "object", "properties": {"n": {"type": ["integer", "null"]}}}
    assert validate_arguments(schema, {"n": "1"}) == ["n: '1' is not of type 'integer', 'null'"]


def test_a_long_value_is_shortened_in_the_message() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    [problem] = validate_arguments(schema, {"n": "y" * 500})
    assert problem.startswith("n: 'yyyy")
    assert "..." in problem
    assert len(problem) < 120


def test_the_list_of_problems_is_capped() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    args = {f"k{i:02}": "x" for i in range(MAX_PROBLEMS + 5)}
    problems = validate_arguments(schema, args)
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[-1] == "... and 5 more problem(s)"


def test_draft_07_is_used_when_the_schema_says_so() -> None:
    # In draft-07, an `items` list describes each position; in 2020-12 it is not allowed.
    pair = {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
    draft_07 = {"$schema": DRAFT_07, "type": "object", "properties": {"pair": pair}}
    assert validate_arguments(draft_07, {"pair": ["a", "b"]}) == [
        "pair[1]: 'b' is not of type 'integer'"
    ]
    without_draft = {"type": "object", "properties": {"pair": pair}}
    assert validate_arguments(without_draft, {"pair": ["a", "b"]}) == []


def test_2020_12_is_used_when_no_draft_is_named() -> None:
    schema = {
        "type": "object",
        "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}]}},
    }
    assert validate_arguments(schema, {"pair": [1]}) == ["pair[0]: 1 is not of type 'string'"]


def test_formats_are_not_checked() -> None:
    schema = {"type": "object", "properties": {"to": {"type": "string", "format": "email"}}}
    assert validate_arguments(schema, {"to": "not an address"}) == []


def test_arguments_in_a_read_only_mapping_are_an_object() -> None:
    assert validate_arguments(SEARCH, MappingProxyType({"query": "mcp"})) == []


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"type": "nope"}, id="unknown-type"),
        pytest.param({"properties": 5}, id="properties-not-an-object"),
        pytest.param({"type": "string", "pattern": "["}, id="broken-pattern"),
        pytest.param({"$ref": "#/$defs/missing"}, id="unresolvable-local-ref"),
        pytest.param({"$ref": "#"}, id="ref-to-itself"),
        pytest.param({"default": {1, 2}}, id="not-json"),
        pytest.param(
            {"$schema": "https://example.com/my-dialect", "type": 3}, id="unknown-dialect"
        ),
    ],
)
def test_a_schema_that_cannot_be_used_lets_the_call_through(schema: dict[str, Any]) -> None:
    assert validate_arguments(schema, {"anything": ["goes"]}) == []


class _SchemaServer(BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        body = b'{"type": "integer"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def schema_server() -> Iterator[str]:
    _SchemaServer.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SchemaServer)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/schema.json"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_remote_refs_are_never_fetched(schema_server: str) -> None:
    schema = {"type": "object", "properties": {"n": {"$ref": schema_server}}}
    with warnings.catch_warnings():
        # jsonschema warns before it fetches; an error here would hide a fetch.
        warnings.simplefilter("ignore")
        assert validate_arguments(schema, {"n": "not an integer"}) == []
    assert _SchemaServer.requests == []


_json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_json = st.recursive(
    _json_leaves,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)
_KEYWORDS = [
    "type", "properties", "required", "items", "prefixItems", "enum", "const", "minimum",
    "maximum", "minLength", "maxLength", "pattern", "anyOf", "oneOf", "allOf", "not", "$ref",
    "$defs", "definitions", "additionalProperties", "patternProperties", "$schema", "format",
    "minItems", "uniqueItems", "dependentRequired", "if", "then", "else", "$id", "$anchor",
]  # fmt: skip
_TYPES = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null"])
_schemas = st.recursive(
    st.booleans() | st.fixed_dictionaries({"type": _TYPES}),
    lambda children: st.dictionaries(
        st.sampled_from(_KEYWORDS),
        children
        | _json
        | _TYPES
        | st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=4), children, max_size=3)
        | st.sampled_from([DRAFT_07, "#", "#/$defs/a", "http://127.0.0.1:9/x"]),
        max_size=5,
    ),
    max_leaves=15,
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    schema=_schemas | _json,
    args=st.dictionaries(st.text(max_size=6), _json, max_size=5),
)
def test_validation_never_raises_and_returns_messages(schema: Any, args: dict[str, Any]) -> None:
    problems = validate_arguments(schema, args)
    assert isinstance(problems, list)
    assert all(isinstance(p, str) and p for p in problems)
    assert len(problems) <= MAX_PROBLEMS + 1
