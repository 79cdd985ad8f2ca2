"""``pi-mcp doctor`` and ``pi-mcp token`` against real servers: loopback HTTP, SSE, TLS,
OAuth, a bearer-protected server, stdio servers that work, exit or are missing, npm servers."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from servers._support import HttpFixtures

from ._manage_support import (
    FAULTS_FIXTURE,
    MCP_FIXTURE,
    NPM_DIR,
    OAUTH_FIXTURE,
    Machine,
    new_machine,
)

TOKEN = "canary-bearer-7f3a9c2e51d04b8a"


@pytest.fixture
def fixtures() -> Iterator[HttpFixtures]:
    running = HttpFixtures()
    try:
        yield running
    finally:
        running.stop_all()


def configure(machine: Machine, servers: dict[str, Any]) -> None:
    machine.user_file.write_text(json.dumps({"mcpServers": servers}))


def doctor(machine: Machine, *args: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    proc = machine.run("doctor", *args, "--json", check=False, **kwargs)
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, {s["name"]: s for s in json.loads(proc.stdout)["servers"]}


def steps(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {step["name"]: step for step in report["steps"]}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_doctor_passes_every_step_of_a_streamable_http_and_an_sse_server(
    tmp_path: Path, fixtures: HttpFixtures
) -> None:
    machine = new_machine(tmp_path)
    http_port = fixtures.start(MCP_FIXTURE, "--transport", "streamable-http")
    sse_port = fixtures.start(MCP_FIXTURE, "--transport", "sse")
    configure(
        machine,
        {
            "web": {"url": f"http://127.0.0.1:{http_port}/mcp"},
            "old": {"url": f"http://127.0.0.1:{sse_port}/sse"},
        },
    )
    code, reports = doctor(machine)
    assert code == 0
    for name in ("web", "old"):
        assert [s["name"] for s in reports[name]["steps"]] == [
            "dns",
            "tcp",
            "http",
            "transport",
            "auth",
            "initialize",
            "tools/list",
        ]
        assert all(s["status"] == "ok" and s["elapsedMs"] >= 0 for s in reports[name]["steps"])
    assert steps(reports["web"])["transport"]["detail"] == "Streamable HTTP"
    assert "SSE" in steps(reports["old"])["transport"]["detail"]
    assert steps(reports["web"])["tools/list"]["detail"].endswith(" tools")
    text = machine.run("doctor", "web").stdout.splitlines()
    assert text[0] == "web (http)"
    assert all(line.startswith("  ok ") and " ms  " in line for line in text[1:])


@pytest.mark.slow
def test_doctor_checks_the_certificate_against_the_ca_file(
    tmp_path: Path, fixtures: HttpFixtures
) -> None:
    machine = new_machine(tmp_path)
    authority = trustme.CA()
    issued = authority.issue_cert("127.0.0.1")
    cert, key, ca = (tmp_path / n for n in ("cert.pem", "key.pem", "ca.pem"))
    issued.private_key_and_cert_chain_pem.write_to_path(str(cert))
    issued.private_key_pem.write_to_path(str(key))
    authority.cert_pem.write_to_path(str(ca))
    port = fixtures.start(
        MCP_FIXTURE,
        "--transport",
        "streamable-http",
        "--tls-cert",
        str(cert),
        "--tls-key",
        str(key),
    )
    url = f"https://127.0.0.1:{port}/mcp"
    configure(machine, {"pinned": {"url": url, "caFile": str(ca)}, "plain": {"url": url}})
    code, reports = doctor(machine)
    assert code == 1
    assert reports["pinned"]["status"] == "ok"
    assert steps(reports["pinned"])["tls"]["detail"].startswith("TLS")
    tls = steps(reports["plain"])["tls"]
    assert tls["status"] == "fail"
    assert "caFile" in tls["fix"]
    assert "initialize" not in steps(reports["plain"])


def test_doctor_says_what_to_do_about_an_unreachable_port_and_a_missing_command(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    port = free_port()
    configure(
        machine,
        {
            "gone": {"url": f"http://127.0.0.1:{port}/mcp"},
            "absent": {"command": "no-such-mcp-server-here"},
        },
    )
    code, reports = doctor(machine)
    assert code == 1
    tcp = steps(reports["gone"])["tcp"]
    assert tcp["status"] == "fail"
    assert f"127.0.0.1:{port}" in tcp["detail"]
    assert "is the server running" in tcp["fix"]
    command = steps(reports["absent"])["command"]
    assert command["status"] == "fail"
    assert "not found on PATH" in command["detail"]
    assert "absolute path" in command["fix"]
    text = machine.run("doctor", "gone", check=False)
    assert text.returncode == 1
    assert "  FAIL  tcp" in text.stdout
    assert "Fix: is the server running" in text.stdout


@pytest.mark.parametrize(
    ("fault", "step", "fix"),
    [
        pytest.param(("--status", "404"), "transport", "check its path", id="wrong-path"),
        pytest.param(("--status", "500"), "http", "retry later", id="server-error"),
        pytest.param(("--status", "403"), "http", "permissions", id="forbidden"),
        pytest.param(("--html",), "transport", "web site or a sign-in page", id="web-page"),
    ],
)
def test_doctor_names_the_step_where_a_url_that_is_not_mcp_fails(
    tmp_path: Path, fixtures: HttpFixtures, fault: tuple[str, ...], step: str, fix: str
) -> None:
    machine = new_machine(tmp_path)
    port = fixtures.start(FAULTS_FIXTURE, *fault)
    configure(machine, {"site": {"url": f"http://127.0.0.1:{port}/mcp"}})
    code, reports = doctor(machine)
    assert code == 1
    last = reports["site"]["steps"][-1]
    assert (last["name"], last["status"]) == (step, "fail")
    assert fix in last["fix"]


def test_doctor_checks_the_way_to_a_proxy_and_honours_no_proxy(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    proxy_port, server_port = free_port(), free_port()
    configure(
        machine,
        {
            "far": {"url": "http://mcp.example.invalid/mcp"},
            "near": {"url": f"http://127.0.0.1:{server_port}/mcp"},
        },
    )
    env = {"HTTP_PROXY": f"http://127.0.0.1:{proxy_port}", "NO_PROXY": "127.0.0.1,localhost"}
    _, reports = doctor(machine, env=env)
    far = steps(reports["far"])
    assert far["proxy"]["detail"] == f"http://127.0.0.1:{proxy_port}"
    assert far["tcp"]["status"] == "fail"
    assert f"127.0.0.1:{proxy_port}" in far["tcp"]["detail"]
    near = steps(reports["near"])
    assert "proxy" not in near
    assert f"127.0.0.1:{server_port}" in near["tcp"]["detail"]


def test_doctor_shows_the_stderr_tail_and_exit_code_of_a_stdio_server_that_exits(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    script = "import sys; sys.stderr.write('fatal: MEMORY_FILE is not set\\n'); sys.exit(3)"
    configure(machine, {"dies": {"command": sys.executable, "args": ["-c", script]}})
    code, reports = doctor(machine, "dies")
    assert code == 1
    found = steps(reports["dies"])
    assert found["command"]["status"] == "ok"
    assert found["start"]["status"] == "ok"
    assert found["initialize"]["status"] == "fail"
    assert "exited with code 3" in found["initialize"]["fix"]
    assert reports["dies"]["stderrTail"] == ["fatal: MEMORY_FILE is not set"]
    text = machine.run("doctor", "dies", check=False).stdout
    assert "    fatal: MEMORY_FILE is not set" in text


def test_doctor_reports_an_untrusted_project_server_and_never_starts_it(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    marker = tmp_path / "started"
    touch = f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
    (machine.project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"cloned": {"command": sys.executable, "args": ["-c", touch]}}})
    )
    code, reports = doctor(machine)
    assert code == 0  # nothing failed; the untrusted server was not probed
    assert reports["cloned"]["status"] == "untrusted"
    assert "pi-mcp trust --project" in reports["cloned"]["steps"][0]["fix"]
    named, _ = doctor(machine, "cloned")
    assert named == 1
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.skipif(
    not (NPM_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything").is_dir(),
    reason="npm test servers not installed (make npm)",
)
def test_doctor_runs_an_npm_server_through_the_npx_resolution(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    configure(
        machine,
        {
            "everything": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-everything"],
            }
        },
    )
    code, reports = doctor(machine, "everything", project=NPM_DIR, cwd=NPM_DIR)
    assert code == 0, reports
    found = steps(reports["everything"])
    assert "node_modules/@modelcontextprotocol/server-everything" in found["command"]["detail"]
    assert found["tools/list"]["status"] == "ok"


@pytest.mark.slow
def test_doctor_finds_the_oauth_metadata_and_says_to_sign_in(
    tmp_path: Path, fixtures: HttpFixtures
) -> None:
    machine = new_machine(tmp_path)
    port = fixtures.start(OAUTH_FIXTURE)
    configure(machine, {"guarded": {"url": f"http://localhost:{port}/mcp"}})
    code, reports = doctor(machine)
    assert code == 1
    found = steps(reports["guarded"])
    assert found["http"]["detail"].startswith("POST -> 401")
    assert found["transport"]["status"] == "skip"
    assert found["auth"]["status"] == "fail"
    assert "oauth-protected-resource" in found["auth"]["detail"]
    assert found["auth"]["fix"] == "run `pi-mcp auth guarded`"


@pytest.mark.slow
def test_doctor_does_not_send_a_machine_client_to_sign_in(
    tmp_path: Path, fixtures: HttpFixtures
) -> None:
    """``client_credentials`` (and ``identity_assertion``) get their token at connect: the
    auth step says so and the handshake is tried, which is where a wrong client shows."""
    machine = new_machine(tmp_path)
    port = fixtures.start(OAUTH_FIXTURE)
    oauth = {"grantType": "client_credentials", "clientId": "robot", "clientSecret": "s3cr3t-x"}
    configure(machine, {"robot": {"url": f"http://localhost:{port}/mcp", "oauth": oauth}})
    code, reports = doctor(machine)
    assert code == 1
    found = steps(reports["robot"])
    assert found["auth"]["status"] == "ok"
    assert "client_credentials obtains a token at connect" in found["auth"]["detail"]
    assert "initialize" in found
    assert found["initialize"]["status"] == "fail"
    assert "pi-mcp auth" not in json.dumps(reports["robot"])


@pytest.mark.slow
def test_a_stored_bearer_token_is_set_from_stdin_used_and_never_shown(
    tmp_path: Path, fixtures: HttpFixtures
) -> None:
    machine = new_machine(tmp_path)
    port = fixtures.start(
        MCP_FIXTURE,
        "--transport",
        "streamable-http",
        "--require-bearer-env",
        "FIXTURE_TOKEN",
        env={"FIXTURE_TOKEN": TOKEN},
    )
    url = f"http://127.0.0.1:{port}/mcp"
    machine.run("add", "--bearer-token-store", "guarded", url)
    assert json.loads(machine.user_file.read_text())["mcpServers"]["guarded"] == {
        "url": url,
        "auth": "bearer",
        "bearerTokenStore": True,
    }
    code, reports = doctor(machine)
    assert code == 1
    assert steps(reports["guarded"])["auth"]["fix"] == "run `pi-mcp token set guarded`"
    refused = machine.run("connect", "guarded", check=False)
    assert refused.returncode == 1
    assert "none is stored: run `pi-mcp token set guarded`" in refused.stderr
    missing = machine.run("token", "status", "guarded", check=False)
    assert missing.returncode == 1
    assert "No bearer token is stored" in missing.stdout

    outputs: list[str] = []
    stored = machine.run("token", "set", "guarded", stdin=TOKEN + "\n")
    outputs.append(stored.stdout + stored.stderr)
    record = tmp_path / "agent" / "mcp-oauth" / "guarded" / "bearer.json"
    assert json.loads(record.read_text()) == {"token": TOKEN, "serverUrl": url}
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    status = machine.run("token", "status", "guarded", "--json")
    outputs.append(status.stdout)
    assert json.loads(status.stdout)["status"] == "present"

    proc = machine.run("doctor", "guarded")
    outputs.append(proc.stdout + proc.stderr)
    assert "  ok    auth" in proc.stdout
    called = machine.run("call", "guarded_echo", '{"message": "with the stored token"}')
    outputs.append(called.stdout + called.stderr)
    assert "Echo: with the stored token" in called.stdout
    assert all(TOKEN not in text for text in outputs)

    machine.run("token", "set", "guarded", stdin="wrong-token-0123456789")
    code, reports = doctor(machine, "guarded")
    assert code == 1
    assert "401" in steps(reports["guarded"])["auth"]["detail"]

    configure(
        machine, {"guarded": {"url": url + "?v=2", "auth": "bearer", "bearerTokenStore": True}}
    )
    moved = machine.run("token", "status", "guarded", check=False)
    assert moved.returncode == 1
    assert "for another URL" in moved.stdout
    removed = machine.run("token", "remove", "guarded")
    assert "Removed" in removed.stdout
    assert not record.exists()
    again = machine.run("token", "status", "guarded", "--json", check=False)
    assert json.loads(again.stdout)["status"] == "missing"


def test_token_set_refuses_an_argument_and_an_unconfigured_server(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    configure(
        machine,
        {
            "stored": {
                "url": "https://example.com/mcp",
                "auth": "bearer",
                "bearerTokenStore": True,
            },
            "plain": {"url": "https://example.com/mcp"},
        },
    )
    extra = machine.run("token", "set", "stored", TOKEN, check=False)
    assert extra.returncode == 2
    assert TOKEN not in extra.stdout + extra.stderr
    assert "takes no token argument" in extra.stderr
    unconfigured = machine.run("token", "set", "plain", stdin=TOKEN, check=False)
    assert unconfigured.returncode == 2
    assert '"bearerTokenStore": true' in unconfigured.stderr
    empty = machine.run("token", "set", "stored", stdin="\n", check=False)
    assert empty.returncode == 2
    assert not (tmp_path / "agent" / "mcp-oauth").exists()
    assert os.listdir(tmp_path / "agent") == ["mcp.json"]


@pytest.mark.slow
def test_doctor_shows_no_secret_of_a_server_that_prints_its_environment(tmp_path: Path) -> None:
    from .test_secret_canary import MARK, secret, servers

    machine = new_machine(tmp_path)
    (tmp_path / f"dir-{MARK}").mkdir()
    every = servers(tmp_path)
    configure(machine, {name: every[name] for name in ("leaky", "remote", "urlpath", "sock")})
    env = {
        "MY_TOKEN": secret("my-token"),
        "OTHER_TOKEN": secret("other-token"),
        "CANARY_DIR": str(tmp_path / f"dir-{MARK}"),
    }
    text = machine.run("doctor", check=False, env=env)
    as_json = machine.run("doctor", "--json", check=False, env=env)
    reports = {s["name"]: s for s in json.loads(as_json.stdout)["servers"]}
    assert reports["leaky"]["stderrTail"]  # it did print its environment
    for output in (text.stdout, text.stderr, as_json.stdout, as_json.stderr):
        assert MARK not in output
