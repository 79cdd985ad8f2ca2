"""What the gateway shows of itself: a span per client request, ``/metrics``, ``/status``.

The spans and instruments are the engine's (``engine/_telemetry.py``); this module only
translates. :func:`request_middleware` replaces the MCP SDK's own tracing middleware (which
would record a second, poorer span per request) with one that records the gateway client,
its session and transport as well. :class:`ObservabilityRoutes` serves the Prometheus text
and a read-only HTML status page beside the MCP endpoint of an HTTP gateway.

Who may read them: whoever holds the gateway's own token (``--auth-token`` /
``PI_MCP_GATEWAY_TOKEN``) or ``settings.telemetry.metricsToken``. A client of
``gatewayClients`` may not: the page lists every server and client, more than its policy
lets it see. A loopback gateway with no token at all serves them to the machine, as it
serves its MCP endpoint.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError
from starlette.types import ASGIApp, Receive, Scope, Send

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.engine._telemetry import Telemetry, active, flush_pending

__all__ = [
    "METRICS_PATH",
    "STATUS_PATH",
    "ObservabilityRoutes",
    "RequestTelemetry",
    "request_middleware",
    "with_observability",
]

METRICS_PATH = "/metrics"
STATUS_PATH = "/status"
_STATUS_REFRESH_S = 5
"""How often the status page reloads itself (it is read-only: no script, no form)."""


def request_middleware(
    middleware: Sequence[ServerMiddleware[Any]], *, client: Callable[[], str | None]
) -> list[ServerMiddleware[Any]]:
    """``middleware`` without the SDK's tracing, and with :class:`RequestTelemetry` first
    when telemetry is on (``client`` names the requesting gateway client)."""
    kept = [m for m in middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    telemetry = active()
    return [RequestTelemetry(telemetry, client), *kept] if telemetry is not None else kept


class RequestTelemetry(ServerMiddleware[Any]):
    """One SERVER span and one duration sample per request a client sends."""

    def __init__(self, telemetry: Telemetry, client: Callable[[], str | None]) -> None:
        self._telemetry = telemetry
        self._client = client

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.request_id is None:  # a notification: no answer, nothing to time
            return await call_next(ctx)
        name = ctx.params.get("name") if ctx.params else None
        http_request = ctx.request
        headers = getattr(http_request, "headers", None)
        session_id = headers.get("mcp-session-id") if headers is not None else None
        meta = ctx.params.get("_meta") if ctx.params else None
        with self._telemetry.request(
            ctx.method,
            target=name if isinstance(name, str) else None,
            request_id=ctx.request_id,
            session_id=session_id,
            transport="tcp" if headers is not None else "pipe",
            client=self._client(),
            parent_meta=meta if isinstance(meta, dict) else None,
            protocol_version=ctx.protocol_version,
        ) as record:
            try:
                result = await call_next(ctx)
            except MCPError as exc:
                record.error_type = str(exc.error.code)
                raise
            except ValidationError:
                record.error_type = "-32602"  # invalid params, as the client is answered
                raise
            if ctx.method == "tools/call" and _is_error_result(result):
                record.error_type = "tool_error"
            return result


def _is_error_result(result: object) -> bool:
    if isinstance(result, dict):
        return result.get("isError") is True
    return getattr(result, "is_error", False) is True


# ---------------------------------------------------------------------------- HTTP routes


class ObservabilityRoutes:
    """ASGI: ``/metrics`` and ``/status`` for those allowed (see the module docstring);
    everything else goes to ``app``."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        telemetry: Telemetry,
        adapter: McpAdapter,
        tokens: Sequence[str],
        open_without_token: bool,
        client_names: Callable[[], Sequence[str]],
    ) -> None:
        self._app = app
        self._telemetry = telemetry
        self._adapter = adapter
        self._digests = [hashlib.sha256(t.encode()).digest() for t in tokens if t]
        self._open = open_without_token and not self._digests
        self._client_names = client_names

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path not in (METRICS_PATH, STATUS_PATH):
            await self._app(scope, receive, send)
            return
        if scope.get("method") not in ("GET", "HEAD"):
            await _respond(send, 405, b"read-only\n", b"text/plain", allow=b"GET, HEAD")
            return
        if not self._authorized(scope):
            await _respond(
                send,
                401,
                b"missing or wrong bearer token (the gateway token or "
                b"settings.telemetry.metricsToken)\n",
                b"text/plain",
                authenticate=True,
            )
            return
        # Calls answered a moment ago are counted and listed; waited for in a thread, so a
        # span processor that stalls the telemetry worker never stalls the gateway's loop.
        await anyio.to_thread.run_sync(flush_pending)
        if path == METRICS_PATH:
            body = self._telemetry.prometheus_text()
            await _respond(send, 200, body, b"text/plain; version=0.0.4; charset=utf-8")
            return
        page = redact(render_status_page(self._adapter, self._telemetry, self._client_names()))
        await _respond(send, 200, page.encode(), b"text/html; charset=utf-8")

    def _authorized(self, scope: Scope) -> bool:
        if self._open:
            return True
        supplied = b""
        for key, value in scope.get("headers", ()):
            if key == b"authorization":
                scheme, _, credentials = bytes(value).partition(b" ")
                if scheme.lower() == b"bearer":
                    supplied = credentials.strip()
                break
        if not supplied:
            return False
        digest = hashlib.sha256(supplied).digest()
        # Every digest is compared (no early exit): timing tells nothing about which matched.
        matches = [hmac.compare_digest(digest, known) for known in self._digests]
        return any(matches)


async def _respond(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    *,
    allow: bytes | None = None,
    authenticate: bool = False,
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"cache-control", b"no-store"),
        # The page runs nothing and loads nothing: only its own inline style.
        (b"content-security-policy", b"default-src 'none'; style-src 'unsafe-inline'"),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
    ]
    if allow is not None:
        headers.append((b"allow", allow))
    if authenticate:
        headers.append((b"www-authenticate", b'Bearer realm="pi-mcp-gateway"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def render_status_page(
    adapter: McpAdapter, telemetry: Telemetry, client_names: Sequence[str]
) -> str:
    """The status page: servers and their state, clients, recent calls and errors, approvals
    waiting. Every value is escaped (a server's error text is the server's)."""
    e = html.escape
    report = adapter.status()
    now = time.time()
    server_rows = "".join(
        f'<tr data-server="{e(s.name)}"><td>{e(s.name)}</td>'
        f'<td class="state">{e(s.status)}</td><td>{s.tool_count}</td>'
        f"<td>{e(s.transport or '')}</td><td>{e(s.lifecycle)}</td>"
        f"<td>{e(s.error or '')}</td></tr>"
        for s in report.servers
    )
    recent = list(telemetry.recent)
    call_rows = "".join(
        f'<tr class="call {e(c.outcome)}"><td>{_ago(now - c.at)}</td><td>{e(c.server)}</td>'
        f"<td>{e(c.tool)}</td><td>{e(c.client or '')}</td><td>{e(c.outcome)}</td>"
        f"<td>{c.duration_ms:.1f}</td><td>{e(c.error_kind or '')}</td></tr>"
        for c in recent
    )
    errors = [c for c in recent if c.outcome != "ok"]
    calls_by_client: dict[str, int] = {}
    for call in recent:
        calls_by_client[call.client or "-"] = calls_by_client.get(call.client or "-", 0) + 1
    names = sorted({*client_names, *(k for k in calls_by_client if k != "-")})
    client_rows = "".join(
        f'<tr data-client="{e(n)}"><td>{e(n)}</td><td>{calls_by_client.get(n, 0)}</td></tr>'
        for n in names
    )
    waiting_rows = "".join(
        f"<tr><td>{e(w.server)}</td><td>{e(w.tool)}</td><td>{_ago(now - w.since)}</td></tr>"
        for w in list(telemetry.waiting.values())
    )
    empty = '<tr><td colspan="7">none</td></tr>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{_STATUS_REFRESH_S}">
<title>pi-mcp gateway status</title>
<style>
body{{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}}
table{{border-collapse:collapse;margin-bottom:1.5rem}}
td,th{{border:1px solid #ccc;padding:.25rem .6rem;text-align:left}}
tr.error td,tr.failed td{{background:#fde8e8}}
</style></head><body>
<h1>pi-mcp gateway</h1>
<p id="summary">{report.connected} of {report.enabled} servers connected,
{report.tool_count} tools, {len(errors)} of the last {len(recent)} calls failed.</p>
<h2>Servers</h2>
<table id="servers"><tr><th>server</th><th>state</th><th>tools</th><th>transport</th>
<th>lifecycle</th><th>error</th></tr>{server_rows or empty}</table>
<h2>Clients</h2>
<table id="clients"><tr><th>client</th><th>recent calls</th></tr>{client_rows or empty}</table>
<h2>Approvals waiting</h2>
<table id="approvals"><tr><th>server</th><th>tool</th><th>waiting</th></tr>
{waiting_rows or empty}</table>
<h2>Recent calls</h2>
<table id="calls"><tr><th>when</th><th>server</th><th>tool</th><th>client</th><th>outcome</th>
<th>ms</th><th>error</th></tr>{call_rows or empty}</table>
</body></html>
"""


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    return f"{seconds / 60:.0f}min ago"


def with_observability(
    app: ASGIApp,
    adapter: McpAdapter,
    *,
    auth_token: str | None,
    has_clients: bool,
    client_names: Callable[[], Sequence[str]],
    mcp_path: str | None = None,
) -> ASGIApp:
    """``app`` with ``/metrics`` and ``/status`` when telemetry is on; ``app`` itself when off.

    Raises:
        UsageError: ``mcp_path`` (the MCP endpoint's ``--path``) is one of theirs: every
            client request would get the metrics or the page instead of an answer.
    """
    telemetry = active()
    if telemetry is None:
        return app
    if mcp_path is not None and mcp_path.rstrip("/") in (METRICS_PATH, STATUS_PATH):
        raise UsageError(
            f"--path {mcp_path!r} is where the gateway serves its "
            f"{'metrics' if mcp_path.rstrip('/') == METRICS_PATH else 'status page'} "
            "while telemetry is on; choose another path for the MCP endpoint (e.g. /mcp)"
        )
    telemetry.serve_prometheus()  # /metrics counts from the gateway's start
    tokens = [t for t in (auth_token, telemetry.metrics_token) if t]
    return ObservabilityRoutes(
        app,
        telemetry=telemetry,
        adapter=adapter,
        tokens=tokens,
        # A gateway open to the machine shows the machine its status; one with clients shows
        # it only to the operator's tokens.
        open_without_token=not auth_token and not has_clients,
        client_names=client_names,
    )
