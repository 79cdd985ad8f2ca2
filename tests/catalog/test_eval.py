"""Labelled-set evaluation: metrics on a tiny set, the CLI end to end, and dev-set quality."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.catalog._eval import EvalReport, LevelMetrics, evaluate, load_labelled_set
from pi_mcp_adapter.cli import app

DEV_SET = Path(__file__).resolve().parents[3] / "shared" / "eval" / "etom-dev" / "etom_dev.json"
REAL_SET = Path(__file__).resolve().parents[2] / "bench" / "data" / "real_servers.json"
HELD_OUT_SET = REAL_SET.with_name("real_servers_held_out.json")
OTHER_CATALOG_SET = REAL_SET.with_name("other_servers_held_out.json")


def level_value(metrics: dict[str, Any], level: int, name: str) -> float:
    got = getattr(metrics[f"level {level}"], name)
    assert got is not None
    return float(got)


TINY_SET: dict[str, Any] = {
    "tools": [
        {
            "id": "Weather API/get_forecast",
            "server": "Weather API",
            "name": "get_forecast",
            "description": "Weather forecast for a city",
            "input_schema": {},
        },
        {
            "id": "Weather API/get_alerts",
            "server": "Weather API",
            "name": "get_alerts",
            "description": "Severe weather alerts for a region",
        },
        {
            "id": "org/mail-server/send_email",
            "server": "org/mail-server",
            "name": "send_email",
            "description": "Send an email message to a recipient",
        },
        {
            "id": "org/mail-server/list_inbox",
            "server": "org/mail-server",
            "name": "list_inbox",
            "description": "List the messages in the inbox",
        },
    ],
    "queries": [
        # Hit at rank 1.
        {
            "qid": "a1",
            "level": 1,
            "query": "weather forecast for Paris",
            "match": "any",
            "gold": ["Weather API/get_forecast"],
        },
        # The gold tool is found, but not first: "alerts" only matches get_alerts by name,
        # while the query is mostly about the forecast.
        {
            "qid": "a2",
            "level": 1,
            "query": "forecast weather city alerts",
            "match": "any",
            "gold": ["Weather API/get_alerts"],
        },
        # Two gold sets, both in the top five.
        {
            "qid": "m1",
            "level": 4,
            "query": "Get the forecast. Then send an email about it.",
            "match": "all",
            "gold": ["Weather API/get_forecast", "org/mail-server/send_email"],
            "gold_sets": [["Weather API/get_forecast"], ["org/mail-server/send_email"]],
        },
        # Nothing fits.
        {
            "qid": "n1",
            "level": 5,
            "query": "recommend a succulent for my garden",
            "match": "none",
            "gold": [],
        },
    ],
}


@pytest.fixture
def tiny_set(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY_SET), encoding="utf-8")
    return path


def test_loading_builds_one_tool_per_id_with_sanitised_prefixed_names(tiny_set: Path) -> None:
    labelled = load_labelled_set(tiny_set)
    # Named like a live server's tools: characters outside [A-Za-z0-9_-] are escaped.
    assert [t.name for t in labelled.tools] == [
        "Weather_20_API_get_forecast",
        "Weather_20_API_get_alerts",
        "org_2f_mail-server_send_email",
        "org_2f_mail-server_list_inbox",
    ]
    # Server names may contain "/": the id splits at the last one.
    assert labelled.ids["org_2f_mail-server_send_email"] == "org/mail-server/send_email"
    assert labelled.tools[2].server == "org/mail-server"
    assert labelled.tools[2].original_name == "send_email"


def test_metrics_follow_from_the_ranked_ids(tiny_set: Path) -> None:
    report = evaluate(load_labelled_set(tiny_set))
    outcome = {o.qid: o for o in report.outcomes}
    assert outcome["a1"].first_gold_rank == 1
    assert outcome["m1"].sets_found_share == 1.0
    assert outcome["n1"].flagged
    rank_a2 = outcome["a2"].first_gold_rank
    assert rank_a2 is not None
    level1 = next(m for m in report.levels if m.label == "level 1")
    assert level1.hit_at_5 == 1.0
    assert level1.mrr == pytest.approx((1.0 + 1.0 / rank_a2) / 2)
    assert level1.hit_at_1 == (1.0 if rank_a2 == 1 else 0.5)
    assert report.overall.none_flagged == 1.0
    assert report.overall.sets_at_5 == 1.0


def test_bm25_never_answers_with_nothing_when_a_word_matches(tiny_set: Path) -> None:
    labelled = load_labelled_set(tiny_set)
    labelled_queries = [q for q in labelled.queries if q.qid == "n1"]
    assert labelled_queries
    report = evaluate(labelled, ranking="bm25")
    # "for my" are words of a tool description: plain BM25 has no notion of a weak match.
    assert next(o for o in report.outcomes if o.qid == "n1").ranked
    assert report.overall.none_flagged == 0.0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("{not json", "not valid JSON", id="not-json"),
        pytest.param('{"tools": {}}', "'tools' and 'queries' lists", id="wrong-shape"),
        pytest.param(
            '{"tools": [{"id": "x"}], "queries": []}', "not '<server>/<tool>'", id="bad-id"
        ),
        pytest.param(
            '{"tools": [], "queries": [{"query": "q", "match": "some"}]}',
            "'match' \\(any, all or none\\)",
            id="bad-match",
        ),
    ],
)
def test_malformed_sets_raise_errors_naming_the_file(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError, match=message) as caught:
        load_labelled_set(path)
    assert str(path) in str(caught.value)


def test_cli_prints_the_metrics_table_and_writes_rankings(tiny_set: Path, tmp_path: Path) -> None:
    out = tmp_path / "rankings.jsonl"
    result = CliRunner().invoke(
        app, ["eval-search", "--set", str(tiny_set), "--rankings", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "hit@5" in result.output
    assert "level 5" in result.output
    assert "none flagged" in result.output
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [line["qid"] for line in lines] == ["a1", "a2", "m1", "n1"]
    assert lines[0]["ranked"][0] == "Weather API/get_forecast"
    assert lines[3]["ranked"]  # weak matches are still listed
    assert all(len(line["ranked"]) <= 20 for line in lines)


def test_cli_json_output_is_machine_readable(tiny_set: Path) -> None:
    result = CliRunner().invoke(
        app, ["eval-search", "--set", str(tiny_set), "--ranking", "seed004", "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ranking"] == "seed004"
    assert data["queries"] == 4
    assert {m["label"] for m in data["levels"]} == {"level 1", "level 4", "level 5"}
    assert data["overall"]["hitAt5"] == 1.0
    # Seed 004 scores "for" in a description, so the infeasible query still gets an answer.
    assert data["overall"]["noneFlagged"] == 0.0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--ranking", "magic"], "unknown ranking", id="unknown-ranking"),
        pytest.param([], "no such file", id="missing-file"),
    ],
)
def test_cli_reports_bad_input_with_exit_code_2(
    tmp_path: Path, args: list[str], message: str
) -> None:
    missing = tmp_path / "absent.json"
    result = CliRunner().invoke(app, ["eval-search", "--set", str(missing), *args])
    assert result.exit_code == 2
    assert message in result.output


@pytest.mark.slow
@pytest.mark.skipif(not DEV_SET.exists(), reason="the development set is not available")
def test_default_ranking_reaches_its_targets_and_beats_bm25_on_the_dev_set() -> None:
    labelled = load_labelled_set(DEV_SET)
    ours = {m.label: m for m in evaluate(labelled).levels}
    bm25 = {m.label: m for m in evaluate(labelled, ranking="bm25").levels}

    def value(metrics: dict[str, Any], level: int, name: str) -> float:
        got = getattr(metrics[f"level {level}"], name)
        assert got is not None
        return float(got)

    # Targets reached (see docs/search.md for the measured table).
    assert value(ours, 1, "hit_at_5") >= 0.99
    assert value(ours, 5, "none_flagged") >= 0.6
    report = evaluate(labelled)
    assert report.overall.feasible_answered_nothing == 0.0
    assert (report.overall.feasible_flagged or 0.0) <= 0.01
    # Measured floors for the targets not (yet) reached: L2 hit@5 0.95 / MRR 0.88, L4 0.75.
    assert value(ours, 2, "hit_at_5") >= 0.925
    assert value(ours, 2, "mrr") >= 0.86
    assert value(ours, 4, "sets_at_5") >= 0.60
    # Better than plain BM25 where BM25 is weak, and no worse on level 1.
    assert value(ours, 2, "hit_at_5") > value(bm25, 2, "hit_at_5")
    assert value(ours, 2, "mrr") > value(bm25, 2, "mrr") + 0.05
    assert value(ours, 4, "sets_at_5") > value(bm25, 4, "sets_at_5") + 0.05
    assert value(ours, 1, "hit_at_5") >= value(bm25, 1, "hit_at_5")


def test_an_all_query_without_gold_is_skipped_with_a_warning_naming_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    data = json.loads(json.dumps(TINY_SET))
    data["queries"].append({"qid": "empty-all", "query": "anything", "match": "all", "gold": []})
    path = tmp_path / "with-empty.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    labelled = load_labelled_set(path)
    assert [q.qid for q in labelled.queries] == ["a1", "a2", "m1", "n1"]
    assert labelled.skipped == ("queries[4] (empty-all) has match 'all' but no gold ids; skipped",)
    out = subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "eval-search", "--set", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "warning: queries[4] (empty-all)" in out.stderr
    report = json.loads(out.stdout)
    assert report["queries"] == 4
    assert "hitAt1" in report["overall"]


@pytest.mark.parametrize(
    "path",
    [REAL_SET, HELD_OUT_SET, OTHER_CATALOG_SET],
    ids=["tuned", "held-out", "held-out-other-catalog"],
)
def test_the_real_server_sets_name_only_tools_of_their_catalog(path: Path) -> None:
    labelled = load_labelled_set(path)
    ids = set(labelled.ids.values())
    for query in labelled.queries:
        assert set(query.gold) <= ids, query.qid
        assert all(set(s) <= ids for s in query.gold_sets), query.qid


def beside_bm25(
    path: Path, ranking: str
) -> tuple[EvalReport, dict[str, LevelMetrics], dict[str, LevelMetrics]]:
    """``ranking``'s report on the set at ``path`` and its metrics and BM25's, by level label
    (skips the test when ``ranking`` is hybrid and the semantic extra is not installed)."""
    labelled = load_labelled_set(path)
    report = evaluate(labelled, ranking=ranking)
    if report.ranking != ranking:
        pytest.skip("the semantic extra is not installed")
    bm25 = evaluate(labelled, ranking="bm25")
    return report, {m.label: m for m in report.levels}, {m.label: m for m in bm25.levels}


@pytest.mark.slow
@pytest.mark.parametrize("ranking", ["lexical", "hybrid"])
def test_our_rankings_beat_bm25_on_real_servers_and_never_answer_hybrid_with_nothing(
    ranking: str,
) -> None:
    report, ours, bm25 = beside_bm25(REAL_SET, ranking)
    # Measured (docs/search.md), one tool hit@5 / several steps: lexical 0.762 / 0.878,
    # hybrid 0.810 / 0.894, bm25 0.357 / 0.450.
    assert level_value(ours, 2, "hit_at_5") >= level_value(bm25, 2, "hit_at_5") + 0.2
    assert level_value(ours, 4, "sets_at_5") >= level_value(bm25, 4, "sets_at_5") + 0.3
    assert level_value(ours, 5, "none_flagged") >= 0.5
    if ranking == "hybrid":
        assert report.overall.feasible_answered_nothing == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("ranking", ["lexical", "hybrid"])
def test_search_meets_its_targets_on_the_set_it_was_not_tuned_on(ranking: str) -> None:
    _report, ours, bm25 = beside_bm25(HELD_OUT_SET, ranking)
    # Measured (docs/search.md): multi-step lexical 0.902, hybrid 0.955, bm25 0.618; one tool
    # hit@5 lexical 0.875, hybrid 0.917, bm25 0.562.
    assert level_value(ours, 4, "sets_at_5") >= 0.85
    assert level_value(ours, 2, "hit_at_5") >= level_value(bm25, 2, "hit_at_5") + 0.2


@pytest.mark.slow
@pytest.mark.parametrize("ranking", ["lexical", "hybrid"])
def test_search_beats_bm25_on_a_catalog_it_was_never_tuned_on(ranking: str) -> None:
    _report, ours, bm25 = beside_bm25(OTHER_CATALOG_SET, ranking)
    # Measured (docs/search.md): one tool hit@5 lexical 0.680, hybrid 0.740, bm25 0.580;
    # several steps lexical 0.747, hybrid 0.787, bm25 0.640.
    assert level_value(ours, 2, "hit_at_5") >= level_value(bm25, 2, "hit_at_5") + 0.05
    assert level_value(ours, 4, "sets_at_5") >= level_value(bm25, 4, "sets_at_5") + 0.05
    assert level_value(ours, 5, "none_flagged") >= 0.5
    if ranking == "hybrid":
        assert level_value(ours, 4, "sets_at_5") >= 0.75
