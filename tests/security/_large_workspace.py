"""What the long-lived memory tests share: a catalog state over a catalog large enough to be
frozen out of the garbage collector's view, driven the way a reload drives it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from _large_catalog import server_metadata, server_name  # tests/ is on sys.path
from pi_mcp_adapter.catalog import MetadataCache
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_store import search_index_store_path
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.engine._catalog_state import LONG_LIVED_FROM_TOOLS, CatalogState

SERVERS = 250
"""1,250 tools: a catalog large enough to be frozen."""


class LargeWorkspace:
    """A catalog state over :data:`SERVERS` cached servers, driven as a running adapter
    drives it (search, lookup, reload)."""

    def __init__(self, agent_dir: Path) -> None:
        self.entries = {
            server_name(i): ServerEntry(command="/bin/false", args=(server_name(i),))
            for i in range(SERVERS)
        }
        self.agent_dir = agent_dir
        self.state = CatalogState(
            cache=MetadataCache(agent_dir / "mcp-cache.json"),
            agent_dir=agent_dir,
            entries=lambda: self.entries,
            settings=Settings,
        )
        for name in self.entries:
            self.state.publish(name, server_metadata(name))
        assert len(self.state.catalog) >= LONG_LIVED_FROM_TOOLS

    def use(self) -> SearchIndex:
        """Search, look up and suggest: every lazily built part of the views exists."""
        index = self.state.index
        hits = index.search("tool 3 of server-00007").hits
        assert hits[0].tool.name == "server-00007_tool_3"
        catalog = self.state.catalog
        assert catalog.lookup("server-00001_tool_1") is not None
        catalog.suggest("server-00001_tol_1")
        return index

    def reload(self, *, without: str | None = None) -> None:
        """What a configuration reload does to the catalog state."""
        if without is not None:
            self.entries = {n: e for n, e in self.entries.items() if n != without}
        self.state.follow_reload(
            self.entries,
            removed=() if without is None else (without,),
            restarted=(),
            live=lambda _name: None,
        )

    def wal_frames_not_folded_back(self) -> int:
        """Frames of the stored index's WAL that a checkpoint cannot copy into the file
        (a reader's older snapshot still needs them)."""
        with sqlite3.connect(search_index_store_path(self.agent_dir)) as other:
            busy, logged, copied = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert busy == 0
        return int(logged) - int(copied)
