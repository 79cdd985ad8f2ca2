from __future__ import annotations

from pi_mcp_adapter._launch import main

main()
