"""A stored search index whose layout was damaged or tampered with is ignored, said so, and
written again, whatever its rows claim.

Opening ``mcp-search-index.sqlite`` reads every server's row of the ``layout`` table in one
aggregate query: its name (a JSON string), its first document id and count, or its ids one
by one, and its tools' name terms joined by control characters. Whatever those hold, opening
never allocates what they claim beyond the ids the index counts, never decodes anything but
JSON, flat arrays and joined words, logs "ignoring the stored search index", and answers as a
fresh build of the catalog (the file is then written again whole). A forged catalog
fingerprint on a layout that does not add up is not believed either.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog import Catalog, ServerMetadata
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_store import pack_names, unpack_names
from pi_mcp_adapter.config import ServerEntry, Settings

from .test_stored_search_index import QUERIES, answers, catalog_tools, open_index, tamper

IGNORED = "ignoring the stored search index"


@pytest.mark.parametrize(
    "statements",
    [
        pytest.param(
            ["UPDATE layout SET count = 1000000000000 WHERE server = 'server-002'"],
            id="a-trillion-consecutive-ids",
        ),
        pytest.param(
            [
                "UPDATE layout SET count = 1000000000000, docs = x'00000000' "
                "WHERE server = 'server-002'"
            ],
            id="a-trillion-ids-listed-as-one",
        ),
        pytest.param(
            ["UPDATE layout SET names = 'mail' WHERE server = 'server-003'"],
            id="fewer-name-terms-than-tools",
        ),
        pytest.param(
            ["UPDATE layout SET names = names || char(30) WHERE server = 'server-003'"],
            id="more-name-terms-than-tools",
        ),
        pytest.param(
            ["UPDATE layout SET label = '{\"not\": \"a name\"}' WHERE server = 'server-001'"],
            id="a-name-that-is-not-a-string",
        ),
        pytest.param(
            ["UPDATE layout SET label = 'not json' WHERE server = 'server-001'"],
            id="a-name-that-is-not-json",
        ),
        pytest.param(
            ["UPDATE layout SET label = '\"server-000\"' WHERE server = 'server-001'"],
            id="a-server-listed-twice",
        ),
        pytest.param(
            ["UPDATE layout SET first = -3 WHERE server = 'server-000'"],
            id="negative-ids",
        ),
        pytest.param(
            ["UPDATE layout SET first = first + 1 WHERE server = 'server-007'"],
            id="an-id-past-the-last",
        ),
        pytest.param(
            ["UPDATE layout SET docs = x'0000000001' WHERE server = 'server-004'"],
            id="listed-ids-of-the-wrong-size",
        ),
        pytest.param(
            ["UPDATE layout SET first = 'three' WHERE server = 'server-004'"],
            id="an-id-that-is-not-a-number",
        ),
        pytest.param(["DELETE FROM layout WHERE server = 'server-005'"], id="a-server-missing"),
    ],
)
def test_a_layout_that_does_not_add_up_is_ignored_and_written_again(
    tmp_path: Path, statements: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(8)
    open_index(tools, path)
    # The catalog's fingerprint still matches: only the layout can give the damage away.
    for statement in statements:
        tamper(path, statement)

    with caplog.at_level(logging.INFO):
        index = open_index(tools, path)

    activity = index.store_activity
    assert activity is not None
    assert activity.full_build
    assert answers(index) == answers(SearchIndex(tools, ranking="lexical"))
    assert any(IGNORED in record.getMessage() for record in caplog.records), caplog.text
    reopened = open_index(tools, path)
    assert reopened.store_activity is not None
    assert not reopened.store_activity.full_build


@pytest.mark.parametrize("table", ["blobs", "layout"])
def test_a_new_file_is_built_in_silence_and_a_missing_table_is_said(
    tmp_path: Path, table: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(4)
    with caplog.at_level(logging.INFO):
        first = open_index(tools, path)
    assert first.store_activity is not None
    assert first.store_activity.full_build
    assert not any(IGNORED in record.getMessage() for record in caplog.records), caplog.text
    tamper(path, f"DROP TABLE {table}")
    caplog.clear()

    with caplog.at_level(logging.INFO):
        again = open_index(tools, path)

    assert again.store_activity is not None
    assert again.store_activity.full_build
    assert any(IGNORED in record.getMessage() for record in caplog.records), caplog.text
    assert answers(again) == answers(first)


def test_a_forged_catalog_fingerprint_on_another_catalogs_layout_is_not_believed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(8)
    open_index(tools, path)
    other = tmp_path / "other.sqlite"
    open_index(catalog_tools(9), other)
    # The layout and entries of nine servers, under the fingerprint of the eight-server
    # catalog: more tools than the catalog has.
    with sqlite3.connect(path) as connection:
        (mine,) = connection.execute("SELECT value FROM blobs WHERE name = 'meta'").fetchone()
    connection.close()
    with sqlite3.connect(other) as connection:
        (theirs,) = connection.execute("SELECT value FROM blobs WHERE name = 'meta'").fetchone()
        forged = {**json.loads(theirs), "catalog": json.loads(mine)["catalog"]}
        connection.execute(
            "UPDATE blobs SET value = ? WHERE name = 'meta'", (json.dumps(forged).encode(),)
        )
    connection.close()

    index = open_index(tools, other)

    activity = index.store_activity
    assert activity is not None
    assert activity.full_build
    assert answers(index) == answers(SearchIndex(tools, ranking="lexical"))


def test_name_terms_are_split_only_at_their_separators(tmp_path: Path) -> None:
    """A tool's name terms are runs of letters and digits; whatever a server names its tools,
    the stored terms split back into the same ones."""
    path = tmp_path / "mcp-search-index.sqlite"
    odd = ServerMetadata(
        tools=(
            {"name": "read\x1ewrite\x1ffile", "description": "Read and write a file."},
            {"name": "查询天气", "description": "查询城市天气预报。"},
            {"name": "x", "description": "A tool whose name has no word of two letters."},
        )
    )
    tools = list(
        Catalog.build({"odd": odd}, {"odd": ServerEntry(command="server")}, Settings()).tools()
    ) + catalog_tools(4)
    built = open_index(tools, path)

    opened = open_index(tools, path)

    assert opened.store_activity is not None
    assert not opened.store_activity.full_build
    for query in (*QUERIES, "read write file", "查询天气", "x"):
        assert [(h.tool.name, h.score) for h in opened.search(query, limit=5).hits] == [
            (h.tool.name, h.score) for h in built.search(query, limit=5).hits
        ]


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(["read\x1fwrite"], id="a-word-separator"),
        pytest.param(["read\x1ewrite"], id="a-tool-separator"),
    ],
)
def test_name_terms_holding_a_separator_are_refused_rather_than_stored(names: list[str]) -> None:
    with pytest.raises(ValueError, match="separator"):
        pack_names(names)
    assert unpack_names(pack_names(["read", "write"])) == ("read", "write")
    assert unpack_names(pack_names([])) == ()
