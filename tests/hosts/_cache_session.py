"""A scripted session for the prompt-cache tests: 5 activations, a server relisted mid-way.

The ``changing`` fixture server lists ``t0``…``t7``; after the first half of the session its
definitions change (``t0``'s description and schema are rewritten, ``t3`` disappears, ``t8``
appears) and the adapter relists it. Every host drives the same script through its real
runtime with a scripted model and records each request's tool definitions and messages.

``bench/bench_prompt_cache.py`` drives the same session to count cache breaks, so this module
imports nothing of the test suite at run time (``Workspace`` is a type only).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from pi_mcp_adapter import McpAdapter

if TYPE_CHECKING:
    from .conftest import Workspace

CHANGING = Path(__file__).resolve().parents[1] / "fixtures" / "changing_server.py"


def _tool(name: str, description: str, *properties: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {p: {"type": "string"} for p in properties},
        },
    }


BEFORE = [_tool(f"t{i}", f"Tool {i}: does task number {i}.", "text") for i in range(8)]
AFTER = [
    _tool("t0", "Tool 0, rewritten: now does something else entirely.", "text", "extra"),
    *(t for t in BEFORE[1:] if t["name"] != "t3"),
    _tool("t8", "Tool 8: arrived with the relisting.", "text"),
]

# (run, steps): each step is a tool call (name, arguments) or the run's closing text. Five
# ToolSearch activations; the server is relisted between run 2 and run 3.
RUNS: list[list[tuple[str, dict[str, Any]] | str]] = [
    [("ToolSearch", {"query": "select:changing_t0"}), ("changing_t0", {"text": "a"}), "ok"],
    [("ToolSearch", {"query": "select:changing_t3"}), ("changing_t3", {"text": "b"}), "ok"],
    [("ToolSearch", {"query": "select:changing_t5"}), ("changing_t0", {"text": "c"}), "ok"],
    [
        ("ToolSearch", {"query": "select:changing_t1"}),
        ("ToolSearch", {"query": "select:changing_t8"}),
        ("changing_t8", {"text": "d"}),
        "ok",
    ],
]
RELIST_BEFORE_RUN = 2
ACTIVATIONS = 5


def configure(workspace: Workspace, **settings: Any) -> Path:
    definitions = workspace.root / "tools.json"
    definitions.write_text(json.dumps(BEFORE))
    workspace.write_config(
        {"changing": {"command": sys.executable, "args": [str(CHANGING), str(definitions)]}},
        settings={"surface": "toolsearch", **settings},
    )
    return definitions


async def relist(adapter: McpAdapter, definitions: Path) -> None:
    """Rewrite the server's definitions and make the adapter list them again."""
    definitions.write_text(json.dumps(AFTER))
    with anyio.fail_after(60):
        await adapter.reconnect("changing")
        while "t8" not in {t.original_name for t in adapter.tools("changing")}:
            await anyio.sleep(0.05)
        # The search index is rebuilt in the background after a listing.
        while "changing_t8" not in [h.tool.name for h in adapter.search("relisting").page.hits]:
            await anyio.sleep(0.05)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def without_timestamps(value: Any) -> Any:
    """``value`` without the runtime's bookkeeping timestamps, which no provider is sent."""
    if isinstance(value, dict):
        return {k: without_timestamps(v) for k, v in value.items() if k != "timestamp"}
    if isinstance(value, list):
        return [without_timestamps(v) for v in value]
    return value
