"""``searchKeywords``: words a user adds to a server's tools so that search finds them.

Keywords are searched like the description and never shown: they stay out of the tool's
description and out of the metadata cache (they come from the configuration, not the server).
"""

from __future__ import annotations

import pytest

from pi_mcp_adapter.catalog._filters import keywords_for
from pi_mcp_adapter.catalog._metadata import ServerMetadata
from pi_mcp_adapter.catalog._naming import build_tool_infos
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.config import ServerEntry, Settings

METADATA = ServerMetadata(
    tools=(
        {"name": "run_query", "description": "Run a statement"},
        {"name": "list-tables", "description": "Names of the tables"},
        {"name": "vacuum", "description": "Reclaim space"},
    )
)
ENTRY = ServerEntry(
    command="db",
    search_keywords={
        "run_query": ("sql", "select rows"),
        "db_list_tables": ("schema",),
        "list_*": ("catalogue",),
    },
)


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        pytest.param(("run_query", "db_run_query"), ("sql", "select rows"), id="original-name"),
        pytest.param(
            ("list-tables", "db_list-tables"), ("schema", "catalogue"), id="hyphen-as-underscore"
        ),
        pytest.param(("vacuum", "db_vacuum"), (), id="no-selector"),
    ],
)
def test_selectors_pick_keywords_like_include_tools_patterns(
    names: tuple[str, ...], expected: tuple[str, ...]
) -> None:
    assert keywords_for(ENTRY.search_keywords, *names) == expected


def test_a_keyword_finds_a_tool_whose_name_and_description_never_say_it() -> None:
    infos = build_tool_infos("db", METADATA, entry=ENTRY, settings=Settings())
    index = SearchIndex(infos)
    assert [h.tool.original_name for h in index.search("sql").hits][:1] == ["run_query"]
    assert [h.tool.original_name for h in index.search("sql", regex=True).hits] == ["run_query"]
    plain = build_tool_infos("db", METADATA, entry=ServerEntry(command="db"), settings=Settings())
    assert not SearchIndex(plain, ranking="lexical").search("sql").hits
    # The hybrid ranking still offers the closest tools, but flags them as weak.
    assert not SearchIndex(plain).search("sql").confident


def test_keywords_are_never_part_of_what_the_model_is_shown() -> None:
    (info, *_) = build_tool_infos("db", METADATA, entry=ENTRY, settings=Settings())
    assert info.keywords == ("sql", "select rows")
    assert "sql" not in info.description
