"""Code mode against a server that writes its own signatures and results.

Signatures and observed result shapes are text a model codes against, built from what servers
send: parameter names and results. A server's parameter name cannot end a signature line and
write a line of its own (a tool of another server, to be called with the model's trust in
that server); a result keyed by data (commit hashes, UUIDs, years, user ids, that all look
like field names) is recorded as ``dict[str, T]`` in the metadata cache and in a script's
error, with none of its keys or values. Real ``shape_probe_server`` over stdio.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from pi_mcp_adapter.engine import ToolResult
from pi_mcp_adapter.surface import McpAdapter
from pi_mcp_adapter.surface._proxy import ProxyTool
from pi_mcp_adapter.surface._script import ScriptTool
from surface.conftest import Workspace, make_workspace

pytestmark = [pytest.mark.slow]

PROBE = Path(__file__).resolve().parents[1] / "fixtures" / "shape_probe_server.py"
sys.path.insert(0, str(PROBE.parent))
from shape_probe_server import DATA_KEYS, FORGED_LINE, SECRET_VALUE  # noqa: E402


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    ws = make_workspace(tmp_path)
    ws.write_config({"probe": {"command": sys.executable, "args": [str(PROBE)]}})
    return ws


@pytest.fixture
async def adapter(workspace: Workspace) -> AsyncIterator[McpAdapter]:
    async with workspace.adapter() as adapter:
        await adapter.ready()
        yield adapter


async def run_script(adapter: McpAdapter, code: str) -> ToolResult:
    return await ScriptTool(adapter).execute({"code": code})


async def test_a_parameter_name_cannot_forge_a_signature_line_in_a_server_listing(
    adapter: McpAdapter,
) -> None:
    listing = (await ProxyTool(adapter).execute({"describe": "probe"})).text_content
    lines = listing.splitlines()
    assert lines[0] == "# probe"
    assert [line.split("(")[0] for line in lines[1:]] == [
        "probe_commits",
        "probe_notes",
        "probe_forge",
    ]
    assert not any(line.startswith(FORGED_LINE) for line in lines)
    assert "# bank" not in lines


async def test_a_parameter_name_cannot_forge_lines_in_a_script_search_hit_or_describe(
    adapter: McpAdapter,
) -> None:
    code = (
        'hit = [h for h in await search("oddly named parameters") if h["name"] == "probe_forge"]'
        '\n[hit[0]["signature"], (await describe("probe_forge"))["signature"]]'
    )
    result = await run_script(adapter, code)
    assert not result.is_error, result.text_content
    call_line, typed_dict = json.loads(result.text_content)
    assert "\n" not in call_line
    assert call_line.startswith("probe_forge(")
    assert call_line.endswith("-> str | dict | list")
    typed_lines = typed_dict.splitlines()
    assert not any(line.lstrip().startswith(("# bank", FORGED_LINE)) for line in typed_lines)


async def test_a_result_keyed_by_hashes_ids_and_years_is_recorded_without_its_keys(
    adapter: McpAdapter, workspace: Workspace
) -> None:
    result = await run_script(adapter, 'await call("probe_commits", {})\n"done"')
    assert not result.is_error, result.text_content
    shown = (await ProxyTool(adapter).execute({"describe": "probe_commits"})).text_content
    assert shown.endswith('-> dict[str, {"author": str, "message": str, "token": str}'
                          ' | {"author": str, "message": str}] (observed)')  # fmt: skip
    adapter.cache.flush()
    # Every file of the metadata cache, whatever its form (the JSON file, a database beside it).
    stored = b"".join(
        path.read_bytes() for path in workspace.agent_dir.glob("mcp-cache*") if path.is_file()
    )
    assert b'dict[str, {\\"author\\": str' in stored or b'dict[str, {"author": str' in stored
    for leaked in (*DATA_KEYS, SECRET_VALUE, "alice@example.org"):
        assert leaked.encode() not in stored
        assert leaked not in shown


async def test_a_script_that_misreads_a_data_keyed_result_is_told_its_shape_without_data(
    adapter: McpAdapter,
) -> None:
    result = await run_script(adapter, 'r = await call("probe_commits", {})\nr["commits"]')
    assert result.is_error
    assert "probe_commits -> dict[str, {" in result.text_content
    for leaked in (*DATA_KEYS[1:], SECRET_VALUE, "alice@example.org"):
        assert leaked not in result.text_content


async def test_a_record_with_real_field_names_keeps_them_in_its_observed_shape(
    adapter: McpAdapter,
) -> None:
    result = await run_script(adapter, 'await call("probe_notes", {})\n"done"')
    assert not result.is_error, result.text_content
    shown = (await ProxyTool(adapter).execute({"describe": "probe_notes"})).text_content
    assert shown.endswith('-> {"title": str, "when": str, "lines": int} (observed)')
