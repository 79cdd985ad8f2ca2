from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pi_mcp_adapter.config._jsonc import JsoncSyntaxError, blank_jsonc, parse_jsonc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('{"a": 1} // note', {"a": 1}, id="line-comment"),
        pytest.param('{"a": /* inline */ 1}', {"a": 1}, id="block-comment"),
        pytest.param('{"a": [1, 2,], }', {"a": [1, 2]}, id="trailing-commas"),
        pytest.param('{"a": [1, 2, /* c */ ]}', {"a": [1, 2]}, id="trailing-comma-then-comment"),
        pytest.param('{"a": "http://x/*y*/ // z"}', {"a": "http://x/*y*/ // z"}, id="in-string"),
        pytest.param('{"a": "say \\"//\\" ok"}', {"a": 'say "//" ok'}, id="escaped-quote"),
        pytest.param('\ufeff{"a": 1}', {"a": 1}, id="byte-order-mark"),
        pytest.param('{"a": ",]"}', {"a": ",]"}, id="comma-bracket-in-string"),
    ],
)
def test_comments_and_trailing_commas_are_accepted(text: str, expected: object) -> None:
    document = parse_jsonc(text)
    assert document is not None
    assert document.data == expected


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("   \n\t\n", id="whitespace"),
        pytest.param("// only a comment\n/* and another */\n", id="comments"),
    ],
)
def test_a_file_with_nothing_but_comments_counts_as_absent(text: str) -> None:
    assert parse_jsonc(text) is None


def test_blanking_keeps_every_character_in_place() -> None:
    text = '{\n  // c1\n  "a": 1, /* c2\n spans */ "b": [2,],\n}\n'
    blanked = blank_jsonc(text)
    assert len(blanked) == len(text)
    assert [i for i, c in enumerate(text) if c == "\n"] == [
        i for i, c in enumerate(blanked) if c == "\n"
    ]
    assert json.loads(blanked) == {"a": 1, "b": [2]}


def test_a_syntax_error_reports_the_line_the_user_sees() -> None:
    text = '{\n  // comment\n  /* a\n  long\n  comment */\n  "a": 1\n  "b": 2\n}\n'
    with pytest.raises(JsoncSyntaxError) as caught:
        parse_jsonc(text)
    assert caught.value.line == 7


def test_nesting_too_deep_for_the_parser_is_a_syntax_error_at_its_deepest_point() -> None:
    text = '{\n  "a": "[[[ in a string",\n  "b": ' + "[" * 5000 + "]" * 5000 + "\n}\n"

    with pytest.raises(JsoncSyntaxError) as caught:
        parse_jsonc(text)

    assert "nested too deep (5001 levels)" in caught.value.message
    assert (caught.value.line, caught.value.column) == (3, 5000 + len('  "b": '))


def test_an_unterminated_block_comment_is_reported_where_it_starts() -> None:
    with pytest.raises(JsoncSyntaxError) as caught:
        parse_jsonc('{\n  "a": 1\n  /* never closed\n}')
    assert caught.value.line == 3
    assert "unterminated" in caught.value.message


def test_every_key_and_array_item_has_its_line() -> None:
    text = (
        '{\n  "servers": {\n    // x\n    "s": {\n      "args": [\n'
        '        "a",\n        "b"\n      ]\n    }\n  }\n}'
    )
    document = parse_jsonc(text)
    assert document is not None
    assert document.key_lines[("servers",)] == 2
    assert document.key_lines[("servers", "s")] == 4
    assert document.key_lines[("servers", "s", "args")] == 5
    assert document.key_lines[("servers", "s", "args", 1)] == 7
    assert document.line_of(("servers", "s", "missing")) == 4


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_json_parses_the_same_as_json_loads(value: object) -> None:
    for text in (json.dumps(value), json.dumps(value, indent=2)):
        document = parse_jsonc(text)
        assert document is not None
        assert document.data == json.loads(text)


def _paths(value: object, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    found: list[tuple[str | int, ...]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            found.append((*prefix, key))
            found.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.append((*prefix, index))
            found.extend(_paths(item, (*prefix, index)))
    return found


@given(json_values)
def test_every_location_in_any_json_gets_a_line(value: object) -> None:
    document = parse_jsonc(json.dumps(value, indent=2))
    assert document is not None
    assert set(_paths(value)) <= set(document.key_lines)
