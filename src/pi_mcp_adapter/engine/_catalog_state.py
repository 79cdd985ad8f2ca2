"""Catalog state and readiness: what is known about each server, what is being listed, and
the views built from it (catalog, prompt catalog, search index).

One owner for "what tools exist": every listing (a connect at start, a call's first use, a
``list_changed`` refresh, ``pi-mcp connect``) arrives through :meth:`CatalogState.publish`,
which stores it in the metadata cache, records definition changes and rebuilds the views once.

Readiness: while a server is being listed, a request that misses (an unknown tool, an empty
search) waits for that listing, bounded by a deadline, before it answers; every host gets the
same answer whether or not it asked before the listing ended (see :meth:`wait_for_listings`).

Callers: every view is the current caller's (:func:`~pi_mcp_adapter.engine._caller.current_caller`,
a gateway client with a policy). This is the one place the policy filters what can be seen:
the catalog, the prompt catalog and the search index of a caller hold only what it may use, so
lookups, suggestions, counts and search answers built from them never name anything else.
Views are built per caller on first use and dropped with every full rebuild.

Cost follows the change: a listing of one server derives each existing view from the previous
one (:meth:`Catalog.replacing_server`, work proportional to that server's tools), and each
search index follows in place: that server's documents are worked out in a worker thread and
swapped in on the event loop (:meth:`SearchIndex.prepare_replacement`), so a relisting costs
what the server offers and never holds up other requests. Only an index that drifted far from
its full build (a quarter more or fewer tools, or half its slots removed) is built again, in
a worker thread while the previous one keeps answering. Until its index follows, the server
counts as still being listed: a search that misses waits for it like for any listing.
"""

from __future__ import annotations

import functools
import gc
import time
from collections.abc import Callable, Collection, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pi_mcp_adapter._collector import collector_paused, return_freed_memory
from pi_mcp_adapter.catalog import (
    CachedListing,
    Catalog,
    DefinitionChanges,
    MetadataCache,
    PromptCatalog,
    PromptInfo,
    ServerMetadata,
    ToolInfo,
    build_tool_infos,
)
from pi_mcp_adapter.config import ServerEntry, Settings

from ._caller import CallerPolicy, current_caller, view_resource_uri

if TYPE_CHECKING:
    # Search (its ranking, tokenizer tables, regex engine) loads with the first search:
    # status, tools and describe never need it.
    from pi_mcp_adapter.catalog._search import SearchIndex

CatalogListener = Callable[[], None]
RunSoon = Callable[[Callable[[], Coroutine[Any, Any, None]]], object]

NOTIFY_INTERVAL_S = 0.25
"""While several servers are being listed, listeners hear of new listings at most this often
(and once more when the last listing ends): each hearing rebuilds the catalog, and a pass over
hundreds of servers would otherwise rebuild it once per server."""


LONG_LIVED_FROM_TOOLS = 1_000
"""From this many tools, a built search index (and the catalog it was built from) is moved out
of the garbage collector's view (``gc.freeze``). A full collection walks every tracked object
while holding the interpreter lock: at 23,750 tools that is 0.6-1 s, and building an index
allocates enough to set one off, so every relisting stalled every request for that long; even
at 2,375 tools one full collection stalled a concurrent call by 0.1 s. The collector never
looks at a frozen object again, so a frozen structure must hold no reference cycle: a
catalog, an index and its ranking hold none (their back references are weak, and the stored
index's connection is closed when its reader is freed), and a replaced one is freed by
reference counting (``tests/engine/test_long_lived_memory.py`` pins it). Small catalogs
(tests, a handful of servers) are left alone: their collections are short."""


class CatalogState:
    """The servers' metadata (live or cached), definition changes, listings in progress, and
    the catalog views. Lives as long as its adapter; owns nothing asynchronous.

    ``entries`` and ``settings`` are read through callables so a reload that replaces the
    configuration is seen at once.
    """

    def __init__(
        self,
        *,
        cache: MetadataCache,
        agent_dir: Path,
        entries: Callable[[], Mapping[str, ServerEntry]],
        settings: Callable[[], Settings],
        ranking: str = "default",
    ) -> None:
        self.cache = cache
        self._agent_dir = agent_dir
        self._entries = entries
        self._settings = settings
        self._ranking = ranking
        self._metadata: dict[str, ServerMetadata] = {}
        self._changes: dict[str, DefinitionChanges] = {}
        """Unacknowledged tool-definition changes per server, as the cache records them."""
        self._changes_unread: set[str] = set()
        """Servers taken from the cache whose change records are read when first asked for:
        reading 19,641 of them was a tenth of opening a catalog of 95,000 tools, and a
        command asks for a few."""
        self._listing: dict[str, anyio.Event] = {}
        """Servers being listed now, each with the event set when its listing ends."""
        self._catalog: Catalog | None = None
        self._prompt_catalog: PromptCatalog | None = None
        self._index: SearchIndex | None = None
        self._index_catalog: Catalog | None = None
        """The catalog ``_index`` was built from (an older one while a rebuild runs)."""
        self._index_pending: set[str] = set()
        """Servers whose tools changed since ``_index`` last followed its catalog."""
        self._caller_views: dict[CallerPolicy, _CallerViews] = {}
        """Each policy's own catalog, prompt catalog and index (a handful of gateway clients)."""
        self._index_makers: dict[CallerPolicy | None, anyio.Lock] = {}
        """Held while an index is made in a worker thread for the full catalog (``None``) or
        a policy's view: concurrent first searches wait for one build."""
        self._listeners: list[CatalogListener] = []
        self._notify_pending = False
        self._notified_at = -float("inf")
        self.run_soon: RunSoon | None = None
        """Starts a background task (the adapter's task group while it runs): with it, search
        indexes are rebuilt off the event loop after a listing; without it (a one-shot
        command), when next read."""
        self._enabled: tuple[Mapping[str, ServerEntry], dict[str, ServerEntry]] | None = None
        self._index_generation = 0
        """Bumped by each incremental change; a background rebuild runs until it catches up."""
        self._index_rebuilding = False
        self._awaiting_index: set[str] = set()
        """Servers whose listing ended while their tools were not yet in the search index:
        they count as being listed until it is rebuilt."""
        self.revision = 0
        """Bumped by every change of what is known (a listing, a rebuild): followers remember
        the revision they saw and ask :meth:`changed_since` what to look at again."""
        self._full_revision = 0
        """The revision of the last change that may have touched every server."""
        self._changed_at: dict[str, int] = {}
        """Servers in the order they last changed, each with that revision (the newest last)."""

    # ------------------------------------------------------------------ what is known

    def enabled(self) -> dict[str, ServerEntry]:
        """The enabled entries (found once per configuration: a large one has tens of
        thousands, and every view asks). Do not modify the answer."""
        entries = self._entries()
        known = self._enabled
        if known is None or known[0] is not entries:
            known = self._enabled = (entries, {n: e for n, e in entries.items() if e.is_enabled})
        return known[1]

    def load_cache(self) -> None:
        """Read the cache file and take every enabled server's entry that is still valid."""
        # Reading every summary and entry allocates millions of long-lived objects: with the
        # collector running, its collections took three quarters of that time (1.8 of 2.4 s
        # at 95,000 tools). What was read lives as long as the adapter: frozen, like an index.
        with collector_paused():
            self.cache.load()
            self.revision += 1
            self._invalidate()
            listings = self.cache.get_listings(self.enabled())
            self._metadata.update(listings)
            self._read_changes_when_asked(listings)
            if sum(len(m.tools) for m in self._metadata.values()) >= LONG_LIVED_FROM_TOOLS:
                gc.freeze()
                return_freed_memory()

    def metadata(self, server: str) -> ServerMetadata | None:
        """What ``server`` offered when last listed (live or from the cache). From the cache
        it is a :class:`CachedListing`, whose tools lack their schemas (see
        :meth:`whole_metadata`); resources, prompts and instructions are whole."""
        return self._metadata.get(server)

    def whole_metadata(self, server: str) -> ServerMetadata | None:
        """:meth:`metadata` with every tool's schemas (a cached listing's are read from the
        server's entry, which stays parsed)."""
        metadata = self._metadata.get(server)
        if isinstance(metadata, CachedListing):
            entry = self._entries().get(server)
            whole = self.cache.get(server, entry) if entry is not None else None
            return whole if whole is not None else metadata
        return metadata

    def is_known(self, server: str) -> bool:
        return server in self._metadata

    def changes(self, server: str) -> DefinitionChanges:
        found = self._changes.get(server)
        if found is None and server in self._changes_unread:
            found = self._changes[server] = self.cache.definition_changes(server)
            self._changes_unread.discard(server)
        return found if found is not None else DefinitionChanges()

    def reread_changes(self, server: str) -> None:
        """Take ``server``'s change record from the cache again (trusted elsewhere, say)."""
        self._set_changes(server, self.cache.definition_changes(server))

    def _set_changes(self, server: str, changes: DefinitionChanges) -> None:
        self._changes[server] = changes
        self._changes_unread.discard(server)

    def _read_changes_when_asked(self, servers: Iterable[str]) -> None:
        """Forget the change records of ``servers``: each is read from the cache again when
        :meth:`changes` is first asked for it."""
        for name in servers:
            self._changes.pop(name, None)
            self._changes_unread.add(name)

    def publish(self, server: str, metadata: ServerMetadata) -> DefinitionChanges | None:
        """A listing of ``server`` arrived: cache it, rebuild the views, tell listeners.

        Returns the definition changes this listing introduced (``None`` when it is the
        listing already published, or the server is no longer configured).
        """
        entry = self._entries().get(server)
        if entry is None or self._metadata.get(server) is metadata:
            return None
        changes = self.cache.store(server, entry, metadata)
        self._metadata[server] = metadata
        self.revision += 1
        self._changed_at.pop(server, None)  # moved to the end: the newest change last
        self._changed_at[server] = self.revision
        self._set_changes(server, self.cache.definition_changes(server))
        self._replace_server(server)
        others_listing = any(name != server for name in self._listing)
        if others_listing and time.monotonic() - self._notified_at < NOTIFY_INTERVAL_S:
            self._notify_pending = True  # told when the pass ends, or with the next listing
        else:
            self._notify()
        return changes

    def follow_reload(
        self,
        entries: Mapping[str, ServerEntry],
        *,
        removed: Collection[str],
        restarted: Collection[str],
        live: Callable[[str], ServerMetadata | None],
    ) -> None:
        """After a reload: forget removed servers, take cached listings for servers that are
        not connected (or start afresh), keep live ones."""
        for name in removed:
            self._metadata.pop(name, None)
            self._changes.pop(name, None)
            self._changes_unread.discard(name)
        from_cache: dict[str, ServerEntry] = {}
        self._read_changes_when_asked(entries)
        for name, entry in entries.items():
            if live(name) is not None and name not in restarted:
                continue  # unchanged and connected: the live listing is the truth
            from_cache[name] = entry
        cached = self.cache.get_listings(from_cache)
        for name in from_cache:
            if name in cached:
                self._metadata[name] = cached[name]
            elif name in restarted or name not in self._metadata:
                self._metadata.pop(name, None)
        self.rebuild()

    # ------------------------------------------------------------------ readiness

    def servers_to_list(
        self, *, eager: bool, missing: bool, among: Collection[str] | None
    ) -> list[str]:
        """The rule for which servers connect when an adapter starts (or a reload adds them):
        eager and keep-alive ones (``eager``) and those whose tools are unknown (``missing``)."""
        return [
            name
            for name, entry in self.enabled().items()
            if (among is None or name in among)
            and (
                (eager and entry.lifecycle in ("eager", "keep-alive"))
                or (missing and name not in self._metadata)
            )
        ]

    def begin_listing(self, names: Collection[str]) -> None:
        for name in names:
            if name not in self._listing:
                self._listing[name] = anyio.Event()

    def end_listing(self, name: str) -> None:
        if name in self._awaiting_index:
            return  # ends when the search index holds its tools (see _rebuild_indexes)
        event = self._listing.pop(name, None)
        if event is not None:
            event.set()
        if not self._listing and self._notify_pending:
            self._notify()

    def is_listing(self, name: str) -> bool:
        return name in self._listing

    def listing(self) -> tuple[str, ...]:
        """Servers being listed now."""
        return tuple(self._listing)

    async def wait_for_listings(
        self, servers: Collection[str] | None = None, *, timeout_s: float
    ) -> bool:
        """Wait until ``servers`` (default: every server) are no longer being listed, at most
        ``timeout_s``, and until listeners have heard of every listing published so far.
        Returns whether anything was waited for.

        Listeners are told of listings at most every ``NOTIFY_INTERVAL_S`` while others are
        still being listed, and they are what registers a host's direct tools: a waiter that
        resumed before that notice would read a tool list without them (a first ``tools/list``
        on a fresh machine while a slow server still starts). So whoever waits here gets the
        notice first, however early or late it came.
        """
        pending = [e for n, e in self._listing.items() if servers is None or n in servers]
        if pending:
            with anyio.move_on_after(timeout_s):
                for event in pending:
                    await event.wait()
        if self._notify_pending:
            self._notify()
        return bool(pending)

    async def wait_for_any_listing(self) -> bool:
        """Wait until one of the listings in progress ends (unbounded: the caller bounds
        it). Returns False at once when none is in progress."""
        pending = list(self._listing.values())
        if not pending:
            return False
        async with anyio.create_task_group() as tg:

            async def first(event: anyio.Event) -> None:
                await event.wait()
                tg.cancel_scope.cancel()

            for event in pending:
                tg.start_soon(first, event)
        return True

    # ------------------------------------------------------------------ views

    def on_changed(self, listener: CatalogListener) -> Callable[[], None]:
        """Call ``listener`` after each rebuild; returns a function that unsubscribes."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    def rebuild(self) -> None:
        """Views are built again when next read; listeners are told now."""
        self.revision += 1
        self._invalidate()
        self._notify()

    def tell_listeners(self) -> None:
        """Tell listeners the catalog is what it is now (built since they last heard)."""
        self._notify()

    def changed_since(self, revision: int) -> list[str] | None:
        """The servers whose listing changed after ``revision`` (newest first), or None when
        anything may have changed since (a reload, a full rebuild): a follower that keeps
        something per server (a host's registrations, a listing signature) looks at these
        only, at the cost of what changed rather than of the catalog."""
        if revision < self._full_revision:
            return None
        changed: list[str] = []
        for server in reversed(self._changed_at):
            if self._changed_at[server] <= revision:
                break
            changed.append(server)
        return changed

    def _invalidate(self) -> None:
        # A full build may rename any server's tools (who keeps a contested name): every
        # follower looks at every server again.
        self._full_revision = self.revision
        self._changed_at.clear()
        retired: list[object] = [
            view
            for view in (self._catalog, self._index, self._index_catalog, self._prompt_catalog)
            if view is not None
        ]
        if self._caller_views:
            retired.append(self._caller_views)
        self._catalog = None
        self._prompt_catalog = None
        self._index = None
        self._index_catalog = None
        self._index_pending.clear()
        self._caller_views = {}
        self._index_generation += 1  # a background rebuild in flight is for an older catalog
        self._retire(retired)

    def _retire(self, retired: list[object]) -> None:
        """Let go of replaced views. Reference counting frees them with their last user (a
        search still running on an old index keeps it, and its stored file's snapshot, until
        it ends): nothing a view holds points back at it, so a frozen one is freed too (see
        LONG_LIVED_FROM_TOOLS). Freeing a large index takes a quarter of a second at 23,750
        tools: a running adapter drops the last reference in a worker thread, not on the
        event loop; a one-shot command here."""
        if retired and self.run_soon is not None:
            self.run_soon(functools.partial(_free_in_worker, retired))
        # else: ``retired`` is the last reference, and goes with this frame.

    def _replace_server(self, server: str) -> None:
        """``server``'s metadata changed: derive every built view from the previous one, at
        the cost of that server's tools, or drop them all when a name is contested (only a
        full build decides who keeps it)."""
        full = self._catalog
        if full is None:
            self._invalidate()
            return
        enabled = self.enabled()
        entry = enabled.get(server)
        metadata = self._metadata.get(server)
        tools = (
            build_tool_infos(server, metadata, entry=entry, settings=self._settings())
            if entry is not None and metadata is not None
            else []
        )
        order = list(filter(self._metadata.__contains__, enabled))  # in C: 19,641 servers
        replaced = full.replacing_server(server, tools, servers=order)
        if replaced is None:
            self._invalidate()
            return
        self._catalog = replaced
        self._prompt_catalog = None
        for caller, views in list(self._caller_views.items()):
            views.prompts = None
            if views.catalog is None:
                continue
            permitted = [t for t in replaced.tools(server) if self._permits(caller, t, replaced)]
            derived = views.catalog.replacing_server(server, permitted, servers=replaced.servers)
            if derived is None:
                self._caller_views[caller] = _CallerViews()
            else:
                views.catalog = derived
        self._refresh_indexes(server)

    def _refresh_indexes(self, server: str) -> None:
        """Bring the search indexes up to the current catalogs: in the background while the
        previous ones keep answering, or (no task to run it in) when next read."""
        self._index_generation += 1
        if self.run_soon is None:
            self._index = None
            for views in self._caller_views.values():
                views.index = None
            return
        if self._index is not None:
            self._index_pending.add(server)
        for views in self._caller_views.values():
            if views.index is not None:
                views.pending.add(server)
        if self._index is None and all(v.index is None for v in self._caller_views.values()):
            return  # nothing searched yet: the first search builds what it needs
        if server in self._listing:
            self._awaiting_index.add(server)
        if not self._index_rebuilding:
            self._index_rebuilding = True
            self.run_soon(self._rebuild_indexes)

    async def _rebuild_indexes(self) -> None:
        """Rebuild, in a worker thread, every index whose catalog changed, until no newer
        change arrived meanwhile; then end the listings that waited for it."""
        try:
            while True:
                generation = self._index_generation
                await self._rebuild_stale_indexes()
                if generation == self._index_generation:
                    break
        finally:
            self._index_rebuilding = False
            waiting, self._awaiting_index = self._awaiting_index, set()
            for name in waiting:
                self.end_listing(name)

    async def _rebuild_stale_indexes(self) -> None:
        # Freeing a replaced index (hundreds of thousands of objects in a large catalog) takes
        # as long as building a good part of it: the worker thread drops the last reference,
        # not the event loop.
        retired: list[object] = []
        if self._index is not None and self._index_catalog is not self._catalog:
            index = self._index
            if await self._follow(index, None, self._index_pending):
                if self._index is index:
                    self._index_catalog = self._catalog
            elif self._index is index:
                catalog = self.catalog_for(None)
                index = await anyio.to_thread.run_sync(
                    functools.partial(self._build_index, catalog, stored=True)
                )
                if self._catalog is catalog and self._index is not None:
                    retired += (self._index, self._index_catalog)
                    self._index, self._index_catalog = index, catalog
                    self._index_pending.clear()
            del index
        for caller, views in list(self._caller_views.items()):
            if views.index is None or views.index_catalog is views.catalog:
                continue
            index = views.index
            if await self._follow(index, caller, views.pending):
                if views.index is index:
                    views.index_catalog = views.catalog
            elif views.index is index:
                catalog = self.catalog_for(caller)
                index = await anyio.to_thread.run_sync(self._build_index, catalog)
                if views.catalog is catalog and views.index is not None:
                    retired += (views.index, views.index_catalog)
                    views.index, views.index_catalog = index, catalog
                    views.pending.clear()
            del index
        if retired:
            await _free_in_worker(retired)

    async def _follow(
        self, index: SearchIndex, caller: CallerPolicy | None, pending: set[str]
    ) -> bool:
        """Bring ``index`` up to ``caller``'s catalog in place, one changed server at a time:
        the server's documents are worked out in a worker thread (tokenising, embedding) and
        swapped in on the event loop, both at the cost of that server's tools. Returns False
        when the index cannot follow (build it again), or stopped being ``caller``'s."""

        def current() -> bool:
            views = self._caller_views.get(caller) if caller is not None else None
            return (self._index if caller is None else views and views.index) is index

        while pending:
            server = pending.pop()
            catalog = self.catalog_for(caller)
            replacement = await anyio.to_thread.run_sync(
                index.prepare_replacement, server, catalog.tools(server)
            )
            if not current():
                return False
            if replacement is None:
                pending.add(server)
                return False
            if not index.apply_replacement(replacement, catalog.servers):
                pending.add(server)  # changed meanwhile: prepared again
        return True

    def _notify(self) -> None:
        self._notify_pending = False
        self._notified_at = time.monotonic()
        for listener in list(self._listeners):
            listener()

    @property
    def catalog(self) -> Catalog:
        """The current caller's catalog (every tool when no caller is set)."""
        return self.catalog_for(current_caller())

    @property
    def full_catalog(self) -> Catalog:
        """Every tool, whoever asks: for what the person running the adapter is told."""
        return self.catalog_for(None)

    def catalog_for(self, caller: CallerPolicy | None) -> Catalog:
        """The tools ``caller`` may use, under the names the full catalog gives them (a denied
        tool's name stays taken, so a permitted tool is named the same for every caller)."""
        if caller is None:
            if self._catalog is None:
                enabled = self.enabled()
                metadata = {n: m for n, m in self._metadata.items() if n in enabled}
                with collector_paused():  # see load_cache
                    self._catalog = Catalog.build(metadata, enabled, self._settings())
                    if len(self._catalog) >= LONG_LIVED_FROM_TOOLS:
                        gc.freeze()
                        return_freed_memory()
            return self._catalog
        views = self._views_of(caller)
        if views.catalog is None:
            full = self.catalog_for(None)
            views.catalog = Catalog(
                (t for t in full.tools() if self._permits(caller, t, full)), servers=full.servers
            )
        return views.catalog

    @staticmethod
    def _permits(caller: CallerPolicy, tool: ToolInfo, full: Catalog) -> bool:
        """A tool by its names; a resource exposed as a tool by the resource rule too (an MCP
        Apps view follows the tools that name it, whatever it is called)."""
        if tool.resource_uri is None:
            return caller.permits(tool)
        uri = tool.resource_uri
        viewers = [t for t in full.tools(tool.server) if view_resource_uri(t) == uri]
        return caller.permits(tool) and caller.permits_resource(
            tool.server, uri, tool.name, viewers
        )

    @property
    def index(self) -> SearchIndex:
        """The current caller's search index: rankings, totals and per-server counts are
        computed over what that caller may use only."""
        caller = current_caller()
        if caller is None:
            if self._index is None:
                catalog = self.catalog_for(None)
                self._index = self._build_index(catalog, stored=True)
                self._index_catalog = catalog
                self._index_pending.clear()
            return self._index
        views = self._views_of(caller)
        if views.index is None:
            catalog = self.catalog_for(caller)
            views.index, views.index_catalog = self._build_index(catalog), catalog
            views.pending.clear()
        return views.index

    async def prepare_index(self) -> None:
        """Make the current caller's search index in a worker thread, unless it is made.

        Otherwise the first search makes it where it runs: at 95,000 tools opening the
        stored index takes half a second, building one (a first start, a new version of the
        search code, a policy's view) tens of seconds, and on the event loop that holds up
        every other request. Concurrent first searches wait for the same build; a catalog
        that changed meanwhile is indexed again."""
        caller = current_caller()
        maker = self._index_makers.get(caller)
        if maker is None:
            maker = self._index_makers[caller] = anyio.Lock()
        async with maker:
            while True:
                views = None if caller is None else self._views_of(caller)
                if (self._index if views is None else views.index) is not None:
                    return
                catalog = self.catalog_for(caller)
                index = await anyio.to_thread.run_sync(
                    functools.partial(self._build_index, catalog, stored=caller is None)
                )
                if views is None:
                    if self._index is None and self._catalog is catalog:
                        self._index, self._index_catalog = index, catalog
                        self._index_pending.clear()
                        return
                elif views.index is None and views.catalog is catalog:
                    views.index, views.index_catalog = index, catalog
                    views.pending.clear()
                    return
                # Made meanwhile on another path, or for a catalog since replaced.
                retired: list[object] = [index]
                del index
                await _free_in_worker(retired)

    def _build_index(self, catalog: Catalog, *, stored: bool = False) -> SearchIndex:
        """An index of ``catalog``; ``stored`` for the full catalog's, which is kept on disk
        between processes (a caller's view is a subset, and would replace it)."""
        from pi_mcp_adapter.catalog._search import SearchIndex, forget_build_memos
        from pi_mcp_adapter.catalog._search_semantic import search_vector_cache_path
        from pi_mcp_adapter.catalog._search_store import search_index_store_path

        ranking = self._ranking
        if ranking == "default":
            ranking = self._settings().search_ranking or "default"
        store = search_index_store_path(self._agent_dir) if stored else None

        def make(*, reopen_stored: bool = False) -> SearchIndex:
            return SearchIndex(
                catalog.tools(),
                ranking=ranking,
                vector_cache=search_vector_cache_path(self._agent_dir),
                index_store=store,
                reopen_stored=reopen_stored,
            )

        if len(catalog) < LONG_LIVED_FROM_TOOLS:
            return make()
        with collector_paused():
            index = make(reopen_stored=True)
            if _built_and_stored(index):
                # What a build leaves alive is spread thinly over all the memory it used, and
                # keeps it resident: at 95,000 tools the process kept 650 MB where one that
                # opened the stored index has under 300. So the built index is dropped, with
                # the memos builds keep and the interpreter's free lists (a full collection
                # empties them; everything older is frozen, so it walks little), and the
                # stored one is opened in the memory they free. The tools are embedded then,
                # not beside the build (see reopen_stored).
                del index
                forget_build_memos()
                self.cache.forget_recent_schemas()
                gc.collect()
                index = make()
            gc.freeze()
            return_freed_memory()
        return index

    def tools(self, server: str | None = None) -> Sequence[ToolInfo]:
        """The current caller's tools (all, or ``server``'s)."""
        return self.catalog.tools(server)

    def prompt_catalog(self) -> PromptCatalog:
        """The current caller's prompts."""
        if self._prompt_catalog is None:
            self._prompt_catalog = PromptCatalog.build(
                self._metadata, self.enabled(), self._settings()
            )
        caller = current_caller()
        if caller is None:
            return self._prompt_catalog
        views = self._views_of(caller)
        if views.prompts is None:
            views.prompts = PromptCatalog(
                [
                    p
                    for p in self._prompt_catalog.prompts()
                    if caller.permits_named(p.name, p.server, p.original_name)
                ]
            )
        return views.prompts

    def prompts(self, server: str | None = None) -> Sequence[PromptInfo]:
        return self.prompt_catalog().prompts(server)

    def may_see_resource(self, server: str, uri: str, listed: str) -> bool:
        """Whether the current caller may see and read ``server``'s resource (or template)
        ``uri``, listed as ``listed``: its policy's globs, or for an MCP Apps view, whether
        a tool naming it as its view is one the caller may call."""
        caller = current_caller()
        if caller is None:
            return True
        viewers = [t for t in self.full_catalog.tools(server) if view_resource_uri(t) == uri]
        return caller.permits_resource(server, uri, listed, viewers)

    def _views_of(self, caller: CallerPolicy) -> _CallerViews:
        views = self._caller_views.get(caller)
        if views is None:
            views = self._caller_views[caller] = _CallerViews()
        return views


async def _free_in_worker(retired: list[object]) -> None:
    """Drop ``retired``'s references in a worker thread (the caller passes its last one)."""
    await anyio.to_thread.run_sync(retired.clear)


def _built_and_stored(index: SearchIndex) -> bool:
    """Whether ``index`` was built whole and written to its store (not opened from it)."""
    activity = index.store_activity
    return activity is not None and activity.full_build and activity.rows_written > 0


class _CallerViews:
    """One caller's views of the catalog, built when first read."""

    __slots__ = ("catalog", "index", "index_catalog", "pending", "prompts")

    def __init__(self) -> None:
        self.catalog: Catalog | None = None
        self.index: SearchIndex | None = None
        self.index_catalog: Catalog | None = None
        self.pending: set[str] = set()
        """Servers whose tools changed since ``index`` last followed ``catalog``."""
        self.prompts: PromptCatalog | None = None
