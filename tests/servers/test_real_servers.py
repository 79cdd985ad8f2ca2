"""Published MCP servers (npm and PyPI) through the manager, each on its real transport."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pi_mcp_adapter.config._models import ServerEntry

from ._support import EVERYTHING_JS, NPM_BIN, HttpFixtures, ManagerFactory, needs_npm, text_of

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaked_processes")]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.npm
@needs_npm
async def test_server_everything_over_stdio(make_manager: ManagerFactory) -> None:
    entry = ServerEntry(command="node", args=(str(EVERYTHING_JS),))
    async with make_manager({"everything": entry}) as manager:
        metadata = (await manager.connect("everything")).metadata
        assert "echo" in [tool["name"] for tool in metadata.tools]
        assert metadata.resources
        assert metadata.prompts
        result = await manager.call_tool("everything", "echo", {"message": "hi"})
        assert text_of(result) == "Echo: hi"
        summed = await manager.call_tool("everything", "get-sum", {"a": 2, "b": 3})
        assert "5" in text_of(summed)
        uri = metadata.resources[0]["uri"]
        read = await manager.read_resource("everything", uri)
        assert read.contents


@pytest.mark.npm
@needs_npm
async def test_server_everything_over_streamable_http(
    make_manager: ManagerFactory, http_fixtures: HttpFixtures
) -> None:
    port = _free_port()
    process = subprocess.Popen(
        ["node", str(EVERYTHING_JS), "streamableHttp"],
        env={"PATH": "/usr/local/bin:/usr/bin:/bin", "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    http_fixtures.processes.append(process)
    assert process.stderr is not None
    # The server announces itself on stderr once it listens.
    for line in process.stderr:
        if "listening" in line.lower() or "running" in line.lower():
            break
    entry = ServerEntry(url=f"http://127.0.0.1:{port}/mcp")
    async with make_manager({"everything": entry}) as manager:
        result = await manager.call_tool("everything", "echo", {"message": "http"})
        assert text_of(result) == "Echo: http"
        assert manager.state("everything").transport == "streamable-http"


@pytest.mark.npm
@needs_npm
async def test_server_filesystem_lists_and_reads_a_directory(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    (tmp_path / "hello.txt").write_text("hello from a file")
    entry = ServerEntry(command=str(NPM_BIN / "mcp-server-filesystem"), args=(str(tmp_path),))
    async with make_manager({"fs": entry}) as manager:
        result = await manager.call_tool(
            "fs", "read_text_file", {"path": str(tmp_path / "hello.txt")}
        )
        assert "hello from a file" in text_of(result)


@pytest.mark.npm
@needs_npm
async def test_server_memory_stores_and_returns_entities(
    make_manager: ManagerFactory, tmp_path: Path
) -> None:
    entry = ServerEntry(
        command=str(NPM_BIN / "mcp-server-memory"),
        env={"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
    )
    async with make_manager({"memory": entry}) as manager:
        entity = {"name": "pi", "entityType": "project", "observations": ["uses MCP"]}
        await manager.call_tool("memory", "create_entities", {"entities": [entity]})
        graph = await manager.call_tool("memory", "read_graph", {})
        assert "uses MCP" in text_of(graph)


async def test_mcp_server_time_from_pypi(make_manager: ManagerFactory) -> None:
    entry = ServerEntry(command=sys.executable, args=("-m", "mcp_server_time"))
    async with make_manager({"time": entry}) as manager:
        result = await manager.call_tool("time", "get_current_time", {"timezone": "UTC"})
        assert "UTC" in text_of(result)
