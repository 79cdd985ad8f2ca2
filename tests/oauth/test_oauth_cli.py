"""OAuth end to end through the real command line, against a local authorization server built
from the SDK's server pieces (``tests/fixtures/oauth_server.py``)."""

from __future__ import annotations

import json
import queue
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from pi_mcp_adapter._errors import NeedsAuthError
from pi_mcp_adapter.engine import McpAdapter

from .conftest import SERVER, Machine, OAuthServer

pytestmark = pytest.mark.slow

NEEDS_AUTH_BUDGET_S = 15.0
"""A call to a server without a token must come back with the instruction, not hang; this
bounds a whole CLI process (Python and SDK import included)."""


def sign_in(machine: Machine, *, json_output: bool = False) -> subprocess.CompletedProcess[str]:
    args = ["auth", SERVER, *(["--json"] if json_output else [])]
    result = machine.run(*args, env={"BROWSER": machine.browser()})
    assert result.returncode == 0, result.stderr
    return result


def expire_stored_token(machine: Machine) -> None:
    data = json.loads(machine.tokens_path.read_text())
    data["expiresAt"] = int((time.time() - 60) * 1000)
    data["obtainedAt"] = int((time.time() - 3660) * 1000)
    machine.tokens_path.write_text(json.dumps(data))


def test_auth_signs_in_through_the_browser_and_calls_work_in_later_processes(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}})
    report = json.loads(sign_in(machine, json_output=True).stdout)
    assert report["status"] == "authorized"
    assert report["tools"] == 3
    assert report["hasTokens"]
    assert report["hasRefreshToken"]
    assert report["location"] == str(machine.tokens_path)
    assert oauth_server.count("authorize") == 1

    called = machine.run("call", f"{SERVER}_echo", '{"message": "hi"}')
    assert called.returncode == 0, called.stderr
    assert "Echo: hi" in called.stdout
    again = machine.run("auth", SERVER)
    assert again.returncode == 0
    assert "Already signed in to remote" in again.stdout
    assert oauth_server.count("authorize") == 1  # no second sign-in


def test_tokens_are_written_owner_only_in_a_private_directory(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    machine.configure({SERVER: {"url": oauth_server.url}})
    sign_in(machine)
    oauth_dir = machine.agent_dir / "mcp-oauth"
    for directory in (oauth_dir, oauth_dir / SERVER):
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    for name in ("tokens.json", "client.json"):
        assert stat.S_IMODE((oauth_dir / SERVER / name).stat().st_mode) == 0o600
    data = json.loads(machine.tokens_path.read_text())
    # The reference adapter's format, plus the URL the tokens are bound to.
    assert set(data) >= {"access_token", "token_type", "refresh_token", "expiresAt", "serverUrl"}
    assert data["serverUrl"] == oauth_server.url
    assert not [p for p in (oauth_dir / SERVER).iterdir() if p.name.endswith(".tmp")]


def test_an_expired_token_is_refreshed_once_for_two_processes_at_the_same_time(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}})
    sign_in(machine)
    expire_stored_token(machine)
    # No BROWSER and no autoAuth: a process that needed a new sign-in would fail.
    processes = [machine.popen("call", f"{SERVER}_echo", '{"message": "x"}') for _ in range(2)]
    outputs = [p.communicate(timeout=60) for p in processes]
    for process, (out, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err
        assert "Echo: x" in out
    counts = oauth_server.stats()["counts"]
    # Refresh tokens rotate: a second refresh with the same one would have been refused.
    assert counts.get("grant:refresh_token") == 1
    assert counts.get("refresh:rejected", 0) == 0
    assert counts.get("authorize") == 1
    data = json.loads(machine.tokens_path.read_text())
    assert data["expiresAt"] > time.time() * 1000


def test_a_revoked_refresh_token_reports_needs_auth_at_once(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}})
    sign_in(machine)
    expire_stored_token(machine)
    oauth_server.post("/test/revoke-refresh")
    oauth_server.post("/test/expire-access")
    started = time.monotonic()
    called = machine.run("call", f"{SERVER}_echo", '{"message": "x"}', timeout=60)
    elapsed = time.monotonic() - started
    assert called.returncode != 0
    assert f"needs authorization: run `pi-mcp auth {SERVER}`" in called.stdout + called.stderr
    assert elapsed < NEEDS_AUTH_BUDGET_S
    assert oauth_server.count("refresh:rejected") == 1
    assert oauth_server.count("authorize") == 1  # nobody was sent to a browser

    # Signing in again repairs it.
    sign_in(machine)
    called = machine.run("call", f"{SERVER}_echo", '{"message": "back"}')
    assert "Echo: back" in called.stdout


def test_a_server_without_a_token_shows_needs_auth_and_a_call_does_not_hang(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}})
    status = machine.run("status", "--json")
    assert status.returncode == 0, status.stderr
    rows = {row["name"]: row for row in json.loads(status.stdout)["servers"]}
    assert rows[SERVER]["status"] == "needs-auth"
    text = machine.run("status").stdout
    assert f"needs auth: run `pi-mcp auth {SERVER}`" in text

    started = time.monotonic()
    called = machine.run("connect", SERVER)
    assert time.monotonic() - started < NEEDS_AUTH_BUDGET_S
    assert called.returncode != 0
    assert f"run `pi-mcp auth {SERVER}`" in called.stdout + called.stderr
    assert oauth_server.count("authorize") == 0


def test_auto_auth_signs_in_on_the_first_call_when_a_browser_is_at_hand(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}}, autoAuth=True)
    # Startup never prompts: status only reports.
    status = machine.run("status", env={"BROWSER": machine.browser()})
    assert "needs auth" in status.stdout
    assert oauth_server.count("authorize") == 0
    called = machine.run("connect", SERVER, env={"BROWSER": machine.browser()})
    assert called.returncode == 0, called.stderr
    assert oauth_server.count("authorize") == 1
    assert machine.tokens_path.exists()


def _authorization_url(process: subprocess.Popen[str], timeout_s: float = 30) -> str:
    """Read the URL the CLI prints for a person to open (stderr is read by a thread, so the
    pipe's buffering cannot hide a line from a select())."""
    assert process.stderr is not None
    lines: queue.Queue[str] = queue.Queue()
    stream = process.stderr

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    seen = ""
    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        seen += line
        if line.strip().startswith("http"):
            return line.strip()
        if not line:
            break
    raise AssertionError(f"no authorization URL was printed:\n{seen}")


def _redirect_location(authorization_url: str) -> str:
    """What a browser elsewhere would land on: the callback URL, not followed."""
    url = authorization_url
    with httpx2.Client(follow_redirects=False, timeout=10) as client:
        for _ in range(5):
            response = client.get(url)
            location = response.headers["location"]
            if "/callback" in location:
                return location
            url = location
    raise AssertionError("the authorization server did not redirect to the callback")


@pytest.mark.parametrize("paste", ["url", "query", "code"])
def test_headless_sign_in_prints_the_url_and_reads_the_redirect_from_stdin(
    machine: Machine, oauth_server: OAuthServer, paste: str
) -> None:
    machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}})
    process = machine.popen("auth", SERVER)
    try:
        url = _authorization_url(process)
        location = _redirect_location(url)
        pasted = {
            "url": location,
            "query": location.split("?", 1)[1],
            "code": httpx2.URL(location).params["code"],
        }[paste]
        assert process.stdin is not None
        process.stdin.write(pasted + "\n")
        process.stdin.close()
        out = process.stdout.read() if process.stdout is not None else ""
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 0
    assert "Signed in to remote" in out
    assert machine.tokens_path.exists()
    assert oauth_server.count("grant:authorization_code") == 1


def test_logout_deletes_the_tokens_and_says_so(machine: Machine, oauth_server: OAuthServer) -> None:
    machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}})
    sign_in(machine)
    first = machine.run("logout", SERVER)
    assert first.returncode == 0
    assert f"Removed the stored OAuth tokens of {SERVER}" in first.stdout
    assert not machine.tokens_path.exists()
    assert not (machine.tokens_path.parent / "client.json").exists()
    second = machine.run("logout", SERVER, "--json")
    assert json.loads(second.stdout)["removed"] is False
    status = json.loads(machine.run("status", "--json").stdout)
    assert {r["name"]: r["status"] for r in status["servers"]}[SERVER] == "needs-auth"


def test_tokens_are_never_sent_to_a_changed_url(machine: Machine, start_oauth_server: Any) -> None:
    first: OAuthServer = start_oauth_server()
    second: OAuthServer = start_oauth_server()
    machine.configure({SERVER: {"url": first.url, "auth": "oauth"}})
    sign_in(machine)
    machine.configure({SERVER: {"url": second.url, "auth": "oauth"}})
    called = machine.run("connect", SERVER)
    assert called.returncode != 0
    assert f"run `pi-mcp auth {SERVER}`" in called.stdout + called.stderr
    assert second.count("foreign-bearer") == 0
    assert not machine.tokens_path.exists()  # dropped, not kept for the other URL


def test_step_up_reauthorizes_once_with_the_larger_scope(
    machine: Machine, start_oauth_server: Any
) -> None:
    server: OAuthServer = start_oauth_server("--step-up", "admin")
    machine.configure({SERVER: {"url": server.url, "auth": "oauth"}}, autoAuth=True)
    sign_in(machine)
    called = machine.run("call", f"{SERVER}_admin", "{}", env={"BROWSER": machine.browser()})
    assert called.returncode == 0, called.stderr
    assert "admin ok" in called.stdout
    stats = server.stats()
    assert stats["counts"]["authorize"] == 2
    assert "admin" in stats["scopes"][1].split()


def test_a_step_up_nobody_can_approve_fails_at_once_and_names_the_scope(
    machine: Machine, start_oauth_server: Any
) -> None:
    server: OAuthServer = start_oauth_server("--step-up", "admin")
    machine.configure({SERVER: {"url": server.url, "auth": "oauth"}})
    sign_in(machine)
    # Without autoAuth nobody can approve the larger scope: the call fails at once and says
    # how to get it.
    called = machine.run("call", f"{SERVER}_admin", "{}")
    assert called.returncode != 0
    assert "needs the larger scope 'admin'" in called.stdout + called.stderr
    assert server.count("authorize") == 1
    # Doing what the message says works.
    machine.configure({SERVER: {"url": server.url, "auth": "oauth", "oauth": {"scope": "admin"}}})
    sign_in(machine)
    assert "admin" in server.stats()["scopes"][-1].split()
    called = machine.run("call", f"{SERVER}_admin", "{}")
    assert "admin ok" in called.stdout


def test_no_token_code_or_secret_appears_in_any_output_file_or_log(
    machine: Machine, oauth_server: OAuthServer, tmp_path: Path
) -> None:
    canary = "canary-client-secret-5e1f0a"
    machine.configure(
        {
            SERVER: {"url": oauth_server.url, "auth": "oauth"},
            "static": {
                "url": oauth_server.url,
                "oauth": {
                    "grantType": "client_credentials",
                    "clientId": "unknown-client",
                    "clientSecret": canary,
                },
            },
        }
    )
    outputs = [sign_in(machine), sign_in(machine, json_output=True)]
    expire_stored_token(machine)
    for args in (
        ("call", f"{SERVER}_echo", '{"message": "x"}'),
        ("status",),
        ("status", "--json"),
        ("config",),
        ("config", "--json"),
        ("tools",),
        ("connect", "static"),
        ("auth", "static", "--json"),
        ("call", "static_echo", "{}"),
    ):
        outputs.append(machine.run(*args))
    issued = [*oauth_server.stats()["issued"], canary]
    assert len(issued) >= 6  # code, tokens, refreshed tokens, client secret, canary
    texts = [o.stdout + o.stderr for o in outputs]
    for path in machine.agent_dir.rglob("*"):
        # The config file is the person's own; the secret is supposed to be there.
        if path.is_file() and "mcp-oauth" not in path.parts and path.name != "mcp.json":
            texts.append(path.read_text(errors="replace"))
    leaks = [(secret, text[:2000]) for secret in issued for text in texts if secret in text]
    assert leaks == []


async def test_a_running_adapter_uses_a_sign_in_made_by_another_process_at_once(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    config = machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}})
    adapter = McpAdapter(
        config_path=config,
        agent_dir=machine.agent_dir,
        project_dir=machine.project,
        connect_missing=False,
        environ=machine.base_env(),
    )
    async with adapter:
        with anyio.fail_after(NEEDS_AUTH_BUDGET_S):
            with pytest.raises(NeedsAuthError, match=r"run `pi-mcp auth remote`"):
                await adapter.connect(SERVER)
        assert adapter.status().servers[0].status == "needs-auth"
        signed_in = await anyio.to_thread.run_sync(lambda: sign_in(machine))
        assert signed_in.returncode == 0
        # No 60 s failure backoff for needs-auth: the stored tokens are used right away.
        with anyio.fail_after(NEEDS_AUTH_BUDGET_S):
            metadata = await adapter.connect(SERVER)
        assert len(metadata.tools) == 3
        outcome = await adapter.call(f"{SERVER}_echo", {"message": "after"})
    assert not outcome.is_error
    assert outcome.result.content[0].text == "Echo: after"
    assert oauth_server.count("authorize") == 1


def test_a_person_may_take_longer_than_the_connect_deadline(
    machine: Machine, oauth_server: OAuthServer
) -> None:
    machine.configure(
        {SERVER: {"url": oauth_server.url, "auth": "oauth", "startupTimeoutMs": 1500}}
    )
    process = machine.popen("auth", SERVER)
    try:
        location = _redirect_location(_authorization_url(process))
        # The person reads, signs in, copies: slower than the server's startup budget. This
        # models their delay; nothing is being waited for.
        time.sleep(2.5)
        assert process.stdin is not None
        process.stdin.write(location + "\n")
        process.stdin.close()
        out = process.stdout.read() if process.stdout is not None else ""
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 0
    assert "Signed in to remote" in out
