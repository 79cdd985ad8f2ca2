"""A cloned repository's ``.mcp.json`` runs nothing until the person trusts its content.

Every test drives the real ``pi-mcp`` entry point (and, for the gateway, a real SDK client)
against a project whose config would create marker files if anything of it ran: a stdio
command, a ``!command`` env value, a ``!command`` header and a ``requestHeadersCommand``.
"""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = [pytest.mark.slow]

PI_MCP = Path(sys.executable).parent / "pi-mcp"
MCP_FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_fixture.py"


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


class Repo:
    """A home with an agent dir, and a project whose ``.mcp.json`` would touch markers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.agent = self.home / "agent"
        self.project = root / "repo"
        self.marks = root / "marks"
        for directory in (self.agent, self.project, self.marks):
            directory.mkdir(parents=True)
        self.write_project()

    def mark(self, name: str) -> str:
        return str(self.marks / name)

    def write_project(self, extra: dict[str, Any] | None = None) -> Path:
        config: dict[str, Any] = {
            "mcpServers": {
                "evil": {
                    "command": "sh",
                    "args": ["-c", f"touch {self.mark('command')}"],
                    "env": {"X": f"!touch {self.mark('env')} && echo value"},
                },
                "web": {
                    "url": "http://127.0.0.1:9/mcp",
                    "headers": {"X-A": f"!touch {self.mark('header')} && echo value"},
                    "requestHeadersCommand": {"command": "touch", "args": [self.mark("hdrcmd")]},
                },
                "sso": {
                    "url": "http://127.0.0.1:9/mcp",
                    "oauth": {
                        "grantType": "identity_assertion",
                        "clientId": "agent",
                        "clientSecret": "as-secret",
                        "authServerMetadataUrl": "http://127.0.0.1:9",
                        "idp": {
                            "tokenEndpoint": "http://127.0.0.1:9/token",
                            "idToken": f"!touch {self.mark('idtoken')} && echo token",
                        },
                    },
                },
                "benign": {"command": sys.executable, "args": [str(MCP_FIXTURE)]},
            },
            **(extra or {}),
        }
        path = self.project / ".mcp.json"
        path.write_text(json.dumps(config, indent=2))
        return path

    def write_user(self, settings: dict[str, Any]) -> None:
        (self.agent / "mcp.json").write_text(json.dumps({"settings": settings}))

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "HOME": str(self.home), "PI_CODING_AGENT_DIR": str(self.agent)}
        for name in ("MCP_DIRECT_TOOLS", "PI_MCP_PROJECT_TRUST", "PI_MCP_CONFIG_MODE"):
            env.pop(name, None)
        return {**env, **extra}

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(PI_MCP), *args],
            env=self.env(**env),
            cwd=self.project,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=90,
        )

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path)


def test_no_command_starts_anything_from_an_untrusted_project(repo: Repo) -> None:
    commands = [
        ("status",),
        ("status", "--json"),
        ("config",),
        ("config", "--json"),
        ("search", "x"),
        ("tools",),
        ("describe", "benign_echo"),
        ("call", "evil_echo", "{}"),
        ("connect", "evil"),
        ("connect", "web"),
        ("connect", "sso"),
        ("reconnect",),
    ]
    for args in commands:
        result = repo.run(*args)
        assert repo.ran() == [], f"`pi-mcp {' '.join(args)}` ran {repo.ran()}"
        assert "Traceback" not in result.stderr, result.stderr
    status = json.loads(repo.run("status", "--json").stdout)
    rows = {row["name"]: row for row in status["servers"]}
    assert {rows[n]["status"] for n in ("evil", "web", "benign")} == {"untrusted"}
    trust_command = f"pi-mcp trust --project {repo.project}"
    assert trust_command in rows["evil"]["error"]
    assert status["projectTrust"]["files"][0]["trusted"] is False
    refused = repo.run("connect", "evil")
    assert refused.returncode == 1
    assert str(repo.project / ".mcp.json") in refused.stderr
    assert trust_command in refused.stderr
    # Start-up connects skip untrusted servers silently: no failure report for them.
    assert "could not list" not in repo.run("search", "x").stderr
    config = repo.run("config").stdout
    assert "  evil (stdio, untrusted)" in config
    assert f"untrusted {repo.project / '.mcp.json'}" in config


def test_trusting_the_project_runs_its_servers_until_the_file_changes(repo: Repo) -> None:
    trusted = repo.run("trust", "--project", str(repo.project))
    assert trusted.returncode == 0, trusted.stderr
    assert str(repo.project / ".mcp.json") in trusted.stdout
    assert f"runs: sh -c 'touch {repo.mark('command')}'" in trusted.stdout
    assert f"runs for env X: touch {repo.mark('env')} && echo value" in trusted.stdout
    assert f"runs for oauth.idp.idToken: touch {repo.mark('idtoken')} && echo token" in (
        trusted.stdout
    )
    store = repo.agent / "mcp-trust.json"
    assert store.stat().st_mode & 0o777 == 0o600

    called = repo.run("call", "benign_echo", '{"message": "hi"}')
    assert called.returncode == 0, called.stderr
    assert "Echo: hi" in called.stdout
    rows = {
        r["name"]: r["status"] for r in json.loads(repo.run("status", "--json").stdout)["servers"]
    }
    assert rows["benign"] != "untrusted"

    # An edit is new content: untrusted again, and nothing runs.
    repo.write_project({"settings": {"toolPrefix": "server"}})
    rows = {
        r["name"]: r["status"] for r in json.loads(repo.run("status", "--json").stdout)["servers"]
    }
    assert rows == dict.fromkeys(("evil", "web", "sso", "benign"), "untrusted")
    repo.run("connect", "evil")
    assert repo.ran() == []

    # Trusted again, the repository's commands do run: the markers above prove nothing ran.
    repo.run("trust", "--project")
    repo.run("connect", "evil")
    repo.run("connect", "web")
    assert {"command", "env", "header"} <= set(repo.ran())

    revoked = repo.run("trust", "--project", "--revoke")
    assert revoked.returncode == 0
    assert "No longer trusted" in revoked.stdout
    rows = {
        r["name"]: r["status"] for r in json.loads(repo.run("status", "--json").stdout)["servers"]
    }
    assert rows["benign"] == "untrusted"


def test_trusting_a_project_without_config_files_is_not_an_error(repo: Repo) -> None:
    empty = repo.root / "empty"
    empty.mkdir()
    result = repo.run("trust", "--project", str(empty))
    assert result.returncode == 0
    assert "Nothing to trust" in result.stdout
    assert not (repo.agent / "mcp-trust.json").exists()


def test_the_gateway_lists_project_servers_as_untrusted_and_starts_none(repo: Repo) -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=str(PI_MCP),
        args=["--agent-dir", str(repo.agent), "--project", str(repo.project), "serve"],
        env=repo.env(),
        cwd=repo.project,
    )

    async def session() -> tuple[str, str, str]:

        with anyio.fail_after(60):
            async with Client(params) as client:  # type: ignore[arg-type]
                status = text_of(await client.call_tool("mcp", {}))
                connect = text_of(await client.call_tool("mcp", {"connect": "evil"}))
                search = text_of(await client.call_tool("mcp", {"search": "x"}))
                return status, connect, search

    status, connect, search = anyio.run(session)
    assert "untrusted" in status
    assert f"pi-mcp trust --project {repo.project}" in status
    assert "not trusted" in connect
    assert "benign" in search or "No tools" in search
    assert repo.ran() == []


def _run_in_pty(repo: Repo, *args: str, answer: str | None) -> tuple[str, int]:
    """Run ``pi-mcp`` with a terminal on stdin, stdout and stderr; type ``answer`` when asked."""
    primary, secondary = pty.openpty()
    env = repo.env(TERM="dumb")
    env.pop("CI", None)
    process = subprocess.Popen(
        [str(PI_MCP), *args],
        env=env,
        cwd=repo.project,
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        close_fds=True,
    )
    os.close(secondary)
    output = b""
    answered = False
    try:
        while True:
            ready, _, _ = select.select([primary], [], [], 60)
            if not ready:
                raise AssertionError(f"no output for 60 s: {output.decode(errors='replace')}")
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
            if not answered and b"[y/N]" in output and answer is not None:
                os.write(primary, answer.encode() + b"\r")
                answered = True
        return output.decode(errors="replace"), process.wait(timeout=60)
    finally:
        os.close(primary)
        if process.poll() is None:
            process.kill()
            process.wait()


def test_at_a_terminal_the_cli_asks_once_per_content_and_yes_runs_it(repo: Repo) -> None:
    output, code = _run_in_pty(repo, "search", "echo", answer="y")
    assert code == 0, output
    assert "[y/N]" in output
    assert str(repo.project / ".mcp.json") in output
    assert f"runs: sh -c 'touch {repo.mark('command')}'" in output
    assert "url: http://127.0.0.1:9/mcp" in output
    assert "benign_echo" in output  # trusted at once: listed in the same run
    assert "command" in repo.ran()

    again, code = _run_in_pty(repo, "search", "echo", answer=None)
    assert code == 0, again
    assert "[y/N]" not in again


def test_at_a_terminal_no_keeps_the_project_off_and_is_not_asked_again(repo: Repo) -> None:
    output, _ = _run_in_pty(repo, "search", "echo", answer="n")
    assert "[y/N]" in output
    assert f"pi-mcp trust --project {repo.project}" in output
    assert repo.ran() == []
    again, _ = _run_in_pty(repo, "search", "echo", answer=None)
    assert "[y/N]" not in again
    assert repo.ran() == []
    # New content is a new question.
    repo.write_project({"settings": {"toolPrefix": "server"}})
    output, _ = _run_in_pty(repo, "status", answer=None)
    assert "[y/N]" not in output  # status runs nothing, so it never asks
    output, _ = _run_in_pty(repo, "search", "echo", answer="n")
    assert "[y/N]" in output


@pytest.mark.parametrize(
    ("user", "env", "expected"),
    [
        pytest.param("always", None, "trusted", id="user-always-runs-without-asking"),
        pytest.param("never", None, "untrusted", id="user-never-ignores-recorded-trust"),
        pytest.param("never", "always", "trusted", id="env-always-overrides-user-never"),
        pytest.param("always", "never", "untrusted", id="env-never-overrides-user-always"),
    ],
)
def test_the_project_trust_setting_and_its_environment_override(
    repo: Repo, user: str, env: str | None, expected: str
) -> None:
    repo.write_user({"projectTrust": user})
    if user == "never":
        repo.run("trust", "--project")
    extra = {"PI_MCP_PROJECT_TRUST": env} if env else {}
    called = repo.run("call", "benign_echo", '{"message": "hi"}', **extra)
    rows = {
        r["name"]: r["status"]
        for r in json.loads(repo.run("status", "--json", **extra).stdout)["servers"]
    }
    if expected == "trusted":
        assert called.returncode == 0, called.stderr
        assert rows["benign"] != "untrusted"
    else:
        assert called.returncode != 0
        assert rows["benign"] == "untrusted"
        assert "ran" not in repo.ran()


def test_a_project_file_cannot_set_project_trust_to_always_for_itself(repo: Repo) -> None:
    repo.write_project({"settings": {"projectTrust": "always"}})
    repo.run("search", "x")
    repo.run("connect", "evil")
    assert repo.ran() == []
    config = json.loads(repo.run("config", "--json").stdout)
    assert config["projectTrust"]["mode"] == "ask"
    assert any("cannot trust itself" in w for w in config["warnings"])
    # It may make it stricter: "never" from the project file is honoured.
    repo.write_project({"settings": {"projectTrust": "never"}})
    repo.run("trust", "--project")
    config = json.loads(repo.run("config", "--json").stdout)
    assert config["projectTrust"]["mode"] == "never"
    assert config["servers"]["benign"]["trusted"] is False


def test_trusting_a_project_also_trusts_the_plugin_files_its_settings_bring_in(
    repo: Repo,
) -> None:
    plugin = repo.project / "ap"
    plugin.mkdir()
    schemas = "https://agent-plugins.org/schemas/1.0.0"
    manifest = {"$schema": f"{schemas}/plugin.schema.json", "name": "acme.search", "version": "1"}
    (plugin / "plugin.json").write_text(json.dumps(manifest))
    server = {"type": "stdio", "command": "sh", "args": ["-c", "exit 0"]}
    plugin_config = {"$schema": f"{schemas}/mcp.schema.json", "mcpServers": {"s": server}}
    (plugin / "mcp.json").write_text(json.dumps(plugin_config))
    pi_dir = repo.project / ".pi"
    pi_dir.mkdir()
    (pi_dir / "mcp.json").write_text(json.dumps({"settings": {"agentPluginPaths": ["ap"]}}))
    before = json.loads(repo.run("config", "--json").stdout)
    assert "acme_search__s" not in before["servers"]  # untrusted: the path is not even read
    assert any("settings.agentPluginPaths" in w for w in before["warnings"])

    trusted = repo.run("trust", "--project")
    assert trusted.returncode == 0, trusted.stderr
    assert str(plugin / "mcp.json") in trusted.stdout
    after = json.loads(repo.run("config", "--json").stdout)
    assert after["servers"]["acme_search__s"]["trusted"] is True
    assert all(f["trusted"] for f in after["projectTrust"]["files"])
