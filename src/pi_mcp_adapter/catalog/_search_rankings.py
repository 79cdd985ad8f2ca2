"""The ranking functions behind tool search, selectable by name for side-by-side measurement.

- ``default``: our ranking (:class:`FieldRanking`), described in ``docs/search.md``;
- ``seed004``: the per-term 10/5/4/3 scoring of the ToolSearch design (:class:`Seed004Ranking`);
- ``bm25``: plain Okapi BM25 over name and description (:class:`Bm25Ranking`).

A ranking is built once from the catalog (all precomputation happens there) and then answers
queries with tool positions in that catalog, best first. Rankings know nothing about paging,
regular expressions or ``select:``; :class:`~._search.SearchIndex` adds those.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import hashlib
import heapq
import itertools
import json
import logging
import math
import re
import weakref
from array import array
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, get_args, overload

from ._metadata import ToolInfo
from ._search_semantic import EmbeddedTexts, TextEmbedder, ToolVectors, load_default_embedder
from ._search_store import (
    EncodedTools,
    KeptCatalog,
    LazyTable,
    ServerRow,
    StoreActivity,
    StoredIndex,
    StoredLayout,
    catalog_fingerprint,
    encode_tools,
    pack_names,
    server_fingerprint,
    texts_fingerprint,
    unpack_names,
)
from ._search_text import (
    ABBREVIATIONS,
    QUERY_STOPWORDS,
    VERB_SYNONYMS,
    ValueKind,
    ValueSpan,
    cjk_glosses,
    document_terms,
    find_values,
    is_cjk,
    named_products,
    normalize_identifier,
    split_clauses,
    split_words,
    stem,
    terms,
)

if TYPE_CHECKING:
    from ._search_semantic import FloatMatrix

__all__ = [
    "RANKINGS",
    "Bm25Ranking",
    "FieldRanking",
    "HybridRanking",
    "PreparedServer",
    "RankedTools",
    "Ranking",
    "RankingFactory",
    "Seed004Ranking",
    "ServerMatch",
]


@dataclass(frozen=True, slots=True)
class ServerMatch:
    """A server with tools among the results: how many, and the score of its best one."""

    server: str
    tools: int
    best_score: float


@dataclass(frozen=True, slots=True)
class RankedTools:
    """The answer of a ranking: catalog positions with scores, best first.

    ``order`` holds at most the ``limit`` asked for; ``total`` counts every result.
    ``confident`` is False when the best candidates match the query too weakly to be worth
    showing (``order`` is then empty); rankings that make no such judgement set it whenever
    there is any result.
    """

    order: tuple[tuple[int, float], ...]
    confident: bool
    total: int
    servers: tuple[ServerMatch, ...] = ()
    """The servers that match best, best first (rankings may leave it empty)."""


class Ranking(Protocol):
    """Ranks one catalog. Built once per catalog; ``rank`` must not mutate shared state."""

    def rank(
        self, query: str, candidates: Collection[int] | None = None, limit: int | None = None
    ) -> RankedTools:
        """Rank the tools for ``query``: only ``candidates`` positions when given, and only
        the first ``limit`` results in ``order`` (all when None)."""
        ...


RankingFactory = Callable[[Sequence[ToolInfo]], Ranking]

logger = logging.getLogger(__name__)

V = TypeVar("V")


# --------------------------------------------------------------------------------------------
# Plain BM25


class Bm25Ranking:
    """Okapi BM25 (k1 = 1.2, b = 0.75) over one bag of words: the name and the description.

    Standard tokenisation: lower-cased runs of letters and digits; no stemming, no stopwords,
    no identifier splitting beyond the separators themselves. The query is a set of words.
    Every tool with a positive score is returned.
    """

    k1 = 1.2
    b = 0.75

    def __init__(self, tools: Sequence[ToolInfo]) -> None:
        self._postings: dict[str, list[tuple[int, float]]] = defaultdict(list)
        lengths: list[int] = []
        counts: list[Counter[str]] = []
        for tool in tools:
            words = _plain_words(f"{tool.name} {tool.description}")
            lengths.append(len(words))
            counts.append(Counter(words))
        n_docs = len(tools)
        avg_len = (sum(lengths) / n_docs) if n_docs else 1.0
        doc_freq: Counter[str] = Counter()
        for c in counts:
            doc_freq.update(c.keys())
        self._idf = {
            t: math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)) for t, df in doc_freq.items()
        }
        for doc, c in enumerate(counts):
            norm = self.k1 * (1.0 - self.b + self.b * lengths[doc] / avg_len)
            for t, tf in c.items():
                self._postings[t].append((doc, tf * (self.k1 + 1.0) / (tf + norm)))

    def rank(
        self, query: str, candidates: Collection[int] | None = None, limit: int | None = None
    ) -> RankedTools:
        scores: dict[int, float] = defaultdict(float)
        # Each distinct query word counts once: long requests repeat their topic words, and
        # counting repeats lets one word drown the rest.
        for t in dict.fromkeys(_plain_words(query)):
            idf = self._idf.get(t)
            if idf is None:
                continue
            for doc, weight in self._postings[t]:
                scores[doc] += idf * weight
        order = _best_first(scores, candidates)
        shown = order if limit is None else order[:limit]
        return RankedTools(order=shown, confident=bool(order), total=len(order))


_PLAIN_WORD = re.compile(r"[^\W_]+")


def _plain_words(text: str) -> list[str]:
    return _PLAIN_WORD.findall(text.lower())


def _best_first(
    scores: Mapping[int, float], candidates: Collection[int] | None
) -> tuple[tuple[int, float], ...]:
    items: Iterable[tuple[int, float]] = scores.items()
    if candidates is not None:
        items = ((d, s) for d, s in items if d in candidates)
    return tuple(sorted(((d, s) for d, s in items if s > 0), key=_by_score))


# --------------------------------------------------------------------------------------------
# Seed 004 ToolSearch scoring


class Seed004Ranking:
    """The ToolSearch scoring of the seed design, read as literally as it allows.

    Per whitespace-separated query term (lower-cased), the best applicable rule scores:
    10 if the term equals a part of the tool name (the name split at ``_`` and ``-``),
    5 if it is a substring of a name part, 4 if it matches the description at word
    boundaries, 3 if it is a substring of the full name. Term scores are summed; tools
    scoring zero are dropped; ties are broken by name; at most five tools are returned.
    """

    max_results = 5

    def __init__(self, tools: Sequence[ToolInfo]) -> None:
        self._names = [t.name.lower() for t in tools]
        part_docs: dict[str, set[int]] = defaultdict(set)
        desc_docs: dict[str, set[int]] = defaultdict(set)
        for doc, tool in enumerate(tools):
            for part in re.split(r"[_\-]+", tool.name.lower()):
                if part:
                    part_docs[part].add(doc)
            for word in re.findall(r"\w+", tool.description.lower()):
                desc_docs[word].add(doc)
        self._part_docs = dict(part_docs)
        self._desc_docs = dict(desc_docs)
        self._descriptions = [t.description for t in tools]

    def _term_scores(self, term: str) -> dict[int, int]:
        best: dict[int, int] = {}

        def offer(docs: Iterable[int], score: int) -> None:
            for doc in docs:
                if best.get(doc, 0) < score:
                    best[doc] = score

        offer(self._part_docs.get(term, ()), 10)
        for part, docs in self._part_docs.items():
            if term in part and part != term:
                offer(docs, 5)
        if re.fullmatch(r"\w+", term):
            offer(self._desc_docs.get(term, ()), 4)
        else:
            pattern = re.compile(rf"(?<!\w){re.escape(term)}(?!\w)", re.IGNORECASE)
            offer((d for d, text in enumerate(self._descriptions) if pattern.search(text)), 4)
        offer((d for d, name in enumerate(self._names) if term in name), 3)
        return best

    def rank(
        self, query: str, candidates: Collection[int] | None = None, limit: int | None = None
    ) -> RankedTools:
        scores: dict[int, float] = defaultdict(float)
        for term in query.lower().split():
            for doc, score in self._term_scores(term).items():
                scores[doc] += score
        ranked = [
            (d, s) for d, s in scores.items() if s > 0 and (candidates is None or d in candidates)
        ]
        ranked.sort(key=lambda ds: (-ds[1], self._names[ds[0]]))
        order = tuple(ranked[: self.max_results])
        shown = order if limit is None else order[:limit]
        return RankedTools(order=shown, confident=bool(order), total=len(order))


# --------------------------------------------------------------------------------------------
# Our ranking


@dataclass(frozen=True, slots=True)
class _Field:
    weight: float
    length_norm: float  # BM25's b for this field: how much a long field dilutes a match


# Why these weights: a word in the tool's own name says most about what it does; the server
# name says which product it drives (queries often name it); the description explains the
# action; parameter names and their descriptions mostly mention inputs and are the noisiest.
_FIELDS: Mapping[str, _Field] = MappingProxyType(
    {
        "name": _Field(weight=3.0, length_norm=0.3),
        "server": _Field(weight=1.5, length_norm=0.3),
        "description": _Field(weight=1.0, length_norm=0.75),
        "param_names": _Field(weight=0.4, length_norm=0.5),
        "param_text": _Field(weight=0.25, length_norm=0.75),
        "server_context": _Field(weight=0.3, length_norm=0.5),
    }
)


@dataclass(frozen=True, slots=True)
class _QueryTerm:
    term: str
    weight: float  # the term's share of the query: 1, less when quoted or a synonym
    direct: bool  # written in the query (not a synonym added for it)


# What a value in a request says about the wanted tool: a path is a file to read or write,
# a URL a web page to fetch, an address someone to e-mail.
_IMPLIED_TERMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        kind: tuple(stem(w) for w in words)
        for kind, words in {"path": ("file",), "url": ("url", "web"), "email": ("email",)}.items()
    }
)
_FOLDER_TERMS = (stem("directory"), stem("folder"))
# A question ("what time is it in Tokyo?", "who maintains this repo?") asks for something to
# be read, not done: among tools that differ by their action, the one that gets wins. A
# question about a path or a URL ("what's in ~/inbox?") is about that value, which implies
# its own action. Yes/no questions are left out: "is there a way to send an email" asks for
# sending.
_QUESTION = re.compile(
    r"^\s*(?:what(?:'s|s)?|who(?:'s)?|whose|which|when|where|how\s+(?:many|much|long|old|far))\b",
    re.IGNORECASE,
)
_QUESTION_TERMS = (stem("get"),)


def _is_folder(path: str) -> bool:
    """Whether a path in a request names a folder: it ends with a separator, or its last
    part has no extension (``~/inbox``, ``./src/``; not ``notes.md`` nor ``syslog.1``)."""
    if path.endswith(("/", "\\")):
        return True
    last = re.split(r"[/\\]", path)[-1]
    return last in ("~", ".", "..") or "." not in last


# A path right after "to", "into" or "as" is a destination: something is written there
# ("save it to ~/x.md"); after "go to", "navigate to", "switch to" it is a place to visit.
_DESTINATION = re.compile(
    r"(?<!\bgo\s)(?<!\bcd\s)(?<!navigate\s)(?<!switch\s)(?<!change\s)\b(?:to|into|as)\s+"
    r"(?:(?:the|a|file|folder)\s+)*$",
    re.IGNORECASE,
)
_DESTINATION_TERMS = (stem("write"),)
# Parameter names that take each kind of value (as stemmed words of the name).
_VALUE_PARAMETERS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        kind: frozenset(stem(w) for w in words.split())
        for kind, words in {
            "path": "path paths file files filename filepath dir directory folder destination",
            "url": "url urls uri link href website",
            "email": "email emails recipient recipients",
            "date": "date dates datetime time start end since until day timestamp period",
            "address": "address wallet contract account",
            "hash": "hash sha commit revision ref txid",
        }.items()
    }
)
_RAW_TOKEN = re.compile(r"[^\W_]+(?:[_\-'][^\W_]+)*")
_SENTENCE_START = re.compile(r"(?:^|[.!?:;\n]\s*|[\"'(]\s*)$")


def _plain_chunks(text: str, values: Sequence[ValueSpan]) -> Iterable[tuple[str, ValueKind | None]]:
    """``text`` cut into pieces, each with the kind of value it is (None for plain text)."""
    position = 0
    for span in values:
        if span.start > position:
            yield text[position : span.start], None
        yield text[span.start : span.end], span.kind
        position = span.end
    if position < len(text):
        yield text[position:], None


def _tokens(chunk: str, is_value: bool) -> Iterable[tuple[str, bool]]:
    """Raw tokens of a chunk, each with whether it looks like a value (a name, an id)."""
    for match in _RAW_TOKEN.finditer(chunk):
        token = match.group(0)
        if is_value:
            yield token, True
            continue
        value_like = any(c.isdigit() for c in token)
        if not value_like and token[:1].isupper():
            # A capital at the start of a sentence says nothing; elsewhere it marks a name.
            # All capitals or inner capitals (AAPL, McDonald) mark one anywhere.
            inner_caps = any(c.isupper() for c in token[1:])
            value_like = inner_caps or not _SENTENCE_START.search(chunk[: match.start()])
        yield token, value_like


class FieldRanking:
    """Our ranking: BM25F over tool fields, plus coverage, name evidence, values, diversity
    and a confidence flag; with ``vectors``, mixed with semantic similarity (hybrid).

    Build time: each tool's name, server, description, parameter names, parameter
    descriptions and server context (words shared by the server's other tools) are split at
    identifier boundaries and lightly stemmed. A term's evidence in a tool is a weighted,
    length-normalised sum over the fields, saturated once (BM25F), times the term's IDF; that
    number is precomputed into the inverted index.

    Query time:

    - terms: stopwords and numbers are dropped; argument values (quoted text, paths, URLs,
      addresses) weigh less and imply a word for their kind; common verbs bring their
      everyday synonyms at half weight;
    - score: the sum of the terms' precomputed evidence (OR semantics), multiplied by
      ``1 + coverage + name evidence (+ mention)``, where coverage is the IDF-weighted share
      of the query the tool matches, name evidence the share of the tool's own name that the
      query mentions, and a mention an identifier in the query equal to the tool's name;
    - exact names: a query that is a tool's name (prefixed or original, ignoring case,
      separators and camelCase) puts that tool first;
    - steps: a request made of several steps (split at sentence ends, "then", "finally", or a
      comma before a verb) is also scored step by step, and places 2 to 5 are refilled so
      that every step is represented (greedy selection in the manner of xQuAD);
    - values: tools with a parameter for a kind of value the request gives (a path, a URL)
      score higher;
    - semantic (hybrid): per request and per step, scores are mixed with the similarity of
      a static embedding model (:meth:`_fuse`);
    - confidence: plain words the catalog never uses count against the best tool's
      coverage; when neither the whole query nor any step is covered well enough, the
      results are flagged not confident, and still returned.
    """

    # BM25 saturation: how quickly repeated evidence for one term stops adding up.
    k1 = 1.2
    # Query term weights, relative to a plain word of the request.
    synonym_weight = 0.5
    # A word the catalog lacks but knows a synonym of is only partly understood: this share
    # of the synonym's IDF counts as not understood, against confidence.
    synonym_doubt = 0.5
    # A word the catalog lacks is read, like a synonym, as the catalog's words that begin as
    # it does: at least this many letters and this share of the shorter word in common
    # ("differ" -> "difference", "configure" -> "configuration"). The light stemmer leaves such
    # families apart. On the development set it flagged 0.70 of infeasible requests instead
    # of 0.65 (their odd words no longer count as unknown to the catalog, but only half
    # understood) at a cost of 0.003 in chains across servers (level 4); on the real-server
    # set, one more implicit request found its tool first.
    relative_prefix = 5
    relative_share = 0.6
    implied_weight = 0.5
    # The English word for a common Chinese word of the request (读取 -> read).
    gloss_weight = 0.8
    # Words inside values: a quoted title may still say what it is about ("the 'Q3 sales'
    # report"); the words of a path, URL or address name data, not the action.
    quoted_weight = 0.3
    locator_weight = 0.1
    # Multipliers of the base score.
    coverage_gain = 1.0
    name_gain = 0.3
    mention_gain = 1.0
    # Two words next to each other in the request that are next to each other in a tool's
    # name or description ("token details", "average price", "list files") are stronger
    # evidence than the two words apart: each such phrase adds its IDF times this weight to
    # the tool's score. Requests written from a tool's description repeat its phrases; on
    # the development set this lifted chains across servers (level 4) from 0.64 to 0.67
    # (lexical); a weight of 1.0 cost implicit requests (level 2) hit@5 there.
    phrase_weight = 0.5
    # A request (or step) that names a server after "use", "with", "on", "via"... ("use git
    # to ...", "on Wikipedia") multiplies that server's tools by enough to put its best match
    # first, at least 1 + gain and at most cap (see _favour_named_servers). A word names a
    # server when at most share of the catalog's servers have it in their names and at least
    # purity of the tools that use it are theirs. Larger caps cost nothing on the development
    # set once purity is required; without purity, "from the knowledge graph" lifted a server.
    named_server_gain = 0.5
    named_server_cap = 4.0
    server_name_share = 0.02
    server_name_purity = 0.5
    # A tool with a parameter for the kind of value the request gives (a path, a URL, an
    # address) can take it: its score is multiplied by 1 + this.
    value_fit_gain = 0.6
    # Multi-step requests: how strongly unserved steps pull (0 = plain score order), how
    # many places are refilled, and from how many candidates per step.
    diversity = 0.85
    diversify_top = 5
    diversify_pool = 20
    # How much a picked tool serves a step: (its score there / the step's best) to this
    # power. Squared, a tool that merely shares a word with a step (a "diff" tool mentioning
    # "commit") leaves that step unserved; only the step's own best tools serve it.
    served_sharpness = 2.0
    min_steps = 2
    step_depth = 200
    # A word the catalog never uses counts this much of a word found in one tool, against
    # the coverage that decides confidence.
    unknown_word_weight = 0.6
    min_confidence = 0.25
    # Most-shared words of a server given to each of its tools (see _server_context).
    server_context_words = 24
    # Query cost bounds (see _score_text): postings read in full, then candidates rescored.
    posting_budget = 1500
    rescore_depth = 400
    # Results scoring below this share of the best are not returned.
    relative_floor = 0.1
    # The semantic signal (hybrid ranking): its share of the mixed score, and how many of
    # the tools most similar to a request (or step) join the lexical candidates.
    semantic_weight = 0.4
    semantic_depth = 30
    # A whole request longer than this many words (after stopwords) gives the semantic
    # signal less than semantic_weight (see _whole_semantic_weight). Steps are short and
    # keep the full weight. On the development set, chains across servers (level 4) went
    # from 0.65 to 0.68 (hybrid) and nothing else moved by more than 0.005.
    semantic_full_words = 15
    fusion_depth = 100
    # Servers reported as matching: those whose best tool reaches this share of the best
    # result, at most this many.
    server_match_share = 0.3
    server_matches = 8

    # A ranking updated in place (see apply) is built again from scratch once it drifts this
    # far from its last full build: field lengths are averaged at a full build only, and
    # removed tools leave empty slots behind.
    rebuild_growth = 0.25
    rebuild_removed_share = 0.5

    def __init__(
        self,
        tools: Sequence[ToolInfo] | KeptCatalog,
        *,
        vectors: ToolVectors | None = None,
        store: Path | None = None,
        reopen_stored: bool = False,
    ) -> None:
        """Index ``tools``; with ``store``, open the index stored there for exactly these
        tools instead of building it, or build it and store it (see :mod:`._search_store`).

        ``reopen_stored``: the caller drops an index this built and stored, and opens it
        from its store (see ``CatalogState._build_index``), so such a build leaves the tool
        vectors to that opening. Embedding every tool beside the build was 55 MB of its
        peak at 95,000 tools.

        A :class:`KeptCatalog` instead of tools opens the index ``store`` holds for it, and
        reads no tool.

        Raises:
            LookupError: ``store`` and the vector file do not hold the kept catalog.
        """
        self.stored_catalog: str | None = None
        """The fingerprint of the catalog the index at ``store`` now holds exactly, as this
        ranking has it (see :class:`KeptCatalog`); None when it holds another, or none."""
        if isinstance(tools, KeptCatalog):
            self._value_weights = self._weights_of_values()
            self.store_activity = StoreActivity()
            self._clear()
            self._placed: list[ToolInfo | None] | None = None
            if store is None or not self._open_kept(store, tools):
                raise LookupError("the stored search index holds another catalog")
            return
        if vectors is not None and len(vectors) != len(tools):
            raise ValueError(f"{len(vectors)} tool vectors for {len(tools)} tools")
        if vectors is not None and store is not None:
            # A stored index may number the tools otherwise than ``tools`` does.
            raise ValueError("give a ranking its vectors or a stored index, not both")
        self._value_weights = self._weights_of_values()
        self.store_activity = StoreActivity()
        """What opening the stored index did (see :mod:`._search_store`)."""
        self._vectors: ToolVectors | None = None
        self._avg_len: dict[str, float] = {}
        self._clear()
        self._placed = None
        texts: str | None = None
        if store is not None:
            # Grouped by server only to patch or place them: an index numbering the tools
            # as the catalog lists them needs neither (95,000 tools).
            grouped = functools.cache(lambda: _by_server(tools))
            texts = texts_fingerprint(tools)
            if self._open_store(store, tools, grouped, texts):
                if self._numbered_as_listed(tools):
                    # The vectors' file is keyed by the same hash of the tools' texts.
                    self._vectors = self._tool_vectors(tools, texts)
                else:
                    self._placed = self._tools_by_doc(grouped())
                    self._vectors = self._tool_vectors(self._placed)
                return
        embed_after = reopen_stored and store is not None and vectors is None
        if not embed_after:
            self._vectors = vectors if vectors is not None else self._tool_vectors(tools, texts)
        # Two passes over the tools, a server at a time: the first for the fields' average
        # lengths, which weigh every document's terms, the second to add each document. Each
        # tool's words per field are made again in the second pass and dropped once added
        # (each distinct description and parameter text is tokenised once, and the schemas
        # are read once, in the first): kept from the first pass they were 70 MB of the
        # build's peak at 95,000 tools, as the documents made all at once were 260 MB.
        words = _BuildWords()
        encoded = EncodedTools(store.parent) if store is not None else None
        lengths, parameters = self._measure_fields(tools, words, encoded)
        n_docs = len(tools)
        self._avg_len = {f: max(1.0, lengths[f] / max(1, n_docs)) for f in _FIELDS}
        self._built_docs = n_docs
        self._add(self._each_doc_terms(tools, self._each_field_terms(tools, words, parameters)))
        del words, parameters
        self.store_activity.full_build = True
        if store is not None and texts is not None and encoded is not None:
            try:
                self._store(store, tools, texts, encoded)
            finally:
                encoded.close()
        if embed_after and not self.store_activity.rows_written:
            self._vectors = self._tool_vectors(tools, texts)  # not stored: not opened again

    def _weights_of_values(self) -> Mapping[str, float]:
        # Quoted text may be a title or a phrase; every other value locates or identifies data.
        return {
            kind: self.quoted_weight if kind == "quoted" else self.locator_weight
            for kind in get_args(ValueKind)
        }

    def _clear(self) -> None:
        """Empty structures, as before a build or an open."""
        self._vectors = None
        # Every structure below is keyed by document id: a tool's position in the catalog at
        # the full build, then the next free id for each tool a relisting adds. A relisting
        # removes the server's documents and adds the new ones (see prepare and apply), so its
        # cost is what that server offers; each term's document frequency is the size of its
        # posting list, and its IDF is worked out from that when a query reads it.
        self._server_of: list[str | None] = []
        self._server_docs: dict[str, Sequence[int]] = {}
        """Each server's document ids (a ``range`` as opened from the store, a list as built),
        in the order of its tools."""
        self._servers_of_word: dict[str, set[str]] = {}
        """The servers whose names use a word (see _tools_of_server_named)."""
        self._postings: dict[str, _Posting] = {}
        """Term -> the documents using it, each with its BM25F pseudo term frequency (fields
        weighted and length-normalised, not yet saturated nor multiplied by IDF)."""
        self._idf = _IdfTable(self._postings, _LiveDocuments(self))
        self._by_prefix: dict[str, list[str]] = defaultdict(list)
        """The catalog's words by their first letters, for reading unknown words (see
        relative_prefix)."""
        self._name_postings: dict[str, array[int]] = {}
        self._name_terms: list[tuple[str, ...] | str] = []
        """Each document's name terms; packed (a str) as opened from the store until a query
        reads them (see _names)."""
        self._phrases: dict[tuple[str, str], array[int]] = {}
        self._accepts: dict[str, set[int]] = defaultdict(set)
        self._exact: dict[str, list[int]] = defaultdict(list)
        self._by_original: dict[str, list[int]] = defaultdict(list)
        self._removed = 0
        self._avg_len = {}
        self._built_docs = 0
        self._stored: StoredIndex | None = None
        self._touched: dict[int, set[Any]] = {}
        """Table -> the keys of its entries the last patch on open changed."""

    def _tool_vectors(
        self, tools: Sequence[ToolInfo | None], texts: str | None = None
    ) -> ToolVectors | None:
        """The vectors of the tools by document id (None: a removed document's row), with
        ``texts`` the hash of the tools' texts when already worked out; the lexical ranking
        has none."""
        return None

    def _tools_by_doc(self, groups: Mapping[str, Sequence[ToolInfo]]) -> list[ToolInfo | None]:
        """The catalog's tools (``groups``: by server) placed at their document ids."""
        by_doc: list[ToolInfo | None] = [None] * len(self._server_of)
        for server, group in groups.items():
            docs = self._server_docs[server]
            if len(docs) != len(group):
                raise ValueError(f"{len(group)} tools of {server!r} for {len(docs)} documents")
            if isinstance(docs, range) and docs.step == 1:
                by_doc[docs.start : docs.stop] = group
            else:
                for doc, tool in zip(docs, group, strict=True):
                    by_doc[doc] = tool
        return by_doc

    def _numbered_as_listed(self, tools: Sequence[ToolInfo]) -> bool:
        """Whether document ``i`` is ``tools[i]``: each server's ids follow each other (so
        its tools take them in order) and the servers of the documents are those of the
        tools, in order."""
        return (
            len(self._server_of) == len(tools)
            and all(isinstance(docs, range) for docs in self._server_docs.values())
            and self._server_of == [tool.server for tool in tools]
        )

    def documents(self) -> tuple[int, Mapping[str, Sequence[int]]]:
        """How many document ids are taken, and each server's, in the order of its tools;
        servers in the order of their first ids."""
        return len(self._server_of), self._server_docs

    def server_of(self, doc: int) -> str | None:
        """The server of document ``doc``; None for a removed document."""
        return self._server_of[doc]

    def take_placed_tools(self) -> list[ToolInfo | None] | None:
        """The catalog's tools at their document ids when this index, opened from its store,
        numbers them otherwise than the catalog lists them (a server patched in on open);
        None when document ids are catalog positions. Given once: the ranking keeps no
        tools."""
        placed, self._placed = self._placed, None
        return placed

    # -- the stored index ------------------------------------------------------------------

    def _store(
        self, path: Path, tools: Sequence[ToolInfo], texts: str, encoded: EncodedTools
    ) -> None:
        """Write this freshly built index of ``tools`` to ``path``, whole; ``texts`` is the
        hash of the tools' texts (see :func:`catalog_fingerprint`), ``encoded`` the servers'
        tools already encoded (see :meth:`_measure_fields`), each taken out as written.

        Entries are flat arrays, joined words and JSON, the layout JSON and joined words:
        nothing in the file is read back with a decoder that could build objects of its
        choosing."""
        groups = _by_server(tools)
        prints = {server: server_fingerprint(group) for server, group in groups.items()}
        catalog = catalog_fingerprint(tools, texts)
        if catalog is None or any(p is None for p in prints.values()):
            return
        # Made one at a time as they are written; a server that cannot be written (a name
        # term holding the separator, a schema JSON cannot encode) leaves the file as it was.
        rows = (
            self._server_row(server, prints[server] or "", group, encoded.pop(server))
            for server, group in groups.items()
        )
        stored = StoredIndex.open(path)
        if stored is None:
            return
        try:
            if not stored.begin_write():
                return
            written = stored.write_all(
                _index_parameters(),
                [
                    (_POSTINGS, ((t, _posting_bytes(p)) for t, p in self._postings.items())),
                    (_NAME_POSTINGS, ((t, d.tobytes()) for t, d in self._name_postings.items())),
                    (
                        _PHRASES,
                        ((_phrase_key(pair), d.tobytes()) for pair, d in self._phrases.items()),
                    ),
                    (_EXACT, ((k, array("i", d).tobytes()) for k, d in self._exact.items())),
                    (
                        _BY_ORIGINAL,
                        ((k, array("i", d).tobytes()) for k, d in self._by_original.items()),
                    ),
                    (_BY_PREFIX, ((k, "\0".join(w).encode()) for k, w in self._by_prefix.items())),
                    (
                        _ACCEPTS,
                        ((k, array("i", sorted(d)).tobytes()) for k, d in self._accepts.items()),
                    ),
                    (
                        _SERVERS_OF_WORD,
                        ((w, _servers_bytes(n)) for w, n in self._servers_of_word.items()),
                    ),
                ],
                rows,
                self._meta(catalog),
            )
            self.store_activity.rows_written += stored.rows_written
            if written:
                self.stored_catalog = catalog
        finally:
            stored.close()

    def _server_row(
        self,
        server: str,
        fingerprint: str,
        tools: Sequence[ToolInfo],
        encoded: bytes | None = None,
    ) -> ServerRow:
        docs = self._server_docs.get(server, [])
        names = self._name_terms
        return ServerRow(
            server=server,
            fingerprint=fingerprint,
            docs=docs,
            names=[n if isinstance(n, str) else pack_names(n) for n in (names[d] for d in docs)],
            tools=tools,
            encoded=encoded,
        )

    def _meta(self, catalog: str) -> dict[str, Any]:
        return {
            "avg_len": self._avg_len,
            "built": self._built_docs,
            "next": len(self._server_of),
            "catalog": catalog,
        }

    def _open_store(
        self,
        path: Path,
        tools: Sequence[ToolInfo],
        grouped: Callable[[], Mapping[str, Sequence[ToolInfo]]],
        texts: str,
    ) -> bool:
        """Take the index stored at ``path`` for ``tools``: as it is when it indexed exactly
        these tools, or with the servers whose tools differ patched in (and written back).
        False, with nothing taken, when there is no usable index there or it drifted too far
        from its full build (see :attr:`rebuild_growth`): build it then. ``texts`` is the
        hash of the tools' texts (see :func:`catalog_fingerprint`), ``grouped`` gives the
        tools by server."""
        catalog = catalog_fingerprint(tools, texts)
        if catalog is None:
            return False
        stored = StoredIndex.open(path)
        if stored is None:
            return False
        # Worked out only when the catalog is not the one stored (a fifth of opening an
        # unchanged index of 95,000 tools).
        prints: dict[str, str] | None = None
        # A writer may commit between this process's write and its next read: the index is
        # then opened again, at most this many times.
        for _attempt in range(3):
            self._clear()
            self.store_activity = StoreActivity()
            layout = stored.read_layout(_index_parameters())
            if layout is None:
                break
            if layout.catalog == catalog:
                if self._adopt(stored, layout, len(tools)):
                    self.stored_catalog = catalog
                    return True
                break
            groups = grouped()
            if prints is None:
                prints = self._server_prints(groups)
                if prints is None:
                    break
            writing = stored.begin_write()
            if not writing:
                stored.begin_read()
            # Read again under the write lock when another process wrote since.
            if stored.generation() != layout.generation:
                layout = stored.read_layout(_index_parameters())
                if layout is None:
                    break
                if layout.catalog == catalog:
                    stored.begin_read()  # written for this catalog by another process
                    continue
            stored_prints = stored.fingerprints()
            if stored_prints is None:
                break
            changed, gone = _differences(stored_prints, prints)
            # With no server changed (the catalog lists its servers in another order), the
            # patch writes only the catalog's fingerprint: the next process takes the index
            # as it is, with no fingerprint per server.
            if not self._adopt(stored, layout, None) or not self._patch(
                stored, changed, gone, groups
            ):
                break
            self.store_activity.patched_servers = (*changed, *gone)
            if not writing:
                # The patch lives in this process only; the read transaction it was read
                # in stays open for the entries queries read later.
                return True
            try:
                rows = [self._server_row(s, prints[s], groups[s]) for s in changed if s in groups]
            except ValueError as exc:
                logger.info("cannot store the search index: %s", exc)
                stored.rollback()
                break
            meta = self._meta(catalog)
            # Every changed entry is read before the write begins (a lazy read in the middle
            # of the write would interleave with it).
            entries = list(self._changed_entries())
            if stored.write_patch(entries, rows, gone, meta, layout.generation + 1):
                self.store_activity.rows_written = stored.rows_written
                stored.begin_read()
                # Unless another writer came in between, the snapshot now read is the one
                # this process patched its index to.
                if stored.generation() == layout.generation + 1:
                    self._touched = {}
                    self.stored_catalog = catalog
                    return True
        self._clear()
        stored.close()
        return False

    def _open_kept(self, path: Path, kept: KeptCatalog) -> bool:
        """Take the index stored at ``path`` when it was written for the ``kept`` catalog,
        with the tool vectors the vector file holds for it; False, with nothing taken,
        otherwise."""
        stored = StoredIndex.open(path)
        if stored is None:
            return False
        layout = stored.read_layout(_index_parameters())
        if (
            layout is not None
            and layout.catalog == kept.index
            and self._adopt(stored, layout, None)
        ):
            try:
                self._vectors = self._kept_vectors(kept.vectors)
            except LookupError as exc:
                logger.info("not opening the kept search index: %s", exc)
            else:
                self.stored_catalog = kept.index
                return True
        self._clear()
        stored.close()
        return False

    def _kept_vectors(self, catalog: str | None) -> ToolVectors | None:
        """The tool vectors the vector file holds for the catalog it knows by ``catalog``
        (see :attr:`vectors_catalog`), numbered as this index numbers the tools.

        Raises:
            LookupError: the file holds another catalog.
        """
        return None

    @property
    def vectors_catalog(self) -> str | None:
        """What the vector file knows this index's tools by (:attr:`ToolVectors.
        file_catalog`), the other half of a :class:`KeptCatalog`; None without vectors."""
        return self._vectors.file_catalog if self._vectors is not None else None

    def stored_tools(self, server: str) -> list[ToolInfo] | None:
        """The tools the stored index holds of ``server``, in the order of its documents;
        None for an index not opened from its store, or a row that cannot be read."""
        stored = self._stored
        return stored.server_tools(server) if stored is not None else None

    @staticmethod
    def _server_prints(groups: Mapping[str, Sequence[ToolInfo]]) -> dict[str, str] | None:
        """Each server's :func:`server_fingerprint`; None when one cannot be worked out."""
        prints: dict[str, str] = {}
        for server, group in groups.items():
            fingerprint = server_fingerprint(group)
            if fingerprint is None:
                return None
            prints[server] = fingerprint
        return prints

    def _adopt(self, stored: StoredIndex, layout: StoredLayout, n_tools: int | None) -> bool:
        """Take the stored layout: the per-document lists now, every table entry when a
        query first reads it. ``n_tools`` given: the layout must number that many tools.
        False when the file does not add up."""
        try:
            meta = layout.meta
            avg_len = {f: float(meta["avg_len"][f]) for f in _FIELDS}
            built = int(meta["built"])
        except (KeyError, ValueError, TypeError) as exc:
            logger.info("ignoring the stored search index: %s", exc)
            return False
        server_of = layout.server_of
        removed = server_of.count(None)
        if n_tools is not None and len(server_of) - removed != n_tools:
            logger.info(
                "ignoring the stored search index: %d tools for a catalog of %d",
                len(server_of) - removed,
                n_tools,
            )
            return False
        self._server_of = server_of
        self._name_terms = layout.names  # type: ignore[assignment]  # packed, see _names
        self._server_docs = dict(layout.server_docs)
        self._removed = removed
        self._avg_len = avg_len
        self._built_docs = built
        slots = len(server_of)
        entry = stored.entry

        def decoded(table: int, key: str, decode: Callable[[bytes], V]) -> V | None:
            data = entry(table, key)
            if data is None:
                return None
            try:
                return decode(data)
            except (ValueError, UnicodeDecodeError) as exc:
                # A damaged entry reads as absent: the query goes on without it.
                logger.warning("ignoring a damaged entry of the stored search index: %s", exc)
                return None

        def doc_ids(data: bytes) -> array[int]:
            docs = array("i")
            docs.frombytes(data)
            if docs and (min(docs) < 0 or max(docs) >= slots):
                raise ValueError("a document id out of range")
            return docs

        def posting(data: bytes) -> _Posting:
            count, rest = divmod(len(data), 12)  # a 4-byte id and an 8-byte frequency each
            if rest:
                raise ValueError("a posting list of the wrong size")
            found = _Posting()
            found.docs = doc_ids(data[: 4 * count])
            found.frequencies.frombytes(data[4 * count :])
            return found

        def word_list(data: bytes) -> list[str]:
            return data.decode().split("\0")

        def id_list(data: bytes) -> list[int]:
            return list(doc_ids(data))

        def id_set(data: bytes) -> set[int]:
            return set(doc_ids(data))

        def table(number: int, decode: Callable[[bytes], V]) -> LazyTable[str, V]:
            return LazyTable(lambda key: decoded(number, key, decode))

        def phrase(pair: tuple[str, str]) -> array[int] | None:
            return decoded(_PHRASES, _phrase_key(pair), doc_ids)

        # Each table is read an entry at a time (see LazyTable); the plain dicts a build
        # makes and these behave alike for every use the index makes of them.
        self._postings = table(_POSTINGS, posting)  # type: ignore[assignment]
        self._idf = _IdfTable(self._postings, _LiveDocuments(self))
        self._name_postings = table(_NAME_POSTINGS, doc_ids)  # type: ignore[assignment]
        self._phrases = LazyTable(phrase)  # type: ignore[assignment]
        self._exact = table(_EXACT, id_list)  # type: ignore[assignment]
        self._by_original = table(_BY_ORIGINAL, id_list)  # type: ignore[assignment]
        self._by_prefix = table(_BY_PREFIX, word_list)  # type: ignore[assignment]
        self._accepts = table(_ACCEPTS, id_set)  # type: ignore[assignment]
        self._servers_of_word = table(_SERVERS_OF_WORD, _servers_set)  # type: ignore[assignment]
        self._stored = stored
        return True

    def _patch(
        self,
        stored: StoredIndex,
        changed: Sequence[str],
        gone: Sequence[str],
        groups: Mapping[str, Sequence[ToolInfo]],
    ) -> bool:
        """Replace the documents of the ``changed`` servers by their tools in ``groups``, and
        take out those of the ``gone`` ones, as a relisting does; remember which entries
        that changed (see :meth:`_changed_entries`). False when a server's stored tools
        cannot be read or the index drifted too far from its full build."""
        touched: dict[int, set[Any]] = defaultdict(set)
        for server in (*changed, *gone):
            new = groups.get(server, ())
            old: list[ToolInfo] = []
            if server in self._server_docs:
                found = stored.server_tools(server)
                if found is None or len(found) != len(self._server_docs[server]):
                    return False
                old = found
            if not old and not new:
                continue
            prepared = self.prepare(old, new)
            if prepared is None:
                return False
            prefix = self.relative_prefix
            for entry in (*prepared.removed, *prepared.added):
                touched[_POSTINGS].update(entry.pseudo_tf)
                touched[_BY_PREFIX].update(
                    t[:prefix] for t in entry.pseudo_tf if len(t) >= prefix and t.isalpha()
                )
                touched[_NAME_POSTINGS].update(entry.names)
                touched[_PHRASES].update(entry.pairs)
                touched[_ACCEPTS].update(entry.accepts)
                touched[_EXACT].update(entry.exact_keys)
                touched[_BY_ORIGINAL].add(entry.original_key)
                touched[_SERVERS_OF_WORD].update(entry.server_words)
            self.apply(prepared)
        self._touched = touched
        return True

    def _changed_entries(self) -> Iterator[tuple[int, str, bytes | None]]:
        """The rows of the entries the last patch changed, as they are now (None: gone)."""
        encoders: dict[int, tuple[Mapping[Any, Any], Callable[[Any], bytes]]] = {
            _POSTINGS: (self._postings, _posting_bytes),
            _NAME_POSTINGS: (self._name_postings, lambda d: d.tobytes()),
            _PHRASES: (self._phrases, lambda d: d.tobytes()),
            _EXACT: (self._exact, lambda d: array("i", d).tobytes()),
            _BY_ORIGINAL: (self._by_original, lambda d: array("i", d).tobytes()),
            _BY_PREFIX: (self._by_prefix, lambda w: "\0".join(w).encode()),
            _ACCEPTS: (self._accepts, lambda d: array("i", sorted(d)).tobytes()),
            _SERVERS_OF_WORD: (self._servers_of_word, _servers_bytes),
        }
        for table, keys in self._touched.items():
            mapping, encode = encoders[table]
            for key in keys:
                value = mapping.get(key)
                row_key = _phrase_key(key) if table == _PHRASES else key
                yield table, row_key, (encode(value) if value else None)

    def _names(self, doc: int) -> tuple[str, ...]:
        """Document ``doc``'s name terms (unpacked the first time a query reads them)."""
        names = self._name_terms[doc]
        if isinstance(names, str):
            names = self._name_terms[doc] = unpack_names(names)
        return names

    @property
    def _n_docs(self) -> int:
        return len(self._server_of) - self._removed

    @property
    def _unknown_idf(self) -> float:
        return _idf(self._n_docs, 1) * self.unknown_word_weight

    # -- building and updating ------------------------------------------------------------

    def _field_terms(self, tools: Sequence[ToolInfo]) -> list[dict[str, list[str]]]:
        """Each tool's words per field (server context included, from the tools of its
        server among ``tools``)."""
        words = _BuildWords()
        field_terms: list[dict[str, list[str]]] = [{}] * len(tools)
        for server, numbers in _positions_by_server(tools).items():
            group = self._server_field_terms(server, [tools[n] for n in numbers], words)
            for n, ft in zip(numbers, group, strict=True):
                field_terms[n] = ft
        return field_terms

    def _server_field_terms(
        self,
        server: str,
        group: Sequence[ToolInfo],
        words: _BuildWords,
        parameters: Sequence[_ParameterWords] | None = None,
    ) -> list[dict[str, list[str]]]:
        """The words per field of ``group``, the tools of ``server`` (with ``parameters``,
        the words of their parameters); ``words`` remembers what they share, and each
        server's words and context for :meth:`_each_field_terms`."""
        server_words = terms(server, drop_stopwords=True)
        if parameters is None:
            parameters = [words.parameters_of(tool) for tool in group]
        field_terms = [
            _tool_fields(tool, server_words, words, p)
            for tool, p in zip(group, parameters, strict=True)
        ]
        context = _server_context(field_terms, self.server_context_words)
        for ft in field_terms:
            ft["server_context"] = context
        words.servers[server] = (server_words, context)
        return field_terms

    def _measure_fields(
        self, tools: Sequence[ToolInfo], words: _BuildWords, encoded: EncodedTools | None
    ) -> tuple[dict[str, int], list[_ParameterWords]]:
        """The total length of each field over ``tools``, and each tool's parameter words,
        with each server's words and context kept in ``words``.

        Of the two passes, only this one reads the tools' schemas (a cached listing's are
        read from the metadata store, one server at a time). With ``encoded``, each server's
        tools are also encoded for the stored index there (:func:`encode_tools`), in this
        pass: encoded as they are written, each server's entry was read and parsed again,
        which made storing a 95,000-tool index three times as long."""
        lengths = dict.fromkeys(_FIELDS, 0)
        parameters: list[_ParameterWords] = [_NO_PARAMETERS] * len(tools)
        for server, numbers in _positions_by_server(tools).items():
            group = [tools[n] for n in numbers]
            found = [words.parameters_of(tool) for tool in group]
            for n, p in zip(numbers, found, strict=True):
                parameters[n] = p
            for ft in self._server_field_terms(server, group, words, found):
                for f in _FIELDS:
                    lengths[f] += len(ft[f])
            if encoded is not None:
                with contextlib.suppress(TypeError, ValueError):  # the store tells why
                    encoded.put(server, encode_tools(group))
        return lengths, parameters

    @staticmethod
    def _each_field_terms(
        tools: Sequence[ToolInfo], words: _BuildWords, parameters: list[_ParameterWords]
    ) -> Iterator[dict[str, list[str]]]:
        """Each tool's words per field, one tool after another, as :meth:`_measure_fields`
        found them (its servers' words and contexts are in ``words``, and ``parameters`` has
        its tools' parameter words, each dropped from there once used)."""
        words.parameter_names.clear()  # so that each tool's parameter words go with it
        for n, tool in enumerate(tools):
            server_words, context = words.servers[tool.server]
            ft = _tool_fields(tool, server_words, words, parameters[n])
            parameters[n] = _NO_PARAMETERS
            ft["server_context"] = context
            yield ft

    def _doc_terms(
        self, tools: Sequence[ToolInfo], field_terms: Sequence[dict[str, list[str]]]
    ) -> list[_DocTerms]:
        """What each tool adds to the index, from its words per field."""
        return list(self._each_doc_terms(tools, field_terms))

    def _each_doc_terms(
        self, tools: Sequence[ToolInfo], field_terms: Iterable[dict[str, list[str]]]
    ) -> Iterator[_DocTerms]:
        """What each tool adds to the index, one tool after another."""
        field_specs = [(f, s.weight, s.length_norm, self._avg_len[f]) for f, s in _FIELDS.items()]
        # Tools that share a description share its word list (see _tool_fields): its pairs
        # are found once.
        description_pairs: dict[int, set[tuple[str, str]]] = {}
        for tool, ft in zip(tools, field_terms, strict=True):
            pseudo_tf: dict[str, float] = {}
            get = pseudo_tf.get
            for fname, weight, length_norm, avg in field_specs:
                words = ft[fname]
                if words:
                    scale = weight / (1.0 - length_norm + length_norm * len(words) / avg)
                    for t in words:
                        pseudo_tf[t] = get(t, 0.0) + scale
            words = ft["description"]
            pairs = description_pairs.get(id(words))
            if pairs is None:
                pairs = description_pairs[id(words)] = _adjacent_pairs(words)
            yield _DocTerms(
                server=tool.server,
                server_words=ft["server"],
                pseudo_tf=pseudo_tf,
                names=tuple(dict.fromkeys(ft["name"])),
                pairs=tuple(pairs.union(_adjacent_pairs(ft["name"]))),
                accepts=tuple(
                    kind
                    for kind, parameter_words in _VALUE_PARAMETERS.items()
                    if parameter_words.intersection(ft["param_words"])
                ),
                exact_keys=tuple(
                    {normalize_identifier(tool.name), normalize_identifier(tool.original_name)}
                ),
                original_key=" ".join(ft["name_seq"]),
            )

    def _add(self, docs: Iterable[_DocTerms]) -> None:
        """Index ``docs`` under the next free document ids, in order."""
        postings = self._postings
        by_prefix = self._by_prefix
        prefix = self.relative_prefix
        server_docs = self._server_docs
        for entry in docs:
            doc = len(self._server_of)
            self._server_of.append(entry.server)
            ids = server_docs.get(entry.server)
            if ids is None:
                ids = server_docs[entry.server] = []
                for word in entry.server_words:
                    self._servers_of_word.setdefault(word, set()).add(entry.server)
            ids.append(doc)  # type: ignore[attr-defined]  # a list: see apply
            for t, tf in entry.pseudo_tf.items():
                posting = postings.get(t)
                if posting is None:
                    posting = postings[t] = _Posting()
                    if len(t) >= prefix and t.isalpha():
                        by_prefix.setdefault(t[:prefix], []).append(t)
                posting.add(doc, tf)
            self._name_terms.append(entry.names)
            for t in entry.names:
                self._name_postings.setdefault(t, array("i")).append(doc)
            for pair in entry.pairs:
                self._phrases.setdefault(pair, array("i")).append(doc)
            for kind in entry.accepts:
                self._accepts.setdefault(kind, set()).add(doc)
            for key in entry.exact_keys:
                self._exact.setdefault(key, []).append(doc)
            self._by_original.setdefault(entry.original_key, []).append(doc)

    def _remove(self, server: str, docs: Sequence[_DocTerms]) -> None:
        """Take ``server``'s documents out of the index; ``docs`` are what they added (the
        same tools prepared again), in the order they were added."""
        ids = self._server_docs.pop(server, [])
        if len(ids) != len(docs):
            raise ValueError(f"{len(docs)} documents to remove for {len(ids)} of {server!r}")
        postings = self._postings
        for doc, entry in zip(ids, docs, strict=True):
            self._server_of[doc] = None
            self._name_terms[doc] = ()
            for t in entry.pseudo_tf:
                posting = postings[t]
                posting.remove(doc)
                if not posting:
                    del postings[t]
                    if len(t) >= self.relative_prefix and t.isalpha():
                        _remove_from(self._by_prefix, t[: self.relative_prefix], t)
            for t in entry.names:
                _remove_from(self._name_postings, t, doc)
            for pair in entry.pairs:
                _remove_from(self._phrases, pair, doc)
            for kind in entry.accepts:
                accepting = self._accepts.get(kind)
                if accepting is not None:
                    accepting.discard(doc)
            for key in entry.exact_keys:
                _remove_from(self._exact, key, doc)
            _remove_from(self._by_original, entry.original_key, doc)
        self._removed += len(ids)
        # A server's words are those of its name, which every one of its documents has.
        for word in docs[0].server_words if docs else ():
            servers = self._servers_of_word.get(word)
            if servers is not None:  # None: a stored entry that was damaged
                servers.discard(server)
                if not servers:
                    del self._servers_of_word[word]

    def prepare(
        self, old_tools: Sequence[ToolInfo], new_tools: Sequence[ToolInfo]
    ) -> PreparedServer | None:
        """The work of replacing one server's tools ``old_tools`` (as indexed) by
        ``new_tools``, done ahead without changing the index: safe in a worker thread while
        queries run. None when the index has drifted too far and must be built again (see
        :attr:`rebuild_growth`)."""
        live = self._n_docs - len(old_tools) + len(new_tools)
        removed = self._removed + len(old_tools)
        if abs(live - self._built_docs) > self.rebuild_growth * max(
            self._built_docs, 1
        ) or removed > self.rebuild_removed_share * (len(self._server_of) + len(new_tools)):
            return None
        servers = {t.server for t in (*old_tools, *new_tools)}
        if len(servers) > 1:
            raise ValueError(f"a replacement is one server's tools, got {sorted(servers)}")
        removed_docs = self._doc_terms(old_tools, self._field_terms(old_tools))
        added_docs = self._doc_terms(new_tools, self._field_terms(new_tools))
        if self._stored is not None:
            # Read the entries the update will change now, in this thread: from a stored
            # index each is a read of the file, which the event loop should not wait for.
            for entry in (*removed_docs, *added_docs):
                for t in entry.pseudo_tf:
                    self._postings.get(t)
                for t in entry.names:
                    self._name_postings.get(t)
                for pair in entry.pairs:
                    self._phrases.get(pair)
                for key in (*entry.exact_keys, entry.original_key):
                    self._exact.get(key)
                    self._by_original.get(key)
                for word in entry.server_words:
                    self._servers_of_word.get(word)
        vectors = (
            self._vectors.prepare(new_tools) if self._vectors is not None and new_tools else None
        )
        return PreparedServer(
            server=next(iter(servers)) if servers else "",
            removed=removed_docs,
            added=added_docs,
            vectors=vectors,
        )

    def apply(self, prepared: PreparedServer) -> None:
        """Replace the server's documents as ``prepared`` says: the cost of its tools, on
        whichever thread owns the index (queries must not run meanwhile)."""
        first = len(self._server_of)
        kept = self._server_docs.get(prepared.server)
        if kept is not None and not prepared.removed and not isinstance(kept, list):
            self._server_docs[prepared.server] = list(kept)  # _add appends to it
        if prepared.removed:
            removed_ids = tuple(self._server_docs.get(prepared.server, ()))
            self._remove(prepared.server, prepared.removed)
            if self._vectors is not None:
                self._vectors.remove(removed_ids)
        self._add(prepared.added)
        if self._vectors is not None and prepared.vectors is not None:
            self._vectors.append(first, prepared.vectors)

    # -- query side -----------------------------------------------------------------------

    def _query_terms(self, text: str) -> tuple[list[_QueryTerm], float]:
        """The weighted terms of ``text`` found in the catalog, and the mass of those not.

        Only plain words count as unknown. Argument values (quoted text, paths, URLs, e-mail
        addresses, file names) are what the tool will work on, not what it is: their words
        found in the catalog count at :attr:`quoted_weight` or :attr:`locator_weight`.
        Words with digits (``PMID 31452104``, ``Q3``) and capitalised names (``Zermatt``,
        ``AAPL``) count fully when the catalog uses them (``S3``, ``Slack``); otherwise they,
        like the words of values, are ignored rather than unknown. A value also implies what
        it is: a path implies a file, a URL a web page. An unknown word with an everyday
        synonym the catalog uses is read as that synonym.
        """
        values = find_values(text)
        weights: dict[str, float] = {}
        unknown: list[str] = []
        for chunk, kind in _plain_chunks(text, values):
            for token, value_like in _tokens(chunk, kind is not None):
                for t in terms(token, drop_stopwords=True):
                    if t.isdigit():
                        continue
                    if t not in self._idf:
                        # A Chinese character pair may straddle two words: not evidence
                        # that the request asks for something the catalog lacks.
                        # Shorthand is mostly written in capitals ("PR", "DB"), which
                        # otherwise read as names: it stands for its words when the catalog
                        # has them, and is a name like any other when it does not.
                        plain = not value_like or (kind is None and bool(self._expansion(t)))
                        if plain and t not in unknown and not is_cjk(t):
                            unknown.append(t)
                        continue
                    weight = self._value_weights.get(kind, 1.0) if kind else 1.0
                    if weight > weights.get(t, 0.0):
                        weights[t] = weight
        for gloss in cjk_glosses(text):
            t = stem(gloss)
            if t in self._idf and weights.get(t, 0.0) < self.gloss_weight:
                weights[t] = self.gloss_weight
        for span in values:
            implied = _IMPLIED_TERMS.get(span.kind, ())
            if span.kind == "path" and _is_folder(text[span.start : span.end]):
                # "~/projects/demo/assets", "~/inbox/": no extension, most likely a folder.
                implied = _FOLDER_TERMS
            if span.kind == "path" and _DESTINATION.search(text[: span.start]):
                # "save it to ~/x.md", "into notes.txt": the path is where something goes.
                implied = (*implied, *_DESTINATION_TERMS)
            for t in implied:
                if t in self._idf and weights.get(t, 0.0) < self.implied_weight:
                    weights[t] = self.implied_weight
        if _QUESTION.match(text) and not any(span.kind in _IMPLIED_TERMS for span in values):
            for t in _QUESTION_TERMS:
                if t in self._idf and weights.get(t, 0.0) < self.implied_weight:
                    weights[t] = self.implied_weight
        out = [_QueryTerm(t, w, True) for t, w in weights.items()]
        unknown_mass = 0.0
        for t in unknown:
            # A word the catalog never uses may still have an everyday synonym it does use
            # ("save" for "write"), or relatives ("differ" for "difference"): then the request
            # is understood, through them.
            stands_for = self._expansion(t)
            if stands_for:
                # Shorthand means its words for certain ("PR" is a pull request), unlike a
                # synonym: read as one word spread over them, with no doubt added.
                share = 1.0 / len(stands_for)
                for w in stands_for:
                    if weights.get(w, 0.0) < share:
                        out.append(_QueryTerm(w, share, True))
                        weights[w] = share
                continue
            known = [syn for syn in VERB_SYNONYMS.get(t, ()) if syn in self._idf]
            if not known:
                known = self._relatives(t)
            if known:
                for syn in known:
                    if syn not in weights:
                        out.append(_QueryTerm(syn, self.synonym_weight, True))
                        weights[syn] = self.synonym_weight
                # Understood through a synonym, the word is only partly understood.
                unknown_mass += self.synonym_doubt * max(self._idf[syn] for syn in known)
            else:
                unknown_mass += self._unknown_idf
        if self.synonym_weight > 0:
            for q in list(out):
                if q.weight < 1.0:  # no synonyms of words in values
                    continue
                for syn in VERB_SYNONYMS.get(q.term, ()):
                    if syn not in weights and syn in self._idf:
                        out.append(_QueryTerm(syn, self.synonym_weight * q.weight, False))
                        weights[syn] = 0.0
        return out, unknown_mass

    def _expansion(self, word: str) -> tuple[str, ...]:
        """The words shorthand ``word`` stands for, when the catalog uses every one of them."""
        stands_for = ABBREVIATIONS.get(word, ())
        return stands_for if all(w in self._idf for w in stands_for) else ()

    def _relatives(self, word: str) -> list[str]:
        """The catalog's words that begin as ``word`` does (see :attr:`relative_prefix`)."""
        if len(word) < self.relative_prefix or not word.isalpha():
            return []
        return [
            t
            for t in self._by_prefix.get(word[: self.relative_prefix], ())
            # A stored index whose postings of a word were damaged no longer has the word.
            if _shared_start(t, word) >= self.relative_share * min(len(t), len(word))
            and t in self._idf
        ]

    def _named_server_tools(self, text: str) -> set[int]:
        """Tools of the servers ``text`` names after "use", "with", "on"... ("use git to",
        "on Wikipedia"): the user chose the product, so its tools come first."""
        docs: set[int] = set()
        for word in named_products(text):
            docs.update(self._tools_of_server_named(word))
        return docs

    def _tools_of_server_named(self, word: str) -> frozenset[int]:
        """The tools of the servers ``word`` names: a word of their names that few other
        servers' names share ("github", not "mcp" or "server") and that their own tools use
        at least as much as all others (see :attr:`server_name_purity`). Worked out when a
        query names a product, from counts kept as servers come and go."""
        servers = self._servers_of_word.get(word)
        if not servers or len(servers) > max(1.0, self.server_name_share * len(self._server_docs)):
            return frozenset()
        named = frozenset(d for srv in servers for d in self._server_docs.get(srv, ()))
        # A product's name is used mostly by its own tools; a word that other tools use
        # as much ("knowledge", "weather") is a subject, even when a server is named so.
        posting = self._postings.get(word)
        used_by = posting.docs if posting is not None else ()
        if len(named.intersection(used_by)) >= self.server_name_purity * len(used_by):
            return named
        return frozenset()

    def _mentions(self, text: str) -> set[int]:
        """Tools whose original name appears in the text as an identifier (``get_issue``)."""
        docs: set[int] = set()
        for word in text.split():
            if len(word) > MAX_MENTION_CHARS:
                continue
            for token in _IDENTIFIER.findall(word):
                docs.update(self._by_original.get(" ".join(terms(token)), ()))
        return docs

    def _score_text(
        self, text: str, candidates: Collection[int] | None, within: Sequence[int] | None = None
    ) -> _Scored | None:
        """Score the tools matching ``text``; None when no tool matches any of its terms.

        Rare terms are scored over their whole posting lists. Once the postings read reach
        :attr:`posting_budget`, the remaining (common) terms only add to the
        :attr:`rescore_depth` best candidates found so far: a tool matching nothing but
        common words of a long request cannot reach the first places anyway, and reading
        those long lists in full is what would make large catalogs slow. With ``within``,
        only those tools are scored (a step of a request is scored among the request's best
        candidates).
        """
        qterms, unknown_mass = self._query_terms(text)
        if not qterms:
            return None
        postings_of = self._postings
        idf = self._idf.frozen()
        k1 = self.k1
        k1_plus = k1 + 1.0
        # Each accumulator is a complex number: the real part sums the term evidence, the
        # imaginary part the IDF mass of the query terms matched (coverage). One dict update
        # per posting instead of two.
        acc: dict[int, complex] = {}
        name_found: dict[int, float] = {}
        known_mass = 0.0
        common: list[_QueryTerm] = []
        if within is None:
            qterms.sort(key=lambda q: len(postings_of[q.term]))
            read = 0
            for q in qterms:
                postings = postings_of[q.term]
                if read and read + len(postings) > self.posting_budget:
                    common.append(q)
                    continue
                read += len(postings)
                qw = q.weight
                term_idf = idf[q.term]
                mass = qw * term_idf if q.direct else 0.0
                known_mass += mass
                step = complex(0.0, mass)
                get = acc.get
                # A posting holds the pseudo term frequency; its evidence is saturated and
                # weighted by the IDF here, in the order a precomputed value would have been.
                if qw == 1.0:
                    for doc, tf in zip(postings.docs, postings.frequencies, strict=True):
                        acc[doc] = get(doc, 0j) + (term_idf * tf * k1_plus / (tf + k1) + step)
                else:
                    for doc, tf in zip(postings.docs, postings.frequencies, strict=True):
                        w = term_idf * tf * k1_plus / (tf + k1)
                        acc[doc] = get(doc, 0j) + (qw * w + step)
                if mass:
                    nget = name_found.get
                    for doc in self._name_postings.get(q.term, ()):
                        name_found[doc] = nget(doc, 0.0) + mass
            if candidates is not None:
                acc = {d: a for d, a in acc.items() if d in candidates}
            if not acc:
                return None
            if common:
                if len(acc) > self.rescore_depth:
                    head = heapq.nlargest(self.rescore_depth, acc, key=lambda d: acc[d].real)
                else:
                    head = list(acc)
        else:
            common = qterms
            head = [d for d in within if candidates is None or d in candidates]
        if common:
            names_of = self._names
            for q in common:
                postings = postings_of[q.term]
                qw = q.weight
                term_idf = idf[q.term]
                mass = qw * term_idf if q.direct else 0.0
                known_mass += mass
                step = complex(0.0, mass)
                for doc in head:
                    frequency = postings.get(doc)
                    if frequency is not None:
                        evidence = term_idf * frequency * k1_plus / (frequency + k1)
                        acc[doc] = acc.get(doc, 0j) + (qw * evidence + step)
                        if mass and q.term in names_of(doc):
                            name_found[doc] = name_found.get(doc, 0.0) + mass
        if not acc:
            return None

        inv_known = self.coverage_gain / known_mass if known_mass else 0.0
        names_of = self._names
        name_gain = self.name_gain
        final: dict[int, float] = {}
        for doc, a in acc.items():
            boost = 1.0 + a.imag * inv_known
            found = name_found.get(doc)
            if found:
                # The IDF mass of the tool's name, with the IDFs of now.
                name_mass = sum(idf[t] for t in names_of(doc))
                boost += name_gain * min(1.0, found / name_mass)
            final[doc] = a.real * boost
        for doc in self._mentions(text).intersection(final):
            final[doc] *= 1.0 + self.mention_gain
        best_doc = max(final, key=final.__getitem__)
        total_mass = known_mass + unknown_mass
        # Confidence is the coverage of the best match on words alone: phrases reorder
        # tools, they do not make a request better understood.
        confidence = acc[best_doc].imag / total_mass if total_mass else 0.0
        if self.phrase_weight:
            self._add_phrases(text, final)
        return _Scored(final=final, best=max(final.values()), confidence=confidence)

    def _add_phrases(self, text: str, final: dict[int, float]) -> None:
        """Add the evidence of the request's phrases to the tools in ``final`` that have
        them: each pair of words next to each other in the request's plain text (stopwords
        and values left out) that is a pair of neighbours in the tool's name or
        description adds its IDF times :attr:`phrase_weight`."""
        values = find_values(text)
        idf = self._idf
        words = [
            t
            for chunk, kind in _plain_chunks(text, values)
            if kind is None
            for t in terms(chunk, drop_stopwords=True)
            if t in idf
        ]
        weight = self.phrase_weight
        for pair in _adjacent_pairs(words):
            docs = self._phrases.get(pair)
            if docs is None:
                continue
            bonus = weight * _idf(self._n_docs, len(docs))
            if len(docs) <= len(final):
                for doc in docs:
                    if doc in final:
                        final[doc] += bonus
            else:
                in_phrase = set(docs)
                for doc in final:
                    if doc in in_phrase:
                        final[doc] += bonus

    def rank(
        self, query: str, candidates: Collection[int] | None = None, limit: int | None = None
    ) -> RankedTools:
        exact = [
            d
            for d in self._exact.get(normalize_identifier(query), ())
            if candidates is None or d in candidates
        ]
        clauses = split_clauses(query)
        texts = [query, *clauses] if len(clauses) > 1 else [query]
        embedded = self._embed(texts)
        lexical = self._score_text(query, candidates)
        whole = lexical
        if embedded is not None:
            row = embedded.similarity(0)
            pool = self._semantic_head(row, candidates)
            whole = self._fuse(
                lexical, row, pool, embedded.baseline(0), self._whole_semantic_weight(query)
            )
        whole = self._fit_values(whole, query)
        if len(texts) == 1:
            # In a request of several steps a named server is favoured in its own step only.
            whole = self._favour_named_servers(whole, query)
        if whole is None:
            return RankedTools(
                order=tuple((d, 1.0) for d in exact), confident=bool(exact), total=len(exact)
            )
        steps: list[_Scored] = []
        if len(texts) > 1:
            within = heapq.nlargest(self.step_depth, whole.final, key=whole.final.__getitem__)
            for i, clause in enumerate(clauses, start=1):
                step = self._score_text(clause, candidates, within)
                if embedded is not None:
                    # A step is judged among the request's best candidates, so its similarity
                    # is needed for those tools only.
                    row = embedded.similarity(i, within)
                    step = self._fuse(step, row, within, embedded.baseline(i))
                step = self._favour_named_servers(self._fit_values(step, clause), clause)
                if step is not None:
                    steps.append(step)
        confidence = max([s.confidence for s in steps] + [whole.confidence])

        floor = whole.best * self.relative_floor
        kept = [(d, s) for d, s in whole.final.items() if s >= floor]
        depth = None if limit is None else limit + len(exact) + self.diversify_pool
        if depth is None or depth >= len(kept):
            ranked = sorted(kept, key=_by_score)
        else:
            ranked = heapq.nsmallest(depth, kept, key=_by_score)
        served = [s for s in steps if s.confidence >= self.min_confidence]
        if self.diversity > 0 and len(served) >= self.min_steps:
            ranked = self._diversify(ranked, whole, served)
        if exact:
            first = set(exact)
            ranked = [(d, whole.final.get(d, whole.best)) for d in exact] + [
                (d, s) for d, s in ranked if d not in first
            ]
        total = len(kept) + sum(1 for d in exact if d not in whole.final or whole.final[d] < floor)
        order = tuple(ranked if limit is None else ranked[:limit])
        confident = bool(exact) or confidence >= self.min_confidence
        return RankedTools(
            order=order, confident=confident, total=total, servers=self._servers_of(kept)
        )

    def _servers_of(self, results: Sequence[tuple[int, float]]) -> tuple[ServerMatch, ...]:
        """The servers of ``results`` whose best tool scores at least
        :attr:`server_match_share` of the best result, best first, at most
        :attr:`server_matches`."""
        if not results:
            return ()
        counts: Counter[str] = Counter()
        best: dict[str, float] = {}
        server_of = self._server_of
        for doc, score in results:
            server = server_of[doc]
            if server is None:
                continue  # not a live document; results never hold one
            counts[server] += 1
            if score > best.get(server, 0.0):
                best[server] = score
        floor = max(best.values()) * self.server_match_share
        strong = sorted((s for s in best if best[s] >= floor), key=lambda s: (-best[s], s))
        return tuple(
            ServerMatch(server=s, tools=counts[s], best_score=best[s])
            for s in strong[: self.server_matches]
        )

    def _favour_named_servers(self, scored: _Scored | None, text: str) -> _Scored | None:
        """Lift the tools of a server that ``text`` names after "use", "with", "on"... ("use
        git to", "on Wikipedia"): the user chose the product. The lift is enough to put that
        server's best match first, at least 1 + :attr:`named_server_gain` and at most
        :attr:`named_server_cap`, so a server named in passing does not bury the rest."""
        if scored is None or not self.named_server_gain:
            return scored
        named = self._named_server_tools(text).intersection(scored.final)
        if not named:
            return scored
        lift = scored.best / max(scored.final[d] for d in named) * 1.01
        gain = min(max(1.0 + self.named_server_gain, lift), self.named_server_cap)
        final = {d: s * gain if d in named else s for d, s in scored.final.items()}
        return _Scored(final=final, best=max(final.values()), confidence=scored.confidence)

    def _fit_values(self, scored: _Scored | None, text: str) -> _Scored | None:
        """Favour the tools that take the kinds of value ``text`` gives (a path, a URL, an
        e-mail address): asked to "save the report to ~/q3.md", a tool with a ``path``
        parameter can do it and one named ``save_as_pdf`` without one probably cannot."""
        if scored is None or not self.value_fit_gain:
            return scored
        kinds = {span.kind for span in find_values(text)}
        fitting = set().union(*(self._accepts.get(k, ()) for k in kinds)) if kinds else set()
        fitting.intersection_update(scored.final)
        if not fitting:
            return scored
        gain = 1.0 + self.value_fit_gain
        final = {d: s * gain if d in fitting else s for d, s in scored.final.items()}
        return _Scored(final=final, best=max(final.values()), confidence=scored.confidence)

    # -- the semantic signal --------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> EmbeddedTexts | None:
        """The texts embedded for similarity to the tools; None without the semantic signal."""
        if self._vectors is None:
            return None
        try:
            return self._vectors.embed([_semantic_text(t) for t in texts])
        except (OSError, ValueError, RuntimeError) as exc:
            # A model that cannot be read (a damaged install) leaves search lexical.
            logger.warning("semantic search is off for this query: %s", exc)
            return None

    def _semantic_head(self, row: FloatMatrix, candidates: Collection[int] | None) -> list[int]:
        """The :attr:`semantic_depth` tools most similar to a text (among ``candidates``)."""
        import numpy as np

        depth = self.semantic_depth
        if candidates is not None:
            allowed = np.fromiter(candidates, dtype=np.int64, count=len(candidates))
            if len(allowed) <= depth:
                return [int(d) for d in allowed]
            top = np.argpartition(-row[allowed], depth)[:depth]
            return [int(d) for d in allowed[top]]
        if len(row) <= depth:
            return list(range(len(row)))
        return [int(d) for d in np.argpartition(-row, depth)[:depth]]

    def _whole_semantic_weight(self, text: str) -> float:
        """The semantic share for a whole request: :attr:`semantic_weight` up to
        :attr:`semantic_full_words` words, then falling with the square root of its
        length. A text's vector is the mean of its tokens' vectors, so the vector of a
        paragraph drifts toward the vector of any text and says less about which tool is
        wanted; the lexical evidence of a long request does not fade that way."""
        words = len(terms(text, drop_stopwords=True))
        if words <= self.semantic_full_words:
            return self.semantic_weight
        return self.semantic_weight * math.sqrt(self.semantic_full_words / words)

    def _fuse(
        self,
        lexical: _Scored | None,
        row: FloatMatrix,
        pool: Iterable[int],
        baseline: float,
        weight: float | None = None,
    ) -> _Scored | None:
        """Lexical and semantic scores of one text, mixed per tool.

        Each signal is divided by its best value among the tools considered, so both run
        from 0 to 1; semantic similarity is measured from ``baseline``, the catalog's mean
        similarity to the text (a tool merely as similar as an average tool gets nothing).
        ``row`` holds the similarity of every tool in ``pool`` and in ``lexical``. The mix is
        ``(1 - w) * lexical + w * semantic`` with ``w`` = ``weight``, by default
        :attr:`semantic_weight`. Confidence stays the lexical one: similarity has no absolute
        scale that says "nothing fits".
        """
        import numpy as np

        semantic_weight = self.semantic_weight if weight is None else weight
        pool_docs = np.fromiter(pool, dtype=np.int64)
        if lexical is not None and lexical.final:
            lexical_docs = np.fromiter(lexical.final, dtype=np.int64, count=len(lexical.final))
            lexical_scores = np.fromiter(
                lexical.final.values(), dtype=np.float64, count=len(lexical.final)
            )
            if len(lexical_docs) > self.fusion_depth:
                # Past this depth a tool's lexical share cannot lift it to the first places;
                # the semantic head is in the pool anyway.
                head = np.argpartition(-lexical_scores, self.fusion_depth)[: self.fusion_depth]
                lexical_docs, lexical_scores = lexical_docs[head], lexical_scores[head]
            extra = pool_docs[~np.isin(pool_docs, lexical_docs)]
            docs = np.concatenate([lexical_docs, extra])
            lexical_part = np.concatenate([lexical_scores, np.zeros(len(extra))])
            lexical_part *= (1.0 - semantic_weight) / lexical.best
        else:
            docs = np.unique(pool_docs)
            lexical_part = np.zeros(len(docs))
        if not len(docs):
            return lexical
        sims = row[docs].astype(np.float64)
        spread = float(sims.max()) - baseline
        if spread > 0:
            semantic_part = np.maximum(sims - baseline, 0.0) * (semantic_weight / spread)
            fused = lexical_part + semantic_part
        else:
            fused = lexical_part
        keep = fused > 0
        if not keep.any():
            return lexical
        final = dict(zip(docs[keep].tolist(), fused[keep].tolist(), strict=True))
        return _Scored(
            final=final,
            best=float(fused[keep].max()),
            confidence=lexical.confidence if lexical is not None else 0.0,
        )

    def _diversify(
        self, ranked: list[tuple[int, float]], whole: _Scored, steps: Sequence[_Scored]
    ) -> list[tuple[int, float]]:
        """Refill places 2 to ``diversify_top`` so that every step of the request is served.

        The first place keeps the best tool for the whole request. Each following place goes
        to the candidate with the best mix of its score for the whole request and its scores
        for the steps not yet served; a picked tool serves a step in proportion to its score
        there. Scores are divided by the best score of their request or step, and a step
        counts in proportion to its confidence. Later places keep the plain score order.
        """
        pool: dict[int, None] = dict.fromkeys(d for d, _ in ranked[: self.diversify_pool])
        for step in steps:
            top = heapq.nsmallest(self.diversify_top, step.final.items(), key=_by_score)
            pool.update(dict.fromkeys(d for d, _ in top if d in whole.final))
        total_confidence = sum(s.confidence for s in steps)
        step_weight = [self.diversity * s.confidence / total_confidence for s in steps]
        unserved = [1.0] * len(steps)
        picked = [ranked[0][0]]
        remaining = [d for d in pool if d != picked[0]]
        while True:
            for i, step in enumerate(steps):
                share = step.final.get(picked[-1], 0.0) / step.best
                unserved[i] *= 1.0 - share**self.served_sharpness
            if len(picked) >= self.diversify_top or not remaining:
                break
            best_doc, best_gain = remaining[0], -1.0
            for d in remaining:
                gain = (1.0 - self.diversity) * whole.final[d] / whole.best
                for i, step in enumerate(steps):
                    s = step.final.get(d)
                    if s:
                        gain += step_weight[i] * unserved[i] * s / step.best
                if gain > best_gain:
                    best_doc, best_gain = d, gain
            picked.append(best_doc)
            remaining.remove(best_doc)
        head = set(picked)
        return [(d, whole.final[d]) for d in picked] + [(d, s) for d, s in ranked if d not in head]


def _by_score(item: tuple[int, float]) -> tuple[float, int]:
    # Best first; ties keep catalog order so that answers are stable.
    return (-item[1], item[0])


def _adjacent_pairs(words: Sequence[str]) -> set[tuple[str, str]]:
    """The pairs of different words that stand next to each other in ``words``."""
    return {(a, b) for a, b in itertools.pairwise(words) if a != b}


def _by_server(tools: Sequence[ToolInfo]) -> dict[str, list[ToolInfo]]:
    """``tools`` by server, servers and tools in catalog order."""
    groups: dict[str, list[ToolInfo]] = {}
    for tool in tools:
        groups.setdefault(tool.server, []).append(tool)
    return groups


def _positions_by_server(tools: Sequence[ToolInfo]) -> dict[str, list[int]]:
    """The positions in ``tools`` of each server's tools, servers in catalog order."""
    positions: dict[str, list[int]] = {}
    for n, tool in enumerate(tools):
        positions.setdefault(tool.server, []).append(n)
    return positions


def _posting_bytes(posting: _Posting) -> bytes:
    return posting.docs.tobytes() + posting.frequencies.tobytes()


def _phrase_key(pair: tuple[str, str]) -> str:
    return f"{pair[0]}\0{pair[1]}"


def _differences(
    stored: Mapping[str, str], prints: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    """The servers whose tools differ from the stored index's (``stored``: its servers'
    fingerprints; changed or new, in catalog order), and the stored servers the catalog no
    longer has."""
    changed = [s for s, p in prints.items() if stored.get(s) != p]
    return changed, [s for s in stored if s not in prints]


def _servers_bytes(servers: Iterable[str]) -> bytes:
    return json.dumps(sorted(servers), ensure_ascii=False).encode()


def _servers_set(data: bytes) -> set[str]:
    servers = json.loads(data)
    if not isinstance(servers, list) or not all(isinstance(s, str) for s in servers):
        raise ValueError("a list of servers of the wrong shape")
    return set(servers)


def _idf(n_docs: int, doc_freq: int) -> float:
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


# Tables of the stored index (see _search_store).
(
    _POSTINGS,
    _NAME_POSTINGS,
    _PHRASES,
    _EXACT,
    _BY_ORIGINAL,
    _BY_PREFIX,
    _ACCEPTS,
    _SERVERS_OF_WORD,
) = range(8)


@lru_cache(maxsize=1)
def _index_parameters() -> str:
    """What a stored index must have been built with to be used: the code that tokenises
    and indexes (a hash of its source files) and the field weights."""
    digest = hashlib.blake2b(digest_size=16)
    here = Path(__file__).parent
    for name in ("_search_rankings.py", "_search_text.py"):
        try:
            digest.update((here / name).read_bytes())
        except OSError:
            digest.update(name.encode())
    digest.update(repr(sorted(_FIELDS.items())).encode())
    return digest.hexdigest()


class _Posting:
    """The documents using one term, in increasing id order (new documents always get the
    largest id), each with its pseudo term frequency: two flat arrays, a tenth of the memory
    of a dict of boxed numbers, and as fast to read in order."""

    __slots__ = ("docs", "frequencies")

    def __init__(self) -> None:
        self.docs = array("i")
        self.frequencies = array("d")

    def __len__(self) -> int:
        return len(self.docs)

    def add(self, doc: int, frequency: float) -> None:
        self.docs.append(doc)
        self.frequencies.append(frequency)

    def get(self, doc: int) -> float | None:
        at = bisect.bisect_left(self.docs, doc)
        if at < len(self.docs) and self.docs[at] == doc:
            return self.frequencies[at]
        return None

    @classmethod
    def from_bytes(cls, docs: bytes, frequencies: bytes) -> _Posting:
        posting = cls()
        posting.docs.frombytes(docs)
        posting.frequencies.frombytes(frequencies)
        return posting

    def remove(self, doc: int) -> None:
        at = bisect.bisect_left(self.docs, doc)
        if at == len(self.docs) or self.docs[at] != doc:
            raise KeyError(doc)
        del self.docs[at]
        del self.frequencies[at]


class _IdfTable(Mapping[str, float]):
    """Each term's IDF, from its document frequency (the size of its posting list) and the
    number of documents, both as they are now: kept as counts, an update changes no IDF."""

    __slots__ = ("_count", "_postings")

    def __init__(self, postings: Mapping[str, _Posting], count: Callable[[], int]):
        self._postings = postings
        self._count = count

    def __getitem__(self, term: str) -> float:
        return _idf(self._count(), len(self._postings[term]))

    def __contains__(self, term: object) -> bool:
        return term in self._postings

    def __iter__(self) -> Iterator[str]:
        return iter(self._postings)

    def __len__(self) -> int:
        return len(self._postings)

    def frozen(self) -> _IdfMemo:
        """The IDFs for one query, each worked out once."""
        return _IdfMemo(self._postings, self._count())


class _LiveDocuments:
    """How many documents a ranking holds now, for its own IDF table.

    The ranking holds the table, so the table reaches back through a weak reference: a
    strong one (a closure over the ranking) made a reference cycle, and a large index is
    moved out of the cyclic collector's view (``gc.freeze``, see ``engine/_catalog_state``),
    so a replaced one was never freed. Without the cycle, reference counting frees it with
    its last user.
    """

    __slots__ = ("_ranking",)

    def __init__(self, ranking: FieldRanking) -> None:
        self._ranking = weakref.ref(ranking)

    def __call__(self) -> int:
        ranking = self._ranking()
        # The table is read only through its ranking, which is alive while it does.
        assert ranking is not None, "an IDF table read after its ranking was freed"
        return ranking._n_docs


class _IdfMemo(dict[str, float]):
    """IDFs worked out on first read (see :meth:`_IdfTable.frozen`)."""

    def __init__(self, postings: Mapping[str, _Posting], n_docs: int) -> None:
        super().__init__()
        self._postings = postings
        self._n_docs = n_docs

    def __missing__(self, term: str) -> float:
        value = self[term] = _idf(self._n_docs, len(self._postings[term]))
        return value


@dataclass(frozen=True, slots=True)
class _DocTerms:
    """What one tool adds to the lexical index. Worked out again from the same tool (and its
    server's other tools) to take it out, so the index keeps none of it per tool."""

    server: str
    server_words: list[str]
    pseudo_tf: dict[str, float]
    names: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    accepts: tuple[str, ...]
    exact_keys: tuple[str, ...]
    original_key: str


@dataclass(frozen=True, slots=True)
class PreparedServer:
    """One server's relisting, worked out ahead by :meth:`FieldRanking.prepare` (no index
    changed yet): the documents to take out and to add, and the new tools' vectors."""

    server: str
    removed: Sequence[_DocTerms]
    added: Sequence[_DocTerms]
    vectors: FloatMatrix | None

    @property
    def documents_touched(self) -> int:
        """How many documents the update takes out and adds."""
        return len(self.removed) + len(self.added)


def _remove_from(index: dict[Any, Any], key: Any, item: Any) -> None:
    """Take ``item`` out of the collection ``index[key]``, and the key once it is empty."""
    items = index[key]
    if type(items) is array:
        # Document ids, in increasing order: found by bisection. ``array.remove`` compares
        # id after id as Python objects, 1.7 ms for one id near the end of a name word's
        # 100,000 (a relisting's apply, on the event loop, removes each of its tools' ids).
        at = bisect.bisect_left(items, item)
        if at < len(items) and items[at] == item:
            del items[at]
        else:  # ids out of order (a damaged stored entry): looked for one by one
            items.remove(item)
    else:
        items.remove(item)
    if not items:
        del index[key]


@dataclass(frozen=True, slots=True)
class _Scored:
    """Final scores of the tools matching a request (or one step of it)."""

    final: dict[int, float]
    best: float
    confidence: float  # share of the request's words the best tool covers


MAX_MENTION_CHARS = 256
"""Longest word looked at for a tool name (names have at most 128 characters): on a long run of
letters the identifier pattern backtracks in quadratic time, so a pasted blob in a query would
stall the search. An identifier never spans whitespace, so matching word by word finds the same
names."""

_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_\-.][A-Za-z0-9]+)+|[a-z]+[A-Z]\w*")


def _server_context(field_terms: Sequence[dict[str, list[str]]], limit: int) -> list[str]:
    """The (at most ``limit``) words that most of a server's tools (``field_terms``) use, if
    two or more do: the server's domain, given to each of its tools.

    A query often describes the domain ("patient records", "my wallet") rather than the
    tool, and the tool's own text may not repeat it while its siblings do.
    """
    if len(field_terms) < 2:
        return []
    seen_in: Counter[str] = Counter()
    for ft in field_terms:
        seen_in.update(list(dict.fromkeys(ft["name"] + ft["description"])))
    # Sorted by share, then alphabetically, so that the choice never depends on hashing.
    ranked = sorted(seen_in.items(), key=lambda tn: (-tn[1], tn[0]))
    return [t for t, n in ranked[:limit] if n >= 2]


_ParameterWords = tuple[list[str], list[str], list[str]]
"""A tool's parameter names as terms (one-letter ones left out), the words of those names,
and the terms of the parameters' descriptions."""
_NO_PARAMETERS: _ParameterWords = ([], [], [])


class _BuildWords:
    """What an index build remembers of the words of a catalog's texts: each distinct text's
    words (catalogs repeat texts: shared parameter descriptions, one server configured
    twice), each distinct description's with its glosses, each distinct set of parameter
    names' words, and each server's words and context. Every tool sharing a text gets the
    same list, which :meth:`FieldRanking._each_doc_terms` relies on."""

    __slots__ = ("descriptions", "parameter_names", "servers", "texts")

    def __init__(self) -> None:
        self.texts: dict[str, list[str]] = {}
        self.descriptions: dict[str, list[str]] = {}
        self.parameter_names: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
        self.servers: dict[str, tuple[list[str], list[str]]] = {}

    def parameters_of(self, tool: ToolInfo) -> _ParameterWords:
        """``tool``'s parameter words, from its input schema (nested objects and array items
        included)."""
        names: list[str] = []
        texts: list[str] = []
        _schema_strings(tool.input_schema, names, texts, 0)
        key = tuple(names)
        found = self.parameter_names.get(key)
        if found is None:
            found = self.parameter_names[key] = (
                # One-letter parameter names (``a``, ``b``, ``x``, ``n``) say nothing about
                # the tool, and a request's one-letter word ("plan b", "an x-ray") must not
                # find them.
                [w for w in self.of(" ".join(names)) if len(w) > 1 or is_cjk(w)],
                [stem(w) for n in names for w in split_words(n)],
            )
        return (*found, self.of("\n".join(texts)) if texts else [])

    def of(self, text: str) -> list[str]:
        found = self.texts.get(text)
        if found is None:
            found = self.texts[text] = list(document_terms(text))
        return found

    def of_description(self, text: str) -> list[str]:
        found = self.descriptions.get(text)
        if found is None:
            found = self.of(text)
            glosses = cjk_glosses(text)
            if glosses:
                # A Chinese description also answers to the English words of its common
                # words.
                found = found + [stem(g) for g in glosses]
            self.descriptions[text] = found
        return found


def _tool_fields(
    tool: ToolInfo, server_words: list[str], words: _BuildWords, parameters: _ParameterWords
) -> dict[str, list[str]]:
    name_seq = terms(tool.original_name)
    name_words = [w for w in name_seq if w not in QUERY_STOPWORDS]
    if tool.is_resource:
        # A resource's tool name ("read_<resource>") says what calling it does.
        known = set(server_words).union(name_words)
        extra = [w for w in terms(tool.name, drop_stopwords=True) if w not in known]
        name_words.extend(dict.fromkeys(extra))
    # Otherwise the prefixed name only adds the server (its own field) and, for servers with
    # unusual characters, escape codes that mean nothing.
    param_names, param_words, param_text = parameters
    return {
        "name": name_words,
        "server": server_words,
        "description": words.of_description(" ".join((tool.description, *tool.keywords))),
        "param_names": param_names,
        "param_words": param_words,
        "param_text": param_text,
        "name_seq": name_seq,
        "server_context": [],
    }


def _schema_strings(
    schema: Mapping[str, Any], names: list[str], texts: list[str], depth: int
) -> None:
    """Collect parameter names and descriptions, nested objects and array items included."""
    props = schema.get("properties")
    if not isinstance(props, Mapping) or depth > 3:
        return
    for key, sub in props.items():
        names.append(str(key))
        if isinstance(sub, Mapping):
            desc = sub.get("description")
            if isinstance(desc, str):
                texts.append(desc)
            inner = sub.get("items") if sub.get("type") == "array" else sub
            if isinstance(inner, Mapping):
                _schema_strings(inner, names, texts, depth + 1)


def _semantic_text(text: str) -> str:
    """A request as the model should read it: each value replaced by what it is ("save the
    report to ~/q3.md" reads "save the report to a file"), because the words of a path, a
    URL or a quoted title are data, not what the request is about."""
    values = find_values(text)
    if not values:
        return text
    parts = [
        chunk if kind is None else _VALUE_NOUNS[kind] for chunk, kind in _plain_chunks(text, values)
    ]
    return " ".join(" ".join(parts).split()) or text


_VALUE_NOUNS: Mapping[str, str] = MappingProxyType(
    {
        "quoted": " ",
        "path": " a file ",
        "url": " a web page ",
        "email": " an email address ",
        "date": " a date ",
        "address": " an address ",
        "hash": " an id ",
    }
)


class HybridRanking(FieldRanking):
    """Our ranking with the semantic signal: :class:`FieldRanking` fused with the similarity
    of a static embedding model, per request and per step (see :meth:`FieldRanking._fuse`).

    Without a model (the ``semantic`` extra not installed) it is the lexical ranking.
    """

    def __init__(
        self,
        tools: Sequence[ToolInfo] | KeptCatalog,
        *,
        embedder: TextEmbedder | None = None,
        vector_cache: Path | None = None,
        store: Path | None = None,
        reopen_stored: bool = False,
    ) -> None:
        self._model = embedder if embedder is not None else load_default_embedder()
        self._vector_cache = vector_cache
        super().__init__(tools, store=store, reopen_stored=reopen_stored)

    def _tool_vectors(
        self, tools: Sequence[ToolInfo | None], texts: str | None = None
    ) -> ToolVectors | None:
        live = [t for t in tools if t is not None]
        # An empty catalog has nothing to compare with; it stays lexical.
        if self._model is None or not live:
            return None
        if len(live) == len(tools):
            return ToolVectors(live, self._model, cache_path=self._vector_cache, texts=texts)
        rows = [doc for doc, t in enumerate(tools) if t is not None]
        return ToolVectors(
            live, self._model, cache_path=self._vector_cache, rows=rows, n_rows=len(tools)
        )

    def _kept_vectors(self, catalog: str | None) -> ToolVectors | None:
        live = [doc for doc, server in enumerate(self._server_of) if server is not None]
        if self._model is None or not live:
            return None  # as a build makes it: lexical
        if catalog is None:
            raise LookupError("no tool vectors were kept for the catalog")
        tools = _ToolsNotRead(len(live))
        if len(live) == len(self._server_of):
            return ToolVectors(tools, self._model, cache_path=self._vector_cache, catalog=catalog)
        return ToolVectors(
            tools,
            self._model,
            cache_path=self._vector_cache,
            rows=live,
            n_rows=len(self._server_of),
            catalog=catalog,
        )

    @property
    def semantic(self) -> bool:
        """Whether the semantic signal is in use."""
        return self._vectors is not None


class _ToolsNotRead(Sequence[ToolInfo]):
    """The tools of a kept catalog, counted and never read: the vectors the file holds for
    that catalog are taken as they are (see :class:`ToolVectors`'s ``catalog``)."""

    def __init__(self, count: int) -> None:
        self._count = count

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> ToolInfo: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[ToolInfo]: ...

    def __getitem__(self, index: int | slice) -> ToolInfo | Sequence[ToolInfo]:
        raise LookupError("the tools of a kept catalog are not read")


RANKINGS: Mapping[str, RankingFactory] = MappingProxyType(
    {
        "lexical": FieldRanking,
        "hybrid": HybridRanking,
        "seed004": Seed004Ranking,
        "bm25": Bm25Ranking,
    }
)
"""The rankings a :class:`~._search.SearchIndex` can use, by name."""


def _shared_start(a: str, b: str) -> int:
    """How many letters ``a`` and ``b`` have in common from their start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
