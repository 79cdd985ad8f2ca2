"""A caller that stops waiting for a slow server early does not make it a failure anywhere."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from pi_mcp_adapter._errors import ConnectTimeoutError
from pi_mcp_adapter.servers._failures import FailureMemory

from ._support import ManagerFactory, fixture_entry

pytestmark = [pytest.mark.slow]


async def test_a_server_cut_before_its_start_up_time_is_still_starting_and_not_remembered(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    memory = FailureMemory(tmp_path / "mcp-failures.json")
    servers = {"slow": fixture_entry("--start-delay", "6", startup_timeout_ms=60_000)}
    async with make_manager(servers, failures=memory) as impatient:
        with anyio.fail_after(30):
            results = await impatient.connect_many(["slow"], deadline_s=1.0)
        error = results["slow"]
        assert isinstance(error, ConnectTimeoutError)
        assert error.still_starting
        assert "still starting" in str(error)
        assert impatient.state("slow").status != "failed"
    assert memory.get("slow", servers["slow"]) is None
    # Another process (a gateway, pi) is not told to back off: it waits and connects.
    async with make_manager(servers, failures=memory) as patient:
        assert patient.state("slow").status != "failed"
        with anyio.fail_after(60):
            connection = await patient.connect("slow")
        assert connection.metadata.tools


async def test_a_server_whose_own_start_up_time_ended_failed_and_is_remembered(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    memory = FailureMemory(tmp_path / "mcp-failures.json")
    servers = {"hangs": fixture_entry("--hang", startup_timeout_ms=1000)}
    async with make_manager(servers, failures=memory) as manager:
        with anyio.fail_after(30):
            results = await manager.connect_many(["hangs"], deadline_s=1.0)
        error = results["hangs"]
        assert isinstance(error, ConnectTimeoutError)
        assert not error.still_starting
    assert memory.get("hangs", servers["hangs"]) is not None
