"""Opening the stored search index of an unchanged catalog compares one fingerprint.

The stored index records a fingerprint of the whole catalog it holds beside each server's.
A process whose catalog is the one the file was written for recognises it with that one
hash and fingerprints no server; only when it differs are the servers compared one by one
(and the changed ones patched in). Counted through ``StoreActivity`` (never timed).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.catalog._search import SearchIndex

SERVERS = 40
QUERIES = ("weather forecast for a city", "send an email", "read a text file")
_TOPICS = (
    ("forecast", "Get the weather forecast for a city."),
    ("send_mail", "Send an email message to a recipient."),
    ("read_file", "Read a text file from the local disk."),
)


def catalog(changed: str | None = None) -> list[ToolInfo]:
    tools = []
    for s in range(SERVERS):
        server = f"server-{s:03d}"
        for name, description in _TOPICS:
            if server == changed:
                description += " Changed."
            tools.append(
                ToolInfo(
                    name=f"{server}_{name}",
                    original_name=name,
                    server=server,
                    description=f"{description} ({server})",
                )
            )
    return tools


def opened(tools: list[ToolInfo], store: Path) -> SearchIndex:
    return SearchIndex(tools, ranking="lexical", index_store=store)


def answers(index: SearchIndex) -> list[list[tuple[str, float]]]:
    return [
        [(h.tool.name, round(h.score, 9)) for h in index.search(q, limit=5).hits] for q in QUERIES
    ]


def test_an_unchanged_catalog_opens_its_stored_index_without_fingerprinting_a_server(
    tmp_path: Path,
) -> None:
    store = tmp_path / "index.sqlite"
    built = opened(catalog(), store)

    index = opened(catalog(), store)

    activity = index.store_activity
    assert activity is not None
    assert not activity.full_build
    assert activity.servers_compared == 0
    assert activity.patched_servers == ()
    assert answers(index) == answers(built)


def test_a_changed_server_is_found_server_by_server_then_the_next_open_compares_none(
    tmp_path: Path,
) -> None:
    store = tmp_path / "index.sqlite"
    opened(catalog(), store)
    changed = "server-007"

    patched = opened(catalog(changed), store)
    again = opened(catalog(changed), store)

    first, second = patched.store_activity, again.store_activity
    assert first is not None
    assert second is not None
    assert first.servers_compared == SERVERS
    assert first.patched_servers == (changed,)
    assert second.servers_compared == 0
    assert not second.full_build
    # A patched index keeps its full build's field lengths: it answers as the patch did.
    assert answers(again) == answers(patched)


def test_a_catalog_in_another_server_order_is_compared_and_needs_no_patch(
    tmp_path: Path,
) -> None:
    store = tmp_path / "index.sqlite"
    tools = catalog()
    built = opened(tools, store)
    reordered = tools[3:] + tools[:3]  # the first server listed last

    index = opened(reordered, store)

    activity = index.store_activity
    assert activity is not None
    assert activity.servers_compared == SERVERS
    assert activity.patched_servers == ()
    assert not activity.full_build
    assert sorted(answers(index)) == sorted(answers(built))


def test_a_tool_renamed_by_the_catalog_is_a_change_of_the_whole_catalog(tmp_path: Path) -> None:
    store = tmp_path / "index.sqlite"
    tools = catalog()
    opened(tools, store)
    renamed = [
        dataclasses.replace(t, name=f"{t.name}_2") if i == 0 else t for i, t in enumerate(tools)
    ]

    index = opened(renamed, store)

    activity = index.store_activity
    assert activity is not None
    assert activity.servers_compared == SERVERS
    assert activity.patched_servers == ("server-000",)
    assert index.select([f"{tools[0].name}_2"])
