from __future__ import annotations

import io
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import httpx2
import pytest
import uvicorn
from mcp.client.auth import OAuthFlowError

from pi_mcp_adapter._errors import NeedsAuthError
from pi_mcp_adapter.config._models import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerManager
from pi_mcp_adapter.servers._oauth import (
    AuthorizationPrompt,
    OAuthProviders,
    choose_redirect_uri,
    parse_pasted_redirect,
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize(
    ("pasted", "code", "state"),
    [
        pytest.param("http://127.0.0.1:1/callback?code=abc&state=s1", "abc", "s1", id="url"),
        pytest.param("code=abc&state=s1", "abc", "s1", id="query"),
        pytest.param("?code=abc", "abc", "expected", id="query-without-state"),
        pytest.param("  abc\n", "abc", "expected", id="bare-code"),
    ],
)
def test_a_pasted_redirect_url_query_or_code_is_understood(
    pasted: str, code: str, state: str
) -> None:
    result = parse_pasted_redirect(pasted, "expected")
    assert (result.code, result.state) == (code, state)


@pytest.mark.parametrize(
    "pasted",
    [
        pytest.param("", id="empty"),
        pytest.param("http://x/cb?error=access_denied", id="refused"),
        pytest.param("http://x/cb?state=s", id="no-code"),
    ],
)
def test_a_paste_without_a_code_is_an_error(pasted: str) -> None:
    with pytest.raises(OAuthFlowError):
        parse_pasted_redirect(pasted, "s")


def test_the_redirect_uri_prefers_config_then_registration_then_the_port() -> None:
    port = free_port()
    environ = {"MCP_OAUTH_CALLBACK_PORT": str(port)}
    plain = ServerEntry(url="https://x")
    assert choose_redirect_uri(plain, environ) == f"http://127.0.0.1:{port}/callback"
    configured = ServerEntry.model_validate(
        {"url": "https://x", "oauth": {"redirectUri": "http://127.0.0.1:7/cb"}}
    )
    assert choose_redirect_uri(configured, environ) == "http://127.0.0.1:7/cb"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()
        other = choose_redirect_uri(plain, environ)
    assert other.startswith("http://127.0.0.1:")
    assert f":{port}/" not in other


async def test_the_loopback_callback_delivers_the_code_to_the_flow() -> None:
    port = free_port()
    redirect_uri = f"http://127.0.0.1:{port}/callback"
    prompt = AuthorizationPrompt(environ={}, stdin=io.StringIO(""), out=io.StringIO())
    url = "https://as.example/authorize?" + urlencode({"state": "s1", "client_id": "c"})

    async def browser() -> None:
        # What the browser does after the person approves: follow the redirect back.
        async with httpx2.AsyncClient() as client:
            for _ in range(100):
                try:
                    response = await client.get(f"{redirect_uri}?code=c0de&state=s1")
                except httpx2.ConnectError:
                    await anyio.sleep(0.05)
                    continue
                assert response.status_code == 200
                return

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(browser)
            result = await prompt("srv", url, redirect_uri)
    assert (result.code, result.state) == ("c0de", "s1")
    # The port is free again: the callback server is gone.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


async def test_without_a_browser_the_url_is_printed_and_the_paste_read() -> None:
    port = free_port()
    out = io.StringIO()
    stdin = io.StringIO("http://127.0.0.1/callback?code=pasted&state=s1\n")
    prompt = AuthorizationPrompt(environ={}, stdin=stdin, out=out, read_paste="always")
    url = "https://as.example/authorize?state=s1"
    with anyio.fail_after(20):
        result = await prompt("srv", url, f"http://127.0.0.1:{port}/callback")
    assert result.code == "pasted"
    assert url in out.getvalue()


async def test_a_flow_outside_allow_prompts_fails_with_needs_auth(tmp_path: Path) -> None:
    entry = ServerEntry(url="https://x.example/mcp", auth="oauth")
    providers = OAuthProviders({"s": entry}, agent_dir=tmp_path, environ={})
    provider = providers.auth_for("s")
    assert provider is not None
    with pytest.raises(NeedsAuthError, match=r"run `pi-mcp auth s`"):
        await provider._redirect("https://as.example/authorize?state=x")  # type: ignore[attr-defined]
    assert providers.needs_auth("s")
    assert providers.auth_for("s") is provider  # one provider per server for the process
    bearer = ServerEntry(url="https://x", bearer_token="t")
    assert OAuthProviders({"b": bearer}, agent_dir=tmp_path, environ={}).auth_for("b") is None


@pytest.mark.parametrize(
    ("challenge", "discovers"),
    [
        pytest.param(None, False, id="401-without-challenge"),
        pytest.param(b'Bearer realm="x"', True, id="401-with-challenge"),
    ],
)
async def test_implicit_oauth_starts_only_on_a_www_authenticate_challenge(
    tmp_path: Path, challenge: bytes | None, discovers: bool
) -> None:
    paths: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        paths.append(scope["path"])
        headers = [(b"content-type", b"text/plain")]
        if challenge is not None and scope["path"] == "/mcp":
            headers.append((b"www-authenticate", challenge))
        status = 401 if scope["path"] == "/mcp" else 404
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"no"})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off"))
    entry = ServerEntry(url=url)
    oauth = OAuthProviders({"s": entry}, agent_dir=tmp_path, environ={})
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        manager = ServerManager(
            {"s": entry},
            Settings(health_check_interval_ms=0),
            log_dir=tmp_path / "logs",
            auth_factory=oauth.auth_for,
        )
        with anyio.fail_after(20):
            async with manager:
                with pytest.raises(NeedsAuthError):
                    await manager.connect("s")
        server.should_exit = True
    assert any(p.startswith("/.well-known/") for p in paths) is discovers


async def test_stdin_that_is_not_a_terminal_is_left_alone_outside_pi_mcp_auth() -> None:
    # A gateway serving MCP over stdio must not lose a line of its stream to a sign-in.
    port = free_port()
    redirect_uri = f"http://127.0.0.1:{port}/callback"
    stdin = io.StringIO('{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}\n')
    out = io.StringIO()
    prompt = AuthorizationPrompt(environ={}, stdin=stdin, out=out)

    async def person_on_this_machine() -> None:
        async with httpx2.AsyncClient() as client:
            for _ in range(100):
                try:
                    await client.get(f"{redirect_uri}?code=c&state=s")
                except httpx2.ConnectError:
                    await anyio.sleep(0.05)
                    continue
                return

    with anyio.fail_after(20):
        async with anyio.create_task_group() as tg:
            tg.start_soon(person_on_this_machine)
            result = await prompt("srv", "https://as.example/authorize?state=s", redirect_uri)
    assert result.code == "c"
    assert stdin.read().startswith('{"jsonrpc"')
    assert "https://as.example/authorize" in out.getvalue()
