"""``pi-mcp app``: a tool's MCP Apps view served on loopback until Ctrl-C.

Real CLI process, the fixture app server over stdio, plain HTTP against the served page (the
browser side is tested with Chromium in tests/surface/test_app_views.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx

APP_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "app_server.py"


def test_app_serves_the_view_and_its_calls_meet_approval_until_interrupted(
    tmp_path: Path,
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    log = tmp_path / "calls.jsonl"
    entry = {
        "command": sys.executable,
        "args": [str(APP_SERVER)],
        "env": {"APP_SERVER_LOG": str(log)},
        "approveTools": ["save_chart"],
    }
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": {"apps": entry}}))
    env = {**os.environ, "HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(tmp_path / "agent")}
    argv = [sys.executable, "-m", "pi_mcp_adapter", "--project", str(tmp_path / "project")]
    argv += ["app", "apps_show_chart", '{"title": "Q3"}', "--no-browser"]
    proc = subprocess.Popen(
        argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().decode().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read() if proc.stderr else ""
        page = httpx.get(url, timeout=30)
        call = {"method": "tools/call", "params": {"name": "save_chart", "arguments": {}}}
        refused = httpx.post(url + "/rpc", json=call, timeout=30).json()["result"]
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert page.status_code == 200
    assert '\\"title\\": \\"Q3\\"' not in page.text  # the config is JSON, not escaped twice
    assert '"structuredContent": {"title": "Q3", "values": [3, 1, 4]}' in page.text
    # No terminal to ask on: approveTools fails closed for the view's call as for any call.
    assert refused["isError"] is True
    assert "approv" in refused["content"][0]["text"].lower()
    calls = [json.loads(line)["tool"] for line in log.read_text().splitlines()]
    assert calls == ["show_chart"]
    assert b"Ctrl-C stops serving it" in stderr
    assert proc.returncode == 130
