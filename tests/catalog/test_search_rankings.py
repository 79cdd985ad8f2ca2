"""Each ranking on a tiny catalog, against scores worked out by hand."""

from __future__ import annotations

import math

import pytest

from pi_mcp_adapter.catalog._metadata import ToolInfo
from pi_mcp_adapter.catalog._search import RANKINGS, SearchIndex
from pi_mcp_adapter.catalog._search_semantic import semantic_available


def tool(name: str, description: str, server: str = "s") -> ToolInfo:
    return ToolInfo(name=name, original_name=name, server=server, description=description)


def test_the_rankings_are_registered_by_name() -> None:
    assert sorted(RANKINGS) == ["bm25", "hybrid", "lexical", "seed004"]


def test_default_means_hybrid_when_the_semantic_extra_is_installed() -> None:
    expected = "hybrid" if semantic_available() else "lexical"
    assert SearchIndex(BM25_CATALOG).ranking == expected
    assert SearchIndex(BM25_CATALOG, ranking="lexical").ranking == "lexical"


# Two documents of plain words: "alpha beta" (2 words) and "beta gamma gamma" (3 words).
BM25_CATALOG = [tool("alpha", "beta"), tool("beta", "gamma gamma")]


def bm25_term(tf: int, doc_len: int, df: int) -> float:
    n_docs, avg_len, k1, b = 2, 2.5, 1.2, 0.75
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avg_len))


def test_bm25_scores_name_and_description_with_k1_1_2_and_b_0_75() -> None:
    page = SearchIndex(BM25_CATALOG, ranking="bm25").search("gamma beta")
    scores = {h.tool.name: h.score for h in page.hits}
    # "beta" is in both documents (df 2), "gamma" twice in the second (df 1).
    expected_second = bm25_term(2, 3, 1) + bm25_term(1, 3, 2)
    expected_first = bm25_term(1, 2, 2)
    assert scores["beta"] == pytest.approx(expected_second)
    assert scores["alpha"] == pytest.approx(expected_first)
    assert [h.tool.name for h in page.hits] == ["beta", "alpha"]


def test_bm25_counts_a_repeated_query_word_once() -> None:
    idx = SearchIndex(BM25_CATALOG, ranking="bm25")
    once = idx.search("gamma").hits[0].score
    assert idx.search("gamma gamma gamma").hits[0].score == pytest.approx(once)


SEED_CATALOG = [
    tool("demo__search_records", "Find records quickly"),
    tool("demo__find_records", "Search records by field"),
    tool("demo__research_notes", "Keep research notes"),
    tool("other__list", "Nothing relevant"),
]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        # search_records: "search" is a name part (10). find_records: "search" is in the
        # description at word boundaries (4). research_notes: "search" is a substring of the
        # name part "research" (5), which beats its description match (4).
        pytest.param(
            "search",
            [("demo__search_records", 10), ("demo__research_notes", 5), ("demo__find_records", 4)],
            id="best-rule-per-term",
        ),
        # Per term scores add up: search_records 10 + 10, find_records 4 + 10.
        pytest.param(
            "search records",
            [
                ("demo__search_records", 20),
                ("demo__find_records", 14),
                ("demo__research_notes", 5),
            ],
            id="terms-sum",
        ),
        # "h_rec" spans a separator: only the full-name substring rule (3) applies.
        pytest.param("h_rec", [("demo__search_records", 3)], id="full-name-fallback"),
    ],
)
def test_seed004_scores_10_5_4_3_per_term(query: str, expected: list[tuple[str, int]]) -> None:
    page = SearchIndex(SEED_CATALOG, ranking="seed004").search(query)
    assert [(h.tool.name, h.score) for h in page.hits] == expected


def test_seed004_returns_at_most_five_tools_with_ties_by_name() -> None:
    catalog = [tool(f"t{i}__get", "x") for i in (7, 3, 9, 1, 5, 2)]
    page = SearchIndex(catalog, ranking="seed004").search("get")
    assert [h.tool.name for h in page.hits] == [
        "t1__get",
        "t2__get",
        "t3__get",
        "t5__get",
        "t7__get",
    ]
    assert page.total == 5


DEFAULT_CATALOG = [
    tool("get_forecast", "Weather forecast for a city", server="weather"),
    tool("get_alerts", "Severe weather alerts for a region", server="weather"),
    tool("send_email", "Send an email message", server="mail"),
]


def test_default_ranks_name_matches_above_description_matches() -> None:
    # "forecast" is in get_forecast's name and description, "alerts" only in get_alerts's.
    page = SearchIndex(DEFAULT_CATALOG, ranking="lexical").search("forecast")
    assert [h.tool.name for h in page.hits] == ["get_forecast"]


def test_default_prefers_the_tool_covering_more_of_the_query() -> None:
    page = SearchIndex(DEFAULT_CATALOG, ranking="lexical").search("weather alerts region")
    assert [h.tool.name for h in page.hits][:2] == ["get_alerts", "get_forecast"]
    assert page.hits[0].score > page.hits[1].score > 0


def test_default_scores_are_best_first_and_positive() -> None:
    page = SearchIndex(DEFAULT_CATALOG, ranking="lexical").search("email the weather forecast")
    scores = [h.score for h in page.hits]
    assert scores == sorted(scores, reverse=True)
    assert all(s > 0 for s in scores)
