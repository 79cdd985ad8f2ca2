"""Who a call is made for, and what that caller may use (a gateway's per-client policy).

A host that serves several parties (the HTTP gateway with ``settings.gatewayClients``) runs
each request inside :func:`acting_for`; the call pipeline refuses a tool the caller's policy
does not allow (every surface: direct tools, the proxy, ToolSearch, scripts), the catalog views
it lists are filtered with :meth:`CallerPolicy.permits`, the upstream routes filter and refuse
prompts and resources by the same globs (:meth:`CallerPolicy.permits_named`), and the trace
records the caller's name. Outside :func:`acting_for` nothing is filtered: the default is one
trusted user.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fnmatch import fnmatchcase

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.catalog import ToolInfo


class PolicyRefusalError(UsageError):
    """The caller's policy does not allow the prompt or resource a request names."""


@dataclass(frozen=True, slots=True)
class CallerPolicy:
    """A caller's name and the globs naming what it may call.

    A glob matches a tool's name as listed (``github_create_issue``) or ``server/tool``
    (``github/create_issue``); ``deny`` wins over ``allow``; no ``allow`` allows every tool.
    Prompts are matched the same way (``github_review``, ``github/review``), resources and
    resource templates by ``server/uri`` (``files/file:///srv/notes.md``) and their listed
    name: ``github/*`` covers a server's tools, prompts and resources alike.
    """

    name: str
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def permits(self, tool: ToolInfo) -> bool:
        return self.permits_named(tool.name, tool.server, tool.original_name)

    def permits_named(self, listed: str, server: str, original: str) -> bool:
        """Whether the caller may use what is listed as ``listed`` and is ``original`` on
        ``server`` (a tool or prompt name, a resource URI or template)."""
        names = (listed, f"{server}/{original}")
        if any(fnmatchcase(n, glob) for glob in self.deny for n in names):
            return False
        return not self.allow or any(fnmatchcase(n, glob) for glob in self.allow for n in names)

    def refusal(self, tool: ToolInfo) -> str:
        return (
            f"Tool {tool.name!r} (server {tool.server!r}) is not allowed for client "
            f"{self.name!r} by this gateway's policy (settings.gatewayClients). The call was "
            "not made."
        )

    def refusal_of(self, what: str, server: str) -> PolicyRefusalError:
        """The error for a prompt or resource (``what``, as the request named it) the policy
        does not allow."""
        return PolicyRefusalError(
            f"{what} (server {server!r}) is not allowed for client {self.name!r} by this "
            "gateway's policy (settings.gatewayClients). Nothing was sent to the server."
        )


_caller: ContextVar[CallerPolicy | None] = ContextVar("pi_mcp_caller", default=None)


def current_caller() -> CallerPolicy | None:
    """The caller the running request acts for; None: the one trusted user."""
    return _caller.get()


@contextmanager
def acting_for(policy: CallerPolicy | None) -> Iterator[None]:
    """Run the block's calls for ``policy``'s caller."""
    token = _caller.set(policy)
    try:
        yield
    finally:
        _caller.reset(token)
