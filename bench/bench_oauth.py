"""How fast OAuth answers: a server that needs a sign-in, a stored token, and a refresh.

Against the local authorization server of the tests (``tests/fixtures/oauth_server.py``, MCP
and authorization server in one process), in one run:

- baseline: connecting with a valid stored token (handshake plus listing);
- needs-auth: connecting with no token and nobody to ask, until ``NeedsAuthError`` (discovery
  and the refusal; no browser, no wait);
- refresh: connecting with an expired stored token (one refresh, then the handshake).

Each is the median of ``--runs`` fresh ``McpAdapter`` connects (a new process would pay the
same plus Python start-up). Prints a table with the ratio to the baseline.

Usage: .venv/bin/python bench/bench_oauth.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio

from pi_mcp_adapter._errors import NeedsAuthError
from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.servers._oauth import AuthorizationPrompt, OAuthProviders, allow_prompts

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "oauth_server.py"
BROWSER = ROOT / "tests" / "oauth" / "browser.py"


def adapter_for(agent_dir: Path, environ: dict[str, str]) -> McpAdapter:
    config = load_config(
        agent_dir=agent_dir,
        project_dir=agent_dir,
        config_path=agent_dir / "mcp.json",
        environ=environ,
    )
    oauth = OAuthProviders(
        config.servers,
        agent_dir=agent_dir,
        settings=config.settings,
        environ=environ,
        prompt=AuthorizationPrompt(environ=environ),
    )
    return McpAdapter(
        config=config,
        agent_dir=agent_dir,
        project_dir=agent_dir,
        connect_missing=False,
        environ=environ,
        oauth=oauth,
    )


async def connect_once(agent_dir: Path, environ: dict[str, str], *, prompts: bool) -> float:
    adapter = adapter_for(agent_dir, environ)
    async with adapter:
        started = time.perf_counter()
        try:
            with allow_prompts(prompts):
                await adapter.connect("remote")
        except NeedsAuthError:
            pass
        return time.perf_counter() - started


def expire(tokens: Path) -> None:
    data = json.loads(tokens.read_text())
    data["expiresAt"] = int((time.time() - 60) * 1000)
    tokens.write_text(json.dumps(data))


def median_ms(runs: int, measure: Callable[[], float]) -> float:
    return statistics.median(measure() for _ in range(runs)) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    server = subprocess.Popen(
        [sys.executable, str(FIXTURE)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().split()[1])
        with tempfile.TemporaryDirectory() as tmp:
            agent_dir = Path(tmp)
            config = {"mcpServers": {"remote": {"url": f"http://127.0.0.1:{port}/mcp"}}}
            (agent_dir / "mcp.json").write_text(json.dumps({**config}))
            browser = agent_dir / "browser"
            browser.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{BROWSER}" "$@"\n')
            browser.chmod(0o755)
            environ = {"BROWSER": str(browser)}
            os.environ.update(environ)  # webbrowser reads the process environment
            tokens = agent_dir / "mcp-oauth" / "remote" / "tokens.json"

            def run(prompts: bool, before: Callable[[], None] = lambda: None) -> float:
                before()
                return anyio.run(lambda: connect_once(agent_dir, environ, prompts=prompts))

            needs_auth = median_ms(args.runs, lambda: run(False))
            run(True)  # sign in once
            assert tokens.exists()
            baseline = median_ms(args.runs, lambda: run(False))
            refresh = median_ms(args.runs, lambda: run(False, lambda: expire(tokens)))
    finally:
        server.kill()
        server.wait()
    rows = [
        ("connect with a stored token (baseline)", baseline),
        ("needs-auth: no token, nobody to ask", needs_auth),
        ("expired token: refresh, then connect", refresh),
    ]
    print(f"{'case':<42} {'median ms':>10} {'vs baseline':>12}")
    for name, value in rows:
        print(f"{name:<42} {value:>10.1f} {value / baseline:>11.2f}x")


if __name__ == "__main__":
    main()
