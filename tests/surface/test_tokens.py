from __future__ import annotations

import json

import pytest

from pi_mcp_adapter.surface import _tokens
from pi_mcp_adapter.surface._tokens import (
    count_tokens,
    count_tool_definition_tokens,
    preload_tokenizer,
)

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}},
    "required": ["query"],
}


# Counts computed once with quicktok's o200k_base, which matches tiktoken's o200k_base.
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        pytest.param("", 0, id="empty"),
        pytest.param("hello world", 2, id="two-words"),
        pytest.param("The quick brown fox jumps over the lazy dog.", 10, id="pangram"),
        pytest.param('{"query": "weather in Paris", "limit": 5}', 14, id="json"),
        pytest.param("こんにちは世界", 2, id="japanese"),
        pytest.param("def f(x):\n    return x * 2\n", 11, id="python"),
        pytest.param("🙂🙃", 3, id="emoji"),
        pytest.param("<|endoftext|>", 7, id="special-token-text-counts-as-text"),
    ],
)
def test_count_tokens_gives_the_o200k_count(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


def test_a_lone_surrogate_is_counted_as_a_replacement_character() -> None:
    assert count_tokens("\ud800abc") == count_tokens("\ufffdabc")


def test_a_tool_definition_is_counted_as_compact_json_of_name_description_and_schema() -> None:
    name, description = "github_search_code", "Search code across repositories"
    compact = json.dumps(
        {"name": name, "description": description, "parameters": SEARCH_SCHEMA},
        separators=(",", ":"),
    )
    assert count_tool_definition_tokens(name, description, SEARCH_SCHEMA) == 34
    assert count_tokens(compact) == 34


def test_a_longer_description_costs_more_tokens() -> None:
    short = count_tool_definition_tokens("t", "Reads a file.", SEARCH_SCHEMA)
    longer = count_tool_definition_tokens(
        "t", "Reads a file from disk and returns its text.", SEARCH_SCHEMA
    )
    assert longer > short


def test_non_json_schema_values_are_counted_by_their_text() -> None:
    assert count_tool_definition_tokens("t", "d", {"default": {1, 2}}) > 0


async def test_preload_loads_the_encoding_so_counting_does_not_load_it() -> None:
    _tokens._encoding.cache_clear()
    await preload_tokenizer()
    assert _tokens._encoding.cache_info().currsize == 1
    assert count_tokens("warm") == 1
    assert _tokens._encoding.cache_info().misses == 1
