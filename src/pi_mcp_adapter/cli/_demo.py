"""``pi-mcp demo``: real servers, end to end, in a throwaway agent directory.

The demo servers are the PyPI reference servers installed with the project (``mcp-server-time``,
``mcp-server-git``) and, where Node.js is present, the npm reference servers
(``server-everything``, ``server-memory``): from the repository's ``tests/npm`` install when it
exists, else through ``npx`` (which the adapter resolves to the package's own binary).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from rich.console import Console
from rich.rule import Rule

from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.hosts import ExportHost
from pi_mcp_adapter.surface import register_surfaces
from pi_mcp_adapter.surface._tokens_report import measure_tokens

from ._app import CliContext, print_json

NPM_VERSION = "2026.8.31"


def _repo_npm_bin(package: str) -> Path | None:
    here = Path(__file__).resolve()
    for parent in here.parents:
        candidate = parent / "tests" / "npm" / "node_modules" / "@modelcontextprotocol" / package
        manifest = candidate / "package.json"
        if manifest.is_file():
            data = json.loads(manifest.read_text())
            bins = data.get("bin")
            rel = next(iter(bins.values())) if isinstance(bins, dict) else bins
            if isinstance(rel, str):
                return candidate / rel
    return None


def _npm_server(package: str) -> dict[str, Any] | None:
    if shutil.which("node") is None:
        return None
    local = _repo_npm_bin(package)
    if local is not None:
        return {"command": "node", "args": [str(local)]}
    if shutil.which("npx") is None:
        return None
    return {"command": "npx", "args": ["-y", f"@modelcontextprotocol/{package}@{NPM_VERSION}"]}


def demo_config(workdir: Path, project_dir: Path) -> dict[str, Any]:
    """The bundled demo configuration: what each server is and how it starts."""
    servers: dict[str, Any] = {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
    }
    repo = project_dir if (project_dir / ".git").exists() else None
    if repo is not None:
        servers["git"] = {
            "command": sys.executable,
            "args": ["-m", "mcp_server_git", "--repository", str(repo)],
        }
    for name, package in (("everything", "server-everything"), ("memory", "server-memory")):
        entry = _npm_server(package)
        if entry is not None:
            if name == "memory":
                entry["env"] = {"MEMORY_FILE_PATH": str(workdir / "memory.jsonl")}
            servers[name] = entry
    return {"mcpServers": servers, "settings": {"idleTimeout": 0}}


def run_demo(cli: CliContext, *, as_json: bool) -> None:
    console = Console(soft_wrap=True, highlight=False)
    with tempfile.TemporaryDirectory(prefix="pi-mcp-demo-") as tmp:
        workdir = Path(tmp)
        config_file = workdir / "mcp.json"
        config_file.write_text(json.dumps(demo_config(workdir, cli.project_dir), indent=2))
        agent_dir = workdir / "agent"
        agent_dir.mkdir()
        config = load_config(
            agent_dir=agent_dir,
            project_dir=workdir,
            config_path=config_file,
            home=workdir,
        )
        report = anyio.run(_demo, config, agent_dir, workdir, console, as_json)
    if as_json:
        print_json(report)


async def _demo(
    config: Any, agent_dir: Path, workdir: Path, console: Console, as_json: bool
) -> dict[str, Any]:
    def section(title: str) -> None:
        if not as_json:
            console.print(Rule(title, align="left"))

    def show(text: str) -> None:
        if not as_json:
            console.print(text, markup=False)

    started = time.perf_counter()
    section("Starting the demo servers (first run: every server connects once to fill the cache)")
    host = ExportHost()
    adapter = McpAdapter(
        config=config,
        agent_dir=agent_dir,
        project_dir=workdir,
        host=host,
        on_progress=lambda s, phase, d: show(f"  {s}: {phase}" + (f" ({d})" if d else "")),
    )
    report: dict[str, Any] = {}
    async with adapter:
        # The demo drives the `mcp` tool exactly as a host binding offers it to a model.
        register_surfaces(adapter, host, surface="proxy")
        section("mcp({})  status")
        status = await host.execute("mcp", {})
        show(status.text_content)
        report["status"] = status.details

        query = "current time in a timezone"
        section(f'mcp({{search: "{query}"}})')
        found = await host.execute("mcp", {"search": query, "limit": 3})
        show(found.text_content)
        report["search"] = found.details

        best = found.details["matches"][0]["name"] if found.details["matches"] else None
        if best is not None:
            section(f'mcp({{describe: "{best}"}})')
            described = await host.execute("mcp", {"describe": best})
            show(described.text_content)
            report["describe"] = described.details

        section('mcp({tool: "time_get_current_time", args: {timezone: "UTC"}})')
        called = await host.execute(
            "mcp", {"tool": "time_get_current_time", "args": {"timezone": "UTC"}}
        )
        show(called.text_content)
        report["call"] = {"isError": called.is_error, "text": called.text_content}

        section("Token cost of what the model sees (o200k)")
        tokens = measure_tokens(adapter)
        show(
            f"  mcp proxy tool:        {tokens.proxy_tokens:>6} tokens\n"
            f"  ToolSearch tool:       {tokens.toolsearch_tokens:>6} tokens\n"
            f"  every tool registered: {tokens.all_tools_tokens:>6} tokens "
            f"({tokens.tool_count} tools)\n"
            f"  saving with the proxy: {tokens.proxy_saving_ratio:.1f}x"
        )
        report["tokens"] = {
            "proxy": tokens.proxy_tokens,
            "toolsearch": tokens.toolsearch_tokens,
            "allTools": tokens.all_tools_tokens,
            "toolCount": tokens.tool_count,
        }
    elapsed = time.perf_counter() - started
    section(f"Done in {elapsed:.1f} s")
    report["elapsedSeconds"] = round(elapsed, 2)
    return report
