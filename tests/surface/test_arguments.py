"""Tool arguments typed as a person writes them: ``key=value`` words or one JSON object."""

from __future__ import annotations

import pytest

from pi_mcp_adapter import UsageError
from pi_mcp_adapter.surface._arguments import (
    ArgumentPairs,
    read_argument_text,
    read_argument_words,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "zip": {"type": "string"},
        "count": {"type": "integer"},
        "ratio": {"type": "number"},
        "dry_run": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "filter": {"type": "object"},
        "note": {"type": ["string", "null"]},
        "limit": {"type": ["integer", "null"]},
        "anything": {},
    },
}


def test_each_value_is_typed_by_its_parameter() -> None:
    words = [
        "zip=02134",
        "count=3",
        "ratio=0.5",
        "dry_run=true",
        'tags=["a", "b"]',
        'filter={"state": "open"}',
        "note=null",
        "limit=null",
        "anything=42",
        "unlisted=7",
        "empty=",
    ]
    given = read_argument_words(words)
    assert isinstance(given, ArgumentPairs)
    assert given.typed(SCHEMA) == {
        "zip": "02134",
        "count": 3,
        "ratio": 0.5,
        "dry_run": True,
        "tags": ["a", "b"],
        "filter": {"state": "open"},
        "note": "null",
        "limit": None,
        "anything": "42",
        "unlisted": "7",
        "empty": "",
    }


def test_a_value_that_is_not_json_stays_text_for_the_argument_check_to_name() -> None:
    given = read_argument_words(["count=three", "tags=[unclosed"])
    assert isinstance(given, ArgumentPairs)
    assert given.typed(SCHEMA) == {"count": "three", "tags": "[unclosed"}


def test_one_json_object_is_read_as_is() -> None:
    assert read_argument_words(['{"count": "3", "a=b": 1}']) == {"count": "3", "a=b": 1}
    assert read_argument_words([]) == {}


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["hello"], "cannot read argument 'hello'"),
        (["count=1", "{}"], "cannot read argument '{}'"),
        (["count=1", "count=2"], "'count' is given twice"),
        (["[1, 2]"], "expected a JSON object, got array"),
    ],
)
def test_words_that_are_neither_pairs_nor_an_object_are_a_usage_error(
    words: list[str], message: str
) -> None:
    with pytest.raises(UsageError, match=message.replace("[", r"\[")):
        read_argument_words(words)


def test_a_command_line_reads_as_json_or_as_shell_words() -> None:
    assert read_argument_text(' {"zip": "021 34"} ') == {"zip": "021 34"}
    assert read_argument_text("") == {}
    given = read_argument_text("title='Q4 plan' count=3")
    assert isinstance(given, ArgumentPairs)
    assert given.typed(SCHEMA) == {"title": "Q4 plan", "count": 3}
    with pytest.raises(UsageError, match="cannot read the arguments: No closing quotation"):
        read_argument_text("title='Q4")
