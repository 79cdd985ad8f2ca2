"""The pi-python extension, end to end in a real AgentHarness with a scripted model.

The model is a plain async stream function; the servers are real (``mcp-server-time``, the npm
everything server). Each test proves a loop the harness itself runs: the model searches,
(under ToolSearch activates,) then calls, and the harness accepts the result.
"""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any

import anyio
import psutil
import pytest
from pi_agent_core.extensions import ClientMcpServer, ExtensionAPI
from pi_agent_harness import AgentHarness
from pi_agent_harness.types import NoticeEvent

from pi_mcp_adapter.hosts.pi_python import PiHost, activate

from .conftest import (
    CANARY,
    TESTS_DIR,
    Workspace,
    assert_no_canary,
    everything_entry,
    needs_npm,
    secret_servers,
    time_entry,
)
from .pi_support import ScriptedStream, last_tool_result, make_harness, result_text

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaked_processes")]


def collect_notices(harness: AgentHarness) -> list[str]:
    notices: list[str] = []

    def listener(event: Any, signal: Any = None) -> None:
        if isinstance(event, NoticeEvent):
            notices.append(event.text)

    harness.subscribe(listener)
    return notices


async def test_proxy_surface_search_then_call_runs_through_the_harness(
    workspace: Workspace,
) -> None:
    workspace.write_config({"time": time_entry()})
    searched: list[str] = []
    stream = ScriptedStream(
        [
            lambda ctx: ("mcp", {"search": "current time timezone"}),
            lambda ctx: (
                searched.append(result_text(last_tool_result(ctx)))
                or ("mcp", {"tool": "time_get_current_time", "args": {"timezone": "UTC"}})
            ),
            lambda ctx: "done: " + result_text(last_tool_result(ctx)),
        ]
    )
    harness = await make_harness(stream, extensions=[activate], env=None)
    try:
        reply = await harness.prompt("What time is it in UTC?")
    finally:
        await harness.close()
    # The proxy tool was offered from the first request on; the search found the tool.
    assert all("mcp" in offered for offered in stream.offered)
    assert "time_get_current_time" in searched[0]
    text = reply.content[0]["text"]
    assert text.startswith("done: ")
    assert json.loads(text.removeprefix("done: "))["timezone"] == "UTC"


@needs_npm
@pytest.mark.npm
async def test_toolsearch_activates_a_tool_for_the_next_request_of_the_same_run(
    workspace: Workspace,
) -> None:
    workspace.write_config(
        {"time": time_entry(), "everything": everything_entry()},
        settings={"surface": "toolsearch"},
    )
    results: list[Any] = []
    stream = ScriptedStream(
        [
            lambda ctx: ("ToolSearch", {"query": "echo a message back"}),
            lambda ctx: ("everything_echo", {"message": "hi from pi"}),
            lambda ctx: (
                results.append(last_tool_result(ctx))
                or ("ToolSearch", {"query": "select:time_get_current_time"})
            ),
            lambda ctx: ("time_get_current_time", {"timezone": "Europe/Paris"}),
            lambda ctx: results.append(last_tool_result(ctx)) or "done",
        ]
    )
    harness = await make_harness(stream, extensions=[activate])
    try:
        await harness.prompt("Echo something, then tell the time in Paris")
    finally:
        await harness.close()
    first, second, _, fourth, _ = stream.offered
    assert first == ["ToolSearch", "mcp_script"]  # every MCP tool is deferred at first
    assert "everything_echo" in second  # activated by the search, same run
    assert "time_get_current_time" not in second
    assert "time_get_current_time" in fourth
    echo, now = results
    assert not echo.isError
    assert result_text(echo) == "Echo: hi from pi"
    assert not now.isError
    assert json.loads(result_text(now))["timezone"] == "Europe/Paris"


async def test_toolsearch_takes_its_new_description_without_pi_warning_of_a_clash(
    workspace: Workspace, caplog: pytest.LogCaptureFixture
) -> None:
    """Once a server is listed, ToolSearch is registered again with a description that names
    its tools; pi-python warns of a name registered twice, which here is no clash."""
    workspace.write_config({"time": time_entry()}, settings={"surface": "toolsearch"})
    stream = ScriptedStream([lambda ctx: ("ToolSearch", {"query": "current time"}), "done"])
    harness = await make_harness(stream, extensions=[activate])
    try:
        await harness.load_extensions()
        before = harness.extension_registry.get_tools()["ToolSearch"].description
        await harness.prompt("What time is it?")  # the search lists the server
        after = harness.extension_registry.get_tools()["ToolSearch"].description
    finally:
        await harness.close()
    assert after != before  # replaced: the server's tools are described now
    assert "time" in after
    clashes = [r.getMessage() for r in caplog.records if "already registered" in r.getMessage()]
    assert clashes == []


async def test_tool_errors_reach_the_model_as_error_results(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()}, settings={"surface": "toolsearch"})
    seen: list[Any] = []
    stream = ScriptedStream(
        [
            lambda ctx: ("ToolSearch", {"query": "select:time_get_current_time"}),
            lambda ctx: ("time_get_current_time", {"timezone": 42}),
            lambda ctx: seen.append(last_tool_result(ctx)) or "done",
        ]
    )
    harness = await make_harness(stream, extensions=[activate])
    try:
        await harness.prompt("time?")
    finally:
        await harness.close()
    (error,) = seen
    assert error.isError
    assert "Invalid arguments for time_get_current_time" in result_text(error)


async def test_mcp_command_is_answered_without_a_model_turn(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()})
    stream = ScriptedStream([])
    harness = await make_harness(stream, extensions=[activate])
    try:
        status = await harness.prompt("/mcp")
        tools = await harness.prompt("/mcp tools time")
        auth = await harness.prompt("/mcp-auth time")
    finally:
        await harness.close()
    assert stream.offered == []  # no provider request at all
    assert "time" in status.content[0]["text"]
    assert "get_current_time" in tools.content[0]["text"]
    assert "needs no sign-in" in auth.content[0]["text"]


def other_mcp_extension(pi: ExtensionAPI) -> None:
    async def handler(args: str) -> None:
        pi.send_message("the other /mcp")

    pi.register_command("mcp", description="someone else's MCP command", handler=handler)


@pytest.mark.parametrize(
    "order",
    [
        pytest.param("other-first", id="other-extension-loaded-first"),
        pytest.param("other-last", id="other-extension-loaded-last"),
    ],
)
async def test_another_extensions_mcp_command_is_detected_and_reported(
    workspace: Workspace, order: str
) -> None:
    workspace.write_config({"time": time_entry()})
    extensions = [other_mcp_extension, activate]
    if order == "other-last":
        extensions.reverse()
    harness = await make_harness(ScriptedStream([]), extensions=extensions)
    notices = collect_notices(harness)
    try:
        theirs = await harness.prompt("/mcp")
        ours = await harness.prompt("/mcp-adapter status")
        auth = await harness.prompt("/mcp-adapter-auth time")
        with anyio.fail_after(5):
            while not any("also registers /mcp" in n for n in notices):
                await anyio.sleep(0)
    finally:
        await harness.close()
    assert theirs.content[0]["text"] == "the other /mcp"
    assert "time" in ours.content[0]["text"]
    assert "needs no sign-in" in auth.content[0]["text"]
    warning = next(n for n in notices if "also registers /mcp" in n)
    assert "other_mcp_extension" in warning
    assert "/mcp-adapter" in warning


async def test_pi_mcp_config_names_the_one_config_file(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace.write_config({"from-agent-dir": time_entry()})
    exclusive = workspace.write_config(
        {"from-env": time_entry()}, path=workspace.root / "exclusive.json"
    )
    monkeypatch.setenv("PI_MCP_CONFIG", str(exclusive))
    harness = await make_harness(ScriptedStream([]), extensions=[activate])
    try:
        status = (await harness.prompt("/mcp status")).content[0]["text"]
    finally:
        await harness.close()
    assert "from-env" in status
    assert "from-agent-dir" not in status


def test_entry_point_names_the_extension() -> None:
    from importlib.metadata import entry_points

    (entry,) = [e for e in entry_points(group="pi_agent.extensions") if e.name == "pi-mcp-adapter"]
    assert entry.load() is activate


# The pi-python 0.6 loader reads entry points through a deprecated interface on Python 3.11; as
# an error that warning makes it find no extension at all, silently.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_auto_discovery_finds_the_extension_through_its_entry_point(
    workspace: Workspace,
) -> None:
    workspace.write_config({"time": time_entry()})
    stream = ScriptedStream([lambda ctx: "hello"])
    harness = await make_harness(
        stream, auto_discover_extensions=True, home=workspace.root / "pi-home"
    )
    try:
        await harness.prompt("hi")
        commands = harness.extension_registry.get_commands()
        failed = harness.failed_extensions
    finally:
        await harness.close()
    assert not failed
    assert commands["mcp"].extension_name == "pi_mcp_adapter.hosts.pi_python"
    # The barrier held the turn until the tools were there.
    assert stream.offered == [["mcp", "mcp_script"]]


async def test_secrets_never_reach_the_model_or_the_user(workspace: Workspace) -> None:
    workspace.write_config(secret_servers())
    stream = ScriptedStream(
        [
            lambda ctx: ("mcp", {}),
            lambda ctx: ("mcp", {"search": "time"}),
            lambda ctx: ("mcp", {"connect": "remote"}),
            lambda ctx: ("mcp", {"connect": "broken"}),
            lambda ctx: ("mcp", {"tool": "time_get_current_time", "args": {"timezone": "UTC"}}),
            lambda ctx: ("mcp", {"tool": "remote_anything", "args": {}}),
            lambda ctx: "done",
        ]
    )
    harness = await make_harness(stream, extensions=[activate])
    notices = collect_notices(harness)
    try:
        await harness.prompt("look around")
        replies = [
            (await harness.prompt(command)).content[0]["text"]
            for command in ("/mcp", "/mcp tools", "/mcp reconnect remote", "/mcp-auth remote")
        ]
    finally:
        await harness.close()
    # The failures did reach the model: connect remote, connect broken, a tool of remote.
    assert stream.seen[-1].count("isError=True") == 3
    assert_no_canary(*stream.seen, *replies, *notices)
    assert CANARY not in json.dumps(replies)


def _time_server_pids() -> set[int]:
    pids = set()
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            command = " ".join(process.cmdline())
            # The supervisor each stdio server runs under names the server too; count servers.
            server = "mcp_server_time" in command and "_reaper.py" not in command
            if server and process.is_running():
                pids.add(process.pid)
    return pids


async def test_turn_end_reconnects_an_eager_server_and_close_stops_it(
    workspace: Workspace,
) -> None:
    workspace.write_config({"time": time_entry(lifecycle="eager")})
    hosts: list[PiHost] = []

    def extension(pi: ExtensionAPI) -> None:
        hosts.append(PiHost(pi))
        hosts[0].install()

    harness = await make_harness(
        ScriptedStream([lambda ctx: "one", lambda ctx: "two"]), extensions=[extension]
    )
    try:
        await harness.prompt("first turn")
        (host,) = hosts
        assert host.adapter is not None
        (first_pid,) = _time_server_pids()
        psutil.Process(first_pid).kill()
        with anyio.fail_after(10):
            while host.adapter.server_status("time").status == "connected":
                await anyio.sleep(0.02)
        await harness.prompt("second turn")  # its end runs the engine's turn hook
        with anyio.fail_after(15):
            while host.adapter.server_status("time").status != "connected":
                await anyio.sleep(0.02)
        assert _time_server_pids() - {first_pid}
    finally:
        await harness.close()
    assert hosts[0].adapter is None
    assert not _time_server_pids()


async def test_a_tool_that_appears_later_is_deferred_not_active(workspace: Workspace) -> None:
    fixture = TESTS_DIR / "fixtures" / "mcp_fixture.py"
    workspace.write_config(
        {"fixture": {"command": sys.executable, "args": [str(fixture)]}},
        settings={"surface": "toolsearch"},
    )
    hosts: list[PiHost] = []

    def extension(pi: ExtensionAPI) -> None:
        hosts.append(PiHost(pi))
        hosts[0].install()

    stream = ScriptedStream(
        [
            lambda ctx: ("ToolSearch", {"query": "select:fixture_add_tool"}),
            lambda ctx: ("fixture_add_tool", {"name": "brand_new"}),
            lambda ctx: "added",
            lambda ctx: ("ToolSearch", {"query": "select:fixture_brand_new"}),
            lambda ctx: "loaded",
        ]
    )
    harness = await make_harness(stream, extensions=[extension])
    try:
        await harness.prompt("add a tool")
        with anyio.fail_after(10):
            while "fixture_brand_new" not in harness.extension_registry.get_tools():
                await anyio.sleep(0.02)
        assert "fixture_brand_new" not in harness.active_tool_names
        await harness.prompt("load it")
    finally:
        await harness.close()
    assert "fixture_brand_new" not in stream.offered[3]
    assert "fixture_brand_new" in stream.offered[4]


async def test_servers_the_client_passes_are_used_and_claimed(workspace: Workspace) -> None:
    workspace.write_config({"time": time_entry()})
    passed = [
        ClientMcpServer(
            name="client-time",
            transport="stdio",
            command=sys.executable,
            args=("-m", "mcp_server_time"),
            env=(("CLIENT_TOKEN", CANARY),),
        ),
        ClientMcpServer(name="time", transport="http", url="http://127.0.0.1:9/mcp"),
    ]
    stream = ScriptedStream(
        [
            lambda ctx: (
                "mcp",
                {"tool": "client-time_get_current_time", "args": {"timezone": "UTC"}},
            ),
            lambda ctx: "done: " + result_text(last_tool_result(ctx)),
        ]
    )
    harness = await make_harness(stream, extensions=[activate])
    harness.set_client_mcp_servers(passed)
    notices = collect_notices(harness)
    try:
        status = (await harness.prompt("/mcp")).content[0]["text"]
        reply = (await harness.prompt("time?")).content[0]["text"]
        with anyio.fail_after(5):
            while not any("client's MCP server 'time'" in n for n in notices):
                await anyio.sleep(0)
        unclaimed = harness.unclaimed_client_mcp_servers
    finally:
        await harness.close()
    assert unclaimed == ()
    assert "client-time" in status
    assert json.loads(reply.removeprefix("done: "))["timezone"] == "UTC"
    assert_no_canary(status, reply, notices, *stream.seen)


async def test_first_turn_waits_for_eager_servers_but_not_past_their_deadline(
    workspace: Workspace,
) -> None:
    fixture = TESTS_DIR / "fixtures" / "mcp_fixture.py"
    workspace.write_config(
        {
            "slow": {
                "command": sys.executable,
                "args": [str(fixture), "--start-delay", "0.8"],
                "lifecycle": "eager",
            },
            "hung": {
                "command": sys.executable,
                "args": [str(fixture), "--hang"],
                "lifecycle": "eager",
                "startupTimeoutMs": 1500,
            },
        }
    )
    statuses: list[str] = []
    stream = ScriptedStream(
        [
            lambda ctx: ("mcp", {}),
            lambda ctx: statuses.append(result_text(last_tool_result(ctx))) or "done",
        ]
    )
    harness = await make_harness(stream, extensions=[activate])
    try:
        with anyio.fail_after(30):
            await harness.prompt("status?")
    finally:
        await harness.close()
    # The first request already had the proxy tool; the slow server was connected by then and
    # the hung one had been given up at its startup timeout.
    assert stream.offered[0] == ["mcp", "mcp_script"]
    (status,) = statuses
    assert "✓ slow" in status
    assert "✓ hung" not in status
    assert "hung" in status


@needs_npm
@pytest.mark.npm
async def test_an_image_from_a_server_reaches_the_model_as_an_image(workspace: Workspace) -> None:
    workspace.write_config({"everything": everything_entry()})
    seen: list[Any] = []
    stream = ScriptedStream(
        [
            lambda ctx: ("mcp", {"tool": "everything_get-tiny-image"}),
            lambda ctx: seen.append(last_tool_result(ctx)) or "seen",
        ]
    )
    harness = await make_harness(stream, extensions=[activate])
    try:
        await harness.prompt("show me")
    finally:
        await harness.close()
    (result,) = seen
    assert not result.isError
    images = [c for c in result.content if c["type"] == "image"]
    assert len(images) == 1
    assert images[0]["mimeType"] == "image/png"
    assert images[0]["data"].startswith("iVBOR")


async def test_mcp_and_cached_direct_tools_are_registered_when_extensions_finish_loading(
    workspace: Workspace,
) -> None:
    """An ACP agent advertises its tools right after ``load_extensions()``: the first run
    lists the server, the second session finds ``mcp`` and the cached direct tool at once."""
    workspace.write_config({"time": time_entry(directTools=["get_current_time"])})
    for _ in range(2):  # a fresh agent dir, then one with the server's tools cached
        harness = await make_harness(ScriptedStream([]), extensions=[activate])
        try:
            await harness.load_extensions()
            first = list(harness.active_tool_names)
            await harness.prompt("/mcp tools time")  # waits for the listing, fills the cache
        finally:
            await harness.close()
        assert "mcp" in first
    assert "time_get_current_time" in first


async def test_mcp_app_serves_a_view_whose_calls_reach_the_server(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    monkeypatch.setenv("PI_MCP_NO_BROWSER", "1")
    log = workspace.root / "calls.jsonl"
    app_server = TESTS_DIR / "fixtures" / "app_server.py"
    entry = {
        "command": sys.executable,
        "args": [str(app_server)],
        "env": {"APP_SERVER_LOG": str(log)},
    }
    workspace.write_config({"apps": entry})
    harness = await make_harness(ScriptedStream([]), extensions=[activate])
    try:
        shown = (await harness.prompt('/mcp app apps_show_chart {"title": "Q3"}')).content[0]
        # key=value words as in a shell: the quoted value keeps its space.
        await harness.prompt("/mcp app apps_show_chart title='Q4 plan'")
        no_view = (await harness.prompt("/mcp app apps_reset_charts")).content[0]["text"]
        url = shown["text"].rsplit(" ", 1)[-1]
        call = {
            "method": "tools/call",
            "params": {"name": "save_chart", "arguments": {"title": "Q3"}},
        }
        async with httpx.AsyncClient() as client:
            page = await client.get(url)
            saved = (await client.post(url + "/rpc", json=call)).json()["result"]
    finally:
        await harness.close()
    assert shown["text"].startswith("The view of apps_show_chart is served at http://127.0.0.1:")
    assert "ui/initialize" in page.text
    assert saved["content"][0]["text"] == "saved Q3"
    assert "no MCP Apps view" in no_view
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(c["tool"], c["arguments"]) for c in calls] == [
        ("show_chart", {"title": "Q3"}),
        ("show_chart", {"title": "Q4 plan"}),
        ("save_chart", {"title": "Q3"}),
    ]
