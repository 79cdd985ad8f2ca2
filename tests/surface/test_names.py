"""Tool names as the ToolSearch design spells them, against the real workbench server."""

from __future__ import annotations

import anyio
import pytest

from pi_mcp_adapter.hosts import ExportHost

from .conftest import Workspace, workbench_entry

pytestmark = [pytest.mark.slow]


async def test_double_separator_names_and_get_spelt_resources_reach_the_server(
    workspace: Workspace,
) -> None:
    workspace.write_config({"work-bench": workbench_entry()}, settings={"toolSeparator": "__"})
    host = ExportHost()
    async with workspace.attached(host) as adapter:
        names = {t.name for t in adapter.tools()}
        assert {"work_bench__echo", "work_bench__read_readme"} <= names
        with anyio.fail_after(30):
            echoed = await host.execute(
                "mcp", {"tool": "work_bench__echo", "args": {"message": "x"}}
            )
            read = await host.execute("mcp", {"tool": "work_bench__get_readme"})
        assert echoed.text_content == "Echo: x"
        assert "hello from a resource" in read.text_content
        assert read.details["name"] == "work_bench__read_readme"
