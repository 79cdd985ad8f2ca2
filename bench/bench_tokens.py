"""What the model-facing surfaces cost in tokens against registering every tool.

Runs ``pi-mcp demo --json`` (real servers: mcp-server-time, mcp-server-git and, with Node.js,
the npm everything and memory servers) and reads the o200k token counts of each surface's tool
definitions as a provider would receive them.

Usage: .venv/bin/python bench/bench_tokens.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record

PI_MCP = Path(sys.executable).parent / "pi-mcp"


def main() -> int:
    done = subprocess.run(
        [str(PI_MCP), "demo", "--json"], capture_output=True, text=True, timeout=300, check=False
    )
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return 1
    tokens = json.loads(done.stdout)["tokens"]
    every = tokens["allTools"]
    count = tokens["toolCount"]
    print(f"demo catalog: {count} tools (o200k tokens of the tool definitions)")
    print(f"{'surface':<24}{'tokens':>8}{'vs every tool':>16}")
    surfaces = (
        ("mcp proxy tool", tokens["proxy"]),
        ("ToolSearch tool", tokens.get("toolSearch", tokens.get("toolsearch"))),
    )
    for label, cost in surfaces:
        print(f"{label:<24}{cost:>8}{cost / every:>15.3f}x")
        record(
            "token cost",
            f"{label}, {count}-tool demo catalog",
            float(cost),
            float(every),
            unit="tokens",
            baseline_name="every tool registered",
        )
    print(f"{'every tool registered':<24}{every:>8}{1:>15.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
