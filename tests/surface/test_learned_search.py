"""Search that learns from use, end to end: a ToolSearch followed by a call teaches the
search's words to the called tool, in the agent dir, never the call's arguments; the next
session's search with those words finds the tool; ``pi-mcp stats --clear-learned`` forgets."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from pi_mcp_adapter.hosts import ExportHost

from .conftest import Workspace

pytestmark = [pytest.mark.slow]

CHANGING = Path(__file__).resolve().parents[1] / "fixtures" / "changing_server.py"
PI_MCP = Path(sys.executable).parent / "pi-mcp"
ARGUMENT_VALUE = "quarterly-numbers-7731"


def configure(workspace: Workspace) -> None:
    definitions = workspace.root / "tools.json"
    tools = [
        {
            "name": f"t{i}",
            "description": f"Tool {i}: does task number {i}.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }
        for i in range(8)
    ]
    definitions.write_text(json.dumps(tools))
    entry = {"command": sys.executable, "args": [str(CHANGING), str(definitions)]}
    workspace.write_config(
        {"changing": entry},
        settings={"surface": "toolsearch", "captureStats": True, "toolSearchLimit": 2},
    )


async def search(workspace: Workspace, query: str, call: str | None = None) -> list[str]:
    host = ExportHost()
    async with workspace.attached(host) as adapter:
        await adapter.ready()
        found = await host.tools["ToolSearch"].execute({"query": query})
        if call is not None:
            ran = await host.execute(call, {"text": ARGUMENT_VALUE})
            assert not ran.is_error
        return list(found.details["matches"])


async def test_words_that_led_to_a_call_find_the_tool_in_the_next_session(
    workspace: Workspace,
) -> None:
    configure(workspace)
    cold = await search(workspace, "frobnicate the gizmo")
    target = next(n for n in (f"changing_t{i}" for i in range(8)) if n not in cold)
    number = target[-1]
    # The agent finds the tool by other words, then calls it: the search's words are learned.
    await search(workspace, f"frobnicate the gizmo: tool {number}", call=target)
    learned = workspace.agent_dir / "mcp-search-learned.json"
    text = learned.read_text()
    assert "gizmo" in text
    assert ARGUMENT_VALUE not in text
    assert "quarterly" not in text
    assert target in await search(workspace, "frobnicate the gizmo")

    cleared = subprocess.run(
        [
            str(PI_MCP),
            "--agent-dir",
            str(workspace.agent_dir),
            "--project",
            str(workspace.project_dir),
            "stats",
            "--clear-learned",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"HOME": str(workspace.home), "PATH": "/usr/bin:/bin"},
    )
    assert cleared.returncode == 0, cleared.stderr
    assert "cleared" in cleared.stdout
    assert not learned.exists()
    assert await search(workspace, "frobnicate the gizmo") == cold


async def test_a_search_not_followed_by_a_call_of_what_it_found_teaches_nothing(
    workspace: Workspace,
) -> None:
    configure(workspace)
    await search(workspace, "frobnicate the gizmo task number five", call=None)
    await search(workspace, "select:changing_t3", call="changing_t3")
    assert not (workspace.agent_dir / "mcp-search-learned.json").exists()


async def test_a_call_that_learns_while_another_process_holds_the_file_stalls_no_one(
    workspace: Workspace,
) -> None:
    # Learning writes the agent dir's file under a lock another process may hold for seconds;
    # the call that learns waits for it in a worker thread, never on the event loop.
    configure(workspace)
    learned = workspace.agent_dir / "mcp-search-learned.json"
    workspace.agent_dir.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import filelock, sys, time\n"
            f"lock = filelock.FileLock({str(learned) + '.lock'!r})\n"
            "lock.acquire()\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdin is not None
    assert holder.stdout.readline().strip() == "held"
    longest_gap = 0.0
    host = ExportHost()
    try:
        async with workspace.attached(host) as adapter:
            await adapter.ready()
            found = await host.tools["ToolSearch"].execute({"query": "frobnicate the gizmo"})
            target = next(iter(found.details["matches"]))

            async def release_later() -> None:
                await anyio.sleep(2.0)
                holder.stdin.close()  # type: ignore[union-attr]

            async def tick() -> None:
                nonlocal longest_gap
                last = time.monotonic()
                while True:
                    await anyio.sleep(0.01)
                    now = time.monotonic()
                    longest_gap = max(longest_gap, now - last)
                    last = now

            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                tg.start_soon(release_later)
                ran = await host.execute(target, {"text": "x"})
                tg.cancel_scope.cancel()
            assert not ran.is_error
    finally:
        if holder.stdin is not None and not holder.stdin.closed:
            holder.stdin.close()
        holder.wait(timeout=30)
    assert "gizmo" in learned.read_text()  # learned once the lock was free
    assert longest_gap < 1.0, f"the event loop stood still {longest_gap:.2f} s"
