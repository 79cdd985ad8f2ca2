"""The learned term of the ranking: words that led to a tool in earlier sessions.

When a search is followed by a call of one of the tools it found, the search's words are
remembered for that tool (``engine/_learned.py`` keeps them). A later query sharing those words
moves that tool into the first five. The cold ranking is untouched: the learned term moves one
tool, only when the evidence is strong (:data:`LEARNED_MIN_SCORE`), never above the cold
ranking's first four, and never changes whether the answer is flagged as a weak match.

Only plain words are ever learned (letters only, 3 to 24 of them, not filler, not a secret the
process knows): a query's numbers, identifiers, paths and quoted values never are, so what is
stored reads like a vocabulary, never like the arguments of a call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pi_mcp_adapter._secrets import redact

from ._search_text import QUERY_STOPWORDS, split_words, stem

__all__ = ["LEARNED_MIN_SCORE", "LearnedWords", "ToolKey", "learnable_terms"]

ToolKey = tuple[str, str]
"""``(server, tool)`` with the server's own tool name: stable across prefixes and overrides."""

LEARNED_MIN_SCORE = 1.99
"""A tool is boosted when the query's learned words point at it with at least the weight of two
words that have only ever led to it (each word's weight is shared among the tools it led to,
so a word used for everything moves nothing). Measured on the labelled sets with half of each
replayed as history (``pi-mcp eval-search --history``): lower thresholds cost more first
places than they gained top-5 places."""

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
class LearnedWords:
    """Stem -> tool -> how many times that word led to that tool (after forgetting)."""

    by_term: Mapping[str, Mapping[ToolKey, float]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.by_term)

    def scores(self, query: str) -> dict[ToolKey, float]:
        """Each tool's learned score for ``query``: for every learned word of the query, the
        share of that word's uses that led to the tool, summed."""
        totals: dict[ToolKey, float] = {}
        for term in learnable_terms(query):
            led_to = self.by_term.get(term)
            if not led_to:
                continue
            weight = sum(led_to.values())
            for tool, count in led_to.items():
                totals[tool] = totals.get(tool, 0.0) + count / weight
        return totals

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
    learned: Mapping[int, float],
    *,
    rank: int = LEARNED_RANK,
) -> list[tuple[int, float]]:
    """``order`` (positions, cold scores) with the most strongly learned position moved up to
    ``rank`` (0-based; :data:`LEARNED_RANK`, or the last place of a shorter first page) if the
    cold ranking has it lower or not at all."""
    strong = [p for p, s in learned.items() if s >= LEARNED_MIN_SCORE]
    if not strong:
        return order
    best = max(strong, key=lambda p: (learned[p], -p))
    placed = next((i for i, (p, _) in enumerate(order) if p == best), None)
    if placed is not None and placed <= rank:
        return order
    rest = [(p, s) for p, s in order if p != best]
    cold_score = order[placed][1] if placed is not None else 0.0
    return [*rest[:rank], (best, cold_score), *rest[rank:]]
