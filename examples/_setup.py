"""Shared by the examples: a throwaway agent dir whose config has one real server.

Nothing in your own configuration is read or changed. Needs ``pip install mcp-server-time``.
"""

from __future__ import annotations

import atexit
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any


def example_config(surface: str = "proxy") -> dict[str, Any]:
    """``McpAdapter`` keyword arguments for a temporary agent dir with the time server."""
    root = Path(tempfile.mkdtemp(prefix="pi-mcp-example-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    config = {
        "mcpServers": {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]}},
        "settings": {"surface": surface},
    }
    (root / "mcp.json").write_text(json.dumps(config))
    return {"agent_dir": root, "project_dir": root, "config_path": root / "mcp.json"}
