"""A stored search index that was tampered with or damaged is never trusted beyond what it
can prove.

``mcp-search-index.sqlite`` lives in the agent dir, where a crash, a bad disk or a careless
script may change it. Whatever it holds: a search never fails with an error, never allocates
what the file claims, never decodes anything but flat arrays and JSON, and answers as a fresh
build of the catalog once the file is found unusable (it is then written again whole).
"""

from __future__ import annotations

import json
import marshal
import sqlite3
import zlib
from collections.abc import Sequence
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog import Catalog, ServerMetadata, ToolInfo
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.config import ServerEntry, Settings

QUERIES = ("send an email to Anna", "weather forecast for Paris", "count quokkas")


def catalog_tools(servers: int, changed: bool = False) -> list[ToolInfo]:
    metadata = {
        f"server-{s:03d}": ServerMetadata(
            tools=tuple(
                {"name": f"{topic}_{t}", "description": f"{text} Variant {t}."}
                for t in range(3)
                for topic, text in (
                    [("mail", "Send an email message to a recipient.")]
                    if s % 2
                    else [("weather", "Get the weather forecast for a city.")]
                )
            )
        )
        for s in range(servers)
    }
    if changed:
        metadata["server-003"] = ServerMetadata(
            tools=({"name": "quokka_census", "description": "Count quokkas on an island."},)
        )
    entries = {name: ServerEntry(command="server") for name in metadata}
    return list(Catalog.build(metadata, entries, Settings()).tools())


def open_index(tools: Sequence[ToolInfo], path: Path) -> SearchIndex:
    return SearchIndex(tools, ranking="lexical", index_store=path)


def answers(index: SearchIndex) -> list[list[str]]:
    return [[h.tool.name for h in index.search(q, limit=10).hits] for q in QUERIES]


def tamper(path: Path, statement: str, parameters: tuple[object, ...] = ()) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute(statement, parameters)
    connection.close()


@pytest.mark.parametrize(
    "tools_blob",
    [
        pytest.param(b"not compressed", id="not-zlib"),
        pytest.param(zlib.compress(b"{not json"), id="not-json"),
        pytest.param(zlib.compress(b'[["too", "few"]]'), id="wrong-shape"),
        pytest.param(zlib.compress(b"[]"), id="fewer-tools-than-documents"),
        pytest.param(
            zlib.compress(marshal.dumps(compile("open('/tmp/pwned', 'w')", "x", "exec"))),
            id="marshalled-code",
        ),
    ],
)
def test_a_tampered_server_row_makes_the_patch_fall_back_to_a_full_build(
    tmp_path: Path, tools_blob: bytes
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    open_index(catalog_tools(8), path)
    # The row of the server that changes is the one the patch must decode.
    tamper(path, "UPDATE tools SET tools = ? WHERE server = 'server-003'", (tools_blob,))
    after = catalog_tools(8, changed=True)

    index = open_index(after, path)

    activity = index.store_activity
    assert activity is not None
    assert activity.full_build
    assert answers(index) == answers(SearchIndex(after, ranking="lexical"))
    assert not Path("/tmp/pwned").exists()


@pytest.mark.parametrize(
    "meta",
    [
        pytest.param({"next": 10**12}, id="a-trillion-document-ids"),
        pytest.param({"next": -1}, id="negative-ids"),
        pytest.param({"avg_len": "x"}, id="field-lengths-not-numbers"),
        pytest.param({"generation": "x"}, id="generation-not-a-number"),
    ],
)
def test_a_tampered_index_total_is_never_believed(tmp_path: Path, meta: dict[str, object]) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(8)
    open_index(tools, path)
    with sqlite3.connect(path) as connection:
        (blob,) = connection.execute("SELECT value FROM blobs WHERE name = 'meta'").fetchone()
        connection.execute(
            "UPDATE blobs SET value = ? WHERE name = 'meta'",
            (json.dumps({**json.loads(blob), **meta}).encode(),),
        )
    connection.close()

    index = open_index(tools, path)

    activity = index.store_activity
    assert activity is not None
    assert activity.full_build
    assert answers(index) == answers(SearchIndex(tools, ranking="lexical"))


@pytest.mark.parametrize(
    "claim",
    [
        pytest.param(
            "UPDATE layout SET first = (SELECT first FROM layout WHERE server = 'server-000') "
            "WHERE server = 'server-001'",
            id="by-first-id",
        ),
        pytest.param(
            "UPDATE layout SET docs = (SELECT x'000000000100000002000000') "
            "WHERE server = 'server-001'",
            id="by-listed-ids",
        ),
    ],
)
def test_a_server_row_claiming_another_servers_documents_is_not_used(
    tmp_path: Path, claim: str
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    tools = catalog_tools(8)
    open_index(tools, path)
    # server-001 (mail) claims server-000's (weather) documents as its own.
    tamper(path, claim)

    index = open_index(tools, path)

    assert answers(index) == answers(SearchIndex(tools, ranking="lexical"))
    assert all(h.tool.server != "server-001" for h in index.search("weather", limit=50).hits)


def test_a_file_that_is_not_a_database_is_replaced_and_searched(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4096)
    tools = catalog_tools(8)

    index = open_index(tools, path)

    assert answers(index) == answers(SearchIndex(tools, ranking="lexical"))
    again = open_index(tools, path)
    activity = again.store_activity
    assert activity is not None
    assert not activity.full_build


def test_the_stored_index_and_its_journal_are_readable_by_the_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    open_index(catalog_tools(8), path)
    reader = open_index(catalog_tools(8), path)  # keeps the file, and its WAL, open

    modes = {p.name: p.stat().st_mode & 0o777 for p in tmp_path.glob(f"{path.name}*")}

    assert path.name in modes
    assert set(modes.values()) == {0o600}, modes
    assert answers(reader)
