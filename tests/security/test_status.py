"""``status`` reads each server's tool count from the metadata store's summary of its entry
instead of the catalog. What it shows must be what the catalog would show, whatever the entry
and its configuration say, and whatever an older or tampered summary holds: where the summary
cannot tell (filters, overrides, unreviewed definition changes, a summary without counts or
with counts that are no counts) that one entry is read as before. A failed connect shows as a
started manager would show it, from the failures file."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import LoadedConfig, ServerEntry, load_config
from pi_mcp_adapter.engine import McpAdapter, ServerStatus, StatusReport
from pi_mcp_adapter.servers import FAILURES_FILE_NAME, FailureMemory

TOOLS = ({"name": "alpha"}, {"name": "beta"}, {"name": "gamma"})
RESOURCES = ({"uri": "file:///a", "name": "a"}, {"uri": "file:///b", "name": "b"})

SERVERS: dict[str, dict[str, Any]] = {
    "plain": {},
    "included": {"includeTools": ["alpha"]},
    "excluded": {"excludeTools": ["beta"]},
    "overridden": {"toolOverrides": {"gamma": {"hidden": True}}},
    "with-resources": {},
    "resources-hidden": {"exposeResources": False},
    "junk-tools": {},
    "changed": {},
    "old-summary": {},
    "forged-summary": {},
    "never-listed": {},
    "reconfigured": {},
    "disabled": {"disabled": True},
}


def listing(name: str) -> ServerMetadata:
    if name in ("with-resources", "resources-hidden"):
        return ServerMetadata(tools=TOOLS, resources=RESOURCES)
    if name == "junk-tools":
        return ServerMetadata(tools=(*TOOLS, {"name": ""}, {"description": "no name"}))
    return ServerMetadata(tools=TOOLS)


def workspace(root: Path) -> LoadedConfig:
    agent = root / "agent"
    agent.mkdir()
    config = {
        name: {"command": "/bin/false", "args": [name], **extra} for name, extra in SERVERS.items()
    }
    (root / "mcp.json").write_text(json.dumps({"mcpServers": config}), encoding="utf-8")
    loaded = load_config(agent_dir=agent, project_dir=root, config_path=root / "mcp.json")
    cache = MetadataCache(agent / "mcp-cache.json")
    for name, entry in loaded.servers.items():
        if name == "reconfigured":  # listed under a command it no longer has
            entry = ServerEntry(command="/bin/false", args=("before",))
        if name != "never-listed":
            cache.store(name, entry, listing(name))
    # A relisting with one description changed: the change awaits review.
    changed = ({"name": "alpha", "description": "now different"}, *TOOLS[1:])
    cache.store("changed", loaded.servers["changed"], ServerMetadata(tools=changed))
    cache.flush()
    with sqlite3.connect(cache.store_path) as db:
        # A row written before summaries held counts, and one whose counts are no counts.
        for name, drop in (("old-summary", ("named", "changes")), ("forged-summary", ())):
            (text,) = db.execute("SELECT summary FROM servers WHERE name = ?", (name,)).fetchone()
            summary = {k: v for k, v in json.loads(text).items() if k not in drop}
            if name == "forged-summary":
                summary["named"] = ["3", True]
            db.execute("UPDATE servers SET summary = ? WHERE name = ?", (json.dumps(summary), name))
    return loaded


def adapter(root: Path, config: LoadedConfig) -> McpAdapter:
    return McpAdapter(
        config=config,
        agent_dir=root / "agent",
        project_dir=root,
        connect_eager=False,
        connect_missing=False,
    )


@pytest.fixture
def reports(tmp_path: Path) -> tuple[StatusReport, StatusReport]:
    config = workspace(tmp_path)
    from_catalog = adapter(tmp_path, config)
    from_catalog.load_cached()
    return adapter(tmp_path, config).cached_status(), from_catalog.status()


def test_status_from_summaries_shows_what_the_catalog_shows_for_every_kind_of_entry(
    reports: tuple[StatusReport, StatusReport],
) -> None:
    from_summaries, from_catalog = reports
    assert from_summaries == from_catalog
    states = {row.name: row.status for row in from_summaries.servers}
    assert states["reconfigured"] == states["never-listed"] == "not-cached"
    counts = {row.name: row.tool_count for row in from_summaries.servers}
    assert counts == {
        "plain": 3,
        "included": 1,
        "excluded": 2,
        "overridden": 2,
        "with-resources": 5,
        "resources-hidden": 3,
        "junk-tools": 3,
        "changed": 3,
        "old-summary": 3,
        "forged-summary": 3,
        "never-listed": 0,
        "reconfigured": 0,
        "disabled": 0,
    }


def test_unreviewed_definition_changes_still_show_with_their_diff(
    reports: tuple[StatusReport, StatusReport],
) -> None:
    from_summaries, _ = reports
    changed = next(row for row in from_summaries.servers if row.name == "changed")
    assert changed.changed_tools == ("alpha",)
    assert [d.tool for d in changed.definition_changes] == ["alpha"]


# Seconds ago and attempts of each server's last failed connect (backoff: 60 s, doubling).
FAILED = {
    "plain": (10, 1),  # backing off
    "never-listed": (100, 2),  # backing off, nothing cached
    "included": (1000, 1),  # backoff over: tried again at the next need
    "disabled": (5, 1),  # not tried at all
}


def record_failures(root: Path, config: LoadedConfig) -> None:
    path = root / "agent" / FAILURES_FILE_NAME
    memory = FailureMemory(path)
    for name in (*FAILED, "excluded"):
        memory.record(name, config.servers[name], f"{name} refused the connection")
    data = json.loads(path.read_text(encoding="utf-8"))
    now_ms = time.time() * 1000
    for name, (ago_s, attempts) in FAILED.items():
        data["servers"][name].update(failedAt=int(now_ms - ago_s * 1000), attempts=attempts)
    data["servers"]["excluded"]["configHash"] = "0" * 64  # recorded for another configuration
    path.write_text(json.dumps(data), encoding="utf-8")


def without_age(row: ServerStatus) -> ServerStatus:
    return dataclasses.replace(row, failed_ago_s=None)


async def test_a_failed_connect_shows_from_the_files_as_a_started_manager_shows_it(
    tmp_path: Path,
) -> None:
    config = workspace(tmp_path)
    record_failures(tmp_path, config)

    from_files = adapter(tmp_path, config).cached_status()
    async with adapter(tmp_path, config) as started:
        from_manager = started.status()

    rows = {row.name: row for row in from_files.servers}
    assert {name: row.status for name, row in rows.items() if name in FAILED} == {
        "plain": "failed",
        "never-listed": "failed",
        "included": "cached",
        "disabled": "disabled",
    }
    assert rows["excluded"].status == "cached"
    assert rows["plain"].error == "plain refused the connection"
    assert rows["plain"].tool_count == 3
    assert rows["plain"].failed_ago_s == pytest.approx(10, abs=30)
    assert rows["included"].error is None
    by_manager = {row.name: row for row in from_manager.servers}
    for name, row in rows.items():
        assert without_age(row) == without_age(by_manager[name]), name
        if row.failed_ago_s is not None:
            assert by_manager[name].failed_ago_s == pytest.approx(row.failed_ago_s, abs=30)


@pytest.mark.parametrize(
    "damage",
    [
        "not json",
        # Two summaries in one text: read in one batch with the others, it would shift every
        # later server's summary onto the server before it.
        'SUMMARY_OF(included), {"configHash": "forged"}',
        "",
    ],
)
def test_a_damaged_summary_is_made_again_from_its_entry_and_shifts_no_other(
    tmp_path: Path, damage: str
) -> None:
    config = workspace(tmp_path)
    store = tmp_path / "agent" / "mcp-cache.db"
    with sqlite3.connect(store) as db:
        (included,) = db.execute("SELECT summary FROM servers WHERE name = 'included'").fetchone()
        for name in ("plain", "with-resources"):
            text = damage.replace("SUMMARY_OF(included)", included)
            db.execute("UPDATE servers SET summary = ? WHERE name = ?", (text, name))
        # Without its listing, a catalog judges the server's entry from its summary too.
        db.execute("DELETE FROM listings WHERE name = 'with-resources'")

    from_summaries = adapter(tmp_path, config).cached_status()
    from_catalog = adapter(tmp_path, config)
    from_catalog.load_cached()

    assert from_summaries == from_catalog.status()
    rows = {row.name: (row.status, row.tool_count) for row in from_summaries.servers}
    assert rows["plain"] == ("cached", 3)
    assert rows["with-resources"] == ("cached", 5)
    assert rows["included"] == ("cached", 1)
    assert len(from_catalog.state.tools("with-resources")) == 5
