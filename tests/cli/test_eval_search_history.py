"""``pi-mcp eval-search --history``: half of a labelled set replayed as history, the other half
scored cold and with what was learned, printed side by side, with the figure for the scored
requests whose gold tool the history called."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow]

PI_MCP = Path(sys.executable).parent / "pi-mcp"


def tool(server: str, name: str, description: str) -> dict[str, Any]:
    return {
        "id": f"{server}/{name}",
        "server": server,
        "name": name,
        "description": description,
        "input_schema": {"type": "object"},
    }


def query(qid: str, text: str, gold: str) -> dict[str, Any]:
    return {"qid": qid, "query": text, "gold": [gold], "match": "any"}


def write_set(path: Path) -> None:
    tools = [
        tool("ops", "restart_service", "Restart a systemd unit."),
        tool("files", "read_file", "Read a file from disk."),
        *(tool("misc", f"helper{i}", f"Helper {i} for units of measure.") for i in range(6)),
    ]
    queries = [
        # Sorted by qid, q0 and q2 are history, q1 and q3 are scored.
        query("q0", "bounce the flaky worker", "ops/restart_service"),
        query("q1", "bounce the flaky daemon", "ops/restart_service"),
        query("q2", "bounce flaky box", "ops/restart_service"),
        query("q3", "read the notes file", "files/read_file"),
    ]
    path.write_text(json.dumps({"tools": tools, "queries": queries}))


def run_eval(tmp_path: Path, *extra: str) -> str:
    labelled = tmp_path / "set.json"
    write_set(labelled)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    done = subprocess.run(
        [str(PI_MCP), "eval-search", "--set", str(labelled), "--history", *extra],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin", "NO_COLOR": "1", "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_eval_search_with_history_prints_the_cold_figure_beside_the_learned_one(
    tmp_path: Path,
) -> None:
    out = run_eval(tmp_path, "--ranking", "lexical")
    cold_at = out.index("Scored half, cold (no history):")
    warm_at = out.index("The same half, with the other half learned as history:")
    assert cold_at < warm_at
    assert (
        "Requests whose gold tool the history called: 1 "
        "(single-tool hit@5 cold 0.000, with history 1.000)"
    ) in out


def test_eval_search_with_history_as_json_holds_both_figures_and_the_helped_requests(
    tmp_path: Path,
) -> None:
    document = json.loads(run_eval(tmp_path, "--ranking", "lexical", "--json"))
    assert document["queries"] == 2
    assert document["overall"]["hitAt5"] == 0.5
    assert document["withHistory"]["overall"]["hitAt5"] == 1.0
    helped = document["goldCalledInHistory"]
    assert helped["cold"]["queries"] == 1
    assert helped["cold"]["overall"]["hitAt5"] == 0.0
    assert helped["withHistory"]["overall"]["hitAt5"] == 1.0
