"""How often a session's requests would miss the provider's prompt cache.

A scripted agent session (13 model requests over 4 runs: 5 ToolSearch activations, a server
relisted mid-way that rewrites one activated tool, removes another and adds a third) is driven
through the plain export host against the real ``changing`` fixture server, recording each
request's tool definitions and messages. A request "breaks" the cache when it is not the one
before it with tools or messages appended (``surface._exposure.count_cache_breaks``).

Rows, each measured in the same run:
- ours, appending (every host without native deferral: pydantic-ai, openai-agents, pi-python,
  plain export), against the way the pydantic-ai and openai-agents bindings listed tools before
  (registration order filtered by the active set, each definition as last listed);
- ours with Anthropic ``defer_loading`` + ``tool_reference`` (``defer="client"``).

Usage: .venv/bin/python bench/bench_prompt_cache.py [--sessions N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The scripted session is the one the prompt-cache tests drive through every host.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.hosts._cache_session import BEFORE, CHANGING, RELIST_BEFORE_RUN, RUNS, dumps, relist

from _summary import record
from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter.engine import ToolDefinition
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.surface._exposure import count_cache_breaks


class RegistrationOrderHost(ExportHost):
    """How the pydantic-ai and openai-agents bindings listed MCP tools before: in registration
    order, filtered by the active set, each definition as its server last listed it."""

    def register_tool(self, tool: ToolDefinition) -> None:
        self.tools[tool.name] = tool

    def unregister_tool(self, name: str) -> None:
        self.tools.pop(name, None)
        self.active = [n for n in self.active if n != name]

    def active_definitions(self) -> list[ToolDefinition]:
        return [d for name, d in self.tools.items() if name in self.active]


async def session(root: Path, host: ExportHost, format: str, defer: Any) -> Sequence[Any]:
    agent_dir, project = root / "agent", root / "project"
    agent_dir.mkdir(parents=True)
    project.mkdir()
    definitions = root / "tools.json"
    definitions.write_text(json.dumps(BEFORE))
    config = agent_dir / "mcp.json"
    server = {"command": sys.executable, "args": [str(CHANGING), str(definitions)]}
    config.write_text(
        json.dumps({"mcpServers": {"changing": server}, "settings": {"surface": "toolsearch"}})
    )
    requests: list[tuple[list[str], list[str]]] = []
    conversation: list[dict[str, Any]] = []
    async with McpAdapter(
        host=host, agent_dir=agent_dir, project_dir=project, config_path=config
    ) as adapter:
        host.attach(adapter)
        await adapter.ready()
        for index, run in enumerate(RUNS):
            if index == RELIST_BEFORE_RUN:
                await relist(adapter, definitions)
            conversation.append({"role": "user", "content": f"turn {index}"})
            for n, step in enumerate(run):
                tools = host.tool_definitions(format, defer=defer)  # type: ignore[arg-type]
                requests.append(([dumps(t) for t in tools], [dumps(m) for m in conversation]))
                if isinstance(step, str):
                    conversation.append({"role": "assistant", "content": step})
                    continue
                name, args = step
                call_id = f"call_{index}_{n}"
                conversation.append({"role": "assistant", "tool_call": [call_id, name, args]})
                result = await host.execute(name, args)
                conversation.append(host.result_shape(name, result, format, call_id=call_id))  # type: ignore[arg-type]
    return requests


async def measure(sessions: int) -> None:
    kinds = {
        "ours, appending (openai-chat)": (ExportHost, "openai-chat", False),
        "ours, Anthropic defer_loading + tool_reference": (ExportHost, "anthropic", "client"),
        "registration order (the bindings before)": (RegistrationOrderHost, "openai-chat", False),
    }
    breaks: dict[str, list[int]] = {k: [] for k in kinds}
    requests_per_session = 0
    for _ in range(sessions):
        for label, (host_type, format, defer) in kinds.items():
            with tempfile.TemporaryDirectory() as tmp:
                requests = await session(Path(tmp), host_type(), format, defer)
            requests_per_session = len(requests)
            breaks[label].append(count_cache_breaks(requests))
    print(f"{sessions} session(s) of {requests_per_session} requests, 5 activations, 1 relisting")
    print(f"{'exposure':<50}{'cache breaks per session':>26}")
    mean = {label: sum(v) / len(v) for label, v in breaks.items()}
    for label, value in mean.items():
        print(f"{label:<50}{value:>26.1f}")
    baseline = mean["registration order (the bindings before)"]
    for label in (
        "ours, appending (openai-chat)",
        "ours, Anthropic defer_loading + tool_reference",
    ):
        record(
            "prompt cache",
            f"cache-breaking requests per session ({label}; target 0)",
            mean[label],
            baseline,
            unit="requests",
            baseline_name="registration order, definitions as relisted (before)",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(measure(args.sessions))


if __name__ == "__main__":
    main()
