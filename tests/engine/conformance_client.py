"""A conformance-suite client built on the Python API: ``McpAdapter(elicit=...)``.

``python tests/engine/conformance_client.py TOOL URL`` (the suite appends the URL of its test
server) calls TOOL through an adapter whose ``elicit`` accepts every form as it comes: the
engine fills in the schema's defaults (SEP-1034). Prints the tool's text; exit 1 on an error.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import anyio
import mcp_types as types

from pi_mcp_adapter import McpAdapter


async def accept_as_is(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={})


async def main(tool: str, url: str) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = root / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {"conformance": {"url": url}}}))
        async with McpAdapter(
            agent_dir=root / "agent",
            project_dir=root,
            config_path=config,
            home=root,
            elicit=accept_as_is,
        ) as adapter:
            outcome = await adapter.call(tool, {})
    if outcome.error_kind is not None or outcome.result is None:
        sys.stderr.write(f"{outcome.message}\n")
        return 1
    for content in outcome.result.content:
        if isinstance(content, types.TextContent):
            sys.stdout.write(content.text + "\n")
    return 1 if outcome.is_error else 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(main, sys.argv[1], sys.argv[-1]))
