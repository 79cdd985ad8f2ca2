"""Step-by-step diagnostics of one server (``pi-mcp doctor``).

Each check is timed and ends in one :class:`ProbeStep` with what was found and, when it failed,
what to do. A failed step stops the probe (later steps would only fail for the same reason),
except that an HTTP server answering 401 still gets its auth discovery.

- HTTP: DNS, TCP, TLS (https), HTTP status of a plain ``initialize`` POST, transport (Streamable
  HTTP, or the SSE fallback), auth discovery (the ``WWW-Authenticate`` challenge and the
  protected resource metadata it points to, RFC 9728), then ``initialize`` and ``tools/list``
  through the transports real connections use (headers, bearer, OAuth tokens, ``caFile``).
- stdio: the command found on ``PATH`` (npx commands resolved as at every start), the process
  starts, it speaks MCP (``initialize``), ``tools/list``, and the tail of its stderr.
- unix socket: the socket exists, ``initialize``, ``tools/list``.

Nothing here runs for a disabled or untrusted entry; the caller reports those. Details never
contain header values or tokens (URLs are shown without userinfo or query), and every text
passes the secret registry on output.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio
import httpx2

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter.config import ServerEntry, Settings

from ._translate import HttpObservation, redact_url

__all__ = ["ProbeReport", "ProbeStep", "StepStatus", "probe_server"]

StepStatus = Literal["ok", "fail", "warn", "skip"]
_HTTP_TIMEOUT_S = 10.0
"""One plain HTTP request of the probe; a server slower than this to answer is itself news."""
_STDERR_TAIL_LINES = 5
_LEGACY_VERSION = "2025-06-18"
_INCONCLUSIVE_STATUSES = frozenset({400, 401, 404, 405, 406, 415})


@dataclass(frozen=True, slots=True)
class ProbeStep:
    """One check: its name, outcome, what was seen, and what to do when it failed."""

    name: str
    status: StepStatus
    detail: str
    elapsed_ms: float
    fix: str | None = None


@dataclass(slots=True)
class ProbeReport:
    """Every step run for one server, in order."""

    server: str
    transport: str
    steps: list[ProbeStep] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(step.status != "fail" for step in self.steps)


class _Stop(Exception):
    """A step failed; the probe ends here."""


class _Steps:
    def __init__(self, report: ProbeReport, on_step: Callable[[ProbeStep], None] | None) -> None:
        self.report = report
        self._on_step = on_step

    def add(
        self, name: str, status: StepStatus, detail: str, started: float, fix: str | None = None
    ) -> ProbeStep:
        step = ProbeStep(name, status, detail, (time.perf_counter() - started) * 1000, fix)
        self.report.steps.append(step)
        if self._on_step is not None:
            self._on_step(step)
        return step

    def fail(self, name: str, detail: str, started: float, fix: str) -> _Stop:
        self.add(name, "fail", detail, started, fix)
        return _Stop()


async def probe_server(
    server: str,
    entry: ServerEntry,
    *,
    agent_dir: Path,
    settings: Settings,
    environ: Mapping[str, str],
    on_step: Callable[[ProbeStep], None] | None = None,
) -> ProbeReport:
    """Run every check for ``server`` (see the module docstring); ``on_step`` sees each step
    as it ends. Never raises for what it finds: a failure is a step."""
    kind = entry.transport_kind
    report = ProbeReport(server, "stdio" if kind == "stdio" else kind)
    steps = _Steps(report, on_step)
    try:
        if kind == "stdio":
            await _probe_stdio(server, entry, agent_dir, environ, steps)
        elif kind == "socket":
            await _probe_socket(server, entry, steps)
        else:
            await _probe_http(server, entry, agent_dir, settings, environ, steps)
    except _Stop:
        pass
    return report


def _single_leaf(exc: BaseException) -> BaseException:
    """``exc`` out of the task groups that wrap it alone."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _error_text(exc: BaseException) -> str:
    """The innermost meaningful message of ``exc`` (task groups nest what failed)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_error_text(e) for e in exc.exceptions)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --- MCP over opened streams -------------------------------------------------------------


async def _speak_mcp(
    open_streams: Callable[[], contextlib.AbstractAsyncContextManager[Any]],
    steps: _Steps,
    *,
    timeout_s: float,
    on_started: Callable[[float], Awaitable[None]] | None = None,
    fix_initialize: Callable[[], str],
    protocol: Literal["legacy", "auto", "2026-07-28"],
) -> None:
    """``initialize`` then ``tools/list`` over the streams ``open_streams`` yields, each a
    step, the whole bounded by ``timeout_s``. ``protocol`` is the entry's ``protocolVersion``,
    spoken as a connect speaks it (a pinned 2026-07-28 era asks the server to discover it), so
    the doctor fails where a connect would."""
    import mcp_types as types
    from mcp import Client, MCPError
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    from ._connection import _client_info

    stage = "start" if on_started is not None else "initialize"
    started = time.perf_counter()
    with anyio.move_on_after(timeout_s) as scope:
        try:
            async with open_streams() as streams:
                if on_started is not None:
                    await on_started(started)
                stage = "initialize"
                started = time.perf_counter()

                @contextlib.asynccontextmanager
                async def opened() -> AsyncIterator[Any]:
                    yield streams

                async with Client(
                    opened(), mode=protocol, cache=None, client_info=_client_info()
                ) as client:
                    if protocol in MODERN_PROTOCOL_VERSIONS:
                        try:
                            discovered = await client.session.send_discover(protocol)
                        except MCPError as exc:
                            raise steps.fail(
                                "initialize",
                                f"the server does not speak the {protocol} protocol "
                                f"(server/discover: {exc})",
                                started,
                                'set its `protocolVersion` to "auto" or "legacy"',
                            ) from None
                        client.session.adopt(types.DiscoverResult.model_validate(discovered))
                    info = client.server_info
                    name = " ".join(filter(None, (info.name, info.version))) if info else ""
                    steps.add(
                        "initialize",
                        "ok",
                        f"{name or 'server'}, protocol {client.protocol_version}",
                        started,
                    )
                    stage = "tools/list"
                    started = time.perf_counter()
                    count, cursor = 0, None
                    while True:
                        page = await client.list_tools(cursor=cursor)
                        count += len(page.tools)
                        cursor = page.next_cursor
                        if cursor is None:
                            break
                    steps.add("tools/list", "ok", f"{count} tools", started)
                    stage = "close"
        except _Stop:
            raise
        except Exception as exc:
            leaf = _single_leaf(exc)
            if isinstance(leaf, _Stop):
                raise leaf from None  # a step failed inside the client's task group
            if stage == "close":
                return
            fixes = {
                "start": "the command could not be started: check that it is an executable file",
                "initialize": fix_initialize() if stage == "initialize" else "",
            }
            fix = fixes.get(stage, "the server failed to list its tools")
            raise steps.fail(stage, _error_text(exc), started, fix) from None
    if scope.cancelled_caught:
        raise steps.fail(
            stage,
            f"no answer within {timeout_s:g} s",
            started,
            "the server started but does not answer MCP; check that it speaks MCP on this "
            "transport, or raise startupTimeoutMs",
        )


# --- stdio ------------------------------------------------------------------------------


async def _probe_stdio(
    server: str, entry: ServerEntry, agent_dir: Path, environ: Mapping[str, str], steps: _Steps
) -> None:
    from ._stderr import StderrCapture
    from ._stdio import ProcessRecord
    from ._transports import open_stdio, stdio_parameters

    assert entry.command is not None
    started = time.perf_counter()
    env_path = environ.get("PATH")
    cwd = _expanded(entry.cwd)
    if cwd is not None and not cwd.is_dir():
        raise steps.fail(
            "command",
            f"the working directory {cwd} does not exist",
            started,
            "fix `cwd` in the server's entry",
        )
    found = _find_command(entry.command, env_path, cwd)
    if found is None and os.sep in entry.command:
        raise steps.fail(
            "command",
            f"{entry.command!r} is not an executable file",
            started,
            "check the path in `command` (and that the file is executable)",
        )
    if found is None:
        raise steps.fail(
            "command",
            f"{entry.command!r} not found on PATH",
            started,
            f"install {entry.command}, or write its absolute path in `command`",
        )
    try:
        params = await stdio_parameters(
            server,
            entry,
            environ=environ,
            npx_cache_path=agent_dir / "mcp-npx-cache.json",
            resolve_npx=True,
        )
    except McpAdapterError as exc:
        raise steps.fail("command", str(exc), started, "fix the server's env values") from None
    shown = found if params.command == entry.command else f"{found} -> {params.command}"
    if params.args and params.command != entry.command:
        shown += f" {params.args[0]}"
    steps.add("command", "ok", shown, started)

    record = ProcessRecord()
    with tempfile.TemporaryDirectory(prefix="pi-mcp-doctor-") as log_dir:
        capture = StderrCapture(server, Path(log_dir))

        @contextlib.asynccontextmanager
        async def open_streams() -> AsyncIterator[Any]:
            async with open_stdio(params, capture, record, lambda: None) as streams:
                yield streams

        async def on_started(since: float) -> None:
            steps.add("start", "ok", f"pid {record.pid}", since)

        try:
            await _speak_mcp(
                open_streams,
                steps,
                timeout_s=entry.startup_timeout_s,
                on_started=on_started,
                fix_initialize=lambda: _stdio_fix(record.returncode),
                protocol=entry.protocol_version,
            )
        finally:
            tail = [line for line in capture.tail().splitlines() if line.strip()]
            steps.report.stderr_tail = tail[-_STDERR_TAIL_LINES:]


def _stdio_fix(returncode: int | None) -> str:
    exited = "" if returncode is None else f" (it exited with code {returncode})"
    return (
        f"the process started but did not complete the MCP handshake{exited}: read its stderr "
        "tail; check the command's arguments and env, and that it writes only MCP messages to "
        "stdout"
    )


def _expanded(path: str | None) -> Path | None:
    # A few stat calls at most: not worth a worker thread in a diagnostic.
    return Path(path).expanduser() if path else None


def _find_command(command: str, path: str | None, cwd: Path | None) -> str | None:
    expanded = os.path.expanduser(command)
    if os.sep in expanded:
        candidate = Path(expanded) if cwd is None else cwd / expanded
        usable = candidate.is_file() and os.access(candidate, os.X_OK)
        return str(candidate) if usable else None
    return shutil.which(expanded, path=path)


# --- unix socket ------------------------------------------------------------------------


async def _probe_socket(server: str, entry: ServerEntry, steps: _Steps) -> None:
    from ._http_extras import open_unix_socket

    assert entry.socket is not None
    started = time.perf_counter()
    path = _expanded(entry.socket)
    assert path is not None
    if not path.exists():
        raise steps.fail(
            "socket",
            f"{path} does not exist",
            started,
            "start the program that serves this socket, or fix `socket`",
        )
    steps.add("socket", "ok", str(path), started)
    await _speak_mcp(
        lambda: open_unix_socket(str(path), lambda: None),
        steps,
        timeout_s=entry.startup_timeout_s,
        fix_initialize=lambda: "something listens on the socket but does not answer MCP",
        protocol=entry.protocol_version,
    )


# --- HTTP -------------------------------------------------------------------------------


async def _probe_http(
    server: str,
    entry: ServerEntry,
    agent_dir: Path,
    settings: Settings,
    environ: Mapping[str, str],
    steps: _Steps,
) -> None:
    assert entry.url is not None
    url = entry.url
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    shown_url = redact_url(url)
    proxy = _proxy_for(url, environ)
    if proxy is not None:
        # Requests go through the proxy (httpx reads the same variables): the network checks
        # are of the way to the proxy, and TLS to the server is checked by the request itself.
        steps.add("proxy", "ok", redact_url(proxy), time.perf_counter())
        proxy_parts = urlsplit(proxy)
        host = proxy_parts.hostname or host
        port = proxy_parts.port or (443 if proxy_parts.scheme == "https" else 80)

    started = time.perf_counter()
    try:
        addresses = await anyio.getaddrinfo(host, port, type=0)
    except OSError as exc:
        raise steps.fail(
            "dns",
            f"cannot resolve {host}: {exc.strerror or exc}",
            started,
            "check the host name in the url, the network and DNS",
        ) from None
    ips = list(dict.fromkeys(str(a[4][0]) for a in addresses))
    steps.add("dns", "ok", ", ".join(ips[:3]), started)

    started = time.perf_counter()
    try:
        with anyio.fail_after(_HTTP_TIMEOUT_S):
            stream = await anyio.connect_tcp(host, port)
        await stream.aclose()
    except (OSError, TimeoutError) as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else _os_reason(exc)
        raise steps.fail(
            "tcp",
            f"cannot connect to {host}:{port}: {reason}",
            started,
            "is the server running? check the port in the url, a firewall or a proxy",
        ) from None
    steps.add("tcp", "ok", f"{host}:{port}", started)

    from ._http_extras import ssl_context_for

    try:
        verify = ssl_context_for(server, entry.ca_file)
    except McpAdapterError as exc:
        raise steps.fail("tls", str(exc), time.perf_counter(), "fix `caFile`") from None
    if parts.scheme == "https" and proxy is None:
        await _check_tls(host, port, verify, entry, steps)

    headers, auth_error = await _request_headers(server, entry, agent_dir, settings, environ)
    if auth_error is not None:
        raise steps.fail("auth", auth_error, time.perf_counter(), _auth_fix(server, entry))
    from ._transports import http_options

    try:
        options = http_options(server, entry, environ)
    except McpAdapterError as exc:
        raise steps.fail(
            "http", str(exc), time.perf_counter(), "fix `requestHeadersCommand` or `caFile`"
        ) from None
    transport: httpx2.AsyncBaseTransport = httpx2.AsyncHTTPTransport(verify=verify)
    if options.wrap_transport is not None:
        # The headers command signs every request, this probe's included.
        transport = options.wrap_transport(transport)
    started = time.perf_counter()
    async with httpx2.AsyncClient(transport=transport, timeout=_HTTP_TIMEOUT_S) as http:
        try:
            response = await http.post(
                url,
                headers={
                    **headers,
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json",
                },
                content=json.dumps(_initialize_request()),
            )
        except httpx2.HTTPError as exc:
            raise steps.fail(
                "http",
                f"POST {shown_url}: {_error_text(exc)}",
                started,
                "the server accepts connections but not HTTP requests here; check the url",
            ) from None
        content_type = response.headers.get("content-type", "").split(";")[0].strip()
        status_text = f"POST -> {response.status_code} {content_type or '(no content type)'}"
        # 401 goes to auth discovery; 404/405 may be an SSE-only server; 400/406/415 may be a
        # server that wants more than this plain request: the real handshake decides.
        status_ok = response.status_code < 400 or response.status_code in _INCONCLUSIVE_STATUSES
        steps.add(
            "http",
            "ok" if status_ok else "fail",
            status_text,
            started,
            None if status_ok else _status_fix(response.status_code),
        )
        if not status_ok:
            raise _Stop()
        kind = await _transport_step(http, url, headers, response, entry, steps)
        await _auth_step(server, entry, http, response, headers, agent_dir, settings, steps)
    await _initialize_http(server, entry, agent_dir, settings, environ, headers, kind, steps)


def _proxy_for(url: str, environ: Mapping[str, str]) -> str | None:
    """The proxy ``HTTP(S)_PROXY`` / ``ALL_PROXY`` give for ``url``, unless ``NO_PROXY``
    exempts its host."""
    proxies = {
        key.lower().removesuffix("_proxy"): value
        for key, value in environ.items()
        if key.lower().endswith("_proxy") and value
    }
    parts = urlsplit(url)
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if proxy is None or _bypassed(parts.hostname or "", proxies.get("no", "")):
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


def _bypassed(host: str, no_proxy: str) -> bool:
    for item in (part.strip().lower() for part in no_proxy.split(",")):
        if item == "*" or (
            item and (host == item.lstrip(".") or host.endswith("." + item.lstrip(".")))
        ):
            return True
    return False


def _os_reason(exc: OSError) -> str:
    """The OS's words for a failed connect (anyio wraps them in "All connection attempts
    failed")."""
    cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
    if cause.errno:
        return os.strerror(cause.errno)
    return cause.strerror or str(exc)


def _initialize_request() -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": _LEGACY_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "pi-mcp-doctor", "version": "1"},
        },
    }


async def _check_tls(
    host: str, port: int, verify: ssl.SSLContext | bool, entry: ServerEntry, steps: _Steps
) -> None:
    from anyio.streams.tls import TLSAttribute

    started = time.perf_counter()
    context = verify if isinstance(verify, ssl.SSLContext) else ssl.create_default_context()
    try:
        with anyio.fail_after(_HTTP_TIMEOUT_S):
            stream = await anyio.connect_tcp(host, port, ssl_context=context, tls_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        fix = (
            "the certificate is not trusted: point `caFile` at the PEM of the CA that signed "
            "it, or fix the server's certificate"
        )
        if entry.ca_file:
            fix = f"the certificate is not signed by a CA in {entry.ca_file}; fix `caFile`"
        raise steps.fail("tls", exc.verify_message or str(exc), started, fix) from None
    except (OSError, TimeoutError, ssl.SSLError) as exc:
        raise steps.fail(
            "tls",
            f"handshake failed: {_error_text(exc)}",
            started,
            "the port does not speak TLS, or no common protocol: check https vs http and the port",
        ) from None
    version = stream.extra(TLSAttribute.tls_version, "TLS")
    certificate = stream.extra(TLSAttribute.peer_certificate, None) or {}
    await stream.aclose()
    expires = certificate.get("notAfter", "")
    detail = f"{version}" + (f", certificate valid until {expires}" if expires else "")
    steps.add("tls", "ok", detail, started)


async def _request_headers(
    server: str,
    entry: ServerEntry,
    agent_dir: Path,
    settings: Settings,
    environ: Mapping[str, str],
) -> tuple[dict[str, str], str | None]:
    """The headers a connection sends (configured, static bearer, stored bearer), or why they
    cannot be built."""
    from ._oauth import uses_stored_bearer
    from ._token_store import create_bearer_store
    from ._transports import http_headers

    try:
        headers = await http_headers(server, entry, environ)
    except McpAdapterError as exc:
        return {}, str(exc)
    if uses_stored_bearer(entry):
        try:
            record = create_bearer_store(settings.oauth_store, agent_dir).load(server)
        except (McpAdapterError, OSError) as exc:
            return headers, f"the token store cannot be read: {exc}"
        if record is None:
            return headers, "no token is stored (bearerTokenStore)"
        if record.server_url != entry.url:
            return headers, "the stored token was stored for another URL"
        headers["Authorization"] = f"Bearer {record.token}"
    return headers, None


def _auth_fix(server: str, entry: ServerEntry) -> str:
    from ._oauth import uses_stored_bearer

    if uses_stored_bearer(entry):
        return f"run `pi-mcp token set {server}`"
    if entry.bearer_token_env:
        return f"check the environment variable {entry.bearer_token_env}"
    if entry.request_headers_command is not None:
        return "check what requestHeadersCommand prints"
    return "fix the server's headers or bearerToken"


def _status_fix(status: int) -> str:
    if status == 403:
        return "the server refuses these credentials: check the token's permissions"
    if status >= 500:
        return "the server failed (5xx): retry later, or read the server's own logs"
    return "the url does not serve MCP: check its path (often /mcp)"


async def _transport_step(
    http: httpx2.AsyncClient,
    url: str,
    headers: Mapping[str, str],
    response: httpx2.Response,
    entry: ServerEntry,
    steps: _Steps,
) -> Literal["streamable-http", "sse"]:
    started = time.perf_counter()
    content_type = response.headers.get("content-type", "").lower()
    if entry.http_transport is not None:
        steps.add("transport", "ok", f"{entry.http_transport} (httpTransport)", started)
        return entry.http_transport
    if response.status_code < 300 and (
        content_type.startswith(("application/json", "text/event-stream"))
    ):
        steps.add("transport", "ok", "Streamable HTTP", started)
        return "streamable-http"
    if response.status_code == 401:
        steps.add("transport", "skip", "not known until authenticated", started)
        return "streamable-http"
    if content_type.startswith("text/html"):
        raise steps.fail(
            "transport",
            f"POST -> {response.status_code} with a web page (HTML), not MCP",
            started,
            "the url is a web site or a sign-in page: use the server's MCP endpoint (often /mcp)",
        )
    try:
        async with http.stream(
            "GET", url, headers={**headers, "Accept": "text/event-stream"}
        ) as answer:
            sse = answer.status_code == 200 and answer.headers.get(
                "content-type", ""
            ).lower().startswith("text/event-stream")
    except httpx2.HTTPError:
        sse = False
    if sse:
        steps.add("transport", "ok", "SSE (the legacy transport)", started)
        return "sse"
    if response.status_code not in (404, 405):
        steps.add(
            "transport",
            "warn",
            f"POST -> {response.status_code} and no SSE stream; trying Streamable HTTP",
            started,
        )
        return "streamable-http"
    raise steps.fail(
        "transport",
        f"neither Streamable HTTP (POST -> {response.status_code}) nor SSE (GET) answers here",
        started,
        "the url does not serve MCP: check its path (often /mcp, or /sse for old servers)",
    )


async def _auth_step(
    server: str,
    entry: ServerEntry,
    http: httpx2.AsyncClient,
    response: httpx2.Response,
    headers: Mapping[str, str],
    agent_dir: Path,
    settings: Settings,
    steps: _Steps,
) -> None:
    from mcp.client.auth.utils import (
        build_protected_resource_metadata_discovery_urls,
        extract_resource_metadata_from_www_auth,
    )

    started = time.perf_counter()
    sent = "Authorization" in headers or entry.request_headers_command is not None
    if response.status_code != 401:
        how = "none asked"
        if entry.request_headers_command is not None:
            how = "requestHeadersCommand"
        elif "Authorization" in headers:
            how = "token sent and accepted"
        steps.add("auth", "ok", how, started)
        return
    if sent:
        raise steps.fail(
            "auth",
            "the server answered 401 to the credentials sent",
            started,
            f"the token is wrong or expired: {_auth_fix(server, entry)}",
        )
    challenge = extract_resource_metadata_from_www_auth(response)
    urls = build_protected_resource_metadata_discovery_urls(challenge, str(entry.url))
    metadata: dict[str, Any] | None = None
    found_at = ""
    for candidate in urls:
        try:
            answer = await http.get(candidate)
        except httpx2.HTTPError:
            continue
        if answer.status_code == 200:
            with contextlib.suppress(ValueError):
                data = answer.json()
                if isinstance(data, dict):
                    metadata, found_at = data, candidate
                    break
    if metadata is None:
        raise steps.fail(
            "auth",
            "401 without OAuth metadata (no protected resource metadata found)",
            started,
            "the server wants credentials: store a token with `pi-mcp token set` "
            '("auth": "bearer", "bearerTokenStore": true), or set bearerTokenEnv or headers',
        )
    servers = metadata.get("authorization_servers") or []
    names = ", ".join(redact_url(str(s)) for s in servers) or "none named"
    detail = f"OAuth: {redact_url(found_at)} names {names}"
    if entry.oauth_mode is None:
        raise steps.fail(
            "auth",
            detail,
            started,
            'the server signs in with OAuth, but this entry turns it off; remove `"auth"` / '
            '`"oauth": false` from it',
        )
    from ._oauth import OAuthProviders

    try:
        state = OAuthProviders({server: entry}, agent_dir=agent_dir, settings=settings).state(
            server
        )
    except McpAdapterError as exc:
        raise steps.fail("auth", f"{detail}; {exc}", started, "fix settings.oauthStore") from None
    grant = entry.oauth_config.grant_type
    if (state is None or not state.has_tokens) and grant != "authorization_code":
        # No person signs in: the token is obtained when the handshake below asks for one.
        steps.add("auth", "ok", f"{detail}; {grant} obtains a token at connect", started)
        return
    if state is None or not state.has_tokens:
        raise steps.fail("auth", f"{detail}; not signed in", started, f"run `pi-mcp auth {server}`")
    steps.add("auth", "ok", f"{detail}; tokens stored", started)


async def _initialize_http(
    server: str,
    entry: ServerEntry,
    agent_dir: Path,
    settings: Settings,
    environ: Mapping[str, str],
    headers: Mapping[str, str],
    transport: Literal["streamable-http", "sse"],
    steps: _Steps,
) -> None:
    from ._oauth import OAuthProviders, uses_stored_bearer
    from ._transports import http_options, open_sse, open_streamable_http

    auth: httpx2.Auth | None = None
    if entry.oauth_mode is not None and not uses_stored_bearer(entry):
        auth = OAuthProviders({server: entry}, agent_dir=agent_dir, settings=settings).auth_for(
            server
        )
    options = http_options(server, entry, environ)
    opener = open_streamable_http if transport == "streamable-http" else open_sse
    assert entry.url is not None
    url = entry.url

    def open_streams() -> contextlib.AbstractAsyncContextManager[Any]:
        return opener(
            url,
            headers=headers,
            auth=auth,
            observation=HttpObservation(),
            on_eof=lambda: None,
            options=options,
        )

    await _speak_mcp(
        open_streams,
        steps,
        timeout_s=entry.startup_timeout_s,
        fix_initialize=lambda: (
            "the endpoint answers HTTP but the MCP handshake failed: check "
            "the url and the server's logs"
        ),
        protocol=entry.protocol_version,
    )
