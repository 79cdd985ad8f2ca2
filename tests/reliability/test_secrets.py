"""Secrets never leak: canaries in every secret-bearing field, then every output is searched.

Each canary is a distinct random string placed in one kind of field: a bearer token written in
the config, one read through ``bearerTokenEnv``, a ``${VAR}`` interpolated into a header, a
header value, a stdio server's env value, a URL password and a URL query token, a secret-looking
argument. The servers really run (a Streamable HTTP fixture that checks the bearer token, a
stdio fixture) or really fail (a refused connection, a wrong token, a missing command). Then the
engine, the ``mcp`` tool and the CLI do everything a session does, and every place a secret
could end up is searched: the agent directory (cache, server logs, call stats), every log
record, status, errors, results, host notices, and what ``pi-mcp config``, ``status``,
``tools``, ``search``, ``describe`` and ``call`` print, and (where this build has the gateway)
everything a client of ``pi-mcp serve`` receives and the gateway's log.
"""

from __future__ import annotations

import json
import logging
import secrets
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from typer.testing import CliRunner

from pi_mcp_adapter.cli import app
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.hosts._export import ExportHost
from pi_mcp_adapter.surface import ProxyTool, register_surfaces
from servers._support import MCP_FIXTURE, HttpFixtures

from ._gateway import has_serve_command, start_gateway

pytestmark = [pytest.mark.slow]


def canary(kind: str) -> str:
    return f"canary-{kind}-{secrets.token_hex(8)}"


CANARIES = {
    kind: canary(kind)
    for kind in (
        "bearer",  # bearerToken written in the config (the fixture's expected token)
        "wrong-bearer",  # a bearer token the server rejects
        "interpolated",  # ${VAR} in a header
        "header",  # a header value written in the config
        "env",  # a stdio server's env value
        "url-password",  # user:password@ in a URL
        "url-query",  # ?token= in a URL
        "arg",  # --api-key=... in args
        "inherited",  # ACME_API_KEY in the environment, named by no configuration
    )
}
LEAKY = Path(__file__).resolve().parents[1] / "fixtures" / "leaky_server.py"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(agent_dir: Path, url: str) -> None:
    port = closed_port()
    servers: dict[str, Any] = {
        "bearer": {
            "url": url,
            "bearerToken": CANARIES["bearer"],
            "headers": {
                "X-Api-Key": CANARIES["header"],
                "X-Interpolated": "${PI_MCP_CANARY_INTERPOLATED}",
            },
        },
        "bearer-env": {"url": url, "bearerTokenEnv": "PI_MCP_CANARY_BEARER"},
        "wrong-bearer": {"url": url, "bearerToken": CANARIES["wrong-bearer"]},
        "stdio": {
            "command": sys.executable,
            "args": [str(MCP_FIXTURE), "--name", "stdio"],
            "env": {"API_KEY": CANARIES["env"]},
        },
        "refused": {
            "url": f"http://user:{CANARIES['url-password']}@127.0.0.1:{port}/mcp"
            f"?token={CANARIES['url-query']}"
        },
        # Prints the environment it inherited on stderr and exits before the handshake.
        "dumper": {"command": sys.executable, "args": [str(LEAKY), "stderr"]},
        "missing": {
            "command": "pi-mcp-no-such-command",
            "args": [f"--api-key={CANARIES['arg']}"],
            "env": {"API_KEY": CANARIES["env"]},
        },
    }
    config = {
        "settings": {"captureStats": True, "healthCheckIntervalMs": 0},
        "mcpServers": {
            name: {**entry, "startupTimeoutMs": 20_000, "requestTimeoutMs": 5_000}
            for name, entry in servers.items()
        },
    }
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "mcp.json").write_text(json.dumps(config))


GATEWAY_REQUESTS: list[dict[str, Any]] = [
    {},
    {"server": "bearer"},
    {"search": "echo"},
    {"describe": "bearer_echo"},
    {"connect": "bearer"},
    {"connect": "refused"},
    {"connect": "wrong-bearer"},
    {"connect": "missing"},
    {"connect": "dumper"},
    {"tool": "bearer_echo", "args": {"message": "x"}},
    {"tool": "refused_echo", "args": {"message": "x"}},
    {"instructions": "stdio"},
]


async def gateway_outputs(agent_dir: Path, home: Path) -> list[tuple[str, str]]:
    """Everything a client of ``pi-mcp serve`` receives, and the gateway's own log."""
    outputs: list[tuple[str, str]] = []
    gateway = start_gateway(agent_dir, home)
    try:
        async with Client(gateway.url) as client:
            tools = await client.list_tools()
            outputs.append(("gateway tools/list", text_of(tools.model_dump(mode="json"))))
            for params in GATEWAY_REQUESTS:
                result = await client.call_tool("mcp", params)
                outputs.append((f"gateway mcp {params}", text_of(result.model_dump(mode="json"))))
    finally:
        gateway.process.send_signal(signal.SIGTERM)
        try:
            gateway.process.wait(timeout=30)
        finally:
            gateway.stop()
    outputs.append(("gateway log", gateway.log))
    return outputs


def leaks(text: str) -> list[str]:
    return [kind for kind, value in CANARIES.items() if value in text]


def text_of(value: Any) -> str:
    return json.dumps(value, default=repr, ensure_ascii=False) + repr(value)


@pytest.mark.timeout(300)
async def test_no_canary_reaches_any_output_of_the_engine_the_surfaces_or_the_cli(
    tmp_path: Path,
    http_fixtures: HttpFixtures,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    environ = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PI_MCP_CANARY_BEARER": CANARIES["bearer"],
        "PI_MCP_CANARY_INTERPOLATED": CANARIES["interpolated"],
        "ACME_API_KEY": CANARIES["inherited"],
    }
    url = http_fixtures.mcp(
        "streamable-http",
        "--name",
        "guarded",
        "--require-bearer-env",
        "FIXTURE_TOKEN",
        env={"FIXTURE_TOKEN": CANARIES["bearer"]},
    )
    agent_dir = tmp_path / "agent"
    write_config(agent_dir, url)
    outputs: list[tuple[str, str]] = []

    host = ExportHost()
    async with McpAdapter(
        agent_dir=agent_dir, project_dir=tmp_path, environ=environ, host=host
    ) as adapter:
        surfaces = register_surfaces(adapter, host)
        proxy = ProxyTool(adapter)
        # The servers that can connect did, with their secrets; the others failed.
        assert adapter.server_status("bearer").status == "connected"
        assert adapter.server_status("bearer-env").status == "connected"
        assert adapter.server_status("stdio").status == "connected"
        for name in ("wrong-bearer", "refused", "missing", "dumper"):
            assert adapter.server_status(name).status in ("failed", "needs-auth"), name
        for name in ("bearer", "bearer-env", "stdio"):
            outcome = await adapter.call(f"{name}_echo", {"message": "hello"})
            assert not outcome.is_error, outcome.message
            outputs.append((f"call {name}", text_of(outcome.result) + outcome.message))
            outcome = await adapter.call(f"{name}_fail", {})
            outputs.append((f"failing call {name}", text_of(outcome.result) + outcome.message))
        for name in ("wrong-bearer", "refused", "missing", "dumper"):
            for attempt in (adapter.connect(name), adapter.reconnect(name)):
                try:
                    outputs.append((f"connect {name}", text_of(await attempt)))
                except Exception as exc:
                    outputs.append((f"connect {name}", f"{exc!s} {exc!r} {exc.__cause__!r}"))
        outputs.append(("status", text_of(adapter.status())))
        for params in (
            {},
            {"server": "bearer"},
            {"search": "echo"},
            {"describe": "bearer_echo"},
            {"connect": "refused"},
            {"connect": "wrong-bearer"},
            {"tool": "bearer_echo", "args": {"message": "x"}},
            {"instructions": "stdio"},
        ):
            result = await proxy.execute(params)
            outputs.append((f"mcp {params}", text_of(result.content) + text_of(result.details)))
        outputs.append(("definitions", text_of([t.description for t in host.tools.values()])))
        outputs.append(("surface tool", text_of(surfaces.surface_tool.description)))
        stats = adapter.stats
        assert stats is not None
        stats.flush()
    outputs.append(("notices", text_of(host.notices)))

    monkeypatch.setenv("HOME", str(tmp_path))
    for name, value in environ.items():
        if name.startswith("PI_MCP_CANARY") or name == "ACME_API_KEY":
            monkeypatch.setenv(name, value)
    runner = CliRunner()
    for command in (
        ["config"],
        ["config", "--json"],
        ["status", "--json"],
        ["status"],
        ["tools", "--json"],
        ["search", "echo", "--json"],
        ["describe", "bearer_echo"],
        ["call", "refused_echo", '{"message": "x"}'],
        ["call", "missing_echo", "{}"],
        ["connect", "wrong-bearer"],
        ["connect", "dumper"],
        ["stats", "--json"],
    ):
        result = runner.invoke(
            app, ["--agent-dir", str(agent_dir), "--project", str(tmp_path), *command]
        )
        outputs.append((f"pi-mcp {' '.join(command)}", result.output + repr(result.exception)))

    if has_serve_command():
        outputs.extend(await gateway_outputs(agent_dir, tmp_path))

    for record in caplog.records:
        outputs.append((f"log {record.name}", record.getMessage() + repr(record.args)))
    files = [p for p in agent_dir.rglob("*") if p.is_file() and p.name != "mcp.json"]
    assert (agent_dir / "mcp-cache.json") in files
    assert any(p.suffix == ".log" for p in files), files
    for path in files:
        outputs.append((f"file {path.relative_to(agent_dir)}", path.read_text(errors="replace")))

    found = {where: leaks(text) for where, text in outputs if leaks(text)}
    assert found == {}
