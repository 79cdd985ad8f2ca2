"""``pi-mcp`` as the client of the conformance suite's general client scenarios.

``python tests/cli/conformance_cli_client.py URL`` (the suite appends its server's URL) does
what a person at the command line would: write a config for the server in a fresh agent
directory, list its tools (``pi-mcp tools``), read each one's parameters (``pi-mcp describe``)
and call it (``pi-mcp call``) with a value of each parameter's type. Exits non-zero at the
first command that fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SERVER = "conformance"
SAMPLE_VALUES: dict[str, Any] = {"number": 1, "integer": 1, "boolean": True, "string": "x"}


def pi_mcp(base: list[str], *args: str) -> Any:
    completed = subprocess.run(
        [*base, *args, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CI": "true"},
        check=False,
    )
    sys.stderr.write(completed.stderr)
    if completed.returncode != 0:
        sys.stderr.write(completed.stdout)
        raise SystemExit(completed.returncode)
    return json.loads(completed.stdout)


def main(url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="pi-mcp-conformance-") as tmp:
        root = Path(tmp)
        agent_dir = root / "agent"
        agent_dir.mkdir()
        config = {"mcpServers": {SERVER: {"url": url}}}
        (agent_dir / "mcp.json").write_text(json.dumps(config), encoding="utf-8")
        base = [sys.executable, "-m", "pi_mcp_adapter", "--agent-dir", str(agent_dir)]
        base += ["--project", str(root)]
        for tool in pi_mcp(base, "tools", SERVER):
            described = pi_mcp(base, "describe", tool["name"])["details"]
            properties = described["inputSchema"].get("properties", {})
            arguments = {
                name: SAMPLE_VALUES.get(schema.get("type"), "x")
                for name, schema in properties.items()
            }
            result = pi_mcp(base, "call", tool["name"], json.dumps(arguments))
            print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[-1])
