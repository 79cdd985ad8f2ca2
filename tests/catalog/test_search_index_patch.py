"""A process opening the stored search index patches in only the servers whose tools changed.

The stored index (``mcp-search-index.sqlite``) records, per server, a fingerprint of what it
indexed. A process whose catalog differs takes out and adds again the documents of the
servers that changed, appeared or disappeared (as a relisting does in memory), writes back
only the rows that patch changed in one transaction, and the next process opens the file as
it is. These tests count servers re-tokenised and rows written (never time), compare the
patched index's answers with an index relisted in memory and with a full build, and kill a
real writer in the middle of a patch.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog import Catalog, ServerMetadata, ToolInfo
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_semantic import semantic_available
from pi_mcp_adapter.catalog._search_store import StoreActivity
from pi_mcp_adapter.config import ServerEntry, Settings

DEV_SET = Path(__file__).resolve().parents[3] / "shared" / "eval" / "etom-dev" / "etom_dev.json"
TESTS_DIR = Path(__file__).resolve().parents[1]
# A killed writer is waited for this long at most (a busy machine may be slow to start one).
CHILD_WAIT_S = 60.0

_TOPICS = (
    ("weather", "Get the weather forecast for a city, with temperature and wind."),
    ("calendar", "List the events of a calendar between two dates."),
    ("mail", "Send an email message to a recipient with a subject and a body."),
    ("files", "Read a text file from the local disk and return its content."),
    ("issues", "Create an issue in a GitHub repository with a title and labels."),
    ("notes", "Search the notes of a notebook by keyword and return the matches."),
)
QUERIES = (
    "weather forecast for Paris",
    "send an email to Anna",
    "create an issue in a github repository",
    "read the file notes.txt then email it",
    "count quokkas",
    "zebra crossing",
)
CHANGED = "server-00004"
QUOKKAS = ServerMetadata(
    tools=(
        {"name": "quokka_census", "description": "Count quokkas on an island."},
        {"name": "zebra_crossing", "description": "Find the zebra crossings of a street."},
    )
)


def server_metadata(server: str) -> ServerMetadata:
    topic, description = _TOPICS[int(server.rsplit("-", 1)[1]) % len(_TOPICS)]
    return ServerMetadata(
        tools=tuple(
            {
                "name": f"{topic}_tool_{t}",
                "description": f"{description} Variant {t}.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "What to find"}},
                },
            }
            for t in range(5)
        )
    )


def catalog_tools(
    servers: int, relisted: dict[str, ServerMetadata] | None = None, *, without: str = ""
) -> list[ToolInfo]:
    names = [f"server-{s:05d}" for s in range(servers) if f"server-{s:05d}" != without]
    metadata = {name: server_metadata(name) for name in names} | (relisted or {})
    entries = {name: ServerEntry(command="server") for name in metadata}
    return list(Catalog.build(metadata, entries, Settings()).tools())


def open_index(tools: Sequence[ToolInfo], path: Path, ranking: str = "lexical") -> SearchIndex:
    return SearchIndex(
        tools, ranking=ranking, index_store=path, vector_cache=path.with_suffix(".npz")
    )


def relisted_in_memory(
    before: Sequence[ToolInfo], after: Sequence[ToolInfo], servers: Sequence[str], ranking: str
) -> SearchIndex:
    """An index of ``before`` with ``servers`` relisted in memory to their tools in ``after``."""
    index = SearchIndex(before, ranking=ranking)
    order = list(dict.fromkeys(t.server for t in after))
    for server in servers:
        replacement = index.prepare_replacement(server, [t for t in after if t.server == server])
        assert replacement is not None
        assert index.apply_replacement(replacement, order)
    return index


def activity_of(index: SearchIndex) -> StoreActivity:
    activity = index.store_activity
    assert activity is not None
    return activity


def answers(index: SearchIndex, queries: Sequence[str] = QUERIES) -> list[list[str]]:
    return [[h.tool.name for h in index.search(q, limit=10).hits] for q in queries]


def test_opening_after_one_server_changed_patches_only_that_server(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    before = catalog_tools(40)
    open_index(before, path)
    after = catalog_tools(40, {CHANGED: QUOKKAS})

    patched = open_index(after, path)

    activity = activity_of(patched)
    assert not activity.full_build
    assert activity.patched_servers == (CHANGED,)
    assert 0 < activity.rows_written < 100  # the server's terms, names and row; not the file
    assert answers(patched) == answers(relisted_in_memory(before, after, [CHANGED], "lexical"))
    assert patched.search("count quokkas", limit=1).hits[0].tool.name == f"{CHANGED}_quokka_census"
    assert [t.name for t in patched.tools] == [t.name for t in after]


def test_the_next_process_opens_a_patched_index_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    open_index(catalog_tools(40), path)
    after = catalog_tools(40, {CHANGED: QUOKKAS})
    first = open_index(after, path)

    second = open_index(after, path)

    activity = activity_of(second)
    assert (activity.full_build, activity.patched_servers, activity.rows_written) == (False, (), 0)
    assert answers(second) == answers(first)


def test_the_rows_a_patch_writes_do_not_grow_with_the_catalog(tmp_path: Path) -> None:
    written = []
    for servers in (30, 300):
        path = tmp_path / f"{servers}.sqlite"
        open_index(catalog_tools(servers), path)
        activity = activity_of(open_index(catalog_tools(servers, {CHANGED: QUOKKAS}), path))
        assert activity.patched_servers == (CHANGED,)
        written.append(activity.rows_written)

    assert written[0] == written[1], written


def test_servers_that_appeared_or_disappeared_are_patched_in_and_out(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    before = catalog_tools(30)
    open_index(before, path)
    new_server = "server-00030"
    after = catalog_tools(31, without=CHANGED)

    patched = open_index(after, path)

    activity = activity_of(patched)
    assert sorted(activity.patched_servers) == [CHANGED, new_server]
    expected = relisted_in_memory(before, after, [CHANGED, new_server], "lexical")
    assert answers(patched) == answers(expected)
    assert patched.search("", server=CHANGED).total == 0
    assert all(h.tool.server != CHANGED for h in patched.search("email", limit=50).hits)
    assert patched.search("", server=new_server).total == 5
    again = open_index(after, path)
    assert answers(again) == answers(patched)


def test_a_reader_keeps_the_index_it_opened_while_another_process_patches_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    before = catalog_tools(30)
    open_index(before, path)
    reader = open_index(before, path)  # reads its entries only when queries need them

    writer = open_index(catalog_tools(30, {CHANGED: QUOKKAS}), path)

    activity = activity_of(writer)
    assert activity.patched_servers == (CHANGED,)
    assert answers(reader) == answers(SearchIndex(before, ranking="lexical"))


def test_a_reader_keeps_the_index_it_opened_while_another_process_writes_it_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    before = catalog_tools(30)
    open_index(before, path)
    reader = open_index(before, path)

    # Twice the servers: too far from the stored build to patch, so it is written whole.
    writer = open_index(catalog_tools(60), path)

    assert activity_of(writer).full_build
    assert answers(reader) == answers(SearchIndex(before, ranking="lexical"))
    assert activity_of(open_index(catalog_tools(60), path)).patched_servers == ()


@pytest.mark.skipif(not semantic_available(), reason="needs the semantic extra")
def test_a_patched_hybrid_index_ranks_as_one_relisted_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    before = catalog_tools(30)
    open_index(before, path, "hybrid")
    after = catalog_tools(30, {CHANGED: QUOKKAS})

    patched = open_index(after, path, "hybrid")

    assert answers(patched) == answers(relisted_in_memory(before, after, [CHANGED], "hybrid"))
    assert answers(open_index(after, path, "hybrid")) == answers(patched)


_STALLED_WRITER = """
import sys, time
sys.path.insert(0, {tests!r})
from pathlib import Path
from catalog.test_search_index_patch import CHANGED, QUOKKAS, catalog_tools, open_index
from pi_mcp_adapter.catalog._search_store import StoredIndex

write_servers = StoredIndex._write_servers

def stalled(self, servers, *, first_position):
    # The patch's entries are written, its transaction not committed: stop here.
    written = write_servers(self, servers, first_position=first_position)
    print("writing", flush=True)
    time.sleep(600)
    return written

StoredIndex._write_servers = stalled
open_index(catalog_tools(40, {{CHANGED: QUOKKAS}}), Path({path!r}))
"""


@pytest.mark.slow
def test_a_writer_killed_mid_patch_leaves_an_index_the_next_process_answers_from(
    tmp_path: Path,
) -> None:
    path = tmp_path / "mcp-search-index.sqlite"
    before = catalog_tools(40)
    expected_before = answers(open_index(before, path))
    child = subprocess.Popen(
        [sys.executable, "-c", _STALLED_WRITER.format(tests=str(TESTS_DIR), path=str(path))],
        stdout=subprocess.PIPE,
        text=True,
    )
    started = threading.Event()

    def wait_for_the_write() -> None:
        assert child.stdout is not None
        if child.stdout.readline().strip() == "writing":
            started.set()

    watcher = threading.Thread(target=wait_for_the_write, daemon=True)
    watcher.start()
    try:
        assert started.wait(CHILD_WAIT_S), "the writer never reached its write"
    finally:
        child.kill()
        child.wait(CHILD_WAIT_S)
    watcher.join(CHILD_WAIT_S)

    # The killed transaction never happened: the old catalog opens with nothing to patch.
    unchanged = open_index(before, path)
    activity = activity_of(unchanged)
    assert activity.patched_servers == ()
    assert not activity.full_build
    assert answers(unchanged) == expected_before
    # The new catalog is patched in afresh, and answers as a relisting would.
    after = catalog_tools(40, {CHANGED: QUOKKAS})
    patched = open_index(after, path)
    activity = activity_of(patched)
    assert activity.patched_servers == (CHANGED,)
    assert answers(patched) == answers(relisted_in_memory(before, after, [CHANGED], "lexical"))
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()


@pytest.mark.slow
@pytest.mark.skipif(not DEV_SET.exists(), reason="the development set is not here")
def test_on_the_development_set_a_patched_index_ranks_as_a_relisting_and_scores_as_a_rebuild(
    tmp_path: Path,
) -> None:
    from pi_mcp_adapter.catalog._eval import _score_query, load_labelled_set

    labelled = load_labelled_set(DEV_SET)
    before = list(labelled.tools)
    servers = list(dict.fromkeys(t.server for t in before))
    victim = servers[len(servers) // 2]
    after = [
        dataclasses.replace(t, description=f"{t.description} Also archives old records.")
        if t.server == victim
        else t
        for t in before
    ]
    path = tmp_path / "mcp-search-index.sqlite"
    open_index(before, path)

    patched = open_index(after, path)

    activity = activity_of(patched)
    assert activity.patched_servers == (victim,)
    queries = [q for q in labelled.queries if q.query.strip()]
    relisted = relisted_in_memory(before, after, [victim], "lexical")
    assert answers(patched, [q.query for q in queries]) == answers(
        relisted, [q.query for q in queries]
    )

    def figures(index: SearchIndex) -> tuple[int, int, float]:
        first = top5 = 0
        reciprocal = 0.0
        for query in queries:
            ranked = tuple(
                labelled.ids[h.tool.name] for h in index.search(query.query, limit=20).hits
            )
            rank, _ = _score_query(query, ranked)
            if query.match == "any" and rank is not None:
                first += rank == 1
                top5 += rank <= 5
                reciprocal += 1 / rank
        return first, top5, round(reciprocal, 6)

    # Field lengths stay averaged as at the full build, so a few near-ties deep in a
    # ranking may swap; what the set measures does not move.
    assert figures(patched) == figures(SearchIndex(after, ranking="lexical"))


_PATCHING_PROCESS = """
import json, sys
sys.path.insert(0, {tests!r})
from pathlib import Path
from catalog.test_search_index_patch import CHANGED, QUOKKAS, answers, catalog_tools, open_index

index = open_index(catalog_tools(40, {{CHANGED: QUOKKAS}}), Path({path!r}))
activity = index.store_activity
print(json.dumps({{"answers": answers(index), "patched": list(activity.patched_servers)}}))
"""


@pytest.mark.slow
def test_processes_opening_a_changed_index_at_once_all_answer_and_leave_it_whole(
    tmp_path: Path,
) -> None:
    import json

    path = tmp_path / "mcp-search-index.sqlite"
    before = catalog_tools(40)
    open_index(before, path)
    after = catalog_tools(40, {CHANGED: QUOKKAS})
    script = _PATCHING_PROCESS.format(tests=str(TESTS_DIR), path=str(path))

    children = [
        subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [child.communicate(timeout=CHILD_WAIT_S)[0] for child in children]

    assert [child.returncode for child in children] == [0, 0, 0]
    expected = answers(relisted_in_memory(before, after, [CHANGED], "lexical"))
    reports = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    assert all(report["answers"] == expected for report in reports)
    # Each patched the file or found it patched by another; none saw it half written.
    assert all(report["patched"] in ([CHANGED], []) for report in reports)
    reopened = open_index(after, path)
    assert activity_of(reopened).patched_servers == ()
    assert answers(reopened) == expected
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    connection.close()
