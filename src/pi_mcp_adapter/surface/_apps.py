"""MCP Apps views in a browser: a loopback page that hosts a tool's ``ui://`` view.

A tool whose ``_meta.ui.resourceUri`` names a ``ui://`` resource has an interactive view (the
MCP Apps extension, ``io.modelcontextprotocol/ui``). Hosts that render views themselves (the
gateway's clients) get ``_meta`` and the resource passed through; the CLI (``pi-mcp app``) and
the pi binding (``/mcp app``) show it with :class:`AppViews`:

* :meth:`AppViews.open` calls the tool through :meth:`McpAdapter.call` (approval, argument
  checks, stats and trace apply), reads its view and serves a host page on
  ``http://127.0.0.1:<random port>/view/<random token>``.
* The host page loads the view's HTML in a sandboxed ``srcdoc`` iframe (scripts only: an opaque
  origin, so the view cannot read the page, its token or anything else of the host) and speaks
  the MCP Apps host side of the protocol over ``postMessage``: ``ui/initialize``, then
  ``ui/notifications/tool-input`` and ``ui/notifications/tool-result``; requests from the view
  (``tools/call``, ``resources/read``, ``ui/open-link``, ``ui/message``,
  ``ui/update-model-context``, ``ui/request-display-mode``, ``ping``) are answered, the ones
  that need a server through ``POST /view/<token>/rpc`` on the same loopback server.
* A ``tools/call`` from the view is :meth:`McpAdapter.call` with ``server=`` the view's server:
  the same pipeline as a model's call. Tools whose ``_meta.ui.visibility`` leaves out
  ``"app"`` are refused, as the extension asks.

The host side is written here rather than shipped from ``@modelcontextprotocol/ext-apps``:
that package's ``AppBridge`` is an ES module importing the TypeScript SDK, with no browser
bundle to serve, and a Python package should not carry a JavaScript build. Views written with
the official ``App`` class talk to it unchanged (the tests use one).
"""

from __future__ import annotations

import base64
import html
import json
import logging
import secrets
import socket
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata as importlib_metadata
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from pi_mcp_adapter._errors import McpAdapterError, UsageError
from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.engine import McpAdapter, view_resource_uri

__all__ = ["AppView", "AppViews", "view_resource_uri"]

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = "2026-01-26"
"""The MCP Apps protocol version this host speaks (the extension's stable release)."""

LOOPBACK = "127.0.0.1"
MAX_RPC_BODY_BYTES = 4 * 1024 * 1024
"""A view's request is a tool call's arguments: 4 MiB is generous and bounds memory."""

Listener = Callable[[str, str], None]
"""``(view url, message)``: what a view said for the person (``ui/message``) or the model."""


def _visible_to_app(tool: ToolInfo) -> bool:
    """Whether a view may call ``tool``: no ``_meta.ui.visibility``, or one naming ``"app"``.

    A visibility that is not a list of ``"model"``/``"app"`` hides the tool from views, as
    the reference does: a server that got the field wrong is not trusted with a guess."""
    ui = (tool.meta or {}).get("ui")
    if not isinstance(ui, Mapping) or "visibility" not in ui:
        return True
    visibility = ui["visibility"]
    if not isinstance(visibility, list) or not set(visibility) <= {"model", "app"}:
        return False
    return "app" in visibility


@dataclass(slots=True)
class AppView:
    """One opened view: the tool, its arguments and result, and the view's HTML."""

    tool: ToolInfo
    arguments: dict[str, Any]
    html: str
    result: dict[str, Any]
    """The tool's ``CallToolResult`` as JSON (an error result when the call failed)."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    url: str = ""


def _result_json(result: types.CallToolResult) -> dict[str, Any]:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _error_result(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


class AppViews:
    """Serves the views opened in one session from one loopback HTTP server.

    The server starts with the first view, as a task of ``task_group`` (its owner's), and
    stops with it. Each view has its own random token; the URL is the only key to it.
    """

    def __init__(
        self,
        adapter: McpAdapter,
        task_group: anyio.abc.TaskGroup,
        *,
        on_message: Listener | None = None,
    ) -> None:
        self._adapter = adapter
        self._task_group = task_group
        self._on_message = on_message
        self._views: dict[str, AppView] = {}
        self._origin: str | None = None
        self._lock = anyio.Lock()

    @property
    def views(self) -> list[AppView]:
        return list(self._views.values())

    async def open(self, name: str, arguments: Mapping[str, Any] | None = None) -> AppView:
        """Call tool ``name`` and serve its view; returns the view with its ``url``.

        Raises:
            UnknownToolError: no such tool.
            UsageError: the tool has no ``ui://`` view, or the view is not HTML text.
            ServerUnavailableError, ServerReportedError: reading the view failed.
        """
        await self._adapter.ready()
        tool = self._adapter.lookup_explained(name)
        uri = view_resource_uri(tool)
        if uri is None:
            raise UsageError(
                f"tool {tool.name!r} has no MCP Apps view (its _meta.ui.resourceUri names no "
                "ui:// resource); call it as any other tool"
            )
        markup = _view_html(await self._adapter.read_resource(tool.server, uri), tool, uri)
        args = dict(arguments or {})
        outcome = await self._adapter.call(tool.name, args)
        if isinstance(outcome.result, types.CallToolResult):
            result = _result_json(outcome.result)
        else:
            result = _error_result(outcome.message or f"tool {tool.name!r} gave no result")
        view = AppView(tool=tool, arguments=args, html=markup, result=result)
        origin = await self._start()
        view.url = f"{origin}/view/{view.token}"
        self._views[view.token] = view
        return view

    async def _start(self) -> str:
        async with self._lock:
            if self._origin is None:
                self._origin = await self._task_group.start(self._serve)
            return self._origin

    async def _serve(self, *, task_status: anyio.abc.TaskStatus[str]) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((LOOPBACK, 0))
        sock.listen(64)
        origin = f"http://{LOOPBACK}:{sock.getsockname()[1]}"
        config = uvicorn.Config(self._asgi_app(origin), log_level="warning", lifespan="off")
        server = _QuietUvicorn(config)
        # The socket listens already: a browser that connects now waits in the backlog.
        task_status.started(origin)
        try:
            await server.serve(sockets=[sock])
        finally:
            sock.close()

    def _asgi_app(self, origin: str) -> Starlette:
        host = origin.removeprefix("http://")

        def view_of(request: Request) -> AppView | None:
            # A page on another site resolving its name to 127.0.0.1 (DNS rebinding) sends its
            # own Host; only this server's address is served.
            if request.headers.get("host") != host:
                return None
            return self._views.get(request.path_params["token"])

        async def page(request: Request) -> Response:
            view = view_of(request)
            if view is None:
                return Response("not found", status_code=404)
            return HTMLResponse(
                host_page(view),
                headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
            )

        async def rpc(request: Request) -> Response:
            view = view_of(request)
            if view is None:
                return Response("not found", status_code=404)
            if request.headers.get("origin") not in (None, origin):
                return Response("forbidden", status_code=403)
            body = await request.body()
            if len(body) > MAX_RPC_BODY_BYTES:
                return JSONResponse(_rpc_error(-32600, "request too large"))
            try:
                message = json.loads(body)
                method, params = message["method"], message.get("params") or {}
                if not isinstance(method, str) or not isinstance(params, dict):
                    raise TypeError
            except (ValueError, KeyError, TypeError):
                return JSONResponse(_rpc_error(-32700, "expected {method, params}"))
            return JSONResponse(await self._answer(view, method, params))

        return Starlette(
            routes=[
                Route("/view/{token}", page, methods=["GET"]),
                Route("/view/{token}/rpc", rpc, methods=["POST"]),
            ]
        )

    async def _answer(self, view: AppView, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The view's request ``method``, answered as a JSON-RPC ``result`` or ``error``."""
        server = view.tool.server
        try:
            if method == "tools/call":
                return {"result": await self._call_from_view(view, params)}
            if method == "resources/read":
                uri = params.get("uri")
                if not isinstance(uri, str):
                    return _rpc_error(-32602, "resources/read needs a string uri")
                read = await self._adapter.read_resource(server, uri)
                return {"result": read.model_dump(mode="json", by_alias=True, exclude_none=True)}
            if method in ("ui/message", "ui/update-model-context"):
                self._tell(view, method, params)
                return {"result": {}}
        except McpAdapterError as exc:
            return _rpc_error(-32603, redact(str(exc)))
        return _rpc_error(-32601, f"method {method!r} is not supported by this host")

    async def _call_from_view(self, view: AppView, params: dict[str, Any]) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            return _error_result("tools/call needs a string name and an object of arguments")
        server = view.tool.server
        try:
            target = self._adapter.catalog.lookup(name, server=server)
        except McpAdapterError:
            target = None
        if target is not None and not _visible_to_app(target):
            return _error_result(
                f"tool {name!r} of MCP server {server!r} is not callable from its views "
                "(_meta.ui.visibility leaves out 'app')"
            )
        # The same pipeline as a model's call: approval, argument checks, stats, trace.
        outcome = await self._adapter.call(name, arguments, server=server)
        if isinstance(outcome.result, types.CallToolResult):
            return _result_json(outcome.result)
        return _error_result(outcome.message or f"tool {name!r} gave no result")

    def _tell(self, view: AppView, method: str, params: Mapping[str, Any]) -> None:
        texts = [
            str(block.get("text"))
            for block in params.get("content") or []
            if isinstance(block, Mapping) and block.get("type") == "text"
        ]
        what = "says" if method == "ui/message" else "updates the model context"
        message = f"{view.tool.name} view {what}: {' '.join(texts) or json.dumps(params)}"
        if self._on_message is not None:
            self._on_message(view.url, redact(message))
        else:
            logger.info("%s", redact(message))


class _QuietUvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: the owner of the task group handles signals."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def _rpc_error(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


def _view_html(read: types.ReadResourceResult, tool: ToolInfo, uri: str) -> str:
    for content in read.contents:
        if isinstance(content, types.TextResourceContents):
            return content.text
        if isinstance(content, types.BlobResourceContents):
            try:
                return base64.b64decode(content.blob).decode("utf-8")
            except ValueError:
                break
    raise UsageError(f"the view {uri} of tool {tool.name!r} is not HTML text")


def _package_version() -> str:
    try:
        return importlib_metadata.version("pi-mcp-adapter")
    except importlib_metadata.PackageNotFoundError:
        return "0"


def host_page(view: AppView) -> str:
    """The host page of ``view``: the sandboxed iframe and the bridge script."""
    tool = view.tool
    config = {
        "html": view.html,
        "arguments": view.arguments,
        "result": view.result,
        "protocolVersion": PROTOCOL_VERSION,
        "hostInfo": {"name": "pi-mcp-adapter", "version": _package_version()},
        "tool": {
            "name": tool.original_name,
            "description": tool.description or "",
            "inputSchema": dict(tool.input_schema or {"type": "object"}),
        },
    }
    # "<" escaped: the view's HTML cannot close this script element early.
    embedded = json.dumps(config).replace("<", "\\u003c")
    title = html.escape(tool.name)
    return _PAGE.replace("{{title}}", title).replace("{{config}}", embedded)


_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>{{title}} · pi-mcp</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{margin:0;font:14px system-ui,sans-serif;background:Canvas;color:CanvasText}
header{padding:6px 12px;border-bottom:1px solid GrayText;display:flex;gap:12px}
iframe{display:block;width:100%;height:480px;border:0}
details{padding:6px 12px;color:GrayText}
</style></head><body>
<header><strong>{{title}}</strong><span id="state">loading view…</span></header>
<iframe id="view" sandbox="allow-scripts allow-forms" title="{{title}}"></iframe>
<details><summary>bridge log</summary><ol id="log"></ol></details>
<script type="application/json" id="config">{{config}}</script>
<script>
"use strict";
const config = JSON.parse(document.getElementById("config").textContent);
const frame = document.getElementById("view");
const rpcUrl = location.pathname + "/rpc";
function log(text) {
  const item = document.createElement("li");
  item.textContent = text;
  document.getElementById("log").append(item);
}
function state(text) { document.getElementById("state").textContent = text; }
// The view has an opaque origin (no allow-same-origin): "*" is the only target that reaches
// it, and only its own window is listened to.
function send(message) { frame.contentWindow.postMessage(message, "*"); }
async function viaServer(method, params) {
  const response = await fetch(rpcUrl, {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify({method, params}),
  });
  if (!response.ok) throw {code: -32603, message: "host server answered " + response.status};
  const answer = await response.json();
  if (answer.error) throw answer.error;
  return answer.result;
}
function hostContext() {
  const dark = window.matchMedia && matchMedia("(prefers-color-scheme: dark)").matches;
  return {
    toolInfo: {tool: config.tool}, theme: dark ? "dark" : "light",
    displayMode: "inline", availableDisplayModes: ["inline"], platform: "web",
    locale: navigator.language, containerDimensions: {maxHeight: 4000, width: frame.clientWidth},
  };
}
async function answer(method, params) {
  switch (method) {
    case "ui/initialize":
      return {
        protocolVersion: config.protocolVersion, hostInfo: config.hostInfo,
        hostCapabilities: {openLinks: {}, serverTools: {}, serverResources: {}, logging: {}},
        hostContext: hostContext(),
      };
    case "ping": return {};
    case "ui/open-link": {
      const url = String(params.url || "");
      if (!/^https?:/i.test(url)) throw {code: -32602, message: "only http(s) links open"};
      window.open(url, "_blank", "noopener,noreferrer");
      return {};
    }
    case "ui/request-display-mode": return {mode: "inline"};
    case "tools/call": case "resources/read": case "ui/message": case "ui/update-model-context":
      return viaServer(method, params);
    default: throw {code: -32601, message: "method not found: " + method};
  }
}
function notified(method, params) {
  if (method === "ui/notifications/initialized") {
    send({jsonrpc: "2.0", method: "ui/notifications/tool-input",
          params: {arguments: config.arguments}});
    send({jsonrpc: "2.0", method: "ui/notifications/tool-result", params: config.result});
    log("tool-result sent");
    state("view connected");
  } else if (method === "ui/notifications/size-changed" && params.height) {
    frame.style.height = Math.min(Number(params.height), 4000) + "px";
  } else if (method === "notifications/message") {
    console.log("[view]", params.level, params.data);
  }
}
window.addEventListener("message", async (event) => {
  if (event.source !== frame.contentWindow) return;
  const message = event.data;
  if (!message || message.jsonrpc !== "2.0" || typeof message.method !== "string") return;
  const params = message.params || {};
  if (message.id === undefined) { notified(message.method, params); return; }
  try {
    const result = await answer(message.method, params);
    log(message.method + (params.name ? " " + params.name : "") +
        (result && result.isError ? ": error" : ": ok"));
    send({jsonrpc: "2.0", id: message.id, result});
  } catch (error) {
    log(message.method + ": " + (error && error.message));
    send({jsonrpc: "2.0", id: message.id,
          error: {code: (error && error.code) || -32603, message: String(error && error.message)}});
  }
});
frame.srcdoc = config.html;
</script></body></html>
"""
