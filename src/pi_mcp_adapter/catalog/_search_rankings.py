"""The ranking functions behind tool search, selectable by name for side-by-side measurement.

- ``default``: our ranking (:class:`FieldRanking`), described in ``docs/search.md``;
- ``seed004``: the per-term 10/5/4/3 scoring of the ToolSearch design (:class:`Seed004Ranking`);
- ``bm25``: plain Okapi BM25 over name and description (:class:`Bm25Ranking`).

A ranking is built once from the catalog (all precomputation happens there) and then answers
queries with tool positions in that catalog, best first. Rankings know nothing about paging,
regular expressions or ``select:``; :class:`~._search.SearchIndex` adds those.
"""

from __future__ import annotations

import heapq
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from ._metadata import ToolInfo
from ._search_text import (
    QUERY_STOPWORDS,
    VERB_SYNONYMS,
    normalize_identifier,
    split_clauses,
    terms,
)

__all__ = [
    "RANKINGS",
    "Bm25Ranking",
    "FieldRanking",
    "RankedTools",
    "Ranking",
    "RankingFactory",
    "Seed004Ranking",
]


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


class Ranking(Protocol):
    """Ranks one catalog. Built once per catalog; ``rank`` must not mutate shared state."""

    def rank(
        self, query: str, candidates: Collection[int] | None = None, limit: int | None = None
    ) -> RankedTools:
        """Rank the tools for ``query``: only ``candidates`` positions when given, and only
        the first ``limit`` results in ``order`` (all when None)."""
        ...


RankingFactory = Callable[[Sequence[ToolInfo]], Ranking]


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


# Text in quotes or backticks is usually an argument value (a title, a path, a message), not
# a description of the wanted action, so its words count for less.
_QUOTED = re.compile(
    r"```.*?```|`[^`\n]+`|\"[^\"\n]+\"|“[^”\n]+”|‘[^’\n]+’|(?<!\w)'[^'\n]+'(?!\w)", re.DOTALL
)


class FieldRanking:
    """Our ranking: BM25F over tool fields, plus coverage, name evidence, diversity, abstention.

    Build time: each tool's name, server, description, parameter names, parameter
    descriptions and server context (words shared by the server's other tools) are split at
    identifier boundaries and lightly stemmed. A term's evidence in a tool is a weighted,
    length-normalised sum over the fields, saturated once (BM25F), times the term's IDF; that
    number is precomputed into the inverted index.

    Query time:

    - terms: stopwords and numbers are dropped; words in quotes or backticks (usually
      argument values) weigh less; common verbs bring their everyday synonyms at half weight;
    - score: the sum of the terms' precomputed evidence (OR semantics), multiplied by
      ``1 + coverage + name evidence (+ mention)``, where coverage is the IDF-weighted share
      of the query the tool matches, name evidence the share of the tool's own name that the
      query mentions, and a mention an identifier in the query equal to the tool's name;
    - exact names: a query that is a tool's name (prefixed or original, ignoring case,
      separators and camelCase) puts that tool first;
    - steps: a request made of several steps (split at sentence ends, "then", "finally", or a
      comma before a verb) is also scored step by step, and places 2 to 5 are refilled so
      that every step is represented (greedy selection in the manner of xQuAD);
    - confidence: words the catalog never uses count against the best tool's coverage; when
      neither the whole query nor any step is covered well enough, the answer is "no
      confident match" and nothing is returned.
    """

    # BM25 saturation: how quickly repeated evidence for one term stops adding up.
    k1 = 1.2
    # Query term weights, relative to a plain word of the request.
    synonym_weight = 0.5
    quoted_weight = 0.3
    # Multipliers of the base score.
    coverage_gain = 1.0
    name_gain = 0.3
    mention_gain = 1.0
    # Multi-step requests: how strongly unserved steps pull (0 = plain score order), how
    # many places are refilled, and from how many candidates per step.
    diversity = 0.85
    diversify_top = 5
    diversify_pool = 20
    min_steps = 3
    step_depth = 200
    # A word the catalog never uses counts this much of a word found in one tool, against
    # the coverage that decides confidence.
    unknown_word_weight = 0.6
    min_confidence = 0.25
    # Most-shared words of a server given to each of its tools (see _add_server_context).
    server_context_words = 24
    # Query cost bounds (see _score_text): postings read in full, then candidates rescored.
    posting_budget = 1500
    rescore_depth = 400
    # Results scoring below this share of the best are not returned.
    relative_floor = 0.1

    def __init__(self, tools: Sequence[ToolInfo]) -> None:
        n_docs = len(tools)
        server_words: dict[str, list[str]] = {}
        for tool in tools:
            if tool.server not in server_words:
                server_words[tool.server] = terms(tool.server, drop_stopwords=True)
        # Catalogs repeat texts (shared parameter descriptions, one server configured twice);
        # each distinct text is tokenised once per build.
        memo: dict[str, list[str]] = {}
        field_terms = [_tool_fields(t, server_words[t.server], memo) for t in tools]
        _add_server_context(tools, field_terms, self.server_context_words)
        avg_len = {
            f: max(1.0, sum(len(ft[f]) for ft in field_terms) / max(1, n_docs)) for f in _FIELDS
        }
        field_specs = [(f, s.weight, s.length_norm, avg_len[f]) for f, s in _FIELDS.items()]
        # Pass 1: each tool's weighted, length-normalised term frequencies (BM25F).
        doc_tf: list[dict[str, float]] = []
        doc_freq: Counter[str] = Counter()
        for ft in field_terms:
            pseudo_tf: dict[str, float] = {}
            get = pseudo_tf.get
            for fname, weight, length_norm, avg in field_specs:
                words = ft[fname]
                if words:
                    scale = weight / (1.0 - length_norm + length_norm * len(words) / avg)
                    for t in words:
                        pseudo_tf[t] = get(t, 0.0) + scale
            doc_tf.append(pseudo_tf)
            doc_freq.update(pseudo_tf.keys())
        idf = {t: _idf(n_docs, df) for t, df in doc_freq.items()}
        self._idf = idf
        self._unknown_idf = _idf(n_docs, 1) * self.unknown_word_weight
        # Pass 2: the inverted index holds each term's final, saturated evidence per tool.
        k1 = self.k1
        postings: dict[str, dict[int, float]] = defaultdict(dict)
        name_postings: dict[str, list[int]] = defaultdict(list)
        name_mass: list[float] = []
        for doc, pseudo_tf in enumerate(doc_tf):
            for t, tf in pseudo_tf.items():
                postings[t][doc] = idf[t] * tf * (k1 + 1.0) / (tf + k1)
            name_set = dict.fromkeys(field_terms[doc]["name"])
            for t in name_set:
                name_postings[t].append(doc)
            name_mass.append(sum(idf[t] for t in name_set))
        self._postings = dict(postings)
        self._name_postings = dict(name_postings)
        self._name_mass = name_mass
        self._name_sets = [frozenset(ft["name"]) for ft in field_terms]
        self._exact: dict[str, list[int]] = defaultdict(list)
        self._by_original: dict[str, list[int]] = defaultdict(list)
        for doc, tool in enumerate(tools):
            for key in {normalize_identifier(tool.name), normalize_identifier(tool.original_name)}:
                self._exact[key].append(doc)
            self._by_original[" ".join(field_terms[doc]["name_seq"])].append(doc)

    # -- query side -----------------------------------------------------------------------

    def _query_terms(self, text: str) -> tuple[list[_QueryTerm], float]:
        """The weighted terms of ``text`` found in the catalog, and the mass of those not."""
        plain = _QUOTED.sub(" ", text)
        weights: dict[str, float] = {}
        unknown_mass = 0.0
        for t in terms(plain, drop_stopwords=True):
            if t in weights or t.isdigit():
                continue
            if t in self._idf:
                weights[t] = 1.0
            else:
                weights[t] = 0.0
                unknown_mass += self._unknown_idf
        for match in _QUOTED.finditer(text):
            for t in terms(match.group(0), drop_stopwords=True):
                if t not in weights and t in self._idf and not t.isdigit():
                    weights[t] = self.quoted_weight
        out = [_QueryTerm(t, w, True) for t, w in weights.items() if w > 0]
        if self.synonym_weight > 0:
            for q in list(out):
                for syn in VERB_SYNONYMS.get(q.term, ()):
                    if syn not in weights and syn in self._idf:
                        out.append(_QueryTerm(syn, self.synonym_weight * q.weight, False))
                        weights[syn] = 0.0
        return out, unknown_mass

    def _mentions(self, text: str) -> set[int]:
        """Tools whose original name appears in the text as an identifier (``get_issue``)."""
        docs: set[int] = set()
        for token in _IDENTIFIER.findall(text):
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
        idf = self._idf
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
                mass = qw * idf[q.term] if q.direct else 0.0
                known_mass += mass
                step = complex(0.0, mass)
                get = acc.get
                if qw == 1.0:
                    for doc, w in postings.items():
                        acc[doc] = get(doc, 0j) + (w + step)
                else:
                    for doc, w in postings.items():
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
            name_sets = self._name_sets
            for q in common:
                postings = postings_of[q.term]
                qw = q.weight
                mass = qw * idf[q.term] if q.direct else 0.0
                known_mass += mass
                step = complex(0.0, mass)
                for doc in head:
                    evidence = postings.get(doc)
                    if evidence is not None:
                        acc[doc] = acc.get(doc, 0j) + (qw * evidence + step)
                        if mass and q.term in name_sets[doc]:
                            name_found[doc] = name_found.get(doc, 0.0) + mass
        if not acc:
            return None

        inv_known = self.coverage_gain / known_mass if known_mass else 0.0
        name_mass = self._name_mass
        name_gain = self.name_gain
        final: dict[int, float] = {}
        for doc, a in acc.items():
            boost = 1.0 + a.imag * inv_known
            found = name_found.get(doc)
            if found:
                boost += name_gain * min(1.0, found / name_mass[doc])
            final[doc] = a.real * boost
        for doc in self._mentions(text).intersection(final):
            final[doc] *= 1.0 + self.mention_gain
        best_doc = max(final, key=final.__getitem__)
        total_mass = known_mass + unknown_mass
        return _Scored(
            final=final,
            best=final[best_doc],
            confidence=acc[best_doc].imag / total_mass if total_mass else 0.0,
        )

    def rank(
        self, query: str, candidates: Collection[int] | None = None, limit: int | None = None
    ) -> RankedTools:
        exact = [
            d
            for d in self._exact.get(normalize_identifier(query), ())
            if candidates is None or d in candidates
        ]
        whole = self._score_text(query, candidates)
        steps: list[_Scored] = []
        if whole is not None:
            clauses = split_clauses(query)
            if len(clauses) > 1:
                within = heapq.nlargest(self.step_depth, whole.final, key=whole.final.__getitem__)
                scored = (self._score_text(c, candidates, within) for c in clauses)
                steps = [s for s in scored if s is not None]
        confidence = max([s.confidence for s in steps] + [whole.confidence if whole else 0.0])
        if whole is None or (not exact and confidence < self.min_confidence):
            return RankedTools(
                order=tuple((d, 1.0) for d in exact), confident=bool(exact), total=len(exact)
            )

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
        return RankedTools(order=order, confident=True, total=total)

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
                unserved[i] *= 1.0 - step.final.get(picked[-1], 0.0) / step.best
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


def _idf(n_docs: int, doc_freq: int) -> float:
    return math.log(1.0 + (n_docs - doc_freq + 0.5) / (doc_freq + 0.5))


@dataclass(frozen=True, slots=True)
class _Scored:
    """Final scores of the tools matching a request (or one step of it)."""

    final: dict[int, float]
    best: float
    confidence: float  # share of the request's words the best tool covers


_IDENTIFIER = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[_\-.][A-Za-z0-9]+)+|[a-z]+[A-Z]\w*")


def _add_server_context(
    tools: Sequence[ToolInfo], field_terms: list[dict[str, list[str]]], limit: int
) -> None:
    """Give each tool the (at most ``limit``) words that most tools of its server use, if two
    or more do: the server's domain.

    A query often describes the domain ("patient records", "my wallet") rather than the
    tool, and the tool's own text may not repeat it while its siblings do.
    """
    by_server: dict[str, list[int]] = defaultdict(list)
    for doc, tool in enumerate(tools):
        by_server[tool.server].append(doc)
    for docs in by_server.values():
        if len(docs) < 2:
            continue
        seen_in: Counter[str] = Counter()
        for doc in docs:
            ft = field_terms[doc]
            seen_in.update(list(dict.fromkeys(ft["name"] + ft["description"])))
        # Sorted by share, then alphabetically, so that the choice never depends on hashing.
        ranked = sorted(seen_in.items(), key=lambda tn: (-tn[1], tn[0]))
        shared = [t for t, n in ranked[:limit] if n >= 2]
        for doc in docs:
            field_terms[doc]["server_context"] = shared


def _tool_fields(
    tool: ToolInfo, server_words: list[str], memo: dict[str, list[str]]
) -> dict[str, list[str]]:
    def words_of(text: str) -> list[str]:
        found = memo.get(text)
        if found is None:
            found = memo[text] = terms(text, drop_stopwords=True)
        return found

    name_seq = terms(tool.original_name)
    name_words = [w for w in name_seq if w not in QUERY_STOPWORDS]
    if tool.is_resource:
        # A resource's tool name ("read_<resource>") says what calling it does.
        known = set(server_words).union(name_words)
        extra = [w for w in terms(tool.name, drop_stopwords=True) if w not in known]
        name_words.extend(dict.fromkeys(extra))
    # Otherwise the prefixed name only adds the server (its own field) and, for servers with
    # unusual characters, escape codes that mean nothing.
    names: list[str] = []
    texts: list[str] = []
    _schema_strings(tool.input_schema, names, texts, 0)
    return {
        "name": name_words,
        "server": server_words,
        "description": words_of(" ".join((tool.description, *tool.keywords))),
        "param_names": words_of(" ".join(names)) if names else [],
        "param_text": words_of("\n".join(texts)) if texts else [],
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


RANKINGS: Mapping[str, RankingFactory] = MappingProxyType(
    {
        "default": FieldRanking,
        "seed004": Seed004Ranking,
        "bm25": Bm25Ranking,
    }
)
"""The rankings a :class:`~._search.SearchIndex` can use, by name."""
