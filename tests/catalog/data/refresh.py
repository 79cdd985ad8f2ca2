"""Re-create the tool-list fixtures in this directory from real MCP servers.

Run from the repository root after ``make npm``::

    .venv/bin/python tests/catalog/data/refresh.py [SERVER ...]

Listing tools needs no network. Each fixture is the server's ``tools/list`` result (every
page), dumped in the wire's camelCase shape and in the order the server sent (property order
matters to renderings), so the schema-rendering tests read exactly what a live server sends.
The real-server search sets (``bench/data/real_servers*.json``) are built from these lists too.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

DATA_DIR = Path(__file__).resolve().parent
REPO_ROOT = DATA_DIR.parents[2]
NPM_BIN = REPO_ROOT / "tests" / "npm" / "node_modules" / ".bin"
VENV_BIN = Path(sys.executable).parent

# Connecting includes a cold node/python start; 60 s leaves room for a slow CI machine.
CONNECT_BUDGET_S = 60


def _servers(scratch_dir: str) -> dict[str, StdioServerParameters]:
    return {
        "server-everything": StdioServerParameters(
            command=str(NPM_BIN / "mcp-server-everything"), args=["stdio"]
        ),
        "server-filesystem": StdioServerParameters(
            command=str(NPM_BIN / "mcp-server-filesystem"), args=[scratch_dir]
        ),
        "mcp-server-time": StdioServerParameters(
            command=str(VENV_BIN / "mcp-server-time"), args=["--local-timezone", "UTC"]
        ),
        "server-memory": StdioServerParameters(
            command=str(NPM_BIN / "mcp-server-memory"),
            env={"MEMORY_FILE_PATH": str(Path(scratch_dir) / "memory.jsonl")},
        ),
        "mcp-server-git": StdioServerParameters(command=str(VENV_BIN / "mcp-server-git")),
        "mcp-server-fetch": StdioServerParameters(command=str(VENV_BIN / "mcp-server-fetch")),
        "wikipedia-mcp": StdioServerParameters(command=str(VENV_BIN / "wikipedia-mcp")),
    }


async def dump_tools(params: StdioServerParameters) -> list[dict[str, Any]]:
    """A server's whole ``tools/list`` (every page), in the wire's camelCase shape."""
    tools: list[dict[str, Any]] = []
    with anyio.fail_after(CONNECT_BUDGET_S):
        async with Client(params, mode="legacy", cache=None) as client:
            cursor: str | None = None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools += [
                    t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in page.tools
                ]
                cursor = page.next_cursor
                if cursor is None:
                    break
    return tools


async def main(only: list[str]) -> None:
    with tempfile.TemporaryDirectory() as scratch_dir:
        for name, params in _servers(scratch_dir).items():
            if only and name not in only:
                continue
            tools = await dump_tools(params)
            out = DATA_DIR / f"{name}.json"
            out.write_text(json.dumps({"tools": tools}, indent=2, ensure_ascii=False) + "\n")
            print(f"{out.relative_to(REPO_ROOT)}: {len(tools)} tools")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
