"""Measuring search quality on a labelled retrieval set.

A labelled set is a JSON file (the format is in ``DESIGN.md``, "Labelled retrieval sets")
holding a tool catalog and queries labelled with the tools that answer them. Each query runs
through :meth:`SearchIndex.search` exactly as ``mcp({search})`` and ``ToolSearch`` run it, and
the top :data:`RANKED_DEPTH` results are scored:

- ``match: "any"`` queries: hit@1 and hit@5 (a gold tool is first / in the first five) and MRR
  (the mean of 1/rank of the first gold tool in the top 20, 0 when absent);
- ``match: "all"`` queries: the share of gold sets found in the top five (a set is found when
  any of its members is there), averaged over queries;
- ``match: "none"`` queries: the share *flagged*, meaning answered with nothing or with hits
  marked not confident (``SearchPage.confident`` is False: "no strong match; closest
  tools"), so a caller can tell that nothing fits;
- every feasible (``any`` or ``all``) query: the share answered with nothing (it should be
  none) and the share flagged not confident (false alarms).

No server is started: the catalog is built from the set's ``tools``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.config import Settings

from ._metadata import JsonObject, ServerMetadata, ToolInfo
from ._naming import build_tool_infos
from ._search import SearchIndex
from ._search_learned import LearnedWords, ToolKey, learnable_terms

__all__ = [
    "RANKED_DEPTH",
    "EvalReport",
    "LabelledQuery",
    "LabelledSet",
    "LevelMetrics",
    "QueryOutcome",
    "evaluate",
    "gold_called_in_history",
    "load_labelled_set",
    "write_rankings",
]

RANKED_DEPTH = 20
"""How many results of each query are kept and scored."""

MatchKind = Literal["any", "all", "none"]


@dataclass(frozen=True, slots=True)
class LabelledQuery:
    """One labelled query. Ids are ``<server>/<tool>``."""

    qid: str
    query: str
    match: MatchKind
    gold: tuple[str, ...] = ()
    gold_sets: tuple[tuple[str, ...], ...] = ()
    level: int | None = None


@dataclass(frozen=True, slots=True)
class LabelledSet:
    """A catalog built from a labelled set, and its queries.

    ``ids`` maps each tool's prefixed name to its id in the set. ``skipped`` lists queries left
    out, with the reason (a ``match: "all"`` query without gold ids has nothing to find).
    """

    tools: tuple[ToolInfo, ...]
    ids: Mapping[str, str]
    queries: tuple[LabelledQuery, ...]
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class QueryOutcome:
    """What the search returned for one query: ids best first, and the per-query scores."""

    qid: str
    level: int | None
    match: MatchKind
    ranked: tuple[str, ...]
    first_gold_rank: int | None  # 1-based, "any" queries only
    sets_found_share: float | None  # "all" queries only
    seconds: float
    confident: bool = True

    @property
    def answered_nothing(self) -> bool:
        return not self.ranked

    @property
    def flagged(self) -> bool:
        """Answered with nothing, or with hits marked as weak."""
        return not self.ranked or not self.confident


@dataclass(frozen=True, slots=True)
class LevelMetrics:
    """Metrics over a group of queries (one level, or all). None where no query applies."""

    label: str
    queries: int
    hit_at_1: float | None
    hit_at_5: float | None
    mrr: float | None
    sets_at_5: float | None
    none_flagged: float | None  # share of "none" queries answered with nothing or weak hits
    feasible_answered_nothing: float | None  # share of "any"/"all" queries with no hits
    feasible_flagged: float | None  # share of "any"/"all" queries flagged not confident

    def as_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "queries": self.queries,
            "hit_at_1": self.hit_at_1,
            "hit_at_5": self.hit_at_5,
            "mrr": self.mrr,
            "sets_at_5": self.sets_at_5,
            "none_flagged": self.none_flagged,
            "feasible_answered_nothing": self.feasible_answered_nothing,
            "feasible_flagged": self.feasible_flagged,
        }


@dataclass(frozen=True, slots=True)
class EvalReport:
    ranking: str
    tools: int
    overall: LevelMetrics
    levels: tuple[LevelMetrics, ...]
    outcomes: tuple[QueryOutcome, ...]
    mean_query_ms: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "ranking": self.ranking,
            "tools": self.tools,
            "queries": len(self.outcomes),
            "mean_query_ms": round(self.mean_query_ms, 3),
            "overall": self.overall.as_dict(),
            "levels": [m.as_dict() for m in self.levels],
        }


def _fail(path: Path, message: str) -> UsageError:
    return UsageError(f"{path}: {message}")


def _str_tuple(value: object, path: Path, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, f"{where} must be a list of tool ids")
    return tuple(value)


def load_labelled_set(path: Path) -> LabelledSet:
    """Read a labelled set and build its catalog, without starting any server.

    Every tool becomes a :class:`ToolInfo` named as a live server's tool would be, by
    :func:`~._naming.build_tool_infos` with default settings (``<server>_<tool>``, sanitised;
    two tools whose names still clash get a ``_2``, ``_3``... suffix).

    Raises:
        UsageError: the file is missing, not JSON, or not in the labelled-set format (the
            message names the file and the offending entry).
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise _fail(path, "no such file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, f"cannot read: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise _fail(path, f"not valid JSON (line {exc.lineno}): {exc.msg}") from exc
    if not isinstance(raw, dict):
        raise _fail(path, "expected an object with 'tools' and 'queries'")
    tools_raw, queries_raw = raw.get("tools"), raw.get("queries")
    if not isinstance(tools_raw, list) or not isinstance(queries_raw, list):
        raise _fail(path, "expected 'tools' and 'queries' lists")

    # One ServerMetadata per server, in the cache's wire shape, named by the same code that
    # names live servers' tools.
    by_server: dict[str, list[JsonObject]] = {}
    id_of: dict[tuple[str, str], str] = {}
    for i, entry in enumerate(tools_raw):
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise _fail(path, f"tools[{i}] needs a string 'id'")
        tool_id: str = entry["id"]
        if "/" not in tool_id:
            raise _fail(path, f"tools[{i}]: id {tool_id!r} is not '<server>/<tool>'")
        id_server, id_tool = tool_id.rsplit("/", 1)
        server = entry.get("server", id_server)
        original = entry.get("name", id_tool)
        description = entry.get("description") or ""
        schema = entry.get("input_schema") or {"type": "object", "properties": {}}
        if not (
            isinstance(server, str)
            and isinstance(original, str)
            and original
            and isinstance(description, str)
            and isinstance(schema, dict)
        ):
            raise _fail(path, f"tools[{i}] ({tool_id}): wrong field types")
        if (server, original) in id_of:
            continue  # a repeated id names the same tool
        id_of[(server, original)] = tool_id
        by_server.setdefault(server, []).append(
            {"name": original, "description": description, "inputSchema": schema}
        )
    built: dict[tuple[str, str], ToolInfo] = {}
    settings = Settings()
    for server, wire_tools in by_server.items():
        metadata = ServerMetadata(tools=tuple(wire_tools))
        for info in build_tool_infos(server, metadata, entry=None, settings=settings):
            built[(info.server, info.original_name)] = info
    tools: list[ToolInfo] = []
    ids: dict[str, str] = {}
    for key, tool_id in id_of.items():
        info = built[key]
        # Two servers whose names sanitise alike would give the same name: keep both.
        name, suffix = info.name, 2
        while name in ids:
            name = f"{info.name}_{suffix}"
            suffix += 1
        ids[name] = tool_id
        tools.append(info if name == info.name else dataclasses.replace(info, name=name))

    queries: list[LabelledQuery] = []
    skipped: list[str] = []
    for i, entry in enumerate(queries_raw):
        if not isinstance(entry, dict):
            raise _fail(path, f"queries[{i}] must be an object")
        qid, text, match = entry.get("qid", str(i)), entry.get("query"), entry.get("match")
        if not isinstance(text, str) or match not in ("any", "all", "none"):
            raise _fail(path, f"queries[{i}] needs 'query' and 'match' (any, all or none)")
        gold = _str_tuple(entry.get("gold", []), path, f"queries[{i}].gold")
        sets_raw = entry.get("gold_sets")
        gold_sets: tuple[tuple[str, ...], ...]
        if sets_raw is None:
            gold_sets = tuple((g,) for g in gold)
        elif isinstance(sets_raw, list):
            gold_sets = tuple(
                _str_tuple(s, path, f"queries[{i}].gold_sets[{j}]") for j, s in enumerate(sets_raw)
            )
        else:
            raise _fail(path, f"queries[{i}].gold_sets must be a list of lists")
        if match == "all" and not gold and not any(gold_sets):
            skipped.append(f"queries[{i}] ({qid}) has match 'all' but no gold ids; skipped")
            continue
        if match != "none" and not gold:
            raise _fail(path, f"queries[{i}] ({qid}) has match {match!r} but no gold ids")
        level = entry.get("level")
        queries.append(
            LabelledQuery(
                qid=str(qid),
                query=text,
                match=match,
                gold=gold,
                gold_sets=gold_sets,
                level=level if isinstance(level, int) else None,
            )
        )
    return LabelledSet(tools=tuple(tools), ids=ids, queries=tuple(queries), skipped=tuple(skipped))


def _score_query(query: LabelledQuery, ranked: Sequence[str]) -> tuple[int | None, float | None]:
    if query.match == "any":
        gold = set(query.gold)
        rank = next((i + 1 for i, tool_id in enumerate(ranked) if tool_id in gold), None)
        return rank, None
    if query.match == "all":
        top = set(ranked[:5])
        sets = [s for s in query.gold_sets if s] or [(g,) for g in query.gold]
        found = sum(1 for s in sets if top.intersection(s))
        return None, found / len(sets)
    return None, None


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def _metrics(label: str, outcomes: Sequence[QueryOutcome]) -> LevelMetrics:
    any_q = [o for o in outcomes if o.match == "any"]
    all_q = [o for o in outcomes if o.match == "all"]
    none_q = [o for o in outcomes if o.match == "none"]
    feasible = any_q + all_q
    ranks = [o.first_gold_rank for o in any_q]
    return LevelMetrics(
        label=label,
        queries=len(outcomes),
        hit_at_1=_mean(1.0 if r == 1 else 0.0 for r in ranks),
        hit_at_5=_mean(1.0 if r is not None and r <= 5 else 0.0 for r in ranks),
        mrr=_mean(1.0 / r if r is not None else 0.0 for r in ranks),
        sets_at_5=_mean(o.sets_found_share or 0.0 for o in all_q),
        none_flagged=_mean(1.0 if o.flagged else 0.0 for o in none_q),
        feasible_answered_nothing=_mean(1.0 if o.answered_nothing else 0.0 for o in feasible),
        feasible_flagged=_mean(1.0 if o.flagged else 0.0 for o in feasible),
    )


def split_history(labelled: LabelledSet) -> tuple[LearnedWords, LabelledSet]:
    """Half of ``labelled`` replayed as history, and the other half to score.

    Queries are taken in ``qid`` order and alternate: the first, third, … are history, as if
    an agent had searched with those words and then called the query's gold tool (the first
    of each gold set), which is what the adapter learns from (``_search_learned.py``); the
    rest are returned to be scored, so no scored query's own words were learned. Score the
    returned set with and without the learned words to report one beside the other.
    """
    origin = {labelled.ids[t.name]: (t.server, t.original_name) for t in labelled.tools}
    ordered = sorted(labelled.queries, key=lambda q: q.qid)
    history, scored = ordered[0::2], ordered[1::2]
    pairs: list[tuple[str, ToolKey, float]] = []
    for query in history:
        called = [query.gold[0]] if query.match == "any" and query.gold else []
        if query.match == "all":
            called = [gold_set[0] for gold_set in query.gold_sets if gold_set]
        for tool_id in called:
            tool = origin.get(tool_id)
            if tool is not None:
                pairs += [(term, tool, 1.0) for term in learnable_terms(query.query)]
    return LearnedWords.from_pairs(pairs), dataclasses.replace(labelled, queries=tuple(scored))


def gold_called_in_history(scored: LabelledSet, learned: LearnedWords) -> LabelledSet:
    """The queries of ``scored`` (the half :func:`split_history` returns) whose gold tool, or
    one of them, was called in the history half: the only ones learning can help.

    A split in half leaves many scored queries asking for tools the history never called;
    their figure is the cold one by construction. Report this subset beside the whole half,
    never in its place.
    """
    called = {tool for led_to in learned.by_term.values() for tool in led_to}
    origin = {scored.ids[t.name]: (t.server, t.original_name) for t in scored.tools}
    kept = tuple(
        q for q in scored.queries if any(origin.get(tool_id) in called for tool_id in q.gold)
    )
    return dataclasses.replace(scored, queries=kept)


def evaluate(
    labelled: LabelledSet,
    *,
    ranking: str = "default",
    vector_cache: Path | None = None,
    learned: LearnedWords | None = None,
) -> EvalReport:
    """Run every query of ``labelled`` through a :class:`SearchIndex` and score the answers.

    ``ranking`` is a name :class:`SearchIndex` accepts; the report names the one used
    (``"default"`` resolves to ``"hybrid"`` or ``"lexical"``). ``vector_cache`` is passed on.
    ``learned`` adds the learned term (see :func:`split_history`); without it, the cold figure.

    Raises:
        UsageError: ``ranking`` is unknown.
    """
    index = SearchIndex(labelled.tools, ranking=ranking, vector_cache=vector_cache)
    outcomes: list[QueryOutcome] = []
    for query in labelled.queries:
        started = time.perf_counter()
        page = (
            index.search(query.query, limit=RANKED_DEPTH, learned=learned)
            if query.query.strip()
            else None
        )
        seconds = time.perf_counter() - started
        ranked = tuple(labelled.ids[h.tool.name] for h in page.hits) if page else ()
        rank, share = _score_query(query, ranked)
        outcomes.append(
            QueryOutcome(
                qid=query.qid,
                level=query.level,
                match=query.match,
                ranked=ranked,
                first_gold_rank=rank,
                sets_found_share=share,
                seconds=seconds,
                confident=page.confident if page else False,
            )
        )
    levels = sorted({o.level for o in outcomes if o.level is not None})
    by_level = tuple(
        _metrics(f"level {lv}", [o for o in outcomes if o.level == lv]) for lv in levels
    )
    return EvalReport(
        ranking=index.ranking,
        tools=len(labelled.tools),
        overall=_metrics("all", outcomes),
        levels=by_level,
        outcomes=tuple(outcomes),
        mean_query_ms=1000.0 * (_mean(o.seconds for o in outcomes) or 0.0),
    )


def write_rankings(report: EvalReport, path: Path) -> None:
    """Write one ``{"qid": ..., "ranked": [ids, best first]}`` JSON line per query."""
    with path.open("w", encoding="utf-8") as out:
        for o in report.outcomes:
            out.write(json.dumps({"qid": o.qid, "ranked": list(o.ranked)}, ensure_ascii=False))
            out.write("\n")
