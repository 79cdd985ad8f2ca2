from __future__ import annotations

import json
from typing import Any

import pytest
import toon_format
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_mcp_adapter.surface._tokens import count_tokens
from pi_mcp_adapter.surface._toon import encode_if_shorter, should_toon

# Shapes that real MCP servers return.
ISSUES = {
    "total_count": 3,
    "incomplete_results": False,
    "items": [
        {
            "number": 101 + i,
            "title": title,
            "state": state,
            "user": {"login": login, "id": 1000 + i},
            "labels": labels,
            "comments": i * 2,
            "created_at": f"2026-10-0{i + 1}T12:00:00Z",
            "body": None if i == 1 else f"Steps to reproduce:\n1. run `pi-mcp call x`\n{i}",
        }
        for i, (title, state, login, labels) in enumerate(
            [
                ("Crash on start", "open", "ada", ["bug", "p1"]),
                ("Add TOON output", "closed", "bob", []),
                ('Docs: stats file, "flushDelayMs"', "open", "chloé", ["docs"]),
            ]
        )
    ],
}
DIRECTORY = [
    {"name": "README.md", "type": "file", "size": 2048},
    {"name": "src", "type": "directory", "size": 0},
    {"name": "pyproject.toml", "type": "file", "size": 1337},
    {"name": "a, b.txt", "type": "file", "size": 12},
]
WEATHER = {
    "location": {"name": "Paris", "lat": 48.8566, "lon": 2.3522},
    "current": {"temp_c": 12.5, "condition": "Light rain", "wind_kph": 14.0},
    "forecast": [
        {"date": "2026-11-23", "min_c": 6.1, "max_c": 11.0, "rain_mm": 3.2},
        {"date": "2026-11-24", "min_c": 4.0, "max_c": 9.5, "rain_mm": 0.0},
    ],
}
TABLE_ROWS = {
    "columns": ["id", "email", "active"],
    "rows": [[i, f"user{i}@example.com", i % 2 == 0] for i in range(20)],
}
REALISTIC = [
    pytest.param(ISSUES, id="github-issues"),
    pytest.param(DIRECTORY, id="directory-listing"),
    pytest.param(WEATHER, id="weather"),
    pytest.param(TABLE_ROWS, id="sql-rows"),
    pytest.param({"": "", "nested": {"empty": {}, "list": []}}, id="empty-containers"),
    pytest.param({"unicode": "日本語 🙂", "quote": 'say "hi"', "num": "007"}, id="tricky-strings"),
]


@pytest.mark.parametrize("value", REALISTIC)
def test_toon_round_trips_realistic_tool_output(value: Any) -> None:
    assert toon_format.decode(toon_format.encode(value)) == value


@pytest.mark.parametrize("value", REALISTIC)
def test_pretty_json_output_becomes_toon_that_decodes_to_the_same_value(value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    encoded = encode_if_shorter(text)
    assert encoded is not None
    assert toon_format.decode(encoded) == value
    assert count_tokens(encoded) < count_tokens(text)


def test_a_uniform_list_becomes_a_table() -> None:
    encoded = encode_if_shorter(json.dumps(DIRECTORY))
    assert encoded is not None
    assert encoded.splitlines()[0] == "[4]{name,type,size}:"


def test_json_that_toon_makes_longer_is_left_alone() -> None:
    text = "[[1],[2]]"
    assert count_tokens(toon_format.encode(json.loads(text))) >= count_tokens(text)
    assert encode_if_shorter(text) is None


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("Echo: hi", id="plain-text"),
        pytest.param("42", id="number"),
        pytest.param('"just a string"', id="string"),
        pytest.param("null", id="null"),
        pytest.param('{"a": 1', id="broken-json"),
        pytest.param('{"a": NaN, "b": [1, 2, 3, 4, 5, 6]}', id="nan-is-not-json"),
        pytest.param('[{"a": Infinity}]', id="infinity-is-not-json"),
        pytest.param("[" * 100_000 + "]" * 100_000, id="too-deep"),
    ],
)
def test_text_that_is_not_a_json_object_or_array_gives_none(text: str) -> None:
    assert encode_if_shorter(text) is None


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_gives_toon_or_none_without_raising(text: str) -> None:
    result = encode_if_shorter(text)
    assert result is None or isinstance(result, str)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=15,
)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.lists(_json) | st.dictionaries(st.text(max_size=8), _json), st.booleans())
def test_any_json_document_gives_an_exact_encoding_or_none(value: Any, pretty: bool) -> None:
    text = json.dumps(value, indent=2 if pretty else None)
    encoded = encode_if_shorter(text)
    if encoded is not None:
        assert toon_format.decode(encoded) == json.loads(text)


@pytest.mark.parametrize(
    ("server", "setting", "expected"),
    [
        pytest.param("github", True, True, id="true-means-every-server"),
        pytest.param("github", False, False, id="false-means-none"),
        pytest.param("github", ["jira", "github"], True, id="listed"),
        pytest.param("github", ("jira",), False, id="not-listed"),
        pytest.param("github", [], False, id="empty-list"),
        pytest.param("git", "github", False, id="a-string-is-one-name-not-its-letters"),
        pytest.param("github", "github", True, id="a-string-naming-the-server"),
    ],
)
def test_should_toon_follows_the_setting(server: str, setting: Any, expected: bool) -> None:
    assert should_toon(server, setting) is expected
