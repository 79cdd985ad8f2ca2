"""A sandboxed caller: nothing the warm process or the pool runs for a command has more than
the command's own process has.

Real ``pi-mcp`` commands started under ``nice``, ``prlimit``, ``ulimit`` and ``unshare``, a
real warm process, a real background pool, and a fixture server that reports the nice value,
limits and network namespace it runs with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gateway.conftest import FIXTURES, PI_MCP
from gateway.test_pool import background_pool, ended_after, pi_mcp, warm
from pi_mcp_adapter._execution_context import context_fingerprint, execution_context

CONTEXT_SERVER = {"command": sys.executable, "args": [str(FIXTURES / "context_server.py")]}
OWN_NET = os.readlink("/proc/self/ns/net")


def _user_namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-rn", "true"], capture_output=True, timeout=30)
    return done.returncode == 0


needs_user_namespaces = pytest.mark.skipif(
    not _user_namespaces_work(),
    reason="this kernel or container does not let an unprivileged `unshare -rn` make a network "
    "namespace",
)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config with the context server, and commands that start a warm process on first use."""
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"ctx": CONTEXT_SERVER}}))
    (tmp_path / "agent").mkdir()
    monkeypatch.delenv("PI_MCP_WARM")
    monkeypatch.delenv("CI", raising=False)
    return tmp_path


WARM_START_BOUND_S = 120.0
"""The warm process imports the CLI, the engine and the search model before it listens: on a
machine busy with other test runs that takes far longer than its usual second."""


def warm_process_of(root: Path) -> psutil.Process:
    """The warm process of ``root``'s agent dir, once it listens."""
    socket_path = root / "agent" / "pool" / "cli.sock"
    deadline = time.monotonic() + WARM_START_BOUND_S
    while not socket_path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert socket_path.exists()
    lock = (root / "agent" / "pool" / "warm.lock").read_text().split()
    return psutil.Process(int(lock[0]))


@pytest.fixture
def warm_process(workspace: Path) -> Iterator[psutil.Process]:
    """The warm process a first command started, taking commands of this test's context."""
    for _attempt in range(5):
        assert pi_mcp(workspace, "tools").returncode == 0
        with ended_after(warm_process_of(workspace)) as process:
            # An unconfined command is served warm, unless the package's files changed since
            # the process imported them (it then ends, and the next command starts another).
            if warm(workspace, "call", "ctx_context")[0] == 0:
                yield process
                return
            psutil.wait_procs([process], timeout=30)
    pytest.fail("no warm process took an unconfined command")


def seen_by_server(root: Path, *prefix: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """What the server started for ``prefix pi-mcp call ctx_context`` reports about itself."""
    globals_ = ["--config", str(root / "mcp.json"), "--agent-dir", str(root / "agent")]
    done = subprocess.run(
        [*prefix, str(PI_MCP), *globals_, "call", "ctx_context"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@pytest.mark.slow
@pytest.mark.usefixtures("warm_process")
@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        pytest.param(("nice", "-n", "7"), {"nice": 7}, id="nice"),
        pytest.param(("prlimit", "--nofile=512:512"), {"nofile": [512, 512]}, id="prlimit"),
        pytest.param(
            ("bash", "-c", 'ulimit -n 512; ulimit -v 4000000; exec "$@"', "sandbox"),
            {"nofile": [512, 512], "address_space": [4_096_000_000, 4_096_000_000]},
            id="ulimit",
        ),
    ],
)
def test_a_command_after_the_warm_process_started_runs_its_server_with_the_callers_limits(
    workspace: Path, prefix: tuple[str, ...], expected: dict[str, Any]
) -> None:
    report = seen_by_server(workspace, *prefix)
    assert {key: report[key] for key in expected} == expected


@pytest.mark.slow
@needs_user_namespaces
@pytest.mark.usefixtures("warm_process")
def test_a_command_in_a_network_namespace_does_not_reach_the_network_through_the_warm_process(
    workspace: Path,
) -> None:
    assert seen_by_server(workspace)["net"] == OWN_NET
    assert seen_by_server(workspace, "unshare", "-rn")["net"] != OWN_NET


FORGED_WARM_REQUEST = """
import json, os, socket, sys
path, context = sys.argv[1], sys.argv[2]
from pi_mcp_adapter._warm import install_identity
request = {"install": install_identity(), "context": context, "argv": ["pi-mcp", "status"],
           "cwd": os.getcwd(), "env": dict(os.environ), "umask": 0o22}
with socket.socket(socket.AF_UNIX) as connection:
    connection.connect(path)
    socket.send_fds(connection, [json.dumps(request).encode() + b"\\n"], [0, 1, 2])
    print(connection.recv(65536).decode().splitlines()[0])
"""


@pytest.mark.slow
@pytest.mark.usefixtures("warm_process")
def test_the_warm_process_believes_the_callers_process_not_the_context_it_claims(
    workspace: Path,
) -> None:
    # A reniced client that sends the fingerprint of the unconfined context it wants.
    claimed = context_fingerprint(execution_context() or {})
    socket_path = str(workspace / "agent" / "pool" / "cli.sock")
    done = subprocess.run(
        ["nice", "-n", "7", sys.executable, "-c", FORGED_WARM_REQUEST, socket_path, claimed],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    answer = json.loads(done.stdout)
    assert answer == {"refused": "another execution context", "differences": ["nice"]}


# -- the pool ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_sandboxed_command_starts_its_own_server_instead_of_using_the_pools(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PI_MCP_WARM", "0")
    with background_pool(workspace):
        pooled = seen_by_server(workspace)
        status = json.loads(pi_mcp(workspace, "status", "--json").stdout)["pool"]
        # Unconfined: the pool's server (a child of the supervisor the pool shows).
        assert psutil.Process(pooled["pid"]).ppid() == status["servers"]["ctx"]["pid"]
        reniced = seen_by_server(workspace, "nice", "-n", "7")
        assert reniced["nice"] == 7
        assert reniced["pid"] != pooled["pid"]
        limited = seen_by_server(workspace, "prlimit", "--nofile=512:512")
        assert limited["nofile"] == [512, 512]


FORGED_POOL_HELLO = """
import json, socket, sys
path, hello = sys.argv[1], json.loads(sys.argv[2])
with socket.socket(socket.AF_UNIX) as connection:
    connection.connect(path)
    connection.sendall(json.dumps(hello).encode() + b"\\n")
    print(connection.recv(65536).decode().splitlines()[0])
"""


def ask_pool_from(prefix: list[str], socket_path: Path, hello: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run(
        [*prefix, sys.executable, "-c", FORGED_POOL_HELLO, str(socket_path), json.dumps(hello)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


@pytest.mark.slow
def test_the_pool_believes_the_callers_process_not_the_context_it_claims(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_mcp_adapter.config import ServerEntry
    from pi_mcp_adapter.servers import pool_socket_path, server_fingerprint

    monkeypatch.setenv("PI_MCP_WARM", "0")
    entry = ServerEntry.model_validate(CONTEXT_SERVER)
    hello = {
        "pool": 1,
        "server": "ctx",
        "fingerprint": server_fingerprint(entry, cwd=workspace),
        "context": context_fingerprint(execution_context() or {}),
    }
    socket_path = pool_socket_path(workspace / "agent")
    with background_pool(workspace) as pool_pid:
        answer = ask_pool_from(["nice", "-n", "7"], socket_path, hello)
        assert answer == {
            "ok": False,
            "reason": "the pool runs in another execution context (nice)",
        }
        # A client that claims nothing is not taken at its word either.
        unclaimed = ask_pool_from(
            [], socket_path, {k: v for k, v in hello.items() if k != "context"}
        )
        assert unclaimed["ok"] is False
        assert unclaimed["reason"].endswith("(the context the client sent)")
        assert ask_pool_from([], socket_path, hello) == {"ok": True}
        assert psutil.pid_exists(pool_pid)


@pytest.mark.slow
@needs_user_namespaces
def test_a_caller_that_cannot_see_the_pools_process_cannot_stop_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pi_mcp_adapter.servers import pool_socket_path

    monkeypatch.setenv("PI_MCP_WARM", "0")
    socket_path = pool_socket_path(workspace / "agent")
    with background_pool(workspace) as pool_pid:
        hidden = ["unshare", "-rpf", "--mount-proc"]
        answer = ask_pool_from(hidden, socket_path, {"pool": 1, "stop": True})
        assert answer["ok"] is False
        assert "namespace pid" in answer["reason"]
        assert psutil.Process(pool_pid).is_running()
