"""``pi-mcp doctor`` speaks each server's ``protocolVersion`` as a connect does, so it fails
where ``pi-mcp connect`` would, and says what to change."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MCP_FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
EVERYTHING = ROOT / "tests/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not EVERYTHING.exists() or shutil.which("node") is None,
        reason="npm test servers are not installed (make npm)",
    ),
]


def test_doctor_fails_a_server_that_does_not_speak_its_pinned_protocol(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    servers = {
        # server-everything speaks only the 2025 era: a connect pinned to 2026-07-28 fails.
        "legacy_only": {
            "command": "node",
            "args": [str(EVERYTHING), "stdio"],
            "protocolVersion": "2026-07-28",
        },
        "both_eras": {
            "command": sys.executable,
            "args": [str(MCP_FIXTURE)],
            "protocolVersion": "2026-07-28",
        },
    }
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "PI_MCP_WARM": "0",
    }
    argv = [sys.executable, "-m", "pi_mcp_adapter", "--project", str(tmp_path / "project")]
    proc = subprocess.run(
        [*argv, "doctor", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    reports = {s["name"]: s for s in json.loads(proc.stdout)["servers"]}
    failed = [step for step in reports["legacy_only"]["steps"] if step["status"] == "fail"]
    assert [step["name"] for step in failed] == ["initialize"]
    assert "does not speak the 2026-07-28 protocol" in failed[0]["detail"]
    assert "protocolVersion" in failed[0]["fix"]
    spoken = {step["name"]: step for step in reports["both_eras"]["steps"]}
    assert spoken["initialize"]["status"] == "ok"
    assert "protocol 2026-07-28" in spoken["initialize"]["detail"]
