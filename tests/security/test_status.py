"""``status`` reads each server's tool count from the metadata store's summary of its entry
instead of the catalog. What it shows must be what the catalog would show, whatever the entry
and its configuration say, and whatever an older or tampered summary holds: where the summary
cannot tell (filters, overrides, unreviewed definition changes, a summary without counts or
with counts that are no counts) that one entry is read as before."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.config import LoadedConfig, ServerEntry, load_config
from pi_mcp_adapter.engine import McpAdapter, StatusReport

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
