"""The person's part of an OAuth sign-in: the loopback callback, the browser, the paste.

:class:`AuthorizationPrompt` is the callback handler of the SDK's authorization-code flow. It
listens on the loopback redirect URI (uvicorn serving one Starlette route, no access log: the
query holds the code), opens the authorization URL with :mod:`webbrowser` (so ``BROWSER``
decides), and when no browser can open (no display, SSH) prints the URL and reads the redirect
URL, its query or the bare code pasted on stdin. Whichever answer comes first wins. While it
waits, the connect deadline of the server is paused (:func:`connect_deadline`): a person is
slower than ``startupTimeoutMs``, and has :data:`AUTHORIZATION_TIMEOUT_S` instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import socket
import sys
import webbrowser
from collections.abc import AsyncGenerator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Literal
from urllib.parse import parse_qs, urlsplit

import anyio
import uvicorn
from mcp.client.auth import OAuthFlowError
from mcp.shared.auth import AuthorizationCodeResult
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

__all__ = [
    "AUTHORIZATION_TIMEOUT_S",
    "DEFAULT_CALLBACK_PORT",
    "AuthorizationPrompt",
    "CallbackPortBusy",
    "connect_deadline",
    "loopback_socket",
    "parse_pasted_redirect",
]

DEFAULT_CALLBACK_PORT = 19876
"""The reference adapter's callback port, so redirect URIs registered by either match."""
CALLBACK_PATH = "/callback"
AUTHORIZATION_TIMEOUT_S = 300.0
"""How long a person has to finish signing in before the flow gives up."""
CALLBACK_SHUTDOWN_TIMEOUT_S = 2.0


_CONNECT_DEADLINE: contextvars.ContextVar[anyio.CancelScope | None] = contextvars.ContextVar(
    "pi_mcp_adapter_connect_deadline", default=None
)


@contextlib.contextmanager
def connect_deadline(scope: anyio.CancelScope) -> Iterator[None]:
    """Mark ``scope`` as the connect deadline of the flows started inside the block: a sign-in
    pauses it while a person is at work (``startupTimeoutMs`` is for servers, not people)."""
    token = _CONNECT_DEADLINE.set(scope)
    try:
        yield
    finally:
        _CONNECT_DEADLINE.reset(token)


@contextlib.contextmanager
def _connect_deadline_paused() -> Iterator[None]:
    scope = _CONNECT_DEADLINE.get()
    if scope is None or math.isinf(scope.deadline):
        yield
        return
    remaining = max(0.0, scope.deadline - anyio.current_time())
    scope.deadline = math.inf
    try:
        yield
    finally:
        if math.isinf(scope.deadline):
            scope.deadline = anyio.current_time() + remaining


def parse_pasted_redirect(text: str, expected_state: str | None) -> AuthorizationCodeResult:
    """A pasted redirect URL (or query string, or bare code) as the flow's callback result.

    A bare code carries no state; the expected state is assumed, since the person copied it
    from the page the flow opened.

    Raises:
        OAuthFlowError: the text is empty or the authorization server reported an error.
    """
    text = text.strip()
    if not text:
        raise OAuthFlowError("nothing was pasted")
    query = urlsplit(text).query if "://" in text else text.lstrip("?")
    if "=" not in query:
        return AuthorizationCodeResult(code=text, state=expected_state)
    params = {k: v[0] for k, v in parse_qs(query).items() if v}
    if "error" in params:
        description = params.get("error_description", "")
        raise OAuthFlowError(f"authorization was refused: {params['error']} {description}".strip())
    if "code" not in params:
        raise OAuthFlowError("the pasted text has no authorization code")
    return AuthorizationCodeResult(
        code=params["code"], state=params.get("state", expected_state), iss=params.get("iss")
    )


class CallbackPortBusy(OAuthFlowError):
    """The loopback callback port is taken by another program."""


@dataclass(slots=True)
class _CallbackResult:
    event: anyio.Event = field(default_factory=anyio.Event)
    result: AuthorizationCodeResult | None = None
    error: str | None = None


def loopback_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if os.name == "posix":
            # The last sign-in's connections linger in TIME_WAIT; on POSIX this still refuses
            # a port another socket listens on (on Windows it would not, so not there).
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(8)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def _bind_host(redirect_uri: str) -> tuple[str, int, str]:
    parts = urlsplit(redirect_uri)
    host = parts.hostname or "127.0.0.1"
    host = "127.0.0.1" if host == "localhost" else host
    return host, parts.port or DEFAULT_CALLBACK_PORT, parts.path or "/"


@contextlib.asynccontextmanager
async def open_callback_server(sock: socket.socket, path: str) -> AsyncGenerator[_CallbackResult]:
    """Serve the loopback redirect URI on ``sock`` until the block ends; the first callback
    wins. The server takes the socket over and closes it on exit."""
    outcome = _CallbackResult()

    async def callback(request: Request) -> HTMLResponse:
        params = dict(request.query_params)
        if not outcome.event.is_set():
            if "error" in params:
                outcome.error = f"{params['error']} {params.get('error_description', '')}".strip()
            elif "code" in params:
                outcome.result = AuthorizationCodeResult(
                    code=params["code"], state=params.get("state"), iss=params.get("iss")
                )
            else:
                return HTMLResponse("<p>No authorization code in this request.</p>", 400)
            outcome.event.set()
        text = "Authorization failed." if outcome.error else "Authorization complete."
        return HTMLResponse(f"<p>{text} You can close this window.</p>")

    app = Starlette(routes=[Route(path, callback, methods=["GET"])])
    # No access log and no logging config: the callback's query string holds the code.
    config = uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=int(CALLBACK_SHUTDOWN_TIMEOUT_S),
    )
    server = uvicorn.Server(config)
    # The listener owns the socket from here on and closes it when it stops; closing it here
    # as well would close whatever descriptor the number was reused for meanwhile.
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        try:
            yield outcome
        finally:
            # uvicorn checks this every 0.1 s, then stops listening; the task group waits.
            server.should_exit = True


def _open_browser(url: str) -> bool:
    try:
        return webbrowser.open(url)
    except Exception:
        return False


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (ValueError, OSError):
        return False


def _should_try_browser(environ: Mapping[str, str]) -> bool:
    if environ.get("BROWSER"):
        return True
    if sys.platform.startswith("linux") and not (
        environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")
    ):
        return False  # headless or over SSH: nothing could show the page
    return not environ.get("SSH_CONNECTION")


@dataclass(slots=True)
class AuthorizationPrompt:
    """Asks a person to authorize: opens the browser, serves the callback, reads a paste.

    ``stdin``/``out`` default to the process's; tests pass their own streams.
    """

    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    stdin: IO[str] | None = None
    out: IO[str] | None = None
    timeout_s: float = AUTHORIZATION_TIMEOUT_S
    read_paste: Literal["terminal", "always"] = "terminal"
    """When no browser opens, read a pasted redirect from stdin only if it is a terminal
    (default: a gateway's stdin may be its MCP stream), or ``always`` (``pi-mcp auth``)."""

    def _say(self, text: str) -> None:
        out = self.out or sys.stderr
        out.write(text + "\n")
        out.flush()

    async def __call__(
        self, server: str, authorization_url: str, redirect_uri: str
    ) -> AuthorizationCodeResult:
        expected_state = parse_qs(urlsplit(authorization_url).query).get("state", [None])[0]
        host, port, path = _bind_host(redirect_uri)
        try:
            sock = loopback_socket(host, port)
        except OSError as exc:
            raise CallbackPortBusy(
                f"cannot listen on {redirect_uri} for the authorization callback "
                f"({exc.strerror or exc}); set MCP_OAUTH_CALLBACK_PORT or oauth.redirectUri"
            ) from exc
        with _connect_deadline_paused():
            async with open_callback_server(sock, path) as callback:
                return await self._wait(server, authorization_url, callback, expected_state)

    async def _wait(
        self,
        server: str,
        authorization_url: str,
        callback: _CallbackResult,
        expected_state: str | None,
    ) -> AuthorizationCodeResult:
        opened = False
        if _should_try_browser(self.environ):
            self._say(f"Opening a browser to authorize MCP server {server!r}…")
            opened = await anyio.to_thread.run_sync(_open_browser, authorization_url)
        stdin = self.stdin or sys.stdin
        read_paste = not opened and (self.read_paste == "always" or _is_terminal(stdin))
        if read_paste:
            self._say(
                f"Open this URL in a browser to authorize MCP server {server!r}:\n\n"
                f"  {authorization_url}\n\n"
                "Then paste the URL the browser was sent to (or just the code) here and press "
                "Enter:"
            )
        elif not opened:
            self._say(
                f"Open this URL in a browser on this machine to authorize MCP server "
                f"{server!r}:\n\n  {authorization_url}\n"
            )
        pasted: list[AuthorizationCodeResult | BaseException] = []
        done = anyio.Event()

        async def paste() -> None:
            try:
                line = await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True)
                if not line:
                    return  # end of input: only the callback can finish the flow now
                pasted.append(parse_pasted_redirect(line, expected_state))
            except Exception as exc:
                pasted.append(exc)
            done.set()

        async def wait_callback() -> None:
            await callback.event.wait()
            done.set()

        with anyio.fail_after(self.timeout_s):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_callback)
                if read_paste:
                    tg.start_soon(paste)
                await done.wait()
                tg.cancel_scope.cancel()
        if callback.event.is_set():
            if callback.error is not None:
                raise OAuthFlowError(f"authorization was refused: {callback.error}")
            assert callback.result is not None
            return callback.result
        outcome = pasted[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome
