"""Editing JSONC in place: one member changes, every other character stays."""

from __future__ import annotations

import difflib
import json

from hypothesis import given
from hypothesis import strategies as st

from pi_mcp_adapter.config._jsonc import parse_jsonc, remove_jsonc_member, set_jsonc_value

HAND_WRITTEN = """\
{
    // Servers I use every day.
    "mcpServers": {
        "time": { "command": "uvx", "args": ["mcp-server-time"] }, // the clock
        /* git, for this machine only */
        "git": {
            "command": "uvx",
            "args": ["mcp-server-git"],   // trailing comma below is fine in JSONC
        },
    },
    "settings": { "idleTimeout": 5 }
}
"""


def data_of(text: str) -> object:
    document = parse_jsonc(text)
    assert document is not None
    return document.data


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.ndiff(before.splitlines(), after.splitlines())
        if line.startswith(("+ ", "- "))
    ]


def test_adding_a_server_only_adds_its_lines_in_the_file_s_own_indentation() -> None:
    after = set_jsonc_value(
        HAND_WRITTEN, ("mcpServers", "memory"), {"command": "npx", "args": ["-y", "mem"]}
    )
    assert changed_lines(HAND_WRITTEN, after) == [
        '+         "memory": {',
        '+             "command": "npx",',
        '+             "args": ["-y", "mem"]',
        "+         }",
    ]
    servers = data_of(after)["mcpServers"]  # type: ignore[index]
    assert list(servers) == ["time", "git", "memory"]


def test_a_field_set_on_a_one_line_entry_stays_on_that_line_with_its_comment() -> None:
    after = set_jsonc_value(HAND_WRITTEN, ("mcpServers", "time", "disabled"), True)
    assert changed_lines(HAND_WRITTEN, after) == [
        '-         "time": { "command": "uvx", "args": ["mcp-server-time"] }, // the clock',
        '+         "time": { "command": "uvx", "args": ["mcp-server-time"], "disabled": true },'
        " // the clock",
    ]


def test_an_existing_value_is_replaced_where_it_stands() -> None:
    after = set_jsonc_value(HAND_WRITTEN, ("settings", "idleTimeout"), 30)
    assert changed_lines(HAND_WRITTEN, after) == [
        '-     "settings": { "idleTimeout": 5 }',
        '+     "settings": { "idleTimeout": 30 }',
    ]


def test_removing_a_multi_line_entry_removes_its_lines_and_nothing_else() -> None:
    after = remove_jsonc_member(HAND_WRITTEN, ("mcpServers", "git"))
    assert changed_lines(HAND_WRITTEN, after) == [
        '-         "git": {',
        '-             "command": "uvx",',
        '-             "args": ["mcp-server-git"],   // trailing comma below is fine in JSONC',
        "-         },",
    ]
    assert "/* git, for this machine only */" in after  # a comment above may describe more
    assert data_of(after) == {
        "mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}},
        "settings": {"idleTimeout": 5},
    }


def test_removing_the_last_member_takes_the_comma_before_it_and_keeps_that_line_s_comment() -> None:
    text = '{\n  "a": 1, // one\n  "b": 2\n}\n'
    assert remove_jsonc_member(text, ("b",)) == '{\n  "a": 1 // one\n}\n'


def test_a_missing_parent_is_created_and_an_empty_file_gets_a_document() -> None:
    assert data_of(set_jsonc_value("", ("mcpServers", "x"), {"url": "https://x"})) == {
        "mcpServers": {"x": {"url": "https://x"}}
    }
    commented = "// nothing here yet\n"
    after = set_jsonc_value(commented, ("mcpServers", "x"), {"url": "https://x"})
    assert after.startswith(commented)
    assert data_of('{"imports": ["cursor"]}') == {"imports": ["cursor"]}
    after = set_jsonc_value('{"imports": ["cursor"]}', ("mcpServers", "x", "url"), "https://x")
    assert data_of(after) == {"imports": ["cursor"], "mcpServers": {"x": {"url": "https://x"}}}


def test_a_file_with_windows_line_endings_keeps_them() -> None:
    text = HAND_WRITTEN.replace("\n", "\r\n")
    after = set_jsonc_value(text, ("mcpServers", "new"), {"command": "x", "args": ["a"]})
    assert "\n" not in after.replace("\r\n", "")
    assert after.replace("\r\n", "\n") == set_jsonc_value(
        HAND_WRITTEN, ("mcpServers", "new"), {"command": "x", "args": ["a"]}
    )


def test_removing_what_is_not_there_changes_nothing() -> None:
    assert remove_jsonc_member(HAND_WRITTEN, ("mcpServers", "absent")) == HAND_WRITTEN


_keys = st.text(alphabet="abcdefgh-_", min_size=1, max_size=6)
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)


@given(st.dictionaries(_keys, _values, max_size=4), _keys, _keys, _values)
def test_any_set_then_remove_round_trips_through_the_parser(
    start: dict[str, object], outer: str, inner: str, value: object
) -> None:
    text = "// header\n" + json.dumps(start, indent=2) + "\n"
    if outer in start and not isinstance(start[outer], dict):
        return
    after = set_jsonc_value(text, (outer, inner), value)
    expected = json.loads(json.dumps(start))
    expected.setdefault(outer, {})[inner] = value
    assert data_of(after) == expected
    assert after.startswith("// header\n")
    removed = remove_jsonc_member(after, (outer, inner))
    del expected[outer][inner]
    assert data_of(removed) == expected
