"""Notices and the status line: what the engine tells the person, through the host.

Every host gets the same notices, worded once here: a server that fails to start or is lost,
one that needs authentication, one that comes back, a tool renamed because another server's
tool has its name, a server whose tool definitions changed, a reload. The status line
(``MCP: 4/6 servers, 132 tools``) is updated at most once per debounce interval, so servers
connecting together update it once, and is made from counts kept as they change (the servers
connected now, the enabled servers, the catalog's size), never from a status report of every
configured server: a catalog of tens of thousands of servers changes it at the same cost.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.catalog import Catalog, DefinitionChanges
from pi_mcp_adapter.servers import ServerState

from ._host import Host, NotifyLevel

DEFAULT_STATUS_DEBOUNCE_S = 0.2
"""Servers connecting together at start update the status line once, not once each."""
_MAX_PENDING_NOTICES = 100
"""Notices kept for a host that is not bound yet; a flood beyond this is dropped."""


class Notices:
    """Tells ``host`` (when there is one) about events; keeps its status line current."""

    def __init__(
        self,
        host: Host | None,
        *,
        status_line: Callable[[], str],
        debounce_s: float = DEFAULT_STATUS_DEBOUNCE_S,
    ) -> None:
        self.host = host
        self._status_text = status_line
        self._debounce_s = debounce_s
        self._status_wanted: anyio.Event | None = None
        self._shown: str | None = None
        self._unavailable: dict[str, str] = {}
        """Servers the host was told are failing or need auth, with that status."""
        self.connected: set[str] = set()
        """Servers connected now, as state changes report them: the status line counts them
        without asking every configured server for its state."""
        self._announced_collisions: set[tuple[str, str, str]] = set()
        self._pending: list[tuple[str, NotifyLevel]] = []
        """Notices from before a host was bound, delivered by :meth:`bind`."""

    def bind(self, host: Host) -> None:
        """Send notices to ``host`` from now on, starting with those nobody has seen yet
        (a server that failed while the adapter started, before a binding attached)."""
        self.host = host
        pending, self._pending = self._pending, []
        for message, level in pending:
            host.notify(message, level)
        self.want_status_line()

    def notify(self, message: str, level: NotifyLevel) -> None:
        # Notices quote server errors and stderr; the person may be sharing their screen.
        message = redact(message)
        if self.host is not None:
            self.host.notify(message, level)
        elif len(self._pending) < _MAX_PENDING_NOTICES:
            self._pending.append((message, level))

    def server_state_changed(self, state: ServerState) -> None:
        """Tell the user when a server becomes unusable, and when it is usable again."""
        server, status = state.server, state.status
        if status == "connected":
            self.connected.add(server)
        else:
            self.connected.discard(server)
        if status in ("failed", "needs-auth"):
            if self._unavailable.get(server) != status:
                self._unavailable[server] = status
                if status == "needs-auth":
                    self.notify(
                        f"MCP server {server!r} needs authentication: run `/mcp-auth {server}` "
                        f"(or `pi-mcp auth {server}`)",
                        "warning",
                    )
                else:
                    reason = (state.error or "unknown error").splitlines()[0]
                    self.notify(f"MCP server {server!r} is unavailable: {reason}", "error")
        elif status == "connected" and self._unavailable.pop(server, None) is not None:
            self.notify(f"MCP server {server!r} is back: connected", "info")
        self.want_status_line()

    def forget(self, server: str) -> None:
        self._unavailable.pop(server, None)
        self.connected.discard(server)

    def definitions_changed(self, server: str, changes: DefinitionChanges) -> None:
        if changes:
            names = ", ".join(changes.names()[:10])
            self.notify(f"MCP server {server!r} changed its tool definitions: {names}", "warning")

    def catalog_rebuilt(self, catalog: Catalog) -> None:
        for collision in catalog.collisions:
            key = (collision.server, collision.original_name, collision.assigned_name)
            if key in self._announced_collisions:
                continue
            self._announced_collisions.add(key)
            self.notify(
                f"MCP tool {collision.original_name!r} of server {collision.server!r} is "
                f"called {collision.assigned_name!r}: {collision.name!r} is taken by server "
                f"{collision.kept_by!r} (a toolPrefix avoids the clash)",
                "warning",
            )
        self.want_status_line()

    # ------------------------------------------------------------------ status line

    def want_status_line(self) -> None:
        if self._status_wanted is not None:
            self._status_wanted.set()

    async def run_status_line(self) -> None:
        """Keep the host's status line current, at most once per debounce interval; runs
        until cancelled (the adapter's task group owns it)."""
        self._status_wanted = anyio.Event()
        self._status_wanted.set()
        while True:
            await self._status_wanted.wait()
            if self.host is None:
                self._status_wanted = anyio.Event()
                continue
            await anyio.sleep(self._debounce_s)
            self._status_wanted = anyio.Event()
            text = self._status_text()
            if text != self._shown and self.host is not None:
                self._shown = text
                self.host.set_status(text)

    def clear_status_line(self) -> None:
        if self.host is not None and self._shown is not None:
            self._shown = None
            self.host.set_status(None)
