"""One behaviour suite for every host: the same rows, parametrised over the CLI, the gateway
over stdio and over HTTP, pi-python, pydantic-ai, openai-agents and plain export.

Each host is driven the way its users drive it (a subprocess for the CLI and the gateway, the
real agent runtime with a scripted model for the bindings) and asked the same things through
the ``mcp`` proxy tool. A host that cannot do a row skips it with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import psutil
import pytest

from .conftest import Workspace

pytestmark = [pytest.mark.slow]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_fixture.py"
PI_MCP = Path(sys.executable).parent / "pi-mcp"
EDIT_WAIT_S = 20.0


def fixture_entry(*extra: str, **fields: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(FIXTURE), *extra], **fields}


def servers(tag: str) -> dict[str, Any]:
    """A healthy server, one that never answers and one that dies at start; ``tag`` marks
    their command lines so the test can find any process left behind."""
    return {
        "fix": fixture_entry("--name", tag),
        "hang": fixture_entry("--hang", "--name", tag, startupTimeoutMs=3000),
        "broken": fixture_entry("--crash-at-start", "--name", tag),
    }


class Session(Protocol):
    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        """Call ``tool`` through the ``mcp`` proxy: the text the model reads, and is-error."""
        ...

    def notices(self) -> str:
        """Everything the host told its person so far."""
        ...

    async def first_tools(self) -> list[str]:
        """The names in the first tool list a model or client reads."""
        ...


class Person:
    """Someone at the host who answers: allows a tool once, fills a server's form."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def ask(self, question: Any) -> str | None:
        self.asked.append("approval")
        return "allow_once"

    async def elicit(self, server: str, params: Any) -> Any:
        import mcp_types as types

        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    async def client_elicitation(self, context: Any, params: Any) -> Any:
        """The same person behind an MCP client: approvals arrive as a ``decision`` form."""
        import mcp_types as types

        if "decision" in params.requested_schema.get("properties", {}):
            self.asked.append("approval")
            return types.ElicitResult(action="accept", content={"decision": "allow_once"})
        return await self.elicit("", params)


class Opener(Protocol):
    def __call__(
        self, ws: Workspace, person: Person | None = None
    ) -> AbstractAsyncContextManager[Session]: ...


# ---------------------------------------------------------------------- the hosts


class _CliSession:
    def __init__(self, ws: Workspace) -> None:
        self._ws = ws
        self._stderr: list[str] = []

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        ws = self._ws
        command = [
            str(PI_MCP),
            "--agent-dir",
            str(ws.agent_dir),
            "--project",
            str(ws.project_dir),
            "call",
            tool,
            json.dumps(args),
        ]
        done = await anyio.run_process(command, check=False, env={**os.environ, "CI": "true"})
        self._stderr.append(done.stderr.decode())
        text = done.stdout.decode() + done.stderr.decode()
        return text, done.returncode != 0

    def notices(self) -> str:
        return "\n".join(self._stderr)

    async def first_tools(self) -> list[str]:
        ws = self._ws
        command = [str(PI_MCP), "--agent-dir", str(ws.agent_dir), "--project", str(ws.project_dir)]
        done = await anyio.run_process([*command, "export", "--format", "mcp"], check=True)
        return [tool["name"] for tool in json.loads(done.stdout)]


@asynccontextmanager
async def open_cli(ws: Workspace, person: Person | None = None) -> AsyncIterator[Session]:
    yield _CliSession(ws)  # no terminal: the person cannot be reached


class _ClientSession:
    def __init__(self, client: Any, stderr: Callable[[], str]) -> None:
        self._client = client
        self._stderr = stderr

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        result = await self._client.call_tool("mcp", {"tool": tool, "args": args})
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        return text, bool(result.is_error)

    def notices(self) -> str:
        return self._stderr()

    async def first_tools(self) -> list[str]:
        return [tool.name for tool in (await self._client.list_tools()).tools]


def _answering(person: Person | None) -> dict[str, Any]:
    return {} if person is None else {"elicitation_callback": person.client_elicitation}


def _person_options(person: Person | None) -> dict[str, Any]:
    return {} if person is None else {"ask": person.ask, "elicit": person.elicit}


def _serve_args(ws: Workspace, *extra: str) -> list[str]:
    return [
        "--agent-dir",
        str(ws.agent_dir),
        "--project",
        str(ws.project_dir),
        "serve",
        *extra,
    ]


@asynccontextmanager
async def open_gateway_stdio(ws: Workspace, person: Person | None = None) -> AsyncIterator[Session]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    errlog_path = ws.root / "gateway-stdio.stderr"
    with errlog_path.open("w") as errlog:
        params = StdioServerParameters(
            command=str(PI_MCP),
            args=_serve_args(ws),
            # Like most clients, pass only what the gateway needs to find its agent dir.
            env={"PI_CODING_AGENT_DIR": str(ws.agent_dir), "HOME": os.environ["HOME"]},
            cwd=ws.project_dir,
        )
        async with Client(
            stdio_client(params, errlog=errlog),
            mode="legacy",
            **_answering(person),
        ) as client:
            yield _ClientSession(client, lambda: errlog_path.read_text(errors="replace"))


@asynccontextmanager
async def open_gateway_http(ws: Workspace, person: Person | None = None) -> AsyncIterator[Session]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    stderr_path = ws.root / "gateway-http.stderr"
    process = subprocess.Popen(
        [str(PI_MCP), *_serve_args(ws, "--transport", "http", "--port", "0")],
        stdout=subprocess.PIPE,
        stderr=stderr_path.open("wb"),
        cwd=ws.project_dir,
    )
    try:
        assert process.stdout is not None
        line = await anyio.to_thread.run_sync(process.stdout.readline)
        url = line.decode().split("listening on ", 1)[1].strip()
        async with Client(
            streamable_http_client(url),
            mode="legacy",
            **_answering(person),
        ) as client:
            yield _ClientSession(client, lambda: stderr_path.read_text(errors="replace"))
    finally:
        process.terminate()
        await anyio.to_thread.run_sync(process.wait, 15)


class _NoticeList:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, message: str, level: Any = "info") -> None:
        self.lines.append(message)

    def text(self) -> str:
        return "\n".join(self.lines)


class _ExportSession:
    def __init__(self, host: Any, surfaces: Any, notices: _NoticeList) -> None:
        self._host = host
        self._surfaces = surfaces
        self._notices = notices

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        result = await self._host.execute("mcp", {"tool": tool, "args": args})
        return result.text_content, result.is_error

    def notices(self) -> str:
        return self._notices.text()

    async def first_tools(self) -> list[str]:
        await self._surfaces.ready()  # what docs/python-api.md tells an export caller to do
        return [tool["name"] for tool in self._host.tool_definitions("mcp")]


@asynccontextmanager
async def open_export(ws: Workspace, person: Person | None = None) -> AsyncIterator[Session]:
    from pi_mcp_adapter import McpAdapter
    from pi_mcp_adapter.hosts import ExportHost

    notices = _NoticeList()
    host = ExportHost(on_notify=notices)
    adapter = McpAdapter(
        agent_dir=ws.agent_dir,
        project_dir=ws.project_dir,
        background_listing=True,
        **_person_options(person),
    )
    async with adapter, anyio.create_task_group() as tg:
        surfaces = host.attach(adapter)
        tg.start_soon(adapter.watch_config)
        yield _ExportSession(host, surfaces, notices)
        surfaces.close()
        tg.cancel_scope.cancel()


class _PydanticSession:
    def __init__(self, capability: Any, notices: _NoticeList) -> None:
        self._capability = capability
        self._notices = notices

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        seen: list[Any] = []

        def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
            if not seen:
                seen.append(None)
                return ModelResponse(parts=[ToolCallPart("mcp", {"tool": tool, "args": args})])
            last = messages[-1]
            assert isinstance(last, ModelRequest)
            seen.append(last.parts[-1])
            return ModelResponse(parts=[TextPart("done")])

        agent = Agent(FunctionModel(model), capabilities=[self._capability])
        await agent.run("go")
        part = seen[-1]
        return str(part.content), getattr(part, "outcome", "success") == "failed"

    def notices(self) -> str:
        return self._notices.text()

    async def first_tools(self) -> list[str]:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel

        offered: list[str] = []

        def model(messages: list[Any], info: AgentInfo) -> ModelResponse:
            offered.extend(tool.name for tool in info.function_tools)
            return ModelResponse(parts=[TextPart("done")])

        await Agent(FunctionModel(model), capabilities=[self._capability]).run("go")
        return offered


@asynccontextmanager
async def _open_binding(
    binding: Any,
    session: Callable[[Any, _NoticeList], Session],
    ws: Workspace,
    person: Person | None,
) -> AsyncIterator[Session]:
    """A Python runtime binding opened as its users open it, following config edits."""
    notices = _NoticeList()
    async with binding.open(
        on_notify=notices,
        watch_config=True,
        agent_dir=ws.agent_dir,
        project_dir=ws.project_dir,
        background_listing=True,
        **_person_options(person),
    ) as opened:
        yield session(opened, notices)


def open_pydantic_ai(
    ws: Workspace, person: Person | None = None
) -> AbstractAsyncContextManager[Session]:
    from pi_mcp_adapter.hosts.pydantic_ai import McpCapability

    return _open_binding(McpCapability, _PydanticSession, ws, person)


class _AgentsSession:
    def __init__(self, tools: Any, notices: _NoticeList) -> None:
        self._tools = tools
        self._notices = notices

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        from agents import Agent, Runner, ToolCallOutputItem
        from agents.testing import ScriptedModel, assistant_message, function_call

        model = ScriptedModel(
            [
                [function_call("mcp", {"tool": tool, "args": args}, call_id="call_1")],
                [assistant_message("done")],
            ]
        )
        agent = Agent(name="assistant", model=model, tools=self._tools.tools)
        result = await Runner.run(agent, "go")
        (output,) = [i.output for i in result.new_items if isinstance(i, ToolCallOutputItem)]
        text = str(output)
        return text, text.startswith("Error: ")

    def notices(self) -> str:
        return self._notices.text()

    async def first_tools(self) -> list[str]:
        from agents import Agent, Runner
        from agents.testing import ScriptedModel, assistant_message

        model = ScriptedModel([[assistant_message("done")]])
        await Runner.run(Agent(name="assistant", model=model, tools=self._tools.tools), "go")
        assert model.first_call is not None
        return [tool.name for tool in model.first_call.tools]


def open_openai_agents(
    ws: Workspace, person: Person | None = None
) -> AbstractAsyncContextManager[Session]:
    from pi_mcp_adapter.hosts.openai_agents import McpTools

    return _open_binding(McpTools, _AgentsSession, ws, person)


class _PiSession:
    def __init__(self, notices: list[str]) -> None:
        self._notices = notices

    async def call(self, tool: str, args: dict[str, Any]) -> tuple[str, bool]:
        from pi_mcp_adapter.hosts.pi_python import activate

        from .pi_support import ScriptedStream, last_tool_result, make_harness, result_text

        results: list[Any] = []
        stream = ScriptedStream(
            [
                lambda ctx: ("mcp", {"tool": tool, "args": args}),
                lambda ctx: results.append(last_tool_result(ctx)) or "done",
            ]
        )
        harness = await make_harness(stream, extensions=[activate])
        try:
            await harness.prompt("go")
        finally:
            await harness.close()
        (result,) = results
        return result_text(result), bool(result.isError)

    def notices(self) -> str:
        return "\n".join(self._notices)

    async def first_tools(self) -> list[str]:
        from pi_mcp_adapter.hosts.pi_python import activate

        from .pi_support import ScriptedStream, make_harness

        stream = ScriptedStream([lambda ctx: "done"])
        harness = await make_harness(stream, extensions=[activate])
        try:
            await harness.prompt("go")
        finally:
            await harness.close()
        return stream.offered[0]


@asynccontextmanager
async def open_pi(ws: Workspace, person: Person | None = None) -> AsyncIterator[Session]:
    # A harness per call: each is a fresh session over the same agent dir and cache.
    yield _PiSession([])


HOSTS: dict[str, Opener] = {
    "cli": open_cli,
    "gateway-stdio": open_gateway_stdio,
    "gateway-http": open_gateway_http,
    "pi-python": open_pi,
    "pydantic-ai": open_pydantic_ai,
    "openai-agents": open_openai_agents,
    "export": open_export,
}
ONE_SHOT = {"cli": "each `pi-mcp` command reads the configuration once", "pi-python": ""}


@pytest.fixture(params=list(HOSTS))
def host(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def tagged(workspace: Workspace) -> str:
    tag = f"conformance-{os.getpid()}-{id(workspace)}"
    workspace.write_config(servers(tag))
    workspace.project_dir.mkdir(parents=True, exist_ok=True)
    return tag


def _left_behind(tag: str) -> list[int]:
    found = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if tag in cmdline:
            found.append(process.info["pid"])
    return found


# ---------------------------------------------------------------------- the rows


async def test_a_fresh_agent_dir_answers_an_immediate_call(
    host: str, workspace: Workspace, tagged: str
) -> None:
    assert not (workspace.agent_dir / "mcp-cache.json").exists()
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(30):
            text, is_error = await session.call("fix_echo", {"message": "first"})
    assert not is_error, text
    assert "Echo: first" in text


async def test_a_fresh_agent_dir_offers_direct_tools_in_the_first_tool_list(
    host: str, workspace: Workspace, tagged: str
) -> None:
    # A server that takes a while to start: the first list must wait for it, not skip it.
    slow = fixture_entry("--name", tagged, "--start-delay", "1.5", directTools=["echo"])
    workspace.write_config({**servers(tagged), "slow": slow})
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(30):
            names = await session.first_tools()
    assert "slow_echo" in names, names
    assert "fix_echo" not in names  # the other servers' tools stay behind the proxy


async def test_a_hanging_server_says_why_its_tools_are_missing(
    host: str, workspace: Workspace, tagged: str
) -> None:
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(40):
            text, is_error = await session.call("hang_echo", {"message": "x"})
            healthy, healthy_error = await session.call("fix_echo", {"message": "still here"})
    assert is_error
    # Each host in its own syntax: the command line names the command a person types.
    retry = "`pi-mcp connect hang`" if host == "cli" else 'mcp({connect: "hang"})'
    assert retry in text, text
    assert not healthy_error
    assert "Echo: still here" in healthy


async def test_an_unknown_tool_and_bad_arguments_are_error_results(
    host: str, workspace: Workspace, tagged: str
) -> None:
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(40):
            unknown, unknown_error = await session.call("fix_no_such_tool", {})
            invalid, invalid_error = await session.call("fix_echo", {"message": 5})
    assert unknown_error
    assert "not found" in unknown.lower(), unknown
    assert invalid_error
    assert "Invalid arguments for fix_echo" in invalid, invalid


async def test_notices_reach_the_person(host: str, workspace: Workspace, tagged: str) -> None:
    if host == "pi-python":
        pytest.skip("pi-python notices are covered by tests/hosts/test_pi_python.py")
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(40):
            await session.call("broken_echo", {"message": "x"})
            notices = session.notices()
    assert "broken" in notices, notices


async def test_a_config_edit_takes_effect_while_running(
    host: str, workspace: Workspace, tagged: str
) -> None:
    if host in ONE_SHOT:
        pytest.skip(ONE_SHOT[host] or "each pi-python session reads the configuration anew")
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(30):
            text, is_error = await session.call("fix_echo", {"message": "before"})
        assert not is_error, text
        workspace.write_config({**servers(tagged), "extra": fixture_entry("--name", tagged)})
        with anyio.fail_after(EDIT_WAIT_S):
            while True:
                text, is_error = await session.call("extra_echo", {"message": "after"})
                if not is_error:
                    break
                await anyio.sleep(0.5)
    assert "Echo: after" in text


async def test_shutdown_leaves_no_process(host: str, workspace: Workspace, tagged: str) -> None:
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(30):
            await session.call("fix_echo", {"message": "x"})
    with anyio.fail_after(10):
        while _left_behind(tagged):
            await anyio.sleep(0.1)


LEAKY = Path(__file__).resolve().parents[1] / "fixtures" / "leaky_server.py"


async def test_no_secret_reaches_the_model_or_the_person(
    host: str, workspace: Workspace, tagged: str
) -> None:
    literal, from_command = f"canary-literal-{uuid.uuid4().hex}", f"canary-cmd-{uuid.uuid4().hex}"
    env = {"API_KEY": literal, "CMD_KEY": f"!echo {from_command}"}
    workspace.write_config(
        {
            **servers(tagged),
            # Quotes its environment in a tool's error text; dumps it on stderr and dies.
            "leaky": {"command": sys.executable, "args": [str(LEAKY), "tool"], "env": env},
            "dying": {"command": sys.executable, "args": [str(LEAKY), "stderr"], "env": env},
        }
    )
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(40):
            dump, dump_error = await session.call("leaky_dump", {})
            died, died_error = await session.call("dying_dump", {})
            notices = session.notices()
    assert dump_error
    assert died_error
    assert "API_KEY=" in dump, dump  # the server did quote its environment
    for text in (dump, died, notices):
        assert literal not in text
        assert from_command not in text


QUESTIONS = Path(__file__).resolve().parents[1] / "fixtures" / "questions_server.py"
NO_ONE_TO_ASK = {
    "cli": "without a terminal (tests/cli/test_approval_prompt.py answers at one)",
    "pi-python": "pi-python's extension API has no input dialog",
}


async def test_an_approval_is_asked_and_an_elicitation_answered(
    host: str, workspace: Workspace, tagged: str
) -> None:
    workspace.write_config(
        {
            **servers(tagged),
            "fix": fixture_entry("--name", tagged, approveTools=["echo"]),
            "ask": {"command": sys.executable, "args": [str(QUESTIONS)]},
        }
    )
    person = Person()
    async with HOSTS[host](workspace, person) as session:
        with anyio.fail_after(40):
            approved, approved_error = await session.call("fix_echo", {"message": "may I"})
            booked, booked_error = await session.call("ask_book_table", {})
    if host in NO_ONE_TO_ASK:
        # No one can answer here: nothing runs unasked, and the model is told why.
        assert approved_error
        assert "needs the user's approval" in approved, approved
        assert "action=decline" in booked, booked
        return
    assert not approved_error, approved
    assert "Echo: may I" in approved
    assert not booked_error, booked
    assert '"name": "Ada"' in booked, booked
    assert '"party": 2' in booked, booked  # the form's defaults fill what the person left out
    assert person.asked == ["approval", "Book a table at Chez Fixture"]


async def test_a_tool_override_and_always_load_show_the_same_in_every_host(
    host: str, workspace: Workspace, tagged: str
) -> None:
    overridden = fixture_entry(
        "--name",
        tagged,
        toolOverrides={
            "echo": {"name": "say", "description": "Say a message back"},
            "fail": {"hidden": True},
        },
        alwaysLoad=["pid"],
    )
    workspace.write_config({**servers(tagged), "fix": overridden})
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(40):
            names = await session.first_tools()
            said, said_error = await session.call("fix_say", {"message": "renamed"})
            old_name, old_name_error = await session.call("fix_echo", {"message": "x"})
            hidden, hidden_error = await session.call("fix_fail", {})
    assert "fix_pid" in names, names  # alwaysLoad: in the first tool list, beside the proxy
    assert "fix_say" not in names  # the renamed tool stays behind the proxy like the rest
    assert not said_error, said
    assert "Echo: renamed" in said  # reached under the server's own name
    # A call names its tool loosely (the server's own name after the prefix is one way): the
    # same tool answers, as in every host, and approval lists keep the server's names.
    assert not old_name_error, old_name
    assert "Echo: x" in old_name
    assert hidden_error
    assert "not found" in hidden.lower(), hidden


async def test_the_most_used_tools_are_loaded_from_the_first_list_in_every_host(
    host: str, workspace: Workspace, tagged: str
) -> None:
    workspace.write_config(
        servers(tagged),
        settings={"surface": "toolsearch", "captureStats": True, "alwaysLoadMostUsed": 1},
    )
    counted = {"calls": 9, "errors": 0, "totalLatencyMs": 1.0, "maxLatencyMs": 1.0, "bytesOut": 1}
    (workspace.agent_dir / "mcp-stats.json").write_text(
        json.dumps({"version": 1, "updatedAtMs": 0, "servers": {"fix": {"pid": counted}}})
    )
    async with HOSTS[host](workspace) as session:
        with anyio.fail_after(40):
            names = await session.first_tools()
    assert "ToolSearch" in names, names
    assert "fix_pid" in names, names  # the most called tool, loaded before any search
    assert "fix_echo" not in names
