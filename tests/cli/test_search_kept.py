"""``pi-mcp search`` keeps what its catalog was made from (``mcp-search-facts.json``), and the
next search opens the stored index by it without loading the configuration or building the
catalog, and shows exactly what loading would show; any change to the configuration's inputs,
to the cache or to the stored index loads it again.

Each search runs the real CLI in a fresh process, under a probe that counts the loads of the
configuration (see ``_kept_facts_support``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata

from ._kept_facts_support import Workspace, write_json

FACTS = "mcp-search-facts.json"

CANARY = "canary-5d2e8b71c4"
"""A secret value, in a header and a variable of a server; never in the kept facts."""

TOOLS: dict[str, tuple[dict[str, Any], ...]] = {
    "files": (
        {
            "name": "read_file",
            "description": "Read a text file from disk",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
        {"name": "write_file", "description": "Write a text file to disk"},
    ),
    "chat": (
        {
            "name": "send_message",
            "description": "Send a chat message to a channel",
            "inputSchema": {"type": "object", "properties": {"channel": {"type": "string"}}},
        },
    ),
    "rows": (
        {"name": "query_rows", "description": "Query rows of a database table"},
        {"name": "read_file", "description": "Read a file stored in the database"},
    ),
}


def _servers() -> dict[str, Any]:
    return {
        "files": {"command": "/bin/false", "args": ["files"]},
        "chat": {"url": "http://127.0.0.1:9/${CHAT_PATH}/mcp"},
        "rows": {
            "command": "/bin/false",
            "headers": {"X-Key": CANARY},
            "env": {"KEY": "${SECRET_VALUE}"},
        },
        "off": {"command": "/bin/false", "enabled": False},
        "broken": {"args": ["no command or url"]},
    }


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    variables = {"CHAT_PATH": "one", "SECRET_VALUE": f"{CANARY}-env"}
    space = Workspace.made(tmp_path, variables, _servers())
    space.cache_servers(list(TOOLS), TOOLS.__getitem__)
    return space


def _search(
    space: Workspace, *args: str, env: dict[str, str] | None = None
) -> tuple[str, str, int]:
    return space.cli("search", *args, env=env)


def _fresh_search(
    space: Workspace, *args: str, env: dict[str, str] | None = None
) -> tuple[str, str]:
    """What a search with nothing kept shows (the kept facts set aside for it)."""
    facts = space.agent / FACTS
    aside = space.root / "facts.aside"
    if facts.exists():
        facts.rename(aside)
    try:
        out, err, loads = _search(space, *args, env=env)
    finally:
        if aside.exists():
            aside.replace(facts)
    assert loads == 1
    return out, err


@pytest.mark.parametrize(
    ("args", "servers"),
    [
        (("read", "file"), {"files", "rows"}),
        (("send a message", "--json", "--no-schemas"), {"chat"}),
    ],
)
def test_a_second_search_shows_the_same_without_loading_the_configuration(
    workspace: Workspace, args: tuple[str, ...], servers: set[str]
) -> None:
    first_out, first_err, first_loads = _search(workspace, *args)
    second_out, second_err, second_loads = _search(workspace, *args)

    assert (first_loads, second_loads) == (1, 0)
    assert second_out == first_out
    assert second_err == first_err
    assert "config: " in first_err  # the broken layer's error, shown by both
    facts = workspace.agent / FACTS
    assert facts.stat().st_mode & 0o777 == 0o600
    assert all(server in first_out for server in servers)


def test_a_page_from_the_kept_index_is_the_page_of_the_catalog(workspace: Workspace) -> None:
    _search(workspace, "read", "file")
    # Paged, with another limit, one server's, and one server's tools listed.
    for args in (
        ("read file", "--limit", "1", "--offset", "1", "--json"),
        ("file", "--json"),
        ("read", "--server", "rows", "--json"),
        ("", "--server", "files"),
    ):
        out, err, loads = _search(workspace, *args)
        assert loads == 0
        assert (out, err) == _fresh_search(workspace, *args)
    page = json.loads(_search(workspace, "read file", "--json")[0])
    assert {m["server"] for m in page["details"]["matches"]} >= {"files", "rows"}


def _edit_config(space: Workspace) -> None:
    servers = _servers()
    servers["files"]["enabled"] = False
    write_json(space.config, {"mcpServers": servers})


def _store_a_relisting(space: Workspace) -> None:
    # Another process lists a server again, with a tool the search finds.
    cache = MetadataCache(space.agent / "mcp-cache.json", environ=space.env)
    tools = (*TOOLS["chat"], {"name": "read_file_aloud", "description": "Read a file aloud"})
    cache.store("chat", space.loaded().servers["chat"], ServerMetadata(tools=tools))
    cache.flush()


def _remove_the_stored_index(space: Workspace) -> None:
    for path in space.agent.glob("mcp-search-index.sqlite*"):
        path.unlink()


def _age_the_entries(space: Workspace) -> None:
    # As if the first catalog entry had gone stale since: the facts say when that happens.
    facts = space.agent / FACTS
    document = json.loads(facts.read_text())
    facts.write_text(json.dumps({**document, "freshUntilMs": 1}), encoding="utf-8")


def _nothing(_space: Workspace) -> None:
    pass


@dataclass(frozen=True)
class Mutation:
    change: Callable[[Workspace], None] = _nothing
    variables: dict[str, str] | None = None
    shows: bool = True
    """Whether the search shows the change."""
    relisted: str | None = None
    """The server whose config hash the change moves: the search lists it again."""


MUTATIONS = {
    "config file edited": Mutation(_edit_config),
    "variable in a url": Mutation(variables={"CHAT_PATH": "two"}, relisted="chat"),
    "variable of a server's env": Mutation(variables={"SECRET_VALUE": "another"}, relisted="rows"),
    "a server listed again by another process": Mutation(_store_a_relisting),
    "the stored index removed": Mutation(_remove_the_stored_index, shows=False),
    "an entry gone stale": Mutation(_age_the_entries, shows=False),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_change_to_what_the_catalog_is_made_from_loads_it_again(
    workspace: Workspace, mutation: str
) -> None:
    case = MUTATIONS[mutation]
    before = _search(workspace, "read", "file", "--json")
    assert _search(workspace, "read", "file", "--json")[2] == 0  # kept
    case.change(workspace)
    env = {**workspace.env, **(case.variables or {})}

    out, err, loads = _search(workspace, "read", "file", "--json", env=env)

    assert loads == 1
    if case.shows:
        assert out != before[0]
    fresh_out, fresh_err = _fresh_search(workspace, "read", "file", "--json", env=env)
    assert out == fresh_out
    if case.relisted is not None:
        # Listed again, it fails (and backs off at the next search, which says so).
        assert f"pi-mcp connect {case.relisted}" in err
    else:
        assert err == fresh_err
        # What that search found is kept for the next.
        assert _search(workspace, "read", "file", "--json", env=env)[2] == 0


SEARCHES_THAT_NEED_THE_CATALOG = {
    "a regular expression": ("read_.*", "--regex"),
    "a server with no tools": ("read", "--server", "off"),
    "names selected": ("select:files_read_file",),
}


@pytest.mark.parametrize("case", sorted(SEARCHES_THAT_NEED_THE_CATALOG))
def test_searches_the_kept_index_cannot_answer_load_the_configuration(
    workspace: Workspace, case: str
) -> None:
    _search(workspace, "read", "file")
    args = SEARCHES_THAT_NEED_THE_CATALOG[case]

    out, err, loads = _search(workspace, *args)

    assert loads == 1
    assert (out, err) == _fresh_search(workspace, *args)


def _untrusted_project_file(space: Workspace) -> None:
    write_json(space.project / ".mcp.json", {"mcpServers": {"proj": {"command": "./serve.sh"}}})


def _import_a_host(space: Workspace) -> None:
    write_json(space.config, {"imports": ["cursor"], "mcpServers": _servers()})


def _a_server_not_cached(space: Workspace) -> None:
    servers = {**_servers(), "new": {"command": "/bin/false", "args": ["new"]}}
    write_json(space.config, {"mcpServers": servers})


NOT_KEPT: dict[str, Callable[[Workspace], None]] = {
    "a project file awaiting trust": _untrusted_project_file,
    "a host import": _import_a_host,
    "a server whose tools are not known": _a_server_not_cached,
}


@pytest.mark.parametrize("case", sorted(NOT_KEPT))
def test_a_catalog_its_inputs_cannot_vouch_for_is_never_kept(
    workspace: Workspace, case: str
) -> None:
    NOT_KEPT[case](workspace)

    first, _err, first_loads = _search(workspace, "read", "file")
    second, _err, second_loads = _search(workspace, "read", "file")

    assert (first_loads, second_loads) == (1, 1)
    assert second == first
    assert not (workspace.agent / FACTS).exists()


def test_kept_facts_hold_no_secret_and_the_search_from_them_shows_none(
    workspace: Workspace,
) -> None:
    first, first_err, _loads = _search(workspace, "query rows", "--json")
    second, second_err, loads = _search(workspace, "query rows", "--json")

    assert loads == 0
    kept = (workspace.agent / FACTS).read_bytes()
    assert CANARY.encode() not in kept
    for text in (first, first_err, second, second_err):
        assert CANARY not in text


def test_a_damaged_facts_file_is_ignored_and_written_again(workspace: Workspace) -> None:
    shown, _err, _loads = _search(workspace, "read", "file")
    facts = workspace.agent / FACTS
    document = json.loads(facts.read_text())
    damaged = {
        "not json": "{ not json",
        "a field of the wrong type": json.dumps({**document, "index": 7}),
        "another version": json.dumps({**document, "version": 99}),
        "another catalog": json.dumps({**document, "index": "0" * 64}),
    }
    for text in damaged.values():
        facts.write_text(text, encoding="utf-8")
        again, _err, loads = _search(workspace, "read", "file")
        assert (loads, again) == (1, shown)
        assert json.loads(facts.read_text()) == document  # written again as it was
