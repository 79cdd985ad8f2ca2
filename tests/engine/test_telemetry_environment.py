"""Telemetry configured from the adapter's environment: an embedder's
``McpAdapter(environ=...)`` naming an OTLP endpoint exports there, though the process's own
environment names none (the exporters' defaults would read the process's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gateway._telemetry_support import fixture_entry, running_otlp_receiver

pytestmark = [pytest.mark.slow]

PROGRAM = """
import sys, anyio
from pathlib import Path
from pi_mcp_adapter.engine import McpAdapter

async def main(agent: str, endpoint: str) -> None:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    async with McpAdapter(agent_dir=Path(agent), project_dir=Path(agent), environ=environ) as a:
        outcome = await a.call("fx_echo", {"message": "hi"})
        assert outcome.error_kind is None, outcome

anyio.run(main, sys.argv[1], sys.argv[2])
"""


def test_an_adapter_exports_to_the_endpoint_its_own_environment_names(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"fx": fixture_entry()}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["HOME"] = str(tmp_path)
    with running_otlp_receiver() as receiver:
        done = subprocess.run(
            [sys.executable, "-c", PROGRAM, str(tmp_path), receiver.endpoint],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        receiver.wait_for(lambda spans: any(s.name == "tools/call echo" for s in spans), 10)
        names = {s.name for s in receiver.spans}
        metrics = list(receiver.metrics)
    assert "tools/call echo" in names, (sorted(names), done.stderr[-2000:])
    assert "mcp.client.operation.duration" in metrics
