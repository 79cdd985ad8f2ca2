"""What the model-facing surfaces cost in tokens against registering every tool.

Part 1 runs ``pi-mcp demo --json`` (real servers: mcp-server-time, mcp-server-git and, with
Node.js, the npm everything and memory servers) and reads the o200k token counts of each
surface's tool definitions as a provider would receive them.

Part 2 measures what the model reads when it asks for the status, at 5, 50 and 500 servers:
a config and a metadata cache are written for that many servers (tools taken from the real
catalog in ``bench/data/real_servers.json``, sizes spread like a real catalog's), and
``pi-mcp tokens --json`` reads them without starting any server. The bounded ``mcp({})`` is
compared with the same status listing every server (what ``mcp({})`` returned before it was
bounded, and what ``pi-mcp status`` still prints), both measured in the same run.

Usage: .venv/bin/python bench/bench_tokens.py [--servers 5,50,500] [--no-demo]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _summary import record
from pi_mcp_adapter.catalog import config_hash
from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.surface._render import STATUS_BUDGET_CHARS

PI_MCP = Path(sys.executable).parent / "pi-mcp"
REAL_TOOLS = Path(__file__).resolve().parent / "data" / "real_servers.json"
# Tools per server, cycled: a few large servers, many small ones (about 4.8 a server on
# average, as in the 491-server, 2,375-tool catalog this was first measured on).
SIZES = (12, 1, 3, 2, 7, 1, 4, 2, 9, 5, 1, 3, 6, 2, 14, 1, 2, 4, 3, 1)


def demo_rows() -> int:
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


def write_catalog(root: Path, count: int) -> tuple[Path, Path]:
    """An agent dir with ``count`` servers and a valid cache entry for each; none can start."""
    agent, project = root / "agent", root / "project"
    agent.mkdir(parents=True)
    project.mkdir()
    real: list[dict[str, Any]] = json.loads(REAL_TOOLS.read_text())["tools"]
    names = sorted({t["server"] for t in real})
    servers = {
        f"{names[i % len(names)]}-{i:03d}": {"command": f"/nonexistent/catalog-server-{i}"}
        for i in range(count)
    }
    (agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    config = load_config(agent_dir=agent, project_dir=project, home=root, environ={})
    now_ms = int(time.time() * 1000)
    cache: dict[str, Any] = {}
    offset = 0
    for i, name in enumerate(servers):
        size = SIZES[i % len(SIZES)]
        # Consecutive tools of the real catalog: distinct names, as SIZES stay below its size.
        picked = [real[(offset + j) % len(real)] for j in range(size)]
        tools = [
            {"name": t["name"], "description": t["description"], "inputSchema": t["input_schema"]}
            for t in picked
        ]
        offset += size
        cache[name] = {
            "configHash": config_hash(config.servers[name], environ={}),
            "cachedAt": now_ms,
            "tools": tools,
            "resources": [],
            "prompts": [],
        }
    (agent / "mcp-cache.json").write_text(json.dumps({"version": 1, "servers": cache}))
    return agent, project


def measure_at(count: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pi-mcp-tokens-") as tmp:
        root = Path(tmp)
        agent, project = write_catalog(root, count)
        env = {**os.environ, "HOME": str(root), "PI_CODING_AGENT_DIR": str(agent)}
        done = subprocess.run(
            [str(PI_MCP), "--agent-dir", str(agent), "--project", str(project), "tokens", "--json"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            env=env,
            cwd=project,
        )
    if done.returncode != 0:
        raise SystemExit(f"pi-mcp tokens failed at {count} servers:\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def status_rows(counts: list[int]) -> None:
    print()
    print("what the model reads when it asks for the status (o200k tokens)")
    header = (
        f"{'servers':>8}{'tools':>7}{'mcp({})':>9}{'every server listed':>21}{'ratio':>8}"
        f"{'status line':>13}{'ToolSearch':>12}"
    )
    print(header)
    for count in counts:
        report = measure_at(count)
        bounded, unbounded = report["statusTokens"], report["statusUnboundedTokens"]
        print(
            f"{report['serverCount']:>8}{report['toolCount']:>7}{bounded:>9}{unbounded:>21}"
            f"{bounded / unbounded:>8.3f}{report['statusLineTokens']:>13}"
            f"{report['toolsearchTokens']:>12}"
        )
        record(
            "token cost",
            f"mcp({{}}) status, {count} servers (budget {STATUS_BUDGET_CHARS:,} characters)",
            float(bounded),
            float(unbounded),
            unit="tokens",
            baseline_name="status listing every server",
        )
        record(
            "token cost",
            f"ToolSearch tool, {count} servers",
            float(report["toolsearchTokens"]),
            float(report["allToolsTokens"]),
            unit="tokens",
            baseline_name="every tool registered",
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="5,50,500", help="comma-separated server counts")
    parser.add_argument("--no-demo", action="store_true", help="skip the real-server demo")
    args = parser.parse_args()
    if not args.no_demo and demo_rows() != 0:
        return 1
    status_rows([int(n) for n in args.servers.split(",") if n.strip()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
