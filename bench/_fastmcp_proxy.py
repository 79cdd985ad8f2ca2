"""FastMCP's proxy (``fastmcp.server.create_proxy``) in front of one MCP server, for
``bench_gateway.py``. Runs in the benchmark's own environment (``bench/.venv-fastmcp``).

Usage: _fastmcp_proxy.py stdio CONFIG_JSON
       _fastmcp_proxy.py http CONFIG_JSON PORT     (serves http://127.0.0.1:PORT/mcp)
"""

from __future__ import annotations

import json
import sys

import anyio
from fastmcp.server import create_proxy


def main() -> None:
    transport, config = sys.argv[1], json.loads(sys.argv[2])
    proxy = create_proxy(config)
    if transport == "stdio":
        anyio.run(lambda: proxy.run_stdio_async(show_banner=False))
        return
    port = int(sys.argv[3])
    anyio.run(
        lambda: proxy.run_http_async(
            show_banner=False, host="127.0.0.1", port=port, path="/mcp", log_level="warning"
        )
    )


if __name__ == "__main__":
    main()
