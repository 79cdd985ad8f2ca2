"""Attacks on secrets the configuration never names, and on dry runs that print a config file.

A server inherits the whole environment of the process that starts it, so a careless (or
hostile) server that prints its environment on stderr and dies hands every credential of the
person's shell to the error message, which the gateway returns to the model. A dry run prints
the user file as a diff, literal secrets of other servers included. Each test here failed on
the code before secrets of the environment and of token shapes were registered, and before dry
runs were masked like ``pi-mcp config``.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

from pi_mcp_adapter._environment import environment_secrets, names_a_secret
from pi_mcp_adapter._secrets import MASK, LineRedactor, redact, register_secret
from reliability._gateway import start_gateway


def canary(kind: str) -> str:
    return f"canary-{kind}-{secrets.token_hex(6)}"


def pi_mcp(home: Path, environ: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args],
        env={**environ, "PI_MCP_WARM": "0", "PI_MCP_POOL": "0"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def make_home(tmp_path: Path, servers: dict[str, object]) -> Path:
    for name in ("agent", "project"):
        (tmp_path / name).mkdir()
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return tmp_path


def base_environ(home: Path) -> dict[str, str]:
    return {
        **os.environ,
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(home / "agent"),
    }


@pytest.mark.slow
async def test_an_inherited_secret_printed_by_a_failing_server_reaches_neither_person_nor_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inherited = {
        "ACME_API_KEY": canary("acme"),
        "AWS_SECRET_ACCESS_KEY": canary("aws"),
        "OPENAI_API_KEY": f"sk-proj-{secrets.token_hex(16)}",
    }
    # A server that prints the variables it inherited and dies before the handshake.
    dump = "import os, sys\n" + "".join(
        f"print('{name}=' + os.environ['{name}'], file=sys.stderr)\n" for name in inherited
    )
    dump += "sys.exit(1)\n"
    home = make_home(tmp_path, {"dumper": {"command": sys.executable, "args": ["-c", dump]}})
    environ = {**base_environ(home), **inherited}

    shown = pi_mcp(home, environ, "connect", "dumper")
    assert shown.returncode != 0
    assert "ACME_API_KEY=${ACME_API_KEY}" in shown.stderr  # the tail is there, masked
    log = (home / "agent" / "logs" / "dumper.log").read_text()
    for name, value in inherited.items():
        assert value not in shown.stdout + shown.stderr, name
        assert value not in log, name

    for name, value in inherited.items():
        monkeypatch.setenv(name, value)
    gateway = start_gateway(home / "agent", home / "project")
    try:
        async with Client(gateway.url) as client:
            result = await client.call_tool("mcp", {"connect": "dumper"})
    finally:
        gateway.process.send_signal(signal.SIGTERM)
        try:
            gateway.process.wait(timeout=30)
        finally:
            gateway.stop()
    answer = result.model_dump_json()
    assert "last stderr lines" in answer
    assert "AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY}" in answer
    for name, value in inherited.items():
        assert value not in answer, name
        assert value not in gateway.log, name


@pytest.mark.slow
def test_a_secret_wrapped_across_lines_encoded_or_in_a_key_block_is_masked_in_tail_and_log(
    tmp_path: Path,
) -> None:
    key = canary("wrapped")
    special = f'{canary("special")}/"q"+'
    password = canary("db")
    code = (
        "import json, os, sys, urllib.parse, base64\n"
        "key = os.environ['ACME_API_KEY']; special = os.environ['ACME_SPECIAL_TOKEN']\n"
        "print('key=' + key[:9], file=sys.stderr)\n"
        "print(key[9:], file=sys.stderr)\n"
        "print(json.dumps(special), file=sys.stderr)\n"
        "print(urllib.parse.quote(special, safe=''), file=sys.stderr)\n"
        "u = urllib.parse.urlsplit(os.environ['DATABASE_URL'])\n"
        "pair = (u.username + ':' + u.password).encode()\n"
        "print('Authorization: Basic ' + base64.b64encode(pair).decode(), file=sys.stderr)\n"
        "print('-----BEGIN RSA PRIVATE KEY-----', file=sys.stderr)\n"
        "print(key, file=sys.stderr)\n"
        "print('-----END RSA PRIVATE KEY-----', file=sys.stderr)\n"
        "print('bye', file=sys.stderr)\n"
        "sys.exit(3)\n"
    )
    home = make_home(tmp_path, {"wrapper": {"command": sys.executable, "args": ["-c", code]}})
    environ = {
        **base_environ(home),
        "ACME_API_KEY": key,
        "ACME_SPECIAL_TOKEN": special,
        "DATABASE_URL": f"postgres://app:{password}@127.0.0.1:9/app",
    }

    shown = pi_mcp(home, environ, "connect", "wrapper").stderr
    log = (home / "agent" / "logs" / "wrapper.log").read_text()
    basic = base64.b64encode(f"app:{password}".encode()).decode()
    for text in (shown, log):
        squeezed = "".join(text.split())
        for value in (key, special, password, basic, json.dumps(special)[1:-1]):
            assert value not in text
        assert key not in squeezed  # not even once the line end is taken out
        assert "key=${ACME_API_KEY}" in text
        assert "Authorization: Basic ${DATABASE_URL}" in text  # registered: its origin
        assert "-----BEGIN RSA PRIVATE KEY-----********-----END RSA PRIVATE KEY-----" in text
        assert "bye" in text


@pytest.mark.slow
@pytest.mark.parametrize("command", ["remove", "add"], ids=["remove", "add"])
def test_a_dry_run_diff_shows_no_literal_secret_of_the_user_file(
    tmp_path: Path, command: str
) -> None:
    literal = {
        "bearer": canary("bearer"),
        "header": canary("header"),
        "env": canary("env"),
        "password": canary("password"),
    }
    home = make_home(
        tmp_path,
        {
            "remote": {
                "url": f"https://user:{literal['password']}@example.com/mcp",
                "bearerToken": literal["bearer"],
                "headers": {"X-Plain": literal["header"]},
            },
            "local": {"command": "node", "args": ["server.js"], "env": {"API_KEY": literal["env"]}},
            "ref": {"command": "node", "env": {"API_KEY": "${MY_TOKEN}"}},
        },
    )
    before = (home / "agent" / "mcp.json").read_text()
    if command == "remove":
        args = ["remove", "remote", "--dry-run"]
    else:
        args = ["add", "extra", "https://example.org/mcp", "--header", "X-Ok: fine", "--dry-run"]
    for output in ("", "--json"):
        result = pi_mcp(home, base_environ(home), *args, *([output] if output else []))
        assert result.returncode == 0, result.stderr
        printed = result.stdout + result.stderr
        assert "remote" in printed or "extra" in printed
        for kind, value in literal.items():
            assert value not in printed, kind
        assert MASK in printed
        assert "${MY_TOKEN}" in printed or command == "remove"
    assert (home / "agent" / "mcp.json").read_text() == before  # a dry run writes nothing


@pytest.mark.parametrize(
    ("name", "value", "secret"),
    [
        pytest.param("ACME_API_KEY", "k-1234567890", True, id="api-key"),
        pytest.param("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENG", True, id="aws-secret"),
        pytest.param("GITHUB_PAT", "abcdefgh1234", True, id="pat"),
        pytest.param("SENTRY_DSN", "https://abc123@o1.ingest.sentry.io/1", True, id="dsn"),
        pytest.param("MY_SESSION_COOKIE", "sess-abcdefgh", True, id="cookie"),
        pytest.param("KEYBOARD_LAYOUT", "us-international", False, id="keyboard"),
        pytest.param("GIT_AUTHOR_NAME", "Somebody Longname", False, id="author"),
        pytest.param("SSH_AUTH_SOCK", "/tmp/ssh-agent.sock", False, id="auth-sock"),
        pytest.param("AUTH_ENABLED", "true-ish-value", False, id="place-suffix"),
        pytest.param("API_TOKEN", "true", False, id="boolean"),
        pytest.param("SESSION_TIMEOUT_S", "1234567890", False, id="number"),
        pytest.param("DB_PASSWORD", "short", False, id="too-short"),
        pytest.param("PATH", "/usr/local/bin:/usr/bin", False, id="path"),
    ],
)
def test_secret_named_variables_are_told_from_harmless_ones(
    name: str, value: str, secret: bool
) -> None:
    found = [found for _, found in environment_secrets({name: value})]
    assert (value in found) is secret


def test_a_url_password_in_any_variable_is_a_secret_with_its_basic_form() -> None:
    found = {v for _, v in environment_secrets({"DATABASE_URL": "postgres://app:pw%2Fx99@db/x"})}
    assert {"pw%2Fx99", "pw/x99", base64.b64encode(b"app:pw/x99").decode()} <= found
    assert not names_a_secret("DATABASE_URL")  # the URL is shown, its password is not


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param("ghp_" + "a1B2" * 9, "ghp_********", id="github"),
        pytest.param("github_pat_11AB" + "c3" * 20, "github_pat_********", id="github-pat"),
        pytest.param("sk-proj-" + "Ab1" * 12, "sk-********", id="openai"),
        pytest.param("sk-ant-api03-" + "x9" * 20, "sk-********", id="anthropic"),
        pytest.param("sk_live_" + "a1" * 12, "sk_live_********", id="stripe"),
        pytest.param("AKIAIOSFODNN7EXAMPLE", "AKIA********", id="aws-key-id"),
        pytest.param("xoxb-123456789012-abcdef", "xoxb-********", id="slack"),
        pytest.param("AIzaSyA-" + "b2" * 16, "AIza********", id="google"),
        pytest.param(
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJl", "eyJ********", id="jwt"
        ),
        pytest.param(
            "Authorization: Bearer abc123def456ghi789",
            "Authorization: Bearer ********",
            id="bearer",
        ),
        pytest.param(
            "Basic " + base64.b64encode(b"me:pw123").decode(), "Basic ********", id="basic"
        ),
        pytest.param(
            "redis://:hunter2@cache:6379", "redis://:********@cache:6379", id="url-password"
        ),
        pytest.param(
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----",
            "-----BEGIN EC PRIVATE KEY-----********-----END EC PRIVATE KEY-----",
            id="pem",
        ),
        # Prose and look-alikes stay.
        pytest.param("Basic authentication and Bearer authentication", None, id="prose"),
        pytest.param("task-abcdefghijklmnopqrstuvwxyz0123", None, id="task-word"),
        pytest.param("https://example.com:8443/a@b", None, id="port-not-password"),
        pytest.param("http://u:${PASSWORD}@host", None, id="reference"),
    ],
)
def test_well_known_token_shapes_are_masked_and_prose_is_not(text: str, shown: str | None) -> None:
    assert redact(text) == (text if shown is None else shown)


def test_a_registered_value_cut_by_a_line_end_is_masked_whole() -> None:
    value = canary("cut")
    register_secret(value, "${CUT}")
    lines = LineRedactor()
    out = [lines.push(line) for line in ("before " + value[:5], "   " + value[5:] + " after")]
    out.append(lines.flush())
    assert [line for line in out if line is not None] == ["before ${CUT}", "    after"]
