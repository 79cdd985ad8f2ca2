"""See the package docstring of pi_mcp_adapter for how this layer fits."""

from __future__ import annotations
