"""The learned term of search: words that led to a tool rank it into the first five; the cold
ranking is unchanged without them; only plain words are ever learned; the history replay
scores one half of a labelled set beside the cold figure."""

from __future__ import annotations

import json
from pathlib import Path

from pi_mcp_adapter._secrets import register_secret
from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.catalog._eval import (
    evaluate,
    gold_called_in_history,
    load_labelled_set,
    split_history,
)
from pi_mcp_adapter.catalog._search import SearchIndex
from pi_mcp_adapter.catalog._search_learned import LearnedWords, learnable_terms


def tool(server: str, name: str, description: str) -> ToolInfo:
    return ToolInfo(
        name=f"{server}_{name}", original_name=name, server=server, description=description
    )


CATALOG = [
    tool("files", "read_file", "Read a file from disk."),
    tool("files", "write_file", "Write a file to disk."),
    tool("net", "fetch_url", "Fetch a web page by URL."),
    tool("ops", "restart_service", "Restart a systemd service on the build host."),
    *(
        tool("misc", f"helper{i}", f"Helper {i} for unit conversion and units of measure.")
        for i in range(6)
    ),
]


def names(index: SearchIndex, query: str, learned: LearnedWords | None = None) -> list[str]:
    return [h.tool.name for h in index.search(query, limit=5, learned=learned).hits]


def test_words_that_led_to_a_tool_move_it_into_the_first_five() -> None:
    index = SearchIndex(CATALOG, ranking="lexical")
    query = "bounce the flaky unit"
    assert "ops_restart_service" not in names(index, query)
    learned = LearnedWords.from_pairs(
        [(t, ("ops", "restart_service"), 2.0) for t in learnable_terms("bounce the flaky worker")]
    )
    boosted = names(index, query, learned)
    assert "ops_restart_service" in boosted
    # The cold ranking's first four keep their places.
    assert boosted[:4] == names(index, query)[:4]


def test_without_learned_words_the_ranking_is_the_cold_one() -> None:
    index = SearchIndex(CATALOG, ranking="lexical")
    for query in ("read a file", "fetch the web page", "unit conversion"):
        cold = index.search(query, limit=5)
        assert index.search(query, limit=5, learned=LearnedWords()) == cold


def test_a_word_that_led_to_many_tools_moves_nothing() -> None:
    index = SearchIndex(CATALOG, ranking="lexical")
    spread = LearnedWords.from_pairs(
        [("bounc", (t.server, t.original_name), 1.0) for t in CATALOG]
        + [("flaky", (t.server, t.original_name), 1.0) for t in CATALOG]
    )
    assert names(index, "bounce the flaky unit", spread) == names(index, "bounce the flaky unit")


def test_learned_words_a_query_does_not_use_leave_the_cold_ranking_byte_identical() -> None:
    index = SearchIndex(CATALOG, ranking="lexical")
    learned = LearnedWords.from_pairs(
        [(t, ("ops", "restart_service"), 3.0) for t in learnable_terms("bounce the flaky worker")]
    )
    for query in ("read a file", "fetch the web page", "unit conversion"):
        assert index.search(query, limit=5, learned=learned) == index.search(query, limit=5)


def test_two_words_pointing_at_one_tool_most_move_it_though_one_led_elsewhere_too() -> None:
    index = SearchIndex(CATALOG, ranking="lexical")
    query = "bounce the flaky unit"
    learned = LearnedWords.from_pairs(
        [
            ("bounc", ("ops", "restart_service"), 1.0),
            ("flaky", ("ops", "restart_service"), 1.0),
            ("flaky", ("files", "read_file"), 1.0),
        ]
    )
    boosted = names(index, query, learned)
    assert "ops_restart_service" in boosted
    assert "files_read_file" not in boosted
    assert boosted[:4] == names(index, query)[:4]


def test_one_learned_word_alone_moves_nothing() -> None:
    index = SearchIndex(CATALOG, ranking="lexical")
    learned = LearnedWords.from_pairs([("bounc", ("ops", "restart_service"), 5.0)])
    assert names(index, "bounce the flaky unit", learned) == names(index, "bounce the flaky unit")


def test_a_word_that_led_to_many_tools_is_less_specific_than_one_that_led_to_one() -> None:
    learned = LearnedWords.from_pairs(
        [("restart", ("ops", "restart_service"), 1.0)]
        + [("run", (t.server, t.original_name), 1.0) for t in CATALOG]
    )
    assert learned.specificity("restart") > learned.specificity("run") > 0.0
    assert learned.specificity("never") == 0.0


def test_only_plain_words_are_ever_learned() -> None:
    register_secret("hunter")
    terms = learnable_terms(
        "send 4111111111111111 to bob@example.com at /etc/passwd with token ghp_abc123XYZ "
        "and password hunter please deploy the service"
    )
    assert "hunter" not in terms
    assert all(t.isalpha() for t in terms)
    assert not any(t.startswith(("ghp", "4111", "etc", "passwd")) for t in terms if len(t) > 6)
    assert "deploy" in terms or "deploi" in terms


def test_history_replay_scores_the_other_half_beside_the_cold_figure(tmp_path: Path) -> None:
    tools = [
        {
            "id": "ops/restart_service",
            "server": "ops",
            "name": "restart_service",
            "description": "Restart a systemd unit.",
            "input_schema": {"type": "object"},
        },
        *(
            {
                "id": f"misc/helper{i}",
                "server": "misc",
                "name": f"helper{i}",
                "description": f"Helper {i} for units of measure.",
                "input_schema": {"type": "object"},
            }
            for i in range(6)
        ),
    ]
    queries = [
        {"qid": f"q{i}", "query": text, "gold": ["ops/restart_service"], "match": "any"}
        for i, text in enumerate(
            [
                "bounce the flaky worker",
                "bounce the flaky daemon",
                "bounce flaky thing",
                "bounce flaky box",
            ]
        )
    ]
    path = tmp_path / "set.json"
    path.write_text(json.dumps({"tools": tools, "queries": queries}))
    labelled = load_labelled_set(path)
    learned, scored = split_history(labelled)
    assert [q.qid for q in scored.queries] == ["q1", "q3"]
    cold = evaluate(scored, ranking="lexical")
    warm = evaluate(scored, ranking="lexical", learned=learned)
    assert cold.overall.hit_at_5 == 0.0
    assert warm.overall.hit_at_5 == 1.0


def test_the_helped_half_keeps_the_scored_requests_whose_gold_tool_history_called(
    tmp_path: Path,
) -> None:
    tools = [
        {"id": "ops/restart_service", "description": "Restart a systemd unit."},
        {"id": "files/read_file", "description": "Read a file from disk."},
    ]
    queries = [
        {"qid": "q0", "query": "bounce the flaky worker", "gold": ["ops/restart_service"]},
        {"qid": "q1", "query": "bounce the flaky daemon", "gold": ["ops/restart_service"]},
        {"qid": "q2", "query": "bounce flaky box", "gold": ["ops/restart_service"]},
        {"qid": "q3", "query": "read the notes file", "gold": ["files/read_file"]},
    ]
    path = tmp_path / "set.json"
    path.write_text(
        json.dumps({"tools": tools, "queries": [{**q, "match": "any"} for q in queries]})
    )
    learned, scored = split_history(load_labelled_set(path))
    assert [q.qid for q in scored.queries] == ["q1", "q3"]
    assert [q.qid for q in gold_called_in_history(scored, learned).queries] == ["q1"]
