"""Who a call is made for, and what that caller may use (a gateway's per-client policy).

A host that serves several parties (the HTTP gateway with ``settings.gatewayClients``) runs
each request inside :func:`acting_for`. The rule is "what a caller may not call, it cannot
see", and it is enforced in one place: the engine's catalog state hands every reader the
catalog, prompt catalog and search index *of the current caller*
(:meth:`~pi_mcp_adapter.engine._catalog_state.CatalogState.catalog_for`), built from the
tools, prompts and resources :class:`CallerPolicy` permits. Lists, search, describe,
ToolSearch, suggestions ("did you mean"), error texts, counts, scripts and direct tools all
read those views, so a denied tool is unknown to them: calling it answers exactly as calling
a tool that does not exist. Resources and resource templates follow the same globs, and an
MCP Apps view (a ``ui://`` resource a tool names in ``_meta.ui.resourceUri``) follows the
tools that name it (:meth:`CallerPolicy.permits_resource`). The trace still records a denied
attempt, with the caller's name, for the operator. Outside :func:`acting_for` nothing is
filtered: the default is one trusted user.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from fnmatch import fnmatchcase

from pi_mcp_adapter.catalog import ToolInfo


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

    def permits_resource(
        self, server: str, uri: str, listed: str, viewed_by: Iterable[ToolInfo] = ()
    ) -> bool:
        """Whether the caller may see and read resource (or template) ``uri`` of ``server``,
        listed as ``listed``. ``viewed_by`` are the tools naming ``uri`` as their MCP Apps
        view: a view is the face of its tools, so unless a ``deny`` glob names the view
        itself, it is visible exactly when one of them is callable (a denied tool's view
        would show what the tool does; an allowed tool's view is needed to show its result).
        """
        viewers = list(viewed_by)
        if not viewers:
            return self.permits_named(listed, server, uri)
        names = (listed, f"{server}/{uri}")
        if any(fnmatchcase(n, glob) for glob in self.deny for n in names):
            return False
        return any(self.permits(tool) for tool in viewers)


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


def view_resource_uri(tool: ToolInfo) -> str | None:
    """The ``ui://`` resource a tool names as its MCP Apps view, or None.

    ``_meta.ui.resourceUri`` is the extension's field; ``_meta["ui/resourceUri"]`` the
    deprecated flat spelling that early servers still send.
    """
    meta = tool.meta or {}
    ui = meta.get("ui")
    uri = ui.get("resourceUri") if isinstance(ui, Mapping) else None
    if uri is None:
        uri = meta.get("ui/resourceUri")
    if isinstance(uri, str) and uri.startswith("ui://"):
        return uri
    return None
