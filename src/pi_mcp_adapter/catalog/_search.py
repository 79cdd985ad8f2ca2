"""Tool search over a catalog of :class:`ToolInfo`, with no server connected.

:class:`SearchIndex` is what ``mcp({search})``, ``ToolSearch`` and ``pi-mcp search`` use. It
supports four ways to ask:

- ranked keywords (the default): any of the words may match, tools matching more of the
  query and matching it in their names rank higher, an exact tool name comes first, the
  meaning of the request counts too when the semantic extra is installed, and when nothing
  fits well the closest tools come back flagged as weak (``SearchPage.confident`` is False);
- ``regex=True``: a case-insensitive regular expression over the name, the original name and
  the description, unranked, in catalog order;
- ``select:name1,name2`` (or :meth:`SearchIndex.select`): exact names, in the order given;
- an empty query with ``server``: that server's tools, sorted by name.

Each mode can be filtered to one server and paged with ``limit`` and ``offset``.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import SupportsIndex, cast, overload

from pi_mcp_adapter._errors import UsageError

from ._metadata import ToolInfo
from ._search_learned import (
    LEARNED_RANK,
    LearnedEvidence,
    LearnedWords,
    ToolKey,
    boosted_order,
)
from ._search_rankings import (
    RANKINGS,
    FieldRanking,
    HybridRanking,
    PreparedServer,
    Ranking,
    ServerMatch,
)
from ._search_regex import MAX_REGEX_LENGTH, compile_regex, regex_matches
from ._search_semantic import forget_remembered_words, semantic_available
from ._search_store import KeptCatalog, StoreActivity
from ._search_text import document_terms, stem

__all__ = [
    "MAX_REGEX_LENGTH",
    "RANKINGS",
    "PreparedReplacement",
    "SearchHit",
    "SearchIndex",
    "SearchPage",
    "ServerMatch",
    "ToolSearchQuery",
    "forget_build_memos",
    "parse_tool_search_query",
    "resolve_ranking",
]

_SELECT_PREFIX = "select:"
_NAMING_SLICE = 4096
"""Names added to the lookup by name per C call (about 1 ms each; see ``_name_documents``)."""

logger = logging.getLogger(__name__)


def resolve_ranking(ranking: str | None) -> str:
    """The ranking to use for a requested name: ``"default"`` and None mean ``"hybrid"``
    when the semantic extra is installed and ``"lexical"`` otherwise; ``"hybrid"`` without
    the extra is ``"lexical"`` (there is nothing to mix in).

    Raises:
        UsageError: ``ranking`` is not ``"default"`` nor one of :data:`RANKINGS`.
    """
    if ranking is None or ranking == "default":
        return "hybrid" if semantic_available() else "lexical"
    if ranking not in RANKINGS:
        known = ", ".join(sorted(["default", *RANKINGS]))
        raise UsageError(f"Unknown search ranking {ranking!r}; known rankings: {known}.")
    if ranking == "hybrid" and not semantic_available():
        logger.warning(
            "hybrid search needs the semantic extra (pip install 'pi-mcp-adapter[semantic]'); "
            "searching with the lexical ranking"
        )
        return "lexical"
    return ranking


def forget_build_memos() -> None:
    """Drop what index builds remember for the next build: the tokenised texts and stems,
    and what the default embedder read (the words it tokenized, which an index opened from
    its store takes back from its vector file; its tokenizer; the table's pages).

    After a large build, these memos are the build's last live objects, spread thinly over
    the memory it used: while they live, the allocator cannot hand that memory back."""
    stem.cache_clear()
    document_terms.cache_clear()
    forget_remembered_words()


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One tool in a search answer. ``score`` is the ranking's own (0 for unranked modes)."""

    tool: ToolInfo
    score: float


@dataclass(frozen=True, slots=True)
class SearchPage:
    """One page of a search answer.

    ``total`` counts every result across pages; ``next_offset`` is the ``offset`` of the next
    page, or None on the last one. ``confident`` is False when no tool fits the query well:
    the hits are then the closest tools, shown as weak matches ("no strong match"), and a
    request for something the catalog cannot do usually ends up here.
    """

    hits: tuple[SearchHit, ...]
    total: int
    offset: int
    next_offset: int | None
    confident: bool = True
    servers: tuple[ServerMatch, ...] = ()
    """For ranked keywords: the servers whose tools match best, best first, with how many of
    their tools are among the results (search again with ``server=`` for more of one)."""

    def __post_init__(self) -> None:
        if self.offset < 0 or self.total < 0:
            raise ValueError("offset and total must not be negative")


@dataclass(frozen=True, slots=True)
class PreparedReplacement:
    """One server's tools replaced, worked out by :meth:`SearchIndex.prepare_replacement`."""

    server: str
    tools: tuple[ToolInfo, ...]
    old_ids: tuple[int, ...]
    prepared: PreparedServer

    @property
    def documents_touched(self) -> int:
        """How many documents of the index the replacement takes out and adds."""
        return self.prepared.documents_touched


@dataclass(frozen=True, slots=True)
class ToolSearchQuery:
    """A parsed ``ToolSearch`` query: either keywords or, with ``select:``, exact names."""

    keywords: str = ""
    selected: tuple[str, ...] = ()

    @property
    def is_select(self) -> bool:
        return bool(self.selected)


def parse_tool_search_query(q: str) -> ToolSearchQuery:
    """Parse the ``ToolSearch`` query syntax.

    ``select:name1,name2`` (the prefix is case-insensitive; spaces around names are ignored;
    repeated names are kept once) selects tools by exact name, in that order. Anything else
    is keywords, trimmed.

    Raises:
        UsageError: the query is empty, or ``select:`` names no tool.
    """
    text = q.strip()
    if not text:
        raise UsageError("The search query is empty: give keywords, or select:name1,name2.")
    if text[: len(_SELECT_PREFIX)].lower() == _SELECT_PREFIX:
        names = [n.strip() for n in text[len(_SELECT_PREFIX) :].split(",")]
        selected = tuple(dict.fromkeys(n for n in names if n))
        if not selected:
            raise UsageError("select: needs at least one tool name, e.g. select:github_get_issue.")
        return ToolSearchQuery(selected=selected)
    return ToolSearchQuery(keywords=text)


class SearchIndex:
    """A searchable view of a tool catalog.

    Building the index does all the precomputation (tokenising, stemming, the inverted index);
    queries then only read it, so one index may serve concurrent searches. When one server's
    tools change, :meth:`prepare_replacement` works out the change (in any thread, while
    queries run) and :meth:`apply_replacement` makes it (on the thread that runs the queries),
    at the cost of that server's tools: the lexical index takes the server's documents out
    and adds the new ones, and the tool vectors get new rows. Tools are known by document id
    (their position at the full build, then the next free id), so ties between equal scores
    keep the catalog order of the full build, and a relisted server's tools come after it.

    Raises:
        UsageError: ``ranking`` is not one of :data:`RANKINGS`.
    """

    def __init__(
        self,
        tools: Sequence[ToolInfo] | KeptCatalog,
        *,
        ranking: str = "default",
        vector_cache: Path | None = None,
        index_store: Path | None = None,
        reopen_stored: bool = False,
    ) -> None:
        """``vector_cache`` keeps the tools' vectors between processes; ``index_store`` the
        lexical index, patched on open for the servers whose tools changed (see
        :mod:`._search_store`). ``reopen_stored``: an index built and stored here is only
        dropped and opened from ``index_store`` (see :class:`.FieldRanking`); it embeds no
        tool.

        A :class:`.KeptCatalog` instead of tools opens the index ``index_store`` holds for
        that catalog, reading a server's tools from it when a result first shows one.

        Raises:
            LookupError: the stored files do not hold the kept catalog (or ``ranking`` is
                not one they store).
        """
        name = resolve_ranking(ranking)
        if isinstance(tools, KeptCatalog):
            self._open_kept(tools, name, vector_cache, index_store)
            return
        every_tool = tuple(tools)
        self._tools: tuple[ToolInfo, ...] | None = every_tool
        self._ranking_name = name
        self._ranking: Ranking
        if name == "hybrid":
            self._ranking = HybridRanking(
                every_tool,
                vector_cache=vector_cache,
                store=index_store,
                reopen_stored=reopen_stored,
            )
        elif name == "lexical":
            self._ranking = FieldRanking(every_tool, store=index_store, reopen_stored=reopen_stored)
        else:
            self._ranking = RANKINGS[name](every_tool)
        self._doc_tools: list[ToolInfo | None]
        """Each document id's tool; None once its server's relisting removed it."""
        self._by_server: dict[str, Sequence[int]]
        """Each server's document ids, in the order of its tools; servers in catalog order."""
        if isinstance(self._ranking, FieldRanking):
            # The ranking numbered the tools already (an index patched on open numbers a
            # changed server's tools after the others, see _search_store): its numbering is
            # taken a server at a time, not worked out again per tool.
            _, server_docs = self._ranking.documents()
            placed = self._ranking.take_placed_tools()
            numbered_in_order = placed is None
            if placed is None:
                # Tool i is document i: the servers in the order of their first ids are in
                # catalog order.
                self._doc_tools = list(every_tool)
                self._by_server = dict(server_docs)
            else:
                self._doc_tools = placed
                servers = dict.fromkeys([tool.server for tool in every_tool])
                self._by_server = {server: server_docs[server] for server in servers}
        else:
            self._doc_tools = list(every_tool)
            groups: dict[str, list[int]] = {}
            for position, tool in enumerate(every_tool):
                groups.setdefault(tool.server, []).append(position)
            self._by_server = dict(groups)
            numbered_in_order = True
        self._unnamed: tuple[Callable[[], Sequence[ToolInfo]], bool] | None = (
            lambda: every_tool,
            numbered_in_order,
        )
        """The tools as indexed, and whether their document ids are their positions, until
        the lookup by name is made (see _by_name): a keyword search needs none."""
        self._live = len(every_tool)
        self._start_lookups()

    def _start_lookups(self) -> None:
        self._names: dict[str, int] = {}
        self._naming = threading.Lock()
        """Held while the lookup by name is made: :meth:`prepare_replacement` makes it in a
        worker thread, so that the first relisting's apply on the event loop finds it made,
        and a query or apply asking meanwhile waits for it rather than making another."""
        self._origins: dict[str, dict[str, int]] = {}
        """Per server, the document id of each original tool name, made the first time a
        search with learned words asks for that server (see _doc_of)."""
        self._catalog_order: list[int] | None = None

    def _open_kept(
        self, kept: KeptCatalog, name: str, vector_cache: Path | None, index_store: Path | None
    ) -> None:
        ranking: FieldRanking
        if name == "hybrid":
            ranking = HybridRanking(kept, vector_cache=vector_cache, store=index_store)
        elif name == "lexical":
            ranking = FieldRanking(kept, store=index_store)
        else:
            raise LookupError(f"the {name} ranking keeps no index")
        self._ranking_name = name
        self._ranking = ranking
        _, server_docs = ranking.documents()
        self._by_server = dict(server_docs)
        self._doc_tools = _StoredTools(ranking)
        self._tools = None
        self._unnamed = (lambda: self.tools, False)
        self._live = sum(len(docs) for docs in server_docs.values())
        self._start_lookups()

    def _by_name(self) -> dict[str, int]:
        """The document id of each tool name: the first in catalog order, as indexed, then
        as relistings change it. Made on first use (95,000 names take 12 ms; a relisting's
        prepare makes it in its worker thread, before the first apply), then follows the
        changes."""
        if self._unnamed is not None:
            with self._naming:
                self._name_documents()
        return self._names

    def _name_documents(self) -> None:
        unnamed = self._unnamed
        if unnamed is not None:
            tools_of, numbered_in_order = unnamed
            tools = tools_of()
            doc_ids: Sequence[int]
            if numbered_in_order:
                doc_ids = range(len(tools))
            else:
                next_of = {server: iter(docs) for server, docs in self._by_server.items()}
                doc_ids = [next(next_of[tool.server]) for tool in tools]
            names = [tool.name for tool in tools]
            by_name: dict[str, int] = {}
            # Built from the last tool back, so that the first of a name keeps it; a slice
            # at a time, because one C call holds the interpreter lock throughout: 95,000
            # names (hashed for the first time) took 20 ms, an event-loop stall while a
            # relisting's prepare made it in its worker thread.
            for end in range(len(names), 0, -_NAMING_SLICE):
                start = max(0, end - _NAMING_SLICE)
                by_name.update(
                    zip(reversed(names[start:end]), reversed(doc_ids[start:end]), strict=True)
                )
            self._names = by_name
            self._unnamed = None

    def _doc_of(self, tool: ToolKey) -> int | None:
        """The document id of a server's tool by its original name (the first the server
        lists): the cost of that server's tools, once."""
        server, original_name = tool
        origins = self._origins.get(server)
        if origins is None:
            origins = self._origins[server] = {}
            for doc in self._by_server.get(server, ()):
                found = self._doc_tools[doc]
                if found is not None:
                    origins.setdefault(found.original_name, doc)
        return origins.get(original_name)

    @property
    def tools(self) -> tuple[ToolInfo, ...]:
        if self._tools is None:
            self._tools = tuple(self._tool(d) for d in self._in_catalog_order())
        return self._tools

    @property
    def store_activity(self) -> StoreActivity | None:
        """What opening the stored index did; None for a ranking that stores none."""
        ranking = self._ranking
        return ranking.store_activity if isinstance(ranking, FieldRanking) else None

    @property
    def ranking(self) -> str:
        return self._ranking_name

    @property
    def kept_catalog(self) -> KeptCatalog | None:
        """What a later process opens this index by without the catalog (see
        :class:`.KeptCatalog`); None when the stored files do not hold exactly this index
        (another ranking, a patch this process could not write, a vector file not written)."""
        ranking = self._ranking
        if not isinstance(ranking, FieldRanking) or ranking.stored_catalog is None:
            return None
        vectors = ranking.vectors_catalog
        if isinstance(ranking, HybridRanking) and ranking.semantic and vectors is None:
            return None
        return KeptCatalog(ranking.stored_catalog, vectors)

    def __len__(self) -> int:
        return self._live

    def has_server(self, server: str) -> bool:
        """Whether ``server`` has tools in this index."""
        return server in self._by_server

    def _in_catalog_order(self) -> list[int]:
        """Every live document id, in catalog order (servers in order, then each server's
        tools in the order it listed them)."""
        if self._catalog_order is None:
            self._catalog_order = list(itertools.chain.from_iterable(self._by_server.values()))
        return self._catalog_order

    def prepare_replacement(
        self, server: str, tools: Sequence[ToolInfo]
    ) -> PreparedReplacement | None:
        """Work out replacing ``server``'s tools by ``tools`` (named as the catalog names
        them), changing nothing yet: safe in a worker thread while queries run.

        None when this index cannot follow the change in place (a ranking other than ours,
        or one that drifted far enough from its full build to be built again): build a new
        index then.
        """
        ranking = self._ranking
        if not isinstance(ranking, FieldRanking):
            return None
        old_ids = tuple(self._by_server.get(server, ()))
        old_tools = [self._doc_tools[d] for d in old_ids]
        prepared = ranking.prepare([t for t in old_tools if t is not None], tools)
        self._by_name()  # made here, off the event loop, for the apply (see _naming)
        if prepared is None:
            return None
        return PreparedReplacement(server, tuple(tools), old_ids, prepared)

    def apply_replacement(self, replacement: PreparedReplacement, servers: Sequence[str]) -> bool:
        """Make a prepared replacement; ``servers`` is the catalog's server order now. Returns
        False, changing nothing, when the index changed since it was prepared (prepare again).

        Must run where the queries run (no query may read the index meanwhile); the work is
        proportional to the server's old and new tools.
        """
        server = replacement.server
        if tuple(self._by_server.get(server, ())) != replacement.old_ids:
            return False
        ranking = self._ranking
        assert isinstance(ranking, FieldRanking)
        by_name = self._by_name()
        ranking.apply(replacement.prepared)
        for doc in replacement.old_ids:
            tool = self._doc_tools[doc]
            self._doc_tools[doc] = None
            if tool is not None and by_name.get(tool.name) == doc:
                del by_name[tool.name]
        first = len(self._doc_tools)
        self._doc_tools.extend(replacement.tools)
        new_ids = list(range(first, len(self._doc_tools)))
        for doc, tool in zip(new_ids, replacement.tools, strict=True):
            by_name.setdefault(tool.name, doc)
        self._origins.pop(server, None)
        self._live += len(new_ids) - len(replacement.old_ids)
        if server in self._by_server or not new_ids:
            if new_ids:
                self._by_server[server] = new_ids
            else:
                self._by_server.pop(server, None)
        else:
            self._by_server[server] = new_ids
            # A server new to the index: its place follows the catalog's server order.
            self._by_server = {s: self._by_server[s] for s in servers if s in self._by_server}
        self._tools = None
        self._catalog_order = None
        return True

    def select(self, names: Sequence[str]) -> list[ToolInfo]:
        """The tools with exactly these (prefixed) names, in the order given.

        Unknown names are skipped and repeated names give one tool; compare the result with
        ``names`` to report what was not found.
        """
        found: list[ToolInfo] = []
        seen: set[int] = set()
        by_name = self._by_name()
        for name in names:
            position = by_name.get(name)
            if position is not None and position not in seen:
                seen.add(position)
                found.append(self._tool(position))
        return found

    def search(
        self,
        query: str,
        *,
        server: str | None = None,
        regex: bool = False,
        limit: int | None = None,
        offset: int = 0,
        learned: LearnedWords | None = None,
    ) -> SearchPage:
        """Search the catalog and return one page of results.

        ``query`` is keywords (ranked), a regular expression when ``regex`` is set, or
        ``select:name1,name2``. With ``server``, only that server's tools are considered; an
        empty query with ``server`` lists that server's tools sorted by name. ``limit`` is
        the page size (None: everything from ``offset`` on) and ``offset`` the number of
        results to skip. ``learned`` adds the learned term to a keyword query (words that
        led to a tool before move it into the first five, ``_search_learned.py``); without
        it the ranking is the cold one.

        Raises:
            UsageError: the query is empty without a server, the regular expression is
                invalid, too long or unsafe, ``limit`` is below 1 or ``offset`` below 0.
        """
        if limit is not None and limit < 1:
            raise UsageError(f"limit must be at least 1, got {limit}.")
        if offset < 0:
            raise UsageError(f"offset must not be negative, got {offset}.")
        text = query.strip()
        in_server = self._by_server.get(server, []) if server is not None else None
        if not text:
            if in_server is None:
                raise UsageError(
                    "The search query is empty: give keywords, or a server to list its tools."
                )
            listed = sorted(in_server, key=lambda p: self._tool(p).name)
            return self._page([(p, 0.0) for p in listed], limit, offset, confident=True)
        if regex:
            pattern = compile_regex(text)
            positions = in_server if in_server is not None else self._in_catalog_order()
            # Only live documents are scanned: a removed one's slot is never read.
            matched = regex_matches(pattern, cast("list[ToolInfo]", self._doc_tools), positions)
            return self._page(matched, limit, offset, confident=True)
        parsed = parse_tool_search_query(text)
        if parsed.is_select:
            by_name = self._by_name()
            chosen = [
                (by_name[t.name], 0.0)
                for t in self.select(parsed.selected)
                if server is None or t.server == server
            ]
            return self._page(chosen, limit, offset, confident=True)
        candidates = frozenset(in_server) if in_server is not None else None
        depth = None if limit is None else offset + limit
        ranked = self._ranking.rank(parsed.keywords, candidates, depth)
        order, total = list(ranked.order), ranked.total
        boost = self._learned_positions(parsed.keywords, learned, candidates)
        if boost:
            # The learned term moves one tool up, never the confidence: a query no tool fits
            # well is still flagged as such, whatever was called after similar words.
            last_on_page = LEARNED_RANK if limit is None else offset + limit - 1
            order = boosted_order(order, boost, rank=min(LEARNED_RANK, last_on_page))
            total += len(order) - len(ranked.order)
        page = self._page(order, limit, offset, confident=ranked.confident, total=total)
        return dataclasses.replace(page, servers=ranked.servers) if ranked.servers else page

    def _learned_positions(
        self, keywords: str, learned: LearnedWords | None, candidates: frozenset[int] | None
    ) -> dict[int, LearnedEvidence]:
        """Positions of the tools ``keywords`` led to before, with their learned evidence."""
        if not learned:
            return {}
        found: dict[int, LearnedEvidence] = {}
        for tool, score in learned.scores(keywords).items():
            position = self._doc_of(tool)
            if position is not None and (candidates is None or position in candidates):
                found[position] = score
        return found

    def _tool(self, doc: int) -> ToolInfo:
        tool = self._doc_tools[doc]
        if tool is None:
            raise LookupError(f"document {doc} was removed from the search index")
        return tool

    def _page(
        self,
        results: Sequence[tuple[int, float]],
        limit: int | None,
        offset: int,
        *,
        confident: bool,
        total: int | None = None,
    ) -> SearchPage:
        """One page of ``results``; ``total`` is given when ``results`` holds only the head."""
        count = len(results) if total is None else total
        end = min(len(results), offset + limit) if limit is not None else len(results)
        hits = tuple(SearchHit(self._tool(p), score) for p, score in results[offset:end])
        next_offset = offset + len(hits) if offset + len(hits) < count else None
        return SearchPage(
            hits=hits,
            total=count,
            offset=offset,
            next_offset=next_offset,
            confident=confident,
        )


class _StoredTools(list[ToolInfo | None]):
    """The tools of an index opened for a kept catalog, by document id: a server's are read
    from the stored index the first time one of them is asked for (a search shows a page of
    hits from a few servers; reading every server's would cost what building the catalog
    does). An id no server has is a removed document's: None."""

    def __init__(self, ranking: FieldRanking) -> None:
        super().__init__([None] * ranking.documents()[0])
        self._ranking = ranking
        self._unread = set(ranking.documents()[1])

    @overload
    def __getitem__(self, index: SupportsIndex) -> ToolInfo | None: ...

    @overload
    def __getitem__(self, index: slice) -> list[ToolInfo | None]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> ToolInfo | list[ToolInfo | None] | None:
        if isinstance(index, slice):
            raise TypeError("the tools of a kept catalog are read one at a time")
        found = super().__getitem__(index)
        if found is None and self._unread:
            server = self._ranking.server_of(int(index))
            if server is not None and server in self._unread:
                self._read(server)
                found = super().__getitem__(index)
        return found

    def __iter__(self) -> Iterator[ToolInfo | None]:
        return (self[doc] for doc in range(len(self)))

    def _read(self, server: str) -> None:
        docs = self._ranking.documents()[1][server]
        tools = self._ranking.stored_tools(server)
        if tools is None or len(tools) != len(docs):
            raise LookupError(f"the stored search index cannot give the tools of {server!r}")
        for doc, tool in zip(docs, tools, strict=True):
            super().__setitem__(doc, tool)
        self._unread.discard(server)
