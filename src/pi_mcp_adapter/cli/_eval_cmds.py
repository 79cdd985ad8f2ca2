"""``pi-mcp eval-search``: retrieval quality of tool search on a labelled set."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from pi_mcp_adapter._errors import UsageError

from ._app import EXIT_USAGE, JsonOption, app, fail, get_context, print_json, print_warning
from ._wording import to_camel_keys

if TYPE_CHECKING:
    from rich.table import Table

    from pi_mcp_adapter.catalog import EvalReport

RANKING_NAMES = ("bm25", "hybrid", "lexical", "seed004")
"""The named rankings ``--ranking`` accepts besides ``default``, written out so that ``--help``
needs no catalog import (a test holds it equal to the catalog's own list)."""
_RANKING_NAMES = ", ".join(["default", *RANKING_NAMES])
RANKED_DEPTH = 20


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _table(report: EvalReport) -> Table:
    from rich.table import Table

    table = Table(
        title=(
            f"Search quality, ranking {report.ranking!r}: {len(report.outcomes)} queries over "
            f"{report.tools:,} tools ({report.mean_query_ms:.2f} ms per query)"
        )
    )
    columns = ["level", "queries", "hit@1", "hit@5", "MRR", "sets@5", "none flagged"]
    columns += ["weak", "empty"]
    for column in columns:
        table.add_column(column, justify="left" if column == "level" else "right")
    for metrics in (*report.levels, report.overall):
        if metrics is report.overall:
            table.add_section()
        table.add_row(
            metrics.label,
            str(metrics.queries),
            _fmt(metrics.hit_at_1),
            _fmt(metrics.hit_at_5),
            _fmt(metrics.mrr),
            _fmt(metrics.sets_at_5),
            _fmt(metrics.none_flagged),
            _fmt(metrics.feasible_flagged),
            _fmt(metrics.feasible_answered_nothing),
        )
    table.caption = (
        "none flagged: infeasible queries answered with nothing or marked not confident; "
        "weak: feasible queries marked not confident; empty: feasible queries answered with "
        "nothing"
    )
    return table


@app.command("eval-search", short_help="Measure search quality on a labelled set.")
def eval_search(
    ctx: typer.Context,
    set_path: Annotated[
        Path,
        typer.Option(
            "--set",
            help=(
                "Labelled retrieval set (JSON; format in DESIGN.md). The development set "
                "lives at ../shared/eval/etom-dev/etom_dev.json next to the repository."
            ),
        ),
    ],
    ranking: Annotated[
        str,
        typer.Option(
            "--ranking",
            help=(
                f"Ranking to measure: {_RANKING_NAMES}. lexical and hybrid are the values of "
                "settings.searchRanking; default is hybrid when the semantic extra is installed."
            ),
        ),
    ] = "default",
    rankings_out: Annotated[
        Path | None,
        typer.Option(
            "--rankings",
            help=f"Write one JSON line per query: qid and up to {RANKED_DEPTH} ids, best first.",
        ),
    ] = None,
    history: Annotated[
        bool,
        typer.Option(
            "--history",
            help=(
                "Replay every other query (in qid order) as history, as if its words had "
                "led to a call of its gold tool, and score the other half twice: cold, and "
                "with what was learned (the learned figure is printed beside the cold one)."
            ),
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Measure tool search on a labelled set: hit@1, hit@5, MRR, gold sets in the top 5, and
    how often queries with no fitting tool are flagged as weak. No server is started."""
    from pi_mcp_adapter.catalog import (
        evaluate,
        gold_called_in_history,
        load_labelled_set,
        split_history,
        write_rankings,
    )

    cli = get_context(ctx)
    if ranking != "default" and ranking not in RANKING_NAMES:
        raise fail(f"unknown ranking {ranking!r}; choose one of: {_RANKING_NAMES}", code=EXIT_USAGE)
    try:
        labelled = load_labelled_set(set_path.expanduser())
        for message in labelled.skipped:
            print_warning(message)
        learned_report = None
        # The scored requests whose gold tool the history called: the only ones learning
        # can help, reported beside the whole half (cold, with history).
        helped: tuple[EvalReport, EvalReport] | None = None
        if history:
            learned, labelled = split_history(labelled)
            learned_report = evaluate(labelled, ranking=ranking, learned=learned)
            called = gold_called_in_history(labelled, learned)
            helped = (
                evaluate(called, ranking=ranking),
                evaluate(called, ranking=ranking, learned=learned),
            )
        report = evaluate(labelled, ranking=ranking)
    except UsageError as exc:
        raise fail(str(exc), code=EXIT_USAGE) from None
    if rankings_out is not None:
        try:
            write_rankings(report, rankings_out.expanduser())
        except OSError as exc:
            raise fail(f"cannot write {rankings_out}: {exc.strerror or exc}") from None
    if as_json:
        document = dict(report.as_dict())
        if learned_report is not None:
            document["with_history"] = learned_report.as_dict()
        if helped is not None:
            document["gold_called_in_history"] = {
                "cold": helped[0].as_dict(),
                "with_history": helped[1].as_dict(),
            }
        print_json(to_camel_keys(document))
        return
    if learned_report is not None:
        cli.console.print("Scored half, cold (no history):", highlight=False)
    cli.console.print(_table(report))
    if learned_report is not None:
        cli.console.print("The same half, with the other half learned as history:")
        cli.console.print(_table(learned_report))
    if helped is not None:
        cold_called, warm_called = helped
        cli.console.print(
            f"Requests whose gold tool the history called: {len(cold_called.outcomes)} "
            f"(single-tool hit@5 cold {_fmt(cold_called.overall.hit_at_5)}, "
            f"with history {_fmt(warm_called.overall.hit_at_5)})",
            highlight=False,
        )
    if rankings_out is not None:
        cli.console.print(f"Rankings written to {rankings_out}", highlight=False)
