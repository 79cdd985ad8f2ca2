"""Loading thousands of servers takes the common field values in a type test, skips the
substitution for values without a reference, freezes a large configuration out of the garbage
collector, and ``pi-mcp status --json`` writes each server into a template. None of these
shortcuts may let a value through that the full path would stop, keep a secret from being
masked, make an untrusted project file count, or let a server's text break the JSON.

Each test plays a hostile configuration (a cloned repository's ``.mcp.json``, values shaped to
slip past a type test, names and errors shaped to break a template) at the size that takes
the shortcuts: the real ``pi-mcp`` entry point runs against it, and the Python API loads the
same files.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.config import LoadedConfig, _loader, load_config

PI_MCP = Path(sys.executable).parent / "pi-mcp"
CANARY = "canary-5e1f-fast-path-s3cret"
MANY = _loader.LONG_LIVED_FROM_SERVERS
"""At least this many servers: the size at which a loaded configuration is frozen."""


@pytest.fixture(autouse=True)
def collector_unfrozen() -> Iterator[None]:
    yield
    gc.unfreeze()


class Workspace:
    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.agent = self.home / ".pi" / "agent"
        self.repo = root / "repo"
        for directory in (self.agent, self.repo):
            directory.mkdir(parents=True)

    def write_user(self, servers: dict[str, Any]) -> None:
        (self.agent / "mcp.json").write_text(json.dumps({"mcpServers": servers}))

    def write_repo(self, servers: dict[str, Any]) -> None:
        (self.repo / ".mcp.json").write_text(json.dumps({"mcpServers": servers}, indent=2))

    def load(self, environ: dict[str, str] | None = None) -> LoadedConfig:
        return load_config(
            agent_dir=self.agent,
            project_dir=self.repo,
            home=self.home,
            environ={"HOME": str(self.home), **(environ or {})},
        )

    def pi_mcp(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "HOME": str(self.home), "PI_CODING_AGENT_DIR": str(self.agent)}
        env["PI_MCP_WARM"] = "0"
        for name in ("PI_MCP_PROJECT_TRUST", "PI_MCP_CONFIG_MODE"):
            env.pop(name, None)
        return subprocess.run(
            [str(PI_MCP), *args],
            env=env,
            cwd=self.repo,
            capture_output=True,
            stdin=subprocess.DEVNULL,  # headless: nobody can trust the repository
            text=True,
            timeout=300,
        )


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path)


def many(**entry: Any) -> dict[str, Any]:
    return {f"s-{i:05d}": {"command": "/bin/false", "args": [str(i)], **entry} for i in range(MANY)}


def test_literal_secrets_of_thousands_of_servers_are_masked_without_a_reference(
    workspace: Workspace,
) -> None:
    # No ${VAR} in them: the substitution is skipped, the registration must not be.
    servers = many()
    servers["s-00042"]["env"] = {"API_KEY": CANARY + "-env"}
    servers["remote"] = {"url": "https://mcp.example/x", "headers": {"X-Key": CANARY + "-hdr"}}
    servers["bearer"] = {"url": "https://mcp.example/y", "bearerToken": CANARY + "-tok"}
    workspace.write_user(servers)

    config = workspace.load()

    assert config.servers["s-00042"].env == {"API_KEY": CANARY + "-env"}
    for suffix in ("-env", "-hdr", "-tok"):
        assert CANARY not in redact(f"the server printed {CANARY}{suffix} to its log")
    assert CANARY not in repr(config.servers["remote"]) + repr(config.servers["bearer"])


@pytest.mark.parametrize(
    ("key", "value"),
    [
        pytest.param("disabled", "true", id="disabled as a string is not a boolean"),
        pytest.param("enabled", 0, id="enabled as a number is not a boolean"),
        pytest.param("args", ["ok", ["nested"]], id="an array inside the args"),
        pytest.param("args", "--one-string", id="args as one string"),
        pytest.param("env", {"K": {"nested": CANARY}}, id="an object as an env value"),
        pytest.param("lifecycle", "EAGER", id="a lifecycle in another case"),
        pytest.param("command", ["/bin/sh", "-c"], id="a command as an array"),
    ],
)
def test_a_value_shaped_to_slip_past_the_type_test_gets_the_full_check(
    workspace: Workspace, key: str, value: object
) -> None:
    servers = many()
    servers["odd"] = {"command": "/bin/false", key: value}
    workspace.write_user(servers)

    config = workspace.load()

    problems = [str(e) for e in config.errors] + list(config.warnings)
    assert any("'odd'" in p and key in p for p in problems), problems
    odd = config.servers.get("odd")
    if odd is not None:  # a non-boolean flag is ignored with a warning, as the reference does
        assert key in ("disabled", "enabled")
        assert odd.is_enabled
    assert CANARY not in "\n".join(problems)


@pytest.mark.slow
def test_thousands_of_servers_from_an_untrusted_repository_run_nothing(
    workspace: Workspace,
) -> None:
    workspace.write_user({"mine": {"command": "/bin/true", "approveTools": True}})
    servers = many()
    # The repository redefines the user's server, and tries to drop its approval.
    servers["mine"] = {"command": "/bin/true", "approveTools": False}
    workspace.write_repo(servers)

    config = workspace.load()

    assert len(config.servers) == MANY + 1
    assert not any(entry.is_enabled for entry in config.servers.values())
    assert config.servers["mine"].approve_tools is True
    shown = workspace.pi_mcp("status", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = json.loads(shown.stdout)["servers"]
    assert {row["status"] for row in rows} == {"untrusted"}


@pytest.mark.slow
def test_server_names_and_errors_shaped_to_break_the_template_stay_inside_their_strings(
    workspace: Workspace,
) -> None:
    hostile = ["{}", "{0}{1}", "{name}", '"}, {"name": "forged', "line\nbreak", "\x1b[2J\u2028"]
    servers = many()
    for index, name in enumerate(hostile):
        servers[name] = {"command": "/bin/false", "args": [str(index)]}
    servers["{broken}"] = {"command": "/bin/false", "url": "https://x.example"}  # an error
    workspace.write_user(servers)

    shown = workspace.pi_mcp("status", "--json")

    assert shown.returncode == 0, shown.stderr
    report = json.loads(shown.stdout)
    names = [row["name"] for row in report["servers"]]
    assert len(names) == len(servers)
    assert set(names) == set(servers)
    assert "forged" not in [row.get("status") for row in report["servers"]]
    broken = next(row for row in report["servers"] if row["name"] == "{broken}")
    assert broken["status"] == "invalid"
    assert "{broken}" in broken["error"]
    assert shown.stdout == json.dumps(report, indent=2, ensure_ascii=False) + "\n"
