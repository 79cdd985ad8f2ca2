"""The canary sweep: a secret placed in every source a configuration can hold reaches no output.

Every value below carries the marker :data:`MARK`: ``${VAR}`` values in a URL path, a command
path, a socket path, a working directory, arguments, headers (one with a plain name) and env;
``!echo`` output in a header and in env; literal header, env and bearer values. Two servers of
ours make it hard: one prints its whole environment, arguments and directory on stderr and
exits, one quotes them in a tool's error text. Then every CLI command runs, with and without
``--json``, the gateway serves over stdio and over HTTP, and the Python surfaces run in-process;
the marker must appear in no stdout, stderr, result or log, in no file under the agent dir, the
project dir (traces) or the spill directory, and the server logs must be private.

The environment also holds secrets the configuration never names (``ACME_API_KEY``,
``AWS_SECRET_ACCESS_KEY``, a ``DATABASE_URL`` password, a GitHub token under a plain name),
which every stdio server inherits; one more server prints them wrapped across lines, JSON- and
URL-encoded, as a Basic header and inside a private key block, and a URL and a command line
written in the configuration hold one literally.
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets
import signal
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from pi_mcp_adapter._secrets import MASK
from reliability._gateway import start_gateway

# The module fixture runs every command once (about a minute on two idle cores).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]
LEAKY = ROOT / "tests" / "fixtures" / "leaky_server.py"
MARK = "K4N4RY"
"""In every secret; not random-looking, so only the rules about where values come from (never
a heuristic about what a token looks like) can hide it."""


def secret(kind: str) -> str:
    return f"{MARK}-{kind}-{secrets.token_hex(4)}"


DB_PASSWORD = secret("db-password")
INHERITED = {
    "ACME_API_KEY": secret("inherited-key"),
    "AWS_SECRET_ACCESS_KEY": secret("aws-secret"),
    "ACME_SPECIAL_TOKEN": f'{MARK}/"quoted"+{secrets.token_hex(4)}',
    "DATABASE_URL": f"postgres://app:{DB_PASSWORD}@127.0.0.1:9/app",
    "UPSTREAM_NOTE": f"ghp_{MARK}{secrets.token_hex(12)}",
}
"""Secrets of the environment that no configuration names: each reaches every stdio server."""
BASIC_CREDENTIALS = base64.b64encode(f"app:{DB_PASSWORD}".encode()).decode()
"""The database's credentials as a Basic header carries them (no marker in it)."""
WRAPPED_DUMP = """
import base64, json, os, sys, urllib.parse
key = os.environ["ACME_API_KEY"]
special = os.environ["ACME_SPECIAL_TOKEN"]
url = urllib.parse.urlsplit(os.environ["DATABASE_URL"])
basic = base64.b64encode(f"{url.username}:{url.password}".encode()).decode()
print("config: key=" + key[:3], file=sys.stderr)
print(key[3:] + " (wrapped)", file=sys.stderr)
print(json.dumps({"special": special}), file=sys.stderr)
print("GET /?t=" + urllib.parse.quote(special, safe=""), file=sys.stderr)
print("Authorization: Basic " + basic, file=sys.stderr)
print("-----BEGIN PRIVATE KEY-----", file=sys.stderr)
print(key + "AAAA", file=sys.stderr)
print("-----END PRIVATE KEY-----", file=sys.stderr)
print("giving up", file=sys.stderr)
sys.exit(1)
"""
"""A server that fails at start after printing inherited secrets in every disguise."""


@dataclass
class Sweep:
    home: Path
    environ: dict[str, str]
    outputs: list[tuple[str, str]] = field(default_factory=list)

    @property
    def agent_dir(self) -> Path:
        return self.home / "agent"

    @property
    def project_dir(self) -> Path:
        return self.home / "project"

    @property
    def spill_dir(self) -> Path:
        return self.home / "tmp"

    def pi_mcp(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pi_mcp_adapter", "--project", str(self.project_dir), *args],
            env=self.environ,
            capture_output=True,
            text=True,
            timeout=90,
        )


def servers(home: Path) -> dict[str, Any]:
    leaky_args = ["--token=${MY_TOKEN}", "--other", "${OTHER_TOKEN}"]
    leaky_env = {
        "API_KEY": "${MY_TOKEN}",
        "CMD_KEY": f"!echo {MARK}-cmd-env",
        "PLAIN_KEY": f"{MARK}-plain-env",
    }
    return {
        "urlpath": {"url": "http://127.0.0.1:9/mcp/${MY_TOKEN}"},
        "cmdpath": {"command": "/opt/${MY_TOKEN}/bin/server"},
        "sock": {"socket": str(home / "${MY_TOKEN}.sock")},
        "remote": {
            "url": "http://127.0.0.1:9/mcp",
            "headers": {
                "X-Plain": f"{MARK}-plain-header",
                "X-Ref": "${OTHER_TOKEN}",
                "X-Cmd": f"!echo {MARK}-cmd-header",
            },
            "bearerToken": f"{MARK}-bearer",
        },
        "keyed": {
            "url": "http://127.0.0.1:9/mcp",
            "oauth": {
                "grantType": "client_credentials",
                "clientId": "robot",
                "clientPrivateKey": (
                    f"-----BEGIN PRIVATE KEY-----\n{MARK}-private-key\n-----END PRIVATE KEY-----\n"
                ),
            },
        },
        "enterprise": {
            "url": "http://127.0.0.1:9/mcp",
            "oauth": {
                "grantType": "identity_assertion",
                "clientId": "agent",
                "clientSecret": f"{MARK}-as-secret",
                "authServerMetadataUrl": "http://127.0.0.1:9",
                "idp": {
                    "tokenEndpoint": "http://127.0.0.1:9/token",
                    "idToken": f"{MARK}-id-token",
                    "clientId": "agent",
                    "clientSecret": f"{MARK}-idp-secret",
                },
            },
        },
        "leaky": {
            "command": sys.executable,
            "args": [str(LEAKY), "stderr", *leaky_args],
            "env": leaky_env,
            "cwd": "${CANARY_DIR}",
        },
        "echoer": {
            "command": sys.executable,
            "args": [str(LEAKY), "tool", *leaky_args],
            "env": leaky_env,
            "cwd": "${CANARY_DIR}",
        },
        "wrapper": {"command": sys.executable, "args": ["-c", WRAPPED_DUMP]},
        # The inherited key written literally where config shows it: a URL path, a command line.
        "hook": {"url": f"http://127.0.0.1:9/hook/{INHERITED['ACME_API_KEY']}"},
        "cmdline": {
            "command": sys.executable,
            "args": [str(LEAKY), "stderr", "--header", f"X-Acme: {INHERITED['ACME_API_KEY']}"],
        },
    }


COMMANDS: list[tuple[str, ...]] = [
    ("status",),
    ("tools",),
    ("tools", "echoer"),
    ("search", "dump"),
    ("describe", "echoer_dump"),
    ("call", "echoer_dump", "{}"),
    ("call", "urlpath_anything", "{}"),
    *(
        ("connect", name)
        for name in ("urlpath", "cmdpath", "sock", "remote", "keyed", "enterprise", "leaky")
    ),
    ("connect", "echoer"),
    ("connect", "wrapper"),
    ("connect", "hook"),
    ("connect", "cmdline"),
    ("doctor", "wrapper"),
    ("doctor", "cmdline"),
    ("reconnect", "leaky"),
    ("reconnect",),
    ("config",),
    ("stats",),
    ("tokens",),
]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Sweep:
    home = tmp_path_factory.mktemp("sweep")
    for name in ("agent", "project", "tmp", f"dir-{MARK}"):
        (home / name).mkdir()
    config = {
        "mcpServers": servers(home),
        "settings": {
            "captureStats": True,
            "trace": True,
            # The dump is longer than this: the guard spills it to a file.
            "outputGuard": {"maxLines": 5},
        },
    }
    (home / "agent" / "mcp.json").write_text(json.dumps(config))
    environ = {
        **os.environ,
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(home / "agent"),
        "TMPDIR": str(home / "tmp"),
        "MY_TOKEN": secret("my-token"),
        "OTHER_TOKEN": secret("other-token"),
        "CANARY_DIR": str(home / f"dir-{MARK}"),
        **INHERITED,
    }
    sweep = Sweep(home, environ)
    # The server's listing first, so that the later commands see a cache.
    sweep.outputs.append(("connect echoer", sweep.pi_mcp("connect", "echoer").stdout))
    runs = [variant for command in COMMANDS for variant in (command, (*command, "--json"))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda args: sweep.pi_mcp(*args), runs))
    for args, result in zip(runs, results, strict=True):
        shown = " ".join(args)
        assert "Traceback" not in result.stderr, (shown, result.stderr)
        sweep.outputs.append((f"pi-mcp {shown} (stdout)", result.stdout))
        sweep.outputs.append((f"pi-mcp {shown} (stderr)", result.stderr))
    return sweep


def leaks(outputs: list[tuple[str, str]]) -> list[str]:
    """Where a secret shows: the marker, also once line ends and indents are taken out (a
    secret wrapped across lines), or the database's credentials as base64."""
    return [
        where
        for where, text in outputs
        if MARK in text or MARK in re.sub(r"\s", "", text) or BASIC_CREDENTIALS in text
    ]


def test_no_cli_command_prints_a_secret_with_or_without_json(sweep: Sweep) -> None:
    assert len(sweep.outputs) == 1 + 4 * len(COMMANDS)
    assert leaks(sweep.outputs) == []
    # The failures really happened, and really carried what the servers printed.
    connect_leaky = dict(sweep.outputs)["pi-mcp connect leaky (stderr)"]
    assert "last stderr lines" in connect_leaky
    assert "--token=${MY_TOKEN}" in connect_leaky
    call = dict(sweep.outputs)["pi-mcp call echoer_dump {} (stderr)"]
    # The environment comes sorted; the output guard keeps its first lines.
    assert "ACME_API_KEY=${ACME_API_KEY}" in call
    # The inherited secrets the configuration never names are shown as their variables.
    wrapped = dict(sweep.outputs)["pi-mcp connect wrapper (stderr)"]
    assert "config: key=${ACME_API_KEY}" in wrapped
    assert "Authorization: Basic ${DATABASE_URL}" in wrapped
    # The key block's lines are gone (its first is masked: the sweep's configured PEM key
    # registers that very line).
    assert "-----END PRIVATE KEY-----" not in wrapped
    assert "giving up" in wrapped


def test_config_shows_references_and_masks_never_values(sweep: Sweep) -> None:
    shown = json.loads(sweep.pi_mcp("config", "--json").stdout)["servers"]
    assert shown["urlpath"]["config"]["url"] == "http://127.0.0.1:9/mcp/${MY_TOKEN}"
    assert shown["cmdpath"]["config"]["command"] == "/opt/${MY_TOKEN}/bin/server"
    assert shown["sock"]["config"]["socket"].endswith("/${MY_TOKEN}.sock")
    assert shown["remote"]["config"]["headers"] == {
        "X-Plain": MASK,
        "X-Ref": "${OTHER_TOKEN}",
        "X-Cmd": f"!echo {MASK}",
    }
    assert shown["remote"]["config"]["bearerToken"] == MASK
    assert shown["leaky"]["config"]["env"] == {
        "API_KEY": "${MY_TOKEN}",
        "CMD_KEY": f"!echo {MASK}",
        "PLAIN_KEY": MASK,
    }
    assert shown["leaky"]["config"]["cwd"] == "${CANARY_DIR}"


def files_under(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*") if p.is_file()]


def test_no_file_written_holds_a_secret(sweep: Sweep) -> None:
    config = sweep.agent_dir / "mcp.json"
    written = [
        p for p in files_under(sweep.agent_dir, sweep.project_dir, sweep.spill_dir) if p != config
    ]
    names = {p.name for p in written}
    assert {
        "mcp-cache.json",
        "mcp-failures.json",
        "leaky.log",
        "echoer.log",
        "wrapper.log",
    } <= names
    spilled = [p for p in written if p.parent.name.startswith("pi-mcp-output-")]
    assert any(f"CMD_KEY={MASK}" in p.read_text() for p in spilled), names
    assert any(p.suffix == ".jsonl" for p in written), names  # the call trace
    leaked = leaks([(str(p), p.read_text(errors="replace")) for p in written])
    assert leaked == []


def test_server_logs_are_private(sweep: Sweep) -> None:
    logs = sweep.agent_dir / "logs"
    assert stat.S_IMODE(logs.stat().st_mode) == 0o700
    files = list(logs.iterdir())
    assert files
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


GATEWAY_CALLS: list[dict[str, Any]] = [
    {},
    {"search": "dump"},
    {"describe": "echoer_dump"},
    {"connect": "leaky"},
    {"connect": "wrapper"},
    {"connect": "urlpath"},
    {"connect": "remote"},
    {"connect": "sock"},
    {"tool": "echoer_dump", "args": {}},
    {"tool": "cmdpath_anything", "args": {}},
]


async def gateway_session(client: Client) -> list[tuple[str, str]]:
    outputs: list[tuple[str, str]] = []
    tools = await client.list_tools()
    outputs.append(("tools/list", tools.model_dump_json()))
    for params in GATEWAY_CALLS:
        result = await client.call_tool("mcp", params)
        outputs.append((f"mcp {params}", result.model_dump_json()))
    return outputs


async def test_the_gateway_over_stdio_shows_no_secret(sweep: Sweep) -> None:
    log = sweep.home / "stdio-gateway.log"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pi_mcp_adapter", "--project", str(sweep.project_dir), "serve"],
        env=sweep.environ,
    )
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy") as client:  # type: ignore[arg-type]
            outputs = await gateway_session(client)
    outputs.append(("gateway stderr", log.read_text()))
    assert "cannot connect" in dict(outputs)[f"mcp {GATEWAY_CALLS[5]}"]
    assert leaks(outputs) == []


async def test_the_gateway_over_http_shows_no_secret(
    sweep: Sweep, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MY_TOKEN", "OTHER_TOKEN", "CANARY_DIR", "TMPDIR", *INHERITED):
        monkeypatch.setenv(name, sweep.environ[name])
    gateway = start_gateway(sweep.agent_dir, sweep.project_dir)
    try:
        async with Client(gateway.url) as client:
            outputs = await gateway_session(client)
    finally:
        gateway.process.send_signal(signal.SIGTERM)
        try:
            gateway.process.wait(timeout=30)
        finally:
            gateway.stop()
    outputs.append(("gateway log", gateway.log))
    assert "last stderr lines" in dict(outputs)[f"mcp {GATEWAY_CALLS[3]}"]
    # What the model is shown of a server that printed an inherited secret, cut in two.
    assert "config: key=${ACME_API_KEY}" in dict(outputs)[f"mcp {GATEWAY_CALLS[4]}"]
    assert leaks(outputs) == []


async def test_the_python_surfaces_return_no_secret(
    sweep: Sweep, caplog: pytest.LogCaptureFixture
) -> None:
    from pi_mcp_adapter.engine import McpAdapter
    from pi_mcp_adapter.hosts._export import ExportHost
    from pi_mcp_adapter.surface import ProxyTool, register_surfaces

    caplog.set_level("DEBUG")
    host = ExportHost()
    outputs: list[tuple[str, str]] = []
    async with McpAdapter(
        agent_dir=sweep.agent_dir,
        project_dir=sweep.project_dir,
        environ=sweep.environ,
        host=host,
    ) as adapter:
        register_surfaces(adapter, host)
        proxy = ProxyTool(adapter)
        for params in GATEWAY_CALLS:
            result = await proxy.execute(params)
            outputs.append((f"mcp {params}", repr(result)))
        for name in ("leaky", "wrapper", "urlpath", "sock"):
            try:
                await adapter.connect(name)
            except Exception as exc:
                outputs.append((f"connect {name}", f"{exc} {exc!r} {exc.__cause__!r}"))
        outputs.append(("status", repr(adapter.status())))
    outputs.append(("notices", repr(host.notices)))
    outputs.extend((f"log {r.name}", caplog.handler.format(r)) for r in caplog.records)
    assert any(where.startswith("connect") for where, _ in outputs)
    assert leaks(outputs) == []
