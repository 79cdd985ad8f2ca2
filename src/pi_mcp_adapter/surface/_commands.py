"""The ``/mcp`` and ``/mcp-auth`` commands: what a user (not the model) types in a host.

``/mcp status | tools [server] | reconnect [server] | trust <server> [tool] | auth <server> |
app <tool> [args]`` and ``/mcp-auth SERVER``.
Hosts without commands call :meth:`McpCommands.run` as a plain Python method.

``app`` shows a tool's MCP Apps view; a host that can serve one sets :attr:`McpCommands.open_view`
(the pi binding does, with :class:`~pi_mcp_adapter.surface._apps.AppViews`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from pi_mcp_adapter._errors import McpAdapterError
from pi_mcp_adapter.engine import McpAdapter

from ._arguments import arguments_for, read_argument_text
from ._proxy import ProxyTool
from ._render import render_status, render_tool_line

COMMAND_USAGE = (
    "status | tools [server] | reconnect [server] | trust <server> [tool] | auth <server> "
    "| app <tool> [json object | key=value ...]"
)

OpenView = Callable[[str, dict[str, Any]], Awaitable[str]]
"""``(tool, arguments)`` to the text that tells the user where the view is."""
MCP_COMMAND = "mcp"
MCP_AUTH_COMMAND = "mcp-auth"


class McpCommands:
    """Runs the ``/mcp`` family of commands against one adapter."""

    def __init__(self, adapter: McpAdapter, proxy: ProxyTool) -> None:
        self._adapter = adapter
        self._proxy = proxy
        self.open_view: OpenView | None = None

    async def run(self, argv: str) -> str:
        """``/mcp`` with its argument string; returns the text to show the user."""
        parts = argv.split()
        verb = parts[0] if parts else "status"
        if verb != "status":
            await self._adapter.ready()  # what a server still being listed offers counts too
        arg = parts[1] if len(parts) > 1 else None
        if verb == "status":
            return render_status(self._adapter.status())
        if verb == "tools":
            if arg:
                return self._proxy.list_result(arg).text_content
            return "\n".join(render_tool_line(t) for t in self._adapter.tools()) or (
                "No tools known."
            )
        if verb == "reconnect":
            results = await self._adapter.reconnect(arg)
            return (
                "\n".join(
                    f"✓ {n} reconnected" if err is None else f"✗ {n}: {err}"
                    for n, err in sorted(results.items())
                )
                or "No servers to reconnect."
            )
        if verb == "trust":
            return trust_result(self._adapter, arg, parts[2] if len(parts) > 2 else None)
        if verb == "auth":
            return await self.auth(arg or "")
        if verb == "app":
            return await self._app(argv.split(None, 2)[1:])
        return f"Unknown command {verb!r}. Use: " + COMMAND_USAGE

    async def _app(self, words: list[str]) -> str:
        if not words:
            return "Usage: /mcp app <tool> [json object | key=value ...]"
        if self.open_view is None:
            return "This host cannot show MCP Apps views; run `pi-mcp app TOOL` in a terminal."
        given = read_argument_text(words[1] if len(words) > 1 else "")
        return await self.open_view(words[0], arguments_for(self._adapter, words[0], given))

    async def auth(self, argv: str) -> str:
        """``/mcp-auth SERVER``: how to authenticate ``SERVER``."""
        server = argv.strip()
        return auth_help(self._adapter, server or None)


def trust_result(adapter: McpAdapter, server: str | None, tool: str | None) -> str:
    """Accept ``server``'s recorded tool-definition changes (or one tool's); say which."""
    if not server:
        return "Usage: trust <server> [tool]"
    try:
        names = adapter.trust(server, tool)
    except McpAdapterError as exc:
        return str(exc)
    return f"Trusted the current definitions of {server}: {', '.join(names)}"


def auth_help(adapter: McpAdapter, server: str | None) -> str:
    """What a user can do today to authenticate ``server``."""
    if not server:
        return "Usage: auth <server>"
    entry = adapter.servers.get(server)
    if entry is None:
        return f"Unknown MCP server {server!r}."
    if entry.url is None:
        return f"{server} is a local (stdio) server; it needs no sign-in."
    if entry.oauth_mode is None:
        return (
            f"{server} authenticates with a bearer token or headers: set `bearerTokenEnv` (or "
            "`bearerToken`, or an `Authorization` header with ${VAR}) in its config entry, then "
            f"`pi-mcp reconnect {server}`."
        )
    return (
        f"{server} signs in with OAuth: run `pi-mcp auth {server}` in a terminal (it opens a "
        "browser, or prints a URL to open elsewhere and reads the redirect URL back), then "
        f"`pi-mcp reconnect {server}`. `pi-mcp logout {server}` forgets the tokens."
    )
