"""Which upstream server answers a prompt, a resource, a completion or a subscription.

Tools are resolved by the catalog; everything else an MCP client can ask of a gateway (or a
host can ask of the adapter) is routed here, once, under the same rules for every host:

- Prompts are listed and resolved under the catalog's names (:class:`PromptCatalog`), so a
  prompt ``review`` on ``github`` is ``github_review`` wherever it is shown.
- A resource URI belongs to the first configured server that lists it; a URI no listing names
  belongs to the server whose resource template matches it, and when nothing matches, to the
  only server offering resources (a server may serve more than it lists).
- A completion reference is routed to the server of the prompt or template it names.
- Upstream subscriptions are counted per subscriber: the server is asked once however many
  subscribers want a URI, and released when the last lets go.
- A caller with a policy (a gateway client, see ``_caller``) lists only the prompts, resources
  and templates it may use (the engine's caller views and :meth:`McpAdapter.may_see_resource`),
  and asking for another is answered as for one that does not exist, before any server is.

Resource handling: none; the adapter's manager owns the connections. :meth:`resubscribe`
is for the caller to run after a reconnect (a reconnected server has forgotten its
subscriptions).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types

from pi_mcp_adapter._errors import McpAdapterError, ServerReportedError, ToolLookupError, UsageError

if TYPE_CHECKING:
    from ._adapter import McpAdapter

__all__ = ["UnknownPromptError", "UnknownResourceError", "UpstreamRoutes"]

logger = logging.getLogger("pi_mcp_adapter.routes")


class UnknownResourceError(UsageError):
    """No configured server lists, templates or can own a resource URI."""


class UnknownPromptError(UsageError):
    """No enabled server offers a prompt of that name."""


class UpstreamRoutes:
    """Routing of prompts, resources, completions and subscriptions to upstream servers."""

    def __init__(self, adapter: McpAdapter) -> None:
        self._adapter = adapter
        self._owners: dict[str, str] = {}
        self._templates: dict[str, list[types.ResourceTemplate]] = {}
        self._upstream: dict[tuple[str, str], set[Hashable]] = {}
        """(server, uri): who is subscribed; the upstream subscription is held while any is."""
        self._listed: dict[str, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        """Per server, what it lists (resources, prompts) as :meth:`listing_signature` last
        saw it."""
        self._listed_revision = -1
        self._listed_versions = (0, 0)

    # ------------------------------------------------------------------ prompts

    async def list_prompts(self) -> list[types.Prompt]:
        """Every enabled server's prompts under their catalog names (after pending listings)."""
        await self._adapter.ready()
        prompts: list[types.Prompt] = []
        for info in self._adapter.prompts():
            meta = self._adapter.state.metadata(info.server)
            listed = meta.prompts if meta is not None else ()
            raw = next((p for p in listed if p.get("name") == info.original_name), {})
            try:
                prompts.append(types.Prompt.model_validate({**raw, "name": info.name}))
            except ValueError:
                logger.warning("server %r: skipping malformed prompt %r", info.server, info.name)
        return prompts

    async def get_prompt(
        self, name: str, arguments: Mapping[str, str] | None = None
    ) -> types.GetPromptResult:
        """Render the prompt the catalog calls ``name``.

        Raises:
            UnknownPromptError: no such prompt.
            ServerUnavailableError, ServerReportedError: as :meth:`McpAdapter.get_prompt`.
        """
        await self._adapter.ready()
        try:
            info = self._adapter.lookup_prompt(name)
        except ToolLookupError as exc:
            raise UnknownPromptError(f"Unknown prompt {name!r}: {exc}") from None
        rendered = await self._adapter.get_prompt(info.server, info.original_name, arguments)
        return types.GetPromptResult(
            description=rendered.description, messages=list(rendered.messages)
        )

    # ------------------------------------------------------------------ resources

    async def list_resources(self) -> list[types.Resource]:
        """Every enabled server's listed resources, names as the catalog names tools."""
        await self._adapter.ready()
        resources: list[types.Resource] = []
        for uri, server, raw in self._listed_resources():
            name = self._adapter.public_name(server, str(raw.get("name") or uri))
            if not self._adapter.may_see_resource(server, uri, name):
                continue
            try:
                resources.append(types.Resource.model_validate({**raw, "name": name}))
            except ValueError:
                logger.warning("server %r: skipping malformed resource %r", server, uri)
        return resources

    def _listed_resources(self) -> list[tuple[str, str, Mapping[str, Any]]]:
        """``(uri, owner, raw)`` for every listed resource, remembering each URI's owner: the
        first configured server owns a URI two servers share."""
        listed: list[tuple[str, str, Mapping[str, Any]]] = []
        owners: dict[str, str] = {}
        for server in self._adapter.enabled_servers():
            meta = self._adapter.state.metadata(server)
            for raw in meta.resources if meta is not None else ():
                uri = raw.get("uri")
                if isinstance(uri, str) and uri not in owners:
                    owners[uri] = server
                    listed.append((uri, server, raw))
        self._owners = owners
        return listed

    async def list_resource_templates(self) -> list[types.ResourceTemplate]:
        """Every server's resource templates (servers that fail to answer are left out)."""
        await self._adapter.ready()
        templates: list[types.ResourceTemplate] = []
        for server in self._resource_servers():
            try:
                found = await self._adapter.list_resource_templates(server)
            except McpAdapterError as exc:
                logger.warning("server %r: listing resource templates failed: %s", server, exc)
                continue
            self._templates[server] = found
            for template in found:
                name = self._adapter.public_name(server, template.name)
                if not self._adapter.may_see_resource(server, template.uri_template, name):
                    continue
                templates.append(template.model_copy(update={"name": name}))
        return templates

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read ``uri`` from the server that owns it.

        Raises:
            UnknownResourceError: no server can own it.
            ServerUnavailableError, ServerReportedError: as :meth:`McpAdapter.read_resource`.
        """
        # The adapter answers a URI the caller may not see as an unknown one.
        return await self._adapter.read_resource(await self.owner(uri), uri)

    async def owner(self, uri: str) -> str:
        """The server that answers for ``uri`` (templates are listed when needed).

        Raises:
            UnknownResourceError: no listing or template names it and several servers
                offer resources.
        """
        server = self._known_owner(uri)
        if server is None:
            # A client may read a template's URI without listing templates first.
            await self.list_resource_templates()
            server = self._known_owner(uri)
        if server is not None:
            return server
        candidates = self._resource_servers()
        if len(candidates) == 1:
            return candidates[0]
        raise UnknownResourceError(f"Unknown resource {uri!r}: no configured server lists it")

    def _known_owner(self, uri: str) -> str | None:
        if not self._owners:
            self._listed_resources()
        owner = self._owners.get(uri)
        if owner is not None:
            return owner
        for server, templates in self._templates.items():
            if any(template_matches(t.uri_template, uri) for t in templates):
                return server
        return None

    def _resource_servers(self) -> list[str]:
        """Servers that may offer resources: those that list some or have templates, and
        every connected one (templates are only known by asking)."""
        servers = []
        for server in self._adapter.enabled_servers():
            meta = self._adapter.state.metadata(server)
            connected = self._adapter.server_status(server).status == "connected"
            if (meta is not None and meta.resources) or server in self._templates or connected:
                servers.append(server)
        return servers

    # ------------------------------------------------------------------ completions

    async def complete(self, params: types.CompleteRequestParams) -> types.CompleteResult:
        """Completions for an argument of a prompt or resource template, as the client names
        it; no values when nothing offers them (the server or the reference is unknown)."""
        target = self._completion_target(params.ref)
        if target is None:
            # The reference may name something not listed yet.
            await self.list_resource_templates()
            target = self._completion_target(params.ref)
        if target is None:
            return types.CompleteResult(completion=types.Completion(values=[]))
        server, ref = target
        if isinstance(ref, types.ResourceTemplateReference) and not (
            self._adapter.may_see_resource(server, ref.uri)
        ):
            # Answered as for a template no server offers (a prompt the caller may not use is
            # not found by its catalog view already).
            return types.CompleteResult(completion=types.Completion(values=[]))
        try:
            return await self._adapter.complete(server, params.model_copy(update={"ref": ref}))
        except ServerReportedError as exc:
            if exc.code == types.METHOD_NOT_FOUND:  # the server offers no completions
                return types.CompleteResult(completion=types.Completion(values=[]))
            raise

    def _completion_target(
        self, ref: types.PromptReference | types.ResourceTemplateReference
    ) -> tuple[str, types.PromptReference | types.ResourceTemplateReference] | None:
        if isinstance(ref, types.PromptReference):
            try:
                info = self._adapter.lookup_prompt(ref.name)
            except ToolLookupError:
                return None
            return info.server, ref.model_copy(update={"name": info.original_name})
        for server, templates in self._templates.items():
            if any(t.uri_template == ref.uri for t in templates):
                return server, ref
        return None

    # ------------------------------------------------------------------ subscriptions

    async def subscribe(self, subscriber: Hashable, uri: str) -> None:
        """``subscriber`` wants updates of ``uri``; the owning server is asked once.

        Raises:
            UnknownResourceError: no server can own ``uri``.
            ServerUnavailableError, ServerReportedError: the server could not subscribe.
        """
        server = await self.owner(uri)
        key = (server, uri)
        if not self._adapter.may_see_resource(server, uri):
            raise UnknownResourceError(f"Unknown resource {uri!r}: no configured server lists it")
        if not self._upstream.get(key):
            await self._adapter.subscribe_resource(server, uri)
        self._upstream.setdefault(key, set()).add(subscriber)

    async def unsubscribe(self, subscriber: Hashable, uri: str) -> None:
        """``subscriber`` lets go of ``uri``; the last one to do so releases the upstream."""
        for key, subscribers in list(self._upstream.items()):
            if key[1] != uri or subscriber not in subscribers:
                continue
            subscribers.discard(subscriber)
            if subscribers:
                continue
            del self._upstream[key]
            try:
                await self._adapter.subscribe_resource(key[0], uri, subscribe=False)
            except McpAdapterError as exc:
                logger.info("server %r: unsubscribing from %s failed: %s", key[0], uri, exc)

    async def forget(self, subscriber: Hashable) -> None:
        """Release everything ``subscriber`` held (its connection closed)."""
        for uri in self.subscriptions_of(subscriber):
            await self.unsubscribe(subscriber, uri)

    def subscriptions_of(self, subscriber: Hashable) -> list[str]:
        return sorted({uri for (_, uri), who in self._upstream.items() if subscriber in who})

    def subscribers(self, uri: str) -> set[Hashable]:
        """Who wants updates of ``uri``."""
        found: set[Hashable] = set()
        for (_, subscribed), who in self._upstream.items():
            if subscribed == uri:
                found |= who
        return found

    @property
    def has_subscriptions(self) -> bool:
        return bool(self._upstream)

    async def resubscribe(self) -> None:
        """Ask every server again for what is subscribed (harmless where it remembered)."""
        for server, uri in list(self._upstream):
            try:
                await self._adapter.subscribe_resource(server, uri)
            except McpAdapterError as exc:
                logger.info("server %r: subscribing again to %s failed: %s", server, uri, exc)

    def listing_signature(self) -> tuple[int, int]:
        """What clients have listed, as (resources, prompts) versions: compare to announce
        list changes. Each call looks again only at the servers whose listing changed since
        the last (the gateway asks after every change, and a catalog has tens of thousands
        of servers); a reload or a full rebuild looks at every server once."""
        state = self._adapter.state
        changed = state.changed_since(self._listed_revision)
        self._listed_revision = state.revision
        if changed is None:
            enabled = state.enabled()
            changed = [*enabled, *(s for s in self._listed if s not in enabled)]
        resources_version, prompts_version = self._listed_versions
        enabled = state.enabled()
        for server in changed:
            meta = state.metadata(server) if server in enabled else None
            if meta is None:
                listed: tuple[tuple[Any, ...], tuple[Any, ...]] = ((), ())
            else:
                listed = (
                    tuple((r.get("uri"), r.get("name")) for r in meta.resources),
                    tuple(p.get("name") for p in meta.prompts),
                )
            before = self._listed.pop(server, ((), ()))
            if listed != ((), ()):
                self._listed[server] = listed
            resources_version += before[0] != listed[0]
            prompts_version += before[1] != listed[1]
        self._listed_versions = (resources_version, prompts_version)
        return self._listed_versions


def template_matches(template: str, uri: str) -> bool:
    """Whether ``uri`` is an instance of the RFC 6570 level-1 ``template``."""
    pattern = "".join(
        "[^/]+" if part.startswith("{") else re.escape(part)
        for part in re.split(r"(\{[^}]*\})", template)
        if part
    )
    return re.fullmatch(pattern, uri) is not None
