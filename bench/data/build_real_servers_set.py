"""Build ``real_servers.json``: the labelled set over real MCP servers' tool lists.

Usage: ``.venv/bin/python bench/data/build_real_servers_set.py``

The catalog is the ``tools/list`` of real servers as captured in ``tests/catalog/data`` (by
``refresh.py`` there); the queries and their labels are in ``real_servers_queries.json``.
Both are joined into the labelled-set format of ``DESIGN.md`` so that ``pi-mcp eval-search``
and ``bench/bench_search.py`` can read them. Every gold id is checked against the catalog.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parents[1] / "tests" / "catalog" / "data"


def main() -> int:
    spec = json.loads((HERE / "real_servers_queries.json").read_text(encoding="utf-8"))
    tools: list[dict[str, object]] = []
    for server, fixture in spec["servers"].items():
        listed = json.loads((FIXTURES / fixture).read_text(encoding="utf-8"))["tools"]
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
        print(f"gold ids not in the catalog: {', '.join(unknown)}", file=sys.stderr)
        return 1
    out = HERE / "real_servers.json"
    labelled = {"tools": tools, "queries": spec["queries"]}
    out.write_text(json.dumps(labelled, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{out.name}: {len(tools)} tools, {len(spec['queries'])} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
