"""The gateway as the official SDK client sees it, over stdio and Streamable HTTP, in both
protocol eras."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import psutil
import pytest
from mcp import Client, MCPError

from .conftest import (
    CANARY,
    PI_MCP,
    GatewayWorkspace,
    conformance_entry,
    fixture_entry,
    make_mark,
    run_http_gateway,
    stdio_gateway,
    text_of,
    wait_for_mark,
)

pytestmark = [pytest.mark.slow, pytest.mark.anyio]

ERAS = [pytest.param("legacy", id="2025-11-25"), pytest.param("auto", id="2026-07-28")]


class ListChanged:
    """Counts ``notifications/tools/list_changed`` a legacy client receives."""

    def __init__(self) -> None:
        self.event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.event.set()

    def reset(self) -> None:
        self.event = anyio.Event()


async def _tool_names(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


async def _expect_list_changed(
    client: Client, mode: str, listener: ListChanged, act: Any, expected_tool: str
) -> None:
    """Run ``act``, then wait for announcements until the list holds ``expected_tool``.

    An announcement may also come from the gateway's own start (its catalog filling in), so
    each one is followed by a listing, and only the expected tool ends the wait.
    """
    with anyio.fail_after(20):
        if mode == "legacy":
            listener.reset()
            await act()
            while True:
                await listener.event.wait()
                listener.reset()
                if expected_tool in await _tool_names(client):
                    return
        async with client.listen(tools_list_changed=True) as subscription:
            await act()
            async for _event in subscription:
                if expected_tool in await _tool_names(client):
                    return


@pytest.mark.parametrize("mode", ERAS)
async def test_toolsearch_activation_is_announced_and_listed(
    gw_workspace: GatewayWorkspace, mode: str
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager")})
    listener = ListChanged()
    with run_http_gateway(gw_workspace, "--surface", "toolsearch") as gateway:
        async with gateway.client(mode, message_handler=listener) as client:
            assert await _tool_names(client) == ["ToolSearch", "mcp_script"]

            async def activate() -> None:
                result = await client.call_tool("ToolSearch", {"query": "select:fixture_echo"})
                assert not result.is_error, text_of(result)

            await _expect_list_changed(client, mode, listener, activate, "fixture_echo")
            echoed = await client.call_tool("fixture_echo", {"message": "hi"})
            assert text_of(echoed) == "Echo: hi"


async def test_each_connection_keeps_its_own_activations(gw_workspace: GatewayWorkspace) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager")})
    with run_http_gateway(gw_workspace, "--surface", "toolsearch") as gateway:
        async with gateway.client() as first, gateway.client() as second:
            await first.call_tool("ToolSearch", {"query": "select:fixture_echo"})
            assert "fixture_echo" in await _tool_names(first)
            assert await _tool_names(second) == ["ToolSearch", "mcp_script"]
            refused = await second.call_tool("fixture_echo", {"message": "hi"})
            assert refused.is_error
            assert "ToolSearch" in text_of(refused)


@pytest.mark.parametrize("mode", ERAS)
async def test_an_upstream_tool_change_is_announced(
    gw_workspace: GatewayWorkspace, mode: str
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager", directTools=True)})
    listener = ListChanged()
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client(mode, message_handler=listener) as client:
            assert "fixture_fresh" not in await _tool_names(client)

            async def add() -> None:
                await client.call_tool("fixture_add_tool", {"name": "fresh"})

            await _expect_list_changed(client, mode, listener, add, "fixture_fresh")


async def test_stdio_gateway_announces_an_upstream_tool_change(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager", directTools=True)})
    listener = ListChanged()
    async with stdio_gateway(gw_workspace, message_handler=listener) as client:
        await _expect_list_changed(
            client,
            "legacy",
            listener,
            lambda: client.call_tool("fixture_add_tool", {"name": "fresh"}),
            "fixture_fresh",
        )


@pytest.mark.parametrize("clients", [2, 8])
async def test_concurrent_http_clients_share_one_set_of_upstream_processes(
    gw_workspace: GatewayWorkspace, clients: int
) -> None:
    gw_workspace.write_config(
        {
            "alpha": fixture_entry(lifecycle="eager", directTools=["pid"]),
            "beta": fixture_entry(lifecycle="eager", directTools=["pid"]),
        }
    )
    with run_http_gateway(gw_workspace) as gateway:
        pids: dict[str, set[str]] = {"alpha": set(), "beta": set()}

        async def one_client() -> None:
            async with gateway.client() as client:
                for server in ("alpha", "beta"):
                    result = await client.call_tool(f"{server}_pid", {})
                    pids[server].add(text_of(result))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for _ in range(clients):
                    tg.start_soon(one_client)
        assert all(len(found) == 1 for found in pids.values()), pids
        upstream = [
            p for p in gateway.server_processes() if "mcp_fixture.py" in " ".join(p.cmdline())
        ]
        assert sorted(str(p.pid) for p in upstream) == sorted(
            next(iter(found)) for found in pids.values()
        )


async def test_one_clients_slow_call_does_not_block_another(
    gw_workspace: GatewayWorkspace, tmp_path: Path
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager", directTools=True)})
    mark = make_mark(tmp_path, "slow-started")
    with run_http_gateway(gw_workspace) as gateway:
        async with (
            gateway.client() as slow_client,
            gateway.client() as quick_client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(slow_client.call_tool, "fixture_slow", {"seconds": 30, "mark": str(mark)})
            await wait_for_mark(mark)
            with anyio.fail_after(5):
                echoed = await quick_client.call_tool("fixture_echo", {"message": "quick"})
            assert text_of(echoed) == "Echo: quick"
            tg.cancel_scope.cancel()


async def test_an_upstream_dying_mid_call_fails_that_call_and_nothing_else(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config(
        {
            "fragile": fixture_entry(lifecycle="eager", directTools=True),
            "steady": fixture_entry(lifecycle="eager", directTools=True),
        }
    )
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client() as client:
            with anyio.fail_after(15):
                crashed = await client.call_tool("fragile_crash", {})
            assert crashed.is_error
            assert "fragile" in text_of(crashed)
            assert "exit" in text_of(crashed).lower() or "closed" in text_of(crashed).lower()
            steady = await client.call_tool("steady_echo", {"message": "still here"})
            assert text_of(steady) == "Echo: still here"
            # The dead server comes back on the next call (lazy reconnect after the loss).
            status = await client.call_tool("mcp", {})
            assert "fragile" in text_of(status)


async def test_progress_and_sampling_reach_the_calling_client(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config(
        {"conf": conformance_entry(lifecycle="eager", directTools=True, toolPrefix="none")}
    )
    prompts: list[str] = []

    async def sampling(
        context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        content = params.messages[0].content
        prompts.append(getattr(content, "text", ""))
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            model="test-model",
        )

    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client(sampling_callback=sampling) as client:
            updates: list[float] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                updates.append(progress)

            await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            assert updates == [0, 50, 100]
            sampled = await client.call_tool("test_sampling", {"prompt": "the answer?"})
            assert text_of(sampled) == "LLM response: forty-two"
            assert prompts == ["the answer?"]
        async with gateway.client() as no_sampling:
            refused = await no_sampling.call_tool("test_sampling", {"prompt": "x"})
            assert refused.is_error
            assert "Sampling not supported" in text_of(refused)


async def test_a_stateless_gateway_asks_a_2026_client_for_approval(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config(
        {"fixture": fixture_entry(lifecycle="eager", directTools=True, approveTools=["echo"])}
    )
    asked: list[str] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    with run_http_gateway(gw_workspace, "--stateless") as gateway:
        async with gateway.client("2026-07-28", elicitation_callback=elicitation) as client:
            result = await client.call_tool("fixture_echo", {"message": "stateless"})
    assert text_of(result) == "Echo: stateless"
    assert len(asked) == 1


async def test_a_servers_question_mid_call_is_refused_for_a_2026_client_and_runs_once(
    gw_workspace: GatewayWorkspace,
) -> None:
    """A 2026-07-28 client can only be asked by a retry of its call; a question the upstream
    server asks mid-call cannot wait for that (the call would run twice): it is refused with
    a reason, and the client is not asked."""
    gw_workspace.write_config(
        {"conf": conformance_entry(lifecycle="eager", directTools=True, toolPrefix="none")}
    )
    asked: list[types.ElicitRequestParams] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"username": "a", "email": "b"})

    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client("2026-07-28", elicitation_callback=elicitation) as client:
            result = await client.call_tool("test_elicitation", {"message": "who?"})
    assert asked == []
    assert "2026-07-28" in text_of(result), text_of(result)


async def test_resources_and_prompts_are_listed_with_prefixes_and_readable(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager")})
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client() as client:
            resources = (await client.list_resources()).resources
            assert [(r.name, str(r.uri)) for r in resources] == [
                ("fixture_greeting", "fixture://greeting")
            ]
            read = await client.read_resource("fixture://greeting")
            assert getattr(read.contents[0], "text", "") == "hello from fixture"
            prompts = (await client.list_prompts()).prompts
            assert [p.name for p in prompts] == ["fixture_greet"]


async def test_http_requires_the_token_when_one_is_set(gw_workspace: GatewayWorkspace) -> None:
    gw_workspace.write_config({"fixture": fixture_entry()})
    token = "gateway-token-" + CANARY
    with run_http_gateway(
        gw_workspace, env={"PI_MCP_GATEWAY_TOKEN": token}, token=token
    ) as gateway:
        initialize = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        }
        headers = {"Accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient(timeout=10) as http:
            missing = await http.post(gateway.url, json=initialize, headers=headers)
            wrong = await http.post(
                gateway.url, json=initialize, headers={**headers, "Authorization": "Bearer nope"}
            )
            right = await http.post(
                gateway.url,
                json=initialize,
                headers={**headers, "Authorization": f"Bearer {token}"},
            )
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        assert wrong.status_code == 401
        assert right.status_code == 200
        async with gateway.client() as client:
            assert await _tool_names(client) == ["mcp", "mcp_script"]
        assert token not in gateway.stderr()


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10"])
def test_refuses_to_bind_a_public_address_without_a_token(
    gw_workspace: GatewayWorkspace, host: str
) -> None:
    gw_workspace.write_config({})
    completed = subprocess.run(
        [str(PI_MCP), *gw_workspace.serve_args("--transport", "http", "--host", host)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": str(gw_workspace.root)},
    )
    assert completed.returncode == 2
    assert "without a token" in completed.stderr
    assert completed.stdout == ""


async def test_sigterm_with_calls_in_flight_leaves_no_process(
    gw_workspace: GatewayWorkspace, tmp_path: Path
) -> None:
    gw_workspace.write_config(
        {
            "one": fixture_entry("--spawn-child", lifecycle="eager", directTools=True),
            "two": fixture_entry(lifecycle="eager", directTools=True),
        }
    )
    marks = [make_mark(tmp_path, f"mark-{i}") for i in range(2)]
    errors: list[str] = []
    both_cut_off = anyio.Event()

    async def call_until_cut_off(client: Client, server: str, mark: Path) -> None:
        try:
            await client.call_tool(f"{server}_slow", {"seconds": 60, "mark": str(mark)})
        except MCPError as exc:
            errors.append(exc.message)
            if len(errors) == 2:
                both_cut_off.set()

    with run_http_gateway(gw_workspace) as gateway:
        assert len(gateway.server_processes()) == 3  # two servers and the grandchild of one
        everything = gateway.descendants()
        async with gateway.client() as client, anyio.create_task_group() as tg:
            for server, mark in zip(("one", "two"), marks, strict=True):
                tg.start_soon(call_until_cut_off, client, server, mark)
            for mark in marks:
                await wait_for_mark(mark)
            started = anyio.current_time()
            gateway.process.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(gateway.process.wait, 15)
            with anyio.fail_after(10):
                await both_cut_off.wait()
            tg.cancel_scope.cancel()
        assert anyio.current_time() - started < 10
        _, alive = psutil.wait_procs(everything, timeout=5)
        assert not alive


async def test_no_upstream_secret_reaches_a_client(gw_workspace: GatewayWorkspace) -> None:
    gw_workspace.write_config(
        {
            "fixture": fixture_entry(
                lifecycle="eager", env={"API_KEY": CANARY}, directTools=["echo"]
            ),
            "remote": {
                "url": f"http://user:{CANARY}@127.0.0.1:9/mcp",
                "headers": {"Authorization": f"Bearer {CANARY}"},
            },
            "broken": {"command": "/nonexistent/not-there", "env": {"TOKEN": CANARY}},
        }
    )
    seen: list[str] = []

    async def record(message: Any) -> None:
        seen.append(repr(message))

    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client(message_handler=record) as client:
            listing = await client.list_tools()
            seen.append(listing.model_dump_json())
            for args in (
                {},
                {"server": "remote"},
                {"connect": "remote"},
                {"connect": "broken"},
                {"tool": "remote_anything", "args": "{}"},
                {"describe": "fixture_echo"},
                {"search": "echo"},
            ):
                seen.append((await client.call_tool("mcp", args)).model_dump_json())
            seen.append((await client.list_resources()).model_dump_json())
            seen.append((await client.list_prompts()).model_dump_json())
        assert "fixture_echo" in json.dumps(seen)
        leaks = [s for s in seen if CANARY in s]
        assert not leaks, [s[max(0, s.index(CANARY) - 300) : s.index(CANARY) + 60] for s in leaks]
        assert CANARY not in gateway.stderr()


async def test_stdio_stdout_carries_only_protocol(gw_workspace: GatewayWorkspace) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager", directTools=True)})
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "raw", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "fixture_echo", "arguments": {"message": "pure"}},
        },
    ]
    process = await anyio.open_process(
        [str(PI_MCP), *gw_workspace.serve_args("--verbose")], cwd=gw_workspace.root
    )
    async with process:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        lines: list[dict[str, Any]] = []
        buffer = b""
        with anyio.fail_after(30):
            for message in messages:
                await process.stdin.send((json.dumps(message) + "\n").encode())
                if "id" not in message:
                    continue
                while True:  # notifications may come before the response
                    while b"\n" not in buffer:
                        buffer += await process.stdout.receive()
                    line, _, buffer = buffer.partition(b"\n")
                    received = json.loads(line)
                    assert received["jsonrpc"] == "2.0"
                    if received.get("id") == message["id"]:
                        lines.append(received)
                        break
            await process.stdin.aclose()
            rest = b""
            async for chunk in process.stdout:
                rest += chunk
            await process.wait()
        stderr = b""
        async for chunk in process.stderr:
            stderr += chunk
    assert [m["id"] for m in lines] == [1, 2, 3]
    assert lines[2]["result"]["content"][0]["text"] == "Echo: pure"
    for leftover in (buffer + rest).splitlines():
        assert json.loads(leftover)["jsonrpc"] == "2.0"
    assert b"pi-mcp: INFO" in stderr  # --verbose logs went to stderr, not stdout


async def test_stateless_http_serves_calls_and_refuses_server_requests(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config(
        {"conf": conformance_entry(lifecycle="eager", directTools=True, toolPrefix="none")}
    )

    async def sampling(context: Any, params: Any) -> types.CreateMessageResult:
        raise AssertionError("a stateless gateway cannot relay sampling")

    with run_http_gateway(gw_workspace, "--stateless") as gateway:
        async with gateway.client(sampling_callback=sampling) as client:
            assert "test_simple_text" in await _tool_names(client)
            simple = await client.call_tool("test_simple_text", {})
            assert text_of(simple) == "This is a simple text response for testing."
            updates: list[float] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                updates.append(progress)

            await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
            assert updates == [0, 50, 100]
            refused = await client.call_tool("test_sampling", {"prompt": "x"})
            assert refused.is_error
            assert "stateless gateway has no channel" in text_of(refused)


async def test_a_clients_cancellation_cancels_the_upstream_call(
    gw_workspace: GatewayWorkspace, tmp_path: Path
) -> None:
    gw_workspace.write_config({"fixture": fixture_entry(lifecycle="eager", directTools=True)})
    started = make_mark(tmp_path, "started")
    cancelled = make_mark(tmp_path, "cancelled")
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client() as client, anyio.create_task_group() as tg:
            arguments = {"seconds": 60, "mark": str(started), "cancelled_mark": str(cancelled)}
            tg.start_soon(client.call_tool, "fixture_slow", arguments)
            await wait_for_mark(started)
            # Cancelling the client's request sends notifications/cancelled to the gateway.
            tg.cancel_scope.cancel()
        await wait_for_mark(cancelled)
        async with gateway.client() as client:
            echoed = await client.call_tool("fixture_echo", {"message": "after"})
            assert text_of(echoed) == "Echo: after"


async def test_completions_are_asked_of_the_server_that_owns_the_prompt(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config({"conf": conformance_entry(lifecycle="eager")})
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client() as client:
            prompts = [p.name for p in (await client.list_prompts()).prompts]
            assert "conf_test_prompt_with_arguments" in prompts
            completed = await client.complete(
                types.PromptReference(type="ref/prompt", name="conf_test_prompt_with_arguments"),
                {"name": "arg1", "value": "par"},
            )
            assert completed.completion.values == ["paris", "park", "party"]
            unknown = await client.complete(
                types.PromptReference(type="ref/prompt", name="nobody_has_this"),
                {"name": "arg1", "value": "p"},
            )
            assert unknown.completion.values == []


# resources/subscribe is a handshake-era method; the SDK client warns that 2026-07-28 replaces it.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_resource_updates_reach_the_subscribed_client_only(
    gw_workspace: GatewayWorkspace,
) -> None:
    gw_workspace.write_config(
        {"conf": conformance_entry(lifecycle="eager", directTools=["touch_resource"])}
    )
    updated = anyio.Event()
    seen: dict[str, list[str]] = {"subscriber": [], "bystander": []}

    def recorder(who: str) -> Any:
        async def record(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                seen[who].append(str(message.params.uri))
                updated.set()

        return record

    with run_http_gateway(gw_workspace) as gateway:
        async with (
            gateway.client(message_handler=recorder("subscriber")) as subscriber,
            gateway.client(message_handler=recorder("bystander")) as bystander,
        ):
            await subscriber.subscribe_resource("test://static-text")
            touched = await bystander.call_tool(
                "conf_touch_resource", {"uri": "test://static-text"}
            )
            assert "(subscribed)" in text_of(touched)
            with anyio.fail_after(10):
                await updated.wait()
            assert seen == {"subscriber": ["test://static-text"], "bystander": []}
            await subscriber.unsubscribe_resource("test://static-text")
            again = await bystander.call_tool("conf_touch_resource", {"uri": "test://static-text"})
            assert "not subscribed" in text_of(again)


async def test_a_notice_for_the_user_reaches_a_stdio_client_as_a_log_message(
    gw_workspace: GatewayWorkspace, tmp_path: Path
) -> None:
    # A server tool named `mcp` under toolPrefix "none" cannot become a direct tool: it would
    # shadow the proxy tool. The surfaces say so to the user, the gateway to its client.
    shadowing = tmp_path / "shadowing.py"
    shadowing.write_text(
        "from mcp.server.mcpserver import MCPServer\n"
        "server = MCPServer('shadowing')\n"
        "@server.tool(name='mcp')\n"
        "def mcp_tool() -> str:\n"
        "    return 'shadow'\n"
        "server.run('stdio')\n"
    )
    gw_workspace.write_config(
        {
            "shadowing": {
                "command": sys.executable,
                "args": [str(shadowing)],
                "directTools": True,
                "toolPrefix": "none",
                "lifecycle": "eager",
            }
        }
    )
    logged = anyio.Event()
    messages: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        messages.append(str(params.data))
        logged.set()

    async with stdio_gateway(gw_workspace, logging_callback=on_log) as client:
        assert "mcp" in await _tool_names(client)
        with anyio.fail_after(15):
            await logged.wait()
    assert any("'mcp' skipped" in m for m in messages), messages


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param(
            {"action": "accept", "content": {"decision": "allow_once"}}, "Echo: may I", id="allow"
        ),
        pytest.param({"action": "decline"}, "The user denied", id="decline"),
        pytest.param(None, "approveTools", id="no-elicitation"),
    ],
)
@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_tool_approval_asks_the_calling_clients_user(
    gw_workspace: GatewayWorkspace, answer: dict[str, Any] | None, expected: str, mode: str
) -> None:
    """A 2026-07-28 client, which cannot be sent requests, is asked through the call's
    ``input_required`` result and answers in its retry."""
    gw_workspace.write_config(
        {"fixture": fixture_entry(lifecycle="eager", directTools=True, approveTools=["echo"])}
    )
    questions: list[types.ElicitRequestParams] = []

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        questions.append(params)
        assert answer is not None
        return types.ElicitResult.model_validate(answer)

    extra = {"elicitation_callback": elicitation} if answer is not None else {}
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client(mode, **extra) as client:
            assert client.protocol_version == (mode if mode != "legacy" else "2025-11-25")
            result = await client.call_tool("fixture_echo", {"message": "may I"})
    assert expected in text_of(result)
    assert result.is_error is (expected != "Echo: may I")
    if answer is not None:
        assert len(questions) == 1
        schema = questions[0].requested_schema
        assert schema["properties"]["decision"]["enum"] == [
            "allow_once",
            "allow_session",
            "allow_always",
            "deny",
        ]


APP_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "app_server.py"


@pytest.mark.parametrize("surface", ["direct", "toolsearch"])
async def test_mcp_apps_views_pass_through_on_direct_and_activated_tools(
    gw_workspace: GatewayWorkspace, surface: str
) -> None:
    entry: dict[str, Any] = {"command": sys.executable, "args": [str(APP_SERVER)]}
    entry["lifecycle"] = "eager"
    if surface == "direct":
        entry["directTools"] = True
    gw_workspace.write_config(
        {"apps": entry}, settings={"surface": "toolsearch"} if surface == "toolsearch" else None
    )
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client() as client:
            if surface == "toolsearch":
                await client.call_tool("ToolSearch", {"query": "select:apps_show_chart"})
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert tools["apps_show_chart"].meta == {
                "ui": {"resourceUri": "ui://charts/chart.html", "visibility": ["model", "app"]}
            }
            view = await client.read_resource("ui://charts/chart.html")
            called = await client.call_tool("apps_show_chart", {"title": "Q3"})
    assert view.contents[0].mime_type == "text/html;profile=mcp-app"
    assert "chart view" in getattr(view.contents[0], "text", "")
    assert called.structured_content == {"title": "Q3", "values": [3, 1, 4]}
