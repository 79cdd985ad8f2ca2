"""What a search from the cache keeps, so that the next one opens the stored index without
building the catalog.

A one-shot search from the cache (``pi-mcp search``) loads the configuration, reads every
server's cached listing, names and gathers the tools into the catalog, then opens the stored
search index and checks it was written for that catalog: at 95,000 tools, 2.5 s before a
search of 40 ms. The catalog follows from the configuration's inputs, the cache's entries and
the code, so a search that made it keeps, in ``<agent dir>/mcp-search-facts.json``:

- the digest of the configuration's inputs (:func:`pi_mcp_adapter.config.inputs_digest`, as
  the status facts have it: the files, the trust records, the environment variables the load
  and the servers' config hashes read, the options and the code);
- the digest of the cache as the search loaded it (:attr:`MetadataCache.loaded_state`: every
  server's summary, with its entry's digest and generation), and when the first of the
  catalog's entries stops being fresh;
- the ranking, and what the stored index and the vector file hold this catalog under
  (:class:`~pi_mcp_adapter.catalog.KeptCatalog`);
- the configuration's errors and warnings, as shown (redacted).

The next search that finds every one of these current opens the index by them, and reads the
tools of its hits' servers only. Anything else (another input, a store by any process, an
entry gone stale, an index written since for another catalog) and it loads everything, as
before, and keeps the facts again. They are kept only for a configuration whose every input
the digest covers, without shared state or a project file awaiting trust, when every enabled
server's tools were known (nothing to connect), and when the stored files hold exactly this
index. The file holds no value of the configuration; it is written whole or not at all (0600).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.catalog import config_hash

from ._kept_files import read_kept, write_kept
from ._telemetry import search_span
from ._values import SearchResults

if TYPE_CHECKING:
    from pi_mcp_adapter.catalog._search import SearchIndex
    from pi_mcp_adapter.catalog._search_store import KeptCatalog
    from pi_mcp_adapter.config import RecordingEnviron

    from ._adapter import McpAdapter

__all__ = [
    "SEARCH_FACTS_NAME",
    "KeptSearch",
    "SearchFacts",
    "keep_search_facts",
    "kept_index_answers",
    "kept_search",
    "read_search_facts",
    "write_search_facts",
]

logger = logging.getLogger(__name__)

SEARCH_FACTS_NAME = "mcp-search-facts.json"
_VERSION = 1
_FILE_LIMIT_BYTES = 1 << 20


@dataclass(frozen=True, slots=True)
class SearchFacts:
    """What a search from the cache needs besides the stored index (see the module)."""

    cache: str
    """:attr:`MetadataCache.loaded_state` of the cache the catalog was made from."""
    fresh_until_ms: float
    """When the first of the catalog's entries stops being fresh (ms since the epoch)."""
    ranking: str
    catalog: KeptCatalog
    errors: tuple[str, ...]
    """The configuration's errors, as shown (``str`` of each)."""
    warnings: tuple[str, ...]

    @classmethod
    def of(cls, adapter: McpAdapter, environ: RecordingEnviron) -> SearchFacts | None:
        """The facts of ``adapter``'s catalog and of the search index it opened, when they
        can be kept (see the module); None otherwise. The enabled servers' config hashes
        are worked out with ``environ``, which notes the variables they read."""
        config = adapter.config
        if not config.inputs_known or adapter.shared_state is not None:
            return None
        if any(not f.trusted for f in config.project_trust.files):
            return None  # the next search loads the configuration, and asks
        state = adapter.state
        cache = state.cache
        loaded = cache.loaded_state
        enabled = adapter.enabled_servers()
        if loaded is None or not all(state.is_known(name) for name in enabled):
            return None
        index = state.index
        kept = index.kept_catalog
        if kept is None:
            return None
        servers = adapter.servers
        for name in enabled:
            config_hash(servers[name], environ=environ)  # notes the variables it reads
        if environ.listed:
            return None  # what was read depends on every variable
        fresh_until = cache.fresh_until_ms(enabled)
        if fresh_until <= cache.now_ms():
            return None
        return cls(
            cache=loaded,
            fresh_until_ms=fresh_until,
            ranking=index.ranking,
            catalog=kept,
            errors=tuple(str(e) for e in config.errors),
            warnings=tuple(config.warnings),
        )


@dataclass(frozen=True, slots=True)
class KeptSearch:
    """A search index opened from kept facts (``engine.kept_search``), with no catalog."""

    index: SearchIndex
    facts: SearchFacts
    cache_warnings: tuple[str, ...]

    def search(
        self, query: str, *, server: str | None = None, limit: int, offset: int = 0
    ) -> SearchResults | None:
        """:meth:`McpAdapter.search` of ranked keywords, or of ``server``'s tools; None for
        ``select:`` (names are looked up in the catalog) and for a server without tools
        here (the catalog says why). No result says which servers could not take part: for
        that, and for an empty page, search with the catalog.

        Raises:
            UsageError: an empty query without a server, ``limit`` below 1 or ``offset``
                below 0.
            LookupError: a hit's tools cannot be read from the stored index.
        """
        if not kept_index_answers(query) or (
            server is not None and not self.index.has_server(server)
        ):
            return None
        with search_span(server=server, regex=False, query=query) as searched:
            page = self.index.search(query, server=server, limit=limit, offset=offset)
            searched.hits = len(page.hits)
        return SearchResults(page)


def kept_index_answers(query: str) -> bool:
    """Whether a kept index can answer ``query`` (not ``select:``, whose names are looked up
    in the catalog): asked before the index is opened."""
    from pi_mcp_adapter.catalog._search import parse_tool_search_query

    return not (query.strip() and parse_tool_search_query(query).is_select)


def keep_search_facts(
    adapter: McpAdapter,
    environ: RecordingEnviron,
    key_of: Callable[[Sequence[str]], str | None],
) -> bool:
    """Keep the facts of ``adapter``'s catalog and search index (loaded with ``environ``) for
    :func:`kept_search`, under ``key_of(names)``, the digest of the inputs for the variables
    read; nothing when they cannot be kept or that is None (the files changed meanwhile).
    Says whether they were kept."""
    facts = SearchFacts.of(adapter, environ)
    if facts is None:
        return False
    names = sorted(environ.read)
    key = key_of(names)
    if key is None:
        return False
    write_search_facts(adapter.agent_dir, facts, key=key, names=names)
    return True


def kept_search(
    agent_dir: Path,
    *,
    key_of: Callable[[Sequence[str]], str],
    relay: bool,
    sampling: bool = False,
    before_open: Callable[[str], object] | None = None,
) -> KeptSearch | None:
    """The search index of an adapter made with these options, opened from the facts kept
    in ``agent_dir`` without the catalog: when ``key_of`` (the digest of the current inputs
    for the variables it is given) is their key, the cache loads as they were made from, its
    entries are still fresh, and the stored files still hold their catalog. None otherwise.
    ``before_open`` is given the ranking before the index is opened."""
    from pi_mcp_adapter.catalog._search import SearchIndex
    from pi_mcp_adapter.catalog._search_semantic import search_vector_cache_path
    from pi_mcp_adapter.catalog._search_store import search_index_store_path

    from ._adapter import _metadata_cache

    facts = read_search_facts(agent_dir, key_of)
    if facts is None:
        return None
    cache = _metadata_cache(agent_dir, relay=relay, sampling=sampling)
    cache.load()
    if cache.loaded_state != facts.cache or cache.now_ms() >= facts.fresh_until_ms:
        return None
    if before_open is not None:
        before_open(facts.ranking)
    try:
        index = SearchIndex(
            facts.catalog,
            ranking=facts.ranking,
            vector_cache=search_vector_cache_path(agent_dir),
            index_store=search_index_store_path(agent_dir),
        )
    except LookupError as exc:
        logger.debug("kept search facts not used: %s", exc)
        return None
    return KeptSearch(index, facts, tuple(cache.warnings))


# ----------------------------------------------------------------------------- the file


def write_search_facts(
    agent_dir: Path, facts: SearchFacts, *, key: str, names: Sequence[str]
) -> None:
    """Keep ``facts`` for the inputs whose digest is ``key`` (``names``: the environment
    variables it reads), in an agent dir that exists; a file that cannot be written is
    logged and left alone."""
    document = {
        "version": _VERSION,
        "key": key,
        "environ": sorted(names),
        "cache": facts.cache,
        # JSON has no infinity: an entry that never goes stale is kept as null.
        "freshUntilMs": None if math.isinf(facts.fresh_until_ms) else facts.fresh_until_ms,
        "ranking": facts.ranking,
        "index": facts.catalog.index,
        "vectors": facts.catalog.vectors,
        "errors": [redact(e) for e in facts.errors],
        "warnings": [redact(w) for w in facts.warnings],
    }
    write_kept(agent_dir / SEARCH_FACTS_NAME, json.dumps(document).encode("utf-8"))


def read_search_facts(
    agent_dir: Path, key_of: Callable[[Sequence[str]], str]
) -> SearchFacts | None:
    """The facts kept in ``agent_dir`` when ``key_of`` gives their key; None for a missing,
    damaged or foreign file, or one kept for other inputs."""
    from pi_mcp_adapter.catalog._search_store import KeptCatalog

    document = read_kept(
        agent_dir / SEARCH_FACTS_NAME,
        version=_VERSION,
        limit_bytes=_FILE_LIMIT_BYTES,
        key_of=key_of,
    )
    if document is None:
        return None
    try:
        fresh_until = document["freshUntilMs"]
        vectors = document["vectors"]
        strings = (document["cache"], document["ranking"], document["index"])
        if (
            not all(isinstance(s, str) for s in strings)
            or not (vectors is None or isinstance(vectors, str))
            or not (fresh_until is None or type(fresh_until) in (int, float))
        ):
            raise ValueError("a field of the wrong type")
        cache, ranking, index = strings
        return SearchFacts(
            cache=cache,
            fresh_until_ms=math.inf if fresh_until is None else float(fresh_until),
            ranking=ranking,
            catalog=KeptCatalog(index, vectors),
            errors=tuple(str(e) for e in document["errors"]),
            warnings=tuple(str(w) for w in document["warnings"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        logger.debug("search facts unreadable: %s", exc)
        return None
