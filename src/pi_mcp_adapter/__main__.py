from __future__ import annotations

from pi_mcp_adapter.cli import main

main()
