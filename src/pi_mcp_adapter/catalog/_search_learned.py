"""The learned term of the ranking: words that led to a tool in earlier sessions.

When a search is followed by a call of one of the tools it found, the search's words are
remembered for that tool (``engine/_learned.py`` keeps them). A later query sharing those words
moves the tool they point at most into the first five. The cold ranking is untouched: the
learned term moves one tool, never above the cold ranking's first four, and never changes
whether the answer is flagged as a weak match.

A word teaches as much as it is specific: its weight is shared among the tools it led to (a
word used for everything moves nothing), and scaled by a learned inverse document frequency
(a word that led to many different tools teaches little). The tool the query's words point at
most is moved only when it is the single best (a tie teaches nothing; the cold ranking keeps
its order) and at least :data:`LEARNED_MIN_WORDS` distinct learned words of the query point at
it. It is moved whether or not the cold ranking found it: learning is for the requests worded
the way no description is.

Only plain words are ever learned (letters only, 3 to 24 of them, not filler, not a secret the
process knows): a query's numbers, identifiers, paths and quoted values never are, so what is
stored reads like a vocabulary, never like the arguments of a call. Query and history are
normalised alike (the words search splits, identifiers split at case changes, stemmed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pi_mcp_adapter._secrets import redact

from ._search_text import QUERY_STOPWORDS, split_words, stem

__all__ = [
    "LEARNED_MIN_WORDS",
    "LearnedEvidence",
    "LearnedWords",
    "ToolKey",
    "learnable_terms",
]

ToolKey = tuple[str, str]
"""``(server, tool)`` with the server's own tool name: stable across prefixes and overrides."""

LEARNED_MIN_WORDS = 2
"""Distinct learned words of a query that must point at a tool to move it: one word may be a
coincidence (a name, a common verb), two that led to the same tool are a habit."""

LEARNED_RANK = 4
"""Where a boosted tool goes when the cold ranking has it lower: the fifth place, so a page of
five always holds it and the cold ranking's first four keep their places."""

_PLAIN_WORD = re.compile(r"[a-z]{3,24}")


def learnable_terms(query: str) -> list[str]:
    """The stems of ``query``'s words that may be stored: letters only, 3 to 24 of them, no
    filler word, nothing that masking would hide. Repeats are dropped, order kept."""
    found: dict[str, None] = {}
    for word in split_words(query):
        lowered = word.lower()
        if lowered in QUERY_STOPWORDS or not _PLAIN_WORD.fullmatch(lowered):
            continue
        if redact(word) != word:
            continue
        found[stem(lowered)] = None
    return list(found)


@dataclass(frozen=True, slots=True)
class LearnedEvidence:
    """How strongly a query's learned words point at one tool: ``weight`` sums, over the words,
    the share of the word's uses that led to the tool times the word's specificity; ``words``
    counts the distinct words."""

    weight: float
    words: int


@dataclass(frozen=True, slots=True)
class LearnedWords:
    """Stem -> tool -> how many times that word led to that tool (after forgetting)."""

    by_term: Mapping[str, Mapping[ToolKey, float]] = field(default_factory=dict)
    _tools_learned: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        tools = {tool for led_to in self.by_term.values() for tool in led_to}
        object.__setattr__(self, "_tools_learned", len(tools))

    def __bool__(self) -> bool:
        return bool(self.by_term)

    def specificity(self, term: str) -> float:
        """The learned inverse document frequency of ``term``: ``log(1 + T / n)`` for ``T``
        tools with learned words and ``n`` of them that ``term`` led to (0 when unknown)."""
        led_to = self.by_term.get(term)
        if not led_to:
            return 0.0
        return math.log(1.0 + self._tools_learned / len(led_to))

    def scores(self, query: str) -> dict[ToolKey, LearnedEvidence]:
        """Each tool's learned evidence for ``query`` (see :class:`LearnedEvidence`)."""
        weights: dict[ToolKey, float] = {}
        words: dict[ToolKey, int] = {}
        for term in learnable_terms(query):
            led_to = self.by_term.get(term)
            if not led_to:
                continue
            uses = sum(led_to.values())
            specificity = self.specificity(term)
            for tool, count in led_to.items():
                weights[tool] = weights.get(tool, 0.0) + specificity * count / uses
                words[tool] = words.get(tool, 0) + 1
        return {tool: LearnedEvidence(weight, words[tool]) for tool, weight in weights.items()}

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, ToolKey, float]]) -> LearnedWords:
        by_term: dict[str, dict[ToolKey, float]] = {}
        for term, tool, count in pairs:
            if count > 0:
                led_to = by_term.setdefault(term, {})
                led_to[tool] = led_to.get(tool, 0.0) + count
        return cls(by_term)


def boosted_order(
    order: list[tuple[int, float]],
    learned: Mapping[int, LearnedEvidence],
    *,
    rank: int = LEARNED_RANK,
) -> list[tuple[int, float]]:
    """``order`` (positions, cold scores, best first) with the learned tool moved up to
    ``rank`` (0-based; :data:`LEARNED_RANK`, or the last place of a shorter first page) if the
    cold ranking has it lower or not at all.

    The learned tool is the one with the most learned weight, when no other has as much and
    :data:`LEARNED_MIN_WORDS` learned words of the query point at it."""
    if not learned:
        return order
    by_weight = sorted(learned, key=lambda p: -learned[p].weight)
    best = by_weight[0]
    if len(by_weight) > 1 and learned[by_weight[1]].weight >= learned[best].weight:
        return order  # a tie: the words point at no one tool
    if learned[best].words < LEARNED_MIN_WORDS:
        return order
    placed = next((i for i, (p, _) in enumerate(order) if p == best), None)
    if placed is not None and placed <= rank:
        return order
    rest = [(p, s) for p, s in order if p != best]
    cold_score = order[placed][1] if placed is not None else 0.0
    return [*rest[:rank], (best, cold_score), *rest[rank:]]
