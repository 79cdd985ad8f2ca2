"""The server pool: processes of one agent dir share a running gateway's stdio servers.

Real pools (in-process, and ``pi-mcp serve --background`` as a detached process), real fixture
servers, real ``pi-mcp`` commands; psutil counts the server processes.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import psutil
import pytest

from pi_mcp_adapter import McpAdapter
from pi_mcp_adapter._execution_context import context_fingerprint, execution_context
from pi_mcp_adapter.servers import ServerPool, pool_socket_path, read_hello_line

from .conftest import (
    CANARY,
    MCP_FIXTURE,
    PI_MCP,
    fixture_entry,
    is_supervisor,
    make_mark,
    wait_for_mark,
)

pytestmark = [pytest.mark.anyio]


def write_config(path: Path, servers: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def fixture_processes(under: int | None = None) -> list[psutil.Process]:
    """The running fixture servers started by process ``under`` (default: this one) or its
    descendants, supervisors excluded."""
    try:
        descendants = psutil.Process(under or os.getpid()).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for process in descendants:
        try:
            if str(MCP_FIXTURE) in process.cmdline() and not is_supervisor(process):
                found.append(process)
        except psutil.NoSuchProcess:
            continue
    return found


def pid_of(outcome: Any) -> int:
    assert outcome.error_kind is None, outcome.message
    return int(outcome.result.content[0].text)


@asynccontextmanager
async def running_pool(agent_dir: Path, config: Path) -> AsyncIterator[McpAdapter]:
    """An in-process gateway adapter serving the pool of ``agent_dir``."""
    adapter = McpAdapter(
        agent_dir=agent_dir,
        config_path=config,
        project_dir=config.parent,
        relay_server_requests=True,
        use_pool=False,
        connect_missing=False,  # a server runs only when a client asks for it
    )
    async with adapter, ServerPool(adapter).serving(stop=lambda: None) as serving:
        assert serving
        yield adapter


def client(agent_dir: Path, config: Path) -> McpAdapter:
    return McpAdapter(agent_dir=agent_dir, config_path=config, project_dir=config.parent)


async def test_adapters_with_the_same_entry_share_the_pools_server_process(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    async with (
        running_pool(agent_dir, config) as pool,
        client(agent_dir, config) as first,
        client(agent_dir, config) as second,
    ):
        with anyio.fail_after(30):
            pids = {pid_of(await a.call("fx_pid")) for a in (first, second, first)}
        assert len(pids) == 1
        assert first.server_manager().state("fx").transport == "pool"
        echoed = await second.call("fx_echo", {"message": "through the pool"})
        assert echoed.result is not None
        assert echoed.result.content[0].text == "Echo: through the pool"  # type: ignore[union-attr]
        held = pool.server_manager().process_id("fx")
        assert held is not None
        assert [p.pid for p in fixture_processes()] == [pids.pop()]


async def test_a_server_whose_entry_differs_is_started_by_the_client_itself(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    pooled = write_config(tmp_path / "pool" / "mcp.json", {"fx": fixture_entry()})
    other = write_config(tmp_path / "other" / "mcp.json", {"fx": fixture_entry("--tools", "2")})
    async with running_pool(agent_dir, pooled) as pool, client(agent_dir, other) as differing:
        with anyio.fail_after(30):
            own = pid_of(await differing.call("fx_pid"))
            assert differing.server_manager().state("fx").transport == "stdio"
            await pool.server_manager().connect("fx")
        assert own != pool.server_manager().process_id("fx")
        assert len(fixture_processes()) == 2


async def test_settings_that_only_change_how_a_client_uses_a_server_still_share_it(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    pooled = write_config(tmp_path / "pool" / "mcp.json", {"fx": fixture_entry()})
    own_settings = fixture_entry(requestTimeoutMs=45_000, lifecycle="eager", directTools=True)
    other = write_config(tmp_path / "other" / "mcp.json", {"fx": own_settings})
    async with running_pool(agent_dir, pooled) as pool, client(agent_dir, other) as sharing:
        with anyio.fail_after(30):
            shared = pid_of(await sharing.call("fx_pid"))
        assert sharing.server_manager().state("fx").transport == "pool"
        assert [p.pid for p in fixture_processes()] == [shared]
        assert pool.server_manager().state("fx").status == "connected"


async def test_without_a_pool_or_with_a_stale_socket_the_client_starts_the_server(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    async with client(agent_dir, config) as alone:
        with anyio.fail_after(30):
            pid_of(await alone.call("fx_pid"))
        assert alone.server_manager().state("fx").transport == "stdio"
    # A socket file nobody listens on: what a pool killed with SIGKILL leaves behind.
    path = pool_socket_path(agent_dir)
    path.parent.mkdir(mode=0o700)
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(str(path))
    async with client(agent_dir, config) as after_crash:
        with anyio.fail_after(30):
            pid_of(await after_crash.call("fx_pid"))
        assert after_crash.server_manager().state("fx").transport == "stdio"


async def test_when_the_pool_stops_a_session_goes_on_with_a_server_of_its_own(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    stop_pool = anyio.Event()

    async def serve_pool(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        async with running_pool(agent_dir, config):
            task_status.started()
            await stop_pool.wait()

    async with anyio.create_task_group() as tg:
        await tg.start(serve_pool)
        async with client(agent_dir, config) as session:
            await check_session_outlives_pool(session, stop_pool)


async def check_session_outlives_pool(session: McpAdapter, stop_pool: anyio.Event) -> None:
    with anyio.fail_after(30):
        pooled = pid_of(await session.call("fx_pid"))
    assert session.server_manager().state("fx").transport == "pool"
    stop_pool.set()
    with anyio.fail_after(5):  # the end of the session reaches this event loop's reader
        while session.server_manager().state("fx").status == "connected":
            await anyio.sleep(0.01)
    assert session.server_manager().state("fx").status == "closed"  # not a failure
    with anyio.fail_after(30):
        own = pid_of(await session.call("fx_pid"))
    assert own != pooled
    assert session.server_manager().state("fx").transport == "stdio"


async def test_an_untrusted_project_server_is_never_asked_of_the_pool(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    project = tmp_path / "cloned"
    write_config(project / ".mcp.json", {"fx": fixture_entry()})
    write_config(agent_dir / "mcp.json", {})
    async with running_pool(agent_dir, config) as pool:
        untrusting = McpAdapter(agent_dir=agent_dir, project_dir=project, connect_missing=False)
        async with untrusting:
            outcome = await untrusting.call("fx_pid")
        assert outcome.error_kind is not None
        assert pool.server_manager().state("fx").status == "closed"
        assert fixture_processes() == []


async def test_the_pool_socket_is_private(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    async with running_pool(agent_dir, config):
        path = pool_socket_path(agent_dir)
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert await ask(path, {"pool": 99}) == {
            "ok": False,
            "reason": "unsupported pool protocol version",
        }
        context = context_fingerprint(execution_context() or {})
        asking = {"pool": 1, "server": "fx", "context": context}
        refused = await ask(path, {**asking, "fingerprint": "another"})
        assert refused == {"ok": False, "reason": "the pool's entry for 'fx' differs"}
        unknown = await ask(path, {**asking, "server": "nope", "fingerprint": "x"})
        assert unknown["ok"] is False
    assert not path.exists()


async def ask(path: Path, hello: dict[str, Any]) -> dict[str, Any]:
    async with await anyio.connect_unix(path) as stream:
        await stream.send(json.dumps(hello).encode() + b"\n")
        answer, _rest = await read_hello_line(stream)
    return answer


# -- the command line -------------------------------------------------------------------------


def pi_mcp(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    globals_ = ["--config", str(root / "mcp.json"), "--agent-dir", str(root / "agent")]
    return subprocess.run(
        [str(PI_MCP), *globals_, "--project", str(root), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
    )


WARM_PROBE = """
import sys
from pi_mcp_adapter._launch import run_warm
code = run_warm(sys.argv[1:])
sys.stdout.flush()
sys.stderr.write(f"WARM {code}\\n")
"""


def warm(
    root: Path, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> tuple[int | None, str]:
    """What the warm process made of a command: its exit code (None: it did not take it) and
    its output."""
    globals_ = ["--config", "mcp.json", "--agent-dir", str(root / "agent")]
    completed = subprocess.run(
        [sys.executable, "-c", WARM_PROBE, *globals_, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=root,
        env={**os.environ, **(env or {})},
    )
    verdict = completed.stderr.splitlines()[-1]
    assert verdict.startswith("WARM "), completed.stderr
    code = verdict.removeprefix("WARM ")
    return (None if code == "None" else int(code)), completed.stdout


def start_slow_call(root: Path, mark: Path) -> subprocess.Popen[bytes]:
    """`pi-mcp call` of the fixture's slow tool, which opens ``mark`` once it runs."""
    return subprocess.Popen(
        [
            str(PI_MCP),
            *("--config", "mcp.json", "--agent-dir", str(root / "agent")),
            *("call", "fx_slow", json.dumps({"seconds": 120, "mark": str(mark)})),
        ],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@contextmanager
def background_pool(root: Path) -> Iterator[int]:
    started = pi_mcp(root, "serve", "--background")
    assert started.returncode == 0, started.stderr
    status = json.loads(pi_mcp(root, "status", "--json").stdout)["pool"]
    pid = int(status["pid"])
    try:
        yield pid
    finally:
        if psutil.pid_exists(pid):
            pi_mcp(root, "serve", "--stop")
        with pytest.raises(psutil.NoSuchProcess):
            psutil.Process(pid).wait(timeout=15)


@pytest.mark.slow
def test_cli_calls_use_the_background_pool_and_stop_leaves_no_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POOL_CANARY", CANARY)  # the pool and every command see the secret
    write_config(tmp_path / "mcp.json", {"fx": fixture_entry(env={"TOKEN": "${POOL_CANARY}"})})
    (tmp_path / "agent").mkdir()
    with background_pool(tmp_path) as pool_pid:
        assert "server pool listening" in pi_mcp(tmp_path, "serve", "--background").stdout
        # A secret the server holds is redacted by the command that prints it.
        leaked = pi_mcp(tmp_path, "call", "fx_env", '{"name": "TOKEN"}')
        assert leaked.returncode == 0, leaked.stderr
        assert CANARY not in leaked.stdout + leaked.stderr
        assert leaked.stdout.strip()
        pids = set()
        for _ in range(3):
            called = pi_mcp(tmp_path, "call", "fx_pid")
            assert called.returncode == 0, called.stderr
            pids.add(int(called.stdout))
        assert len(pids) == 1
        servers = fixture_processes(pool_pid)
        assert [p.pid for p in servers] == list(pids)
        status = pi_mcp(tmp_path, "status")
        assert f"server pool: pid {pool_pid}" in status.stdout
        # Short commands run in the pool's warm process, with this one's directory (the
        # relative --config), environment and streams, and exit with the command's code (not
        # with PI_MCP_WARM=0, which the tests' environment sets).
        use_warm = {"PI_MCP_WARM": "1"}
        assert warm(
            tmp_path, "call", "fx_echo", "-", stdin='{"message": "warm"}', env=use_warm
        ) == (0, "Echo: warm\n")
        assert warm(tmp_path, "call", "fx_fail", env=use_warm)[0] == 1
        assert warm(tmp_path, "call", "fx_pid", env={"PI_MCP_POOL": "0"}) == (None, "")
        # Ctrl-C on a command the warm process runs stops that command, as it would here.
        mark = make_mark(tmp_path, "slow-started")
        slow = start_slow_call(tmp_path, mark)
        anyio.run(wait_for_mark, mark)
        slow.send_signal(signal.SIGINT)
        assert slow.wait(timeout=30) == 130
        helpers = psutil.Process(pool_pid).children(recursive=True)  # servers, warm process
        stopped = pi_mcp(tmp_path, "serve", "--stop")
        assert f"stopped the server pool (pid {pool_pid})" in stopped.stdout
        _gone, alive = psutil.wait_procs(helpers, timeout=10)
        assert alive == []
        assert not pool_socket_path(tmp_path / "agent").exists()
    # With no pool, the call starts its own server again.
    assert pi_mcp(tmp_path, "call", "fx_echo", '{"message": "alone"}').stdout == "Echo: alone\n"
    assert "no server pool runs" in pi_mcp(tmp_path, "serve", "--stop").stdout
    assert json.loads(pi_mcp(tmp_path, "status", "--json").stdout)["pool"] is None


QUESTIONS = {"command": sys.executable, "args": [str(MCP_FIXTURE.parent / "questions_server.py")]}


async def test_a_servers_questions_during_a_pooled_call_reach_the_session_that_made_it(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"q": QUESTIONS})
    asked: list[str] = []

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(server)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    asking = McpAdapter(
        agent_dir=agent_dir, config_path=config, project_dir=tmp_path, elicit=elicit
    )
    async with running_pool(agent_dir, config), asking, client(agent_dir, config) as mute:
        with anyio.fail_after(30):
            answered = await asking.call("q_book_table")
            refused = await mute.call("q_book_table")
        assert asking.server_manager().state("q").transport == "pool"
        assert mute.server_manager().state("q").transport == "pool"
    assert asked == ["q"]
    assert answered.result is not None
    assert '"name": "Ada"' in answered.result.content[0].text  # type: ignore[union-attr]
    assert refused.is_error


TASKS = {
    "command": sys.executable,
    "args": [str(MCP_FIXTURE.parent / "tasks_server.py")],
    "protocolVersion": "auto",
}


async def test_a_task_on_the_pools_connection_answers_a_pooled_call(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"jobs": TASKS})
    asked: list[str] = []

    async def elicit(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Ada"})

    asking = McpAdapter(
        agent_dir=agent_dir, config_path=config, project_dir=tmp_path, elicit=elicit
    )
    async with running_pool(agent_dir, config), asking:
        with anyio.fail_after(30):
            report = await asking.call("jobs_slow_report", {"seconds": 0.2})
            greeting = await asking.call("jobs_ask_name")
        assert asking.server_manager().state("jobs").transport == "pool"
    assert report.result is not None
    assert greeting.result is not None
    # The pool follows the task on its own connection; the question still reaches the caller.
    assert report.result.content[0].text == "report ready"  # type: ignore[union-attr]
    assert greeting.result.content[0].text == "hello Ada (accept)"  # type: ignore[union-attr]
    assert asked == ["What is your name?"]


async def test_status_in_another_process_lists_the_pools_running_tasks(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"jobs": TASKS})
    async with (
        running_pool(agent_dir, config) as pool,
        client(agent_dir, config) as caller,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(caller.call, "jobs_slow_report", {"seconds": 60})
        with anyio.fail_after(30):
            while not pool.status().running_tasks:
                await anyio.sleep(0.05)
        [running] = pool.status().running_tasks
        shown = await anyio.to_thread.run_sync(pi_mcp, tmp_path, "status")
        as_json = await anyio.to_thread.run_sync(pi_mcp, tmp_path, "status", "--json")
        tg.cancel_scope.cancel()
    assert "Running tasks (1):" in shown.stdout, shown.stdout + shown.stderr
    assert f"jobs/slow_report  task {running.task_id}  working" in shown.stdout
    [listed] = json.loads(as_json.stdout)["runningTasks"]
    assert (listed["server"], listed["tool"], listed["taskId"]) == (
        "jobs",
        "slow_report",
        running.task_id,
    )


async def test_pydantic_ai_agents_call_through_the_pools_one_server_process(
    tmp_path: Path,
) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
    from pydantic_ai.messages import TextPart as PaiTextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from pi_mcp_adapter.hosts.pydantic_ai import McpCapability

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returned = [
            str(part.content)
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if part.part_kind == "tool-return"
        ]
        if returned:
            return ModelResponse(parts=[PaiTextPart(returned[-1])])
        return ModelResponse(parts=[ToolCallPart("mcp", {"tool": "fx_pid"}, tool_call_id="c1")])

    agent_dir = tmp_path / "agent"
    config = write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    async with running_pool(agent_dir, config) as pool:
        answers = []
        for _ in range(2):
            async with client(agent_dir, config) as adapter:
                agent = Agent(FunctionModel(model), capabilities=[McpCapability(adapter)])
                with anyio.fail_after(30):
                    answers.append((await agent.run("which pid?")).output)
        assert answers[0] == answers[1]
        assert [p.pid for p in fixture_processes()] == [int(answers[0])]
        assert pool.server_manager().state("fx").status == "connected"


@pytest.mark.slow
def test_an_approval_question_of_a_warm_command_is_asked_on_the_callers_terminal(
    tmp_path: Path,
) -> None:
    # The terminal driver of the CLI's own tests (a sibling test package).
    spec = importlib.util.spec_from_file_location(
        "pool_terminal", MCP_FIXTURE.parents[1] / "cli" / "terminal.py"
    )
    assert spec is not None
    assert spec.loader is not None
    terminal = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(terminal)
    terminal_command, run_on_terminal = terminal.pi_mcp, terminal.run_on_terminal

    workbench = MCP_FIXTURE.parents[1] / "surface" / "workbench_server.py"
    (tmp_path / "project").mkdir()
    entry = {"command": sys.executable, "args": [str(workbench)], "approveTools": ["echo"]}
    write_config(tmp_path / "agent" / "mcp.json", {"workbench": entry})
    argv, env = terminal_command(tmp_path, "serve", "--background")
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=120)
    try:
        argv, env = terminal_command(tmp_path, "call", "workbench_echo", '{"message": "tty"}')
        result, shown = run_on_terminal(argv, env, [(b"Choose 1-4: ", b"1\n")])
        assert b"Allow the MCP tool workbench_echo (server workbench)?" in shown
        assert result.returncode == 0
        assert "tty" in result.stdout
        argv, env = terminal_command(tmp_path, "status", "--json")
        status = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        pool = json.loads(status.stdout)["pool"]
        assert pool["servers"]["workbench"]["pid"] is not None  # the pool ran the server
    finally:
        argv, env = terminal_command(tmp_path, "serve", "--stop")
        subprocess.run(argv, env=env, capture_output=True, timeout=60)


# -- the warm process started on first use ------------------------------------------------------


@pytest.fixture
def warm_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let `pi-mcp` commands start a warm process on first use, as they do outside tests (and
    outside CI jobs)."""
    monkeypatch.delenv("PI_MCP_WARM")
    monkeypatch.delenv("CI", raising=False)


def warm_process_of(root: Path) -> psutil.Process:
    """The warm process of ``root``'s agent dir, once it takes commands."""
    socket_path = root / "agent" / "pool" / "cli.sock"
    for _ in range(600):
        if socket_path.exists():
            break
        time.sleep(0.05)
    status = json.loads(pi_mcp(root, "status", "--json").stdout)["warmProcess"]
    assert status is not None
    assert socket_path.exists()
    return psutil.Process(int(status["pid"]))


def spawned_warm_process(root: Path) -> psutil.Process:
    """The warm process started for ``root``'s agent dir, found by its command line."""
    pool_dir = str(root / "agent" / "pool")
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if pool_dir in cmdline and any("serve_warm_on_first_use" in part for part in cmdline):
            return process
    raise AssertionError(f"no warm process was started for {pool_dir}")


@contextmanager
def ended_after(process: psutil.Process) -> Iterator[psutil.Process]:
    """``process`` for the block, killed after it if it still runs: a failing test must not
    leave a warm process behind."""
    try:
        yield process
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()


def wait_until_gone(process: psutil.Process, timeout: float = 20) -> None:
    _gone, alive = psutil.wait_procs([process], timeout=timeout)
    assert alive == []


@pytest.mark.slow
@pytest.mark.usefixtures("warm_start")
def test_the_first_short_command_starts_a_warm_process_that_holds_no_secret_and_no_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WARM_CANARY", CANARY)
    write_config(tmp_path / "mcp.json", {"fx": fixture_entry(env={"TOKEN": "${WARM_CANARY}"})})
    (tmp_path / "agent").mkdir()
    # Output captured to its end: the detached process must not hold these pipes open.
    first = pi_mcp(tmp_path, "call", "fx_echo", '{"message": "cold"}')
    assert (first.returncode, first.stdout) == (0, "Echo: cold\n"), first.stderr
    with ended_after(warm_process_of(tmp_path)) as process:
        assert process.terminal() is None
        assert process.cwd() == "/"
        assert process.ppid() != os.getpid()  # detached: not a child of the test
        assert all(CANARY not in value for value in process.environ().values())
        lock = tmp_path / "agent" / "pool" / "warm.lock"
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600
        assert stat.S_IMODE(lock.parent.stat().st_mode) == 0o700
        # The next commands run in it, each with its own environment (the server gets the
        # secret, the output does not show it); their servers are not kept.
        code, output = warm(tmp_path, "call", "fx_env", '{"name": "TOKEN"}')
        assert code == 0
        assert output.strip()
        assert CANARY not in output
        assert warm(tmp_path, "call", "fx_echo", '{"message": "warm"}') == (0, "Echo: warm\n")
        assert fixture_processes(process.pid) == []
        assert f"warm process: pid {process.pid}" in pi_mcp(tmp_path, "status").stdout
        # A second first-use start while it runs starts nothing.
        pi_mcp(tmp_path, "tools")
        assert warm_process_of(tmp_path).pid == process.pid
        stopped = pi_mcp(tmp_path, "serve", "--stop")
        assert f"stopped the warm process (pid {process.pid})" in stopped.stdout
        wait_until_gone(process)
        assert not (tmp_path / "agent" / "pool" / "cli.sock").exists()
        monkeypatch.setenv("PI_MCP_WARM", "0")  # or this status would start the next one
        assert json.loads(pi_mcp(tmp_path, "status", "--json").stdout)["warmProcess"] is None


@pytest.mark.slow
@pytest.mark.usefixtures("warm_start")
def test_the_warm_process_exits_when_idle_or_when_the_package_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    (tmp_path / "agent").mkdir()
    monkeypatch.setenv("PI_MCP_WARM_IDLE_S", "3")
    assert pi_mcp(tmp_path, "tools").returncode == 0
    # Found by its command line, not by asking it: on a busy machine another command could
    # start after the idle time has already ended the process.
    idle = spawned_warm_process(tmp_path)
    wait_until_gone(idle)
    assert not (tmp_path / "agent" / "pool" / "cli.sock").exists()
    monkeypatch.setenv("PI_MCP_WARM_IDLE_S", "600")
    assert pi_mcp(tmp_path, "tools").returncode == 0
    with ended_after(warm_process_of(tmp_path)) as process:
        # Status reports the running process's own timeout, not the asking environment's.
        monkeypatch.setenv("PI_MCP_WARM_IDLE_S", "5")
        shown = json.loads(pi_mcp(tmp_path, "status", "--json").stdout)["warmProcess"]
        assert shown["idleExitS"] == 600
        # A command from a copy of the package edited or upgraded since the warm process
        # imported it runs by itself, and the outdated process ends.
        newer = (
            "import sys\n"
            "from pi_mcp_adapter._warm import _client\n"
            "current = _client.install_identity()\n"
            "_client.install_identity = lambda: [*current[:-1], current[-1] + '0']\n"
            "code = _client.run_warm(sys.argv[1:])\n"
            "sys.stderr.write(f'WARM {code}\\n')\n"
        )
        probe = subprocess.run(
            [sys.executable, "-c", newer, "--agent-dir", str(tmp_path / "agent"), "tools"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        assert probe.stderr.splitlines()[-1] == "WARM None", probe.stderr
        wait_until_gone(process)


@pytest.mark.parametrize(
    "environ",
    [{"PI_MCP_WARM": "0"}, {"CI": "true"}, {"CI": "1", "PI_MCP_WARM": "0"}],
    ids=["turned-off", "in-a-ci-job", "turned-off-in-a-ci-job"],
)
def test_no_warm_process_starts_when_turned_off_or_in_a_ci_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, environ: dict[str, str]
) -> None:
    write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    (tmp_path / "agent").mkdir()
    monkeypatch.delenv("PI_MCP_WARM")
    monkeypatch.delenv("CI", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert pi_mcp(tmp_path, "tools").returncode == 0
    assert not (tmp_path / "agent" / "pool").exists()


@pytest.mark.slow
@pytest.mark.usefixtures("warm_start")
def test_a_ci_job_can_ask_for_the_warm_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    (tmp_path / "agent").mkdir()
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("PI_MCP_WARM", "1")
    assert pi_mcp(tmp_path, "tools").returncode == 0
    with ended_after(warm_process_of(tmp_path)) as process:
        assert pi_mcp(tmp_path, "serve", "--stop").returncode == 0
        wait_until_gone(process)


@pytest.mark.slow
@pytest.mark.usefixtures("warm_start")
def test_a_background_pool_takes_over_from_the_warm_process_started_on_first_use(
    tmp_path: Path,
) -> None:
    write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    (tmp_path / "agent").mkdir()
    assert pi_mcp(tmp_path, "tools").returncode == 0
    with ended_after(warm_process_of(tmp_path)) as first_use, background_pool(tmp_path):
        # The pool's own warm process holds the socket now; the other one ends.
        wait_until_gone(first_use)
        assert warm(tmp_path, "call", "fx_echo", '{"message": "pool"}') == (
            0,
            "Echo: pool\n",
        )


@pytest.mark.slow
@pytest.mark.usefixtures("warm_start")
def test_a_command_whose_caller_is_killed_ends_with_its_servers(tmp_path: Path) -> None:
    write_config(tmp_path / "mcp.json", {"fx": fixture_entry()})
    (tmp_path / "agent").mkdir()
    assert pi_mcp(tmp_path, "tools").returncode == 0
    with ended_after(warm_process_of(tmp_path)) as process:
        mark = make_mark(tmp_path, "slow-started")
        caller = start_slow_call(tmp_path, mark)
        anyio.run(wait_for_mark, mark)
        (command,) = process.children()
        servers = fixture_processes(command.pid)
        assert len(servers) == 1
        # SIGKILL is the one signal the caller cannot pass on: the command notices its
        # caller's end of the connection close, and ends as it would have ended here.
        caller.kill()
        caller.wait()
        _gone, alive = psutil.wait_procs([command, *servers], timeout=15)
        assert alive == []
        # The warm process itself serves on.
        assert warm(tmp_path, "call", "fx_echo", '{"message": "next"}') == (0, "Echo: next\n")
