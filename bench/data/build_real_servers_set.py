"""Build the labelled sets over real MCP servers' tool lists.

Usage: ``.venv/bin/python bench/data/build_real_servers_set.py``

The catalog is the ``tools/list`` of real servers as captured in ``tests/catalog/data`` (by
``refresh.py`` there). Two sets of queries are labelled against it:

- ``real_servers_queries.json`` -> ``real_servers.json``, used while tuning search;
- ``real_servers_held_out_queries.json`` -> ``real_servers_held_out.json``, written by hand
  and never tuned on: it checks that what was tuned elsewhere generalises;
- ``other_servers_held_out_queries.json`` -> ``other_servers_held_out.json``, held out too,
  over a second catalog: ten other real servers (``other_servers/``, captured by
  ``other_servers/capture.py``) that nothing else in the project uses.

Each is joined with the catalog into the labelled-set format of ``DESIGN.md`` so that
``pi-mcp eval-search`` and ``bench/bench_search.py`` can read it. Every gold id is checked
against the catalog.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parents[1] / "tests" / "catalog" / "data"


SETS = {
    "real_servers_queries.json": "real_servers.json",
    "real_servers_held_out_queries.json": "real_servers_held_out.json",
    "other_servers_held_out_queries.json": "other_servers_held_out.json",
}


def main() -> int:
    for source, target in SETS.items():
        if build(HERE / source, HERE / target):
            return 1
    return 0


def build(source: Path, out: Path) -> int:
    spec = json.loads(source.read_text(encoding="utf-8"))
    tools: list[dict[str, object]] = []
    # A set names the folder of its tool lists when they are not the test fixtures.
    fixtures = HERE / spec["fixtures"] if "fixtures" in spec else FIXTURES
    for server, fixture in spec["servers"].items():
        listed = json.loads((fixtures / fixture).read_text(encoding="utf-8"))["tools"]
        for tool in listed:
            tools.append(
                {
                    "id": f"{server}/{tool['name']}",
                    "server": server,
                    "name": tool["name"],
                    "description": tool.get("description", ""),
                    "input_schema": tool.get("inputSchema", {"type": "object"}),
                }
            )
    known = {t["id"] for t in tools}
    unknown = sorted(
        {
            g
            for q in spec["queries"]
            for g in [*q.get("gold", []), *(m for s in q.get("gold_sets", []) for m in s)]
            if g not in known
        }
    )
    if unknown:
        print(f"{source.name}: gold ids not in the catalog: {', '.join(unknown)}", file=sys.stderr)
        return 1
    labelled = {"tools": tools, "queries": spec["queries"]}
    out.write_text(json.dumps(labelled, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{out.name}: {len(tools)} tools, {len(spec['queries'])} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
