"""What the engine says about each configured server: its state, the status report, and why a
tool may be missing, with what to do about it.

It reads the configuration, the catalog state, the manager and the OAuth providers, and
changes and connects nothing; every host shows these same words (the CLI rewords the proxy
calls in them into ``pi-mcp`` commands).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from pi_mcp_adapter._errors import ConfigError, ServerNotConfiguredError
from pi_mcp_adapter.catalog import (
    ToolDefinitionDiff,
    build_tool_infos,
    carries_prefix_of,
    diff_definitions,
)
from pi_mcp_adapter.config import LoadedConfig, ServerEntry, Settings

from ._caller import current_caller
from ._catalog_state import CatalogState
from ._status_facts import Known, StatusFacts, cached_status_rows
from ._values import ServerStatus, StatusReport

if TYPE_CHECKING:
    from pi_mcp_adapter.servers import FailureMemory, OAuthProviders, ServerManager


class ServerStatuses:
    """Each server's state and the explanations built from it."""

    def __init__(
        self,
        *,
        config: Callable[[], LoadedConfig],
        state: CatalogState,
        manager: Callable[[], ServerManager | None],
        oauth: Callable[[], OAuthProviders],
        failures: FailureMemory,
    ) -> None:
        self._config = config
        self._state = state
        self._manager = manager
        self._oauth = oauth
        self._failures = failures

    @property
    def _servers(self) -> Mapping[str, ServerEntry]:
        return self._config().servers

    @property
    def _settings(self) -> Settings:
        return self._config().settings

    def of(self, name: str) -> ServerStatus:
        """One server's state; connects nothing."""
        config = self._config()
        return self._status_of(
            name, config.servers.get(name), config.invalid_servers.get(name), self._manager()
        )

    def _status_of(
        self,
        name: str,
        entry: ServerEntry | None,
        invalid: ConfigError | None,
        manager: ServerManager | None,
    ) -> ServerStatus:
        # The configuration and the manager are looked up by the caller: a report asks once
        # for all its servers (19,641 of them at 95,000 tools), not once per server.
        if invalid is not None:
            return ServerStatus(name, "invalid", 0, error=invalid.message)
        if entry is None:
            raise ServerNotConfiguredError(name, self.unknown_server_message(name))
        known, tool_count, changed, diffs = self._known_from_catalog(name, entry)
        if not entry.is_enabled:
            untrusted = entry.untrusted
            if untrusted is not None and entry.enabled and not entry.disabled:
                return ServerStatus(
                    name, "untrusted", 0, lifecycle=entry.lifecycle, error=untrusted.message
                )
            return ServerStatus(name, "disabled", 0, lifecycle=entry.lifecycle)
        state = manager.state(name) if manager is not None else None
        if manager is None or state is None or state.status in ("closed", "idle", "new"):
            status = "cached" if known else "not-cached"
            if self._state.is_listing(name):
                status = "connecting"
            elif entry.oauth_mode == "explicit" and self._oauth().needs_auth(name):
                status = "needs-auth"
            return ServerStatus(
                name,
                status,
                tool_count,
                lifecycle=entry.lifecycle,
                changed_tools=changed,
                definition_changes=diffs,
            )
        failed_ago = None
        if state.failed_at is not None:
            failed_ago = max(0.0, manager.now() - state.failed_at)
        return ServerStatus(
            name,
            state.status,
            tool_count,
            transport=state.transport,
            lifecycle=entry.lifecycle,
            error=state.error,
            failed_ago_s=failed_ago,
            changed_tools=changed,
            definition_changes=diffs,
        )

    def _known_from_catalog(self, name: str, entry: ServerEntry) -> Known:
        # Counts and changed tools are the current caller's (see ``_caller``).
        tools = self._state.tools(name) if entry.is_enabled else ()
        record = self._state.changes(name)
        changed = record.names()
        diffs: tuple[ToolDefinitionDiff, ...] = ()
        if record:
            meta = self._state.whole_metadata(name)
            diffs = diff_definitions(record, meta.tools if meta is not None else ())
        if current_caller() is not None:
            visible = {t.original_name for t in tools}
            changed = tuple(n for n in changed if n in visible)
            diffs = tuple(d for d in diffs if d.tool in visible)
        return self._state.is_known(name), len(tools), changed, diffs

    def _known_from_entry(self, name: str) -> Known:
        """What the catalog would say of ``name`` (known, tool count, changes), from its cache
        entry alone: for a status from the cache whose summary cannot tell (``includeTools``,
        ``excludeTools``, ``toolOverrides``, a summary written before it held counts, changes
        awaiting review; see ``_status_facts``)."""
        cache = self._state.cache
        entry = self._servers[name]
        meta = cache.get(name, entry)
        if meta is None:
            return False, 0, (), ()
        tools = build_tool_infos(name, meta, entry=entry, settings=self._settings)
        record = cache.definition_changes(name)
        diffs = diff_definitions(record, meta.tools) if record else ()
        return True, len(tools), record.names(), diffs

    def report(self, *, from_cache: bool = False, facts: StatusFacts | None = None) -> StatusReport:
        """Every configured server's state, invalid ones included, and the config errors.

        ``from_cache``, with no manager started: as the metadata cache tells it, without the
        catalog, and each failed connect as the failures file tells it (a started manager
        would have recalled the same records: a one-shot status shows a server's backoff
        without starting anything). Each server is judged by its cache summary (see
        :mod:`._status_facts`), so no entry is parsed and no catalog is built: a status of
        20,000 servers costs their configuration and summaries only. ``facts``: those of the
        configuration, when the caller worked them out."""
        manager = self._manager()
        config = self._config()
        if from_cache and manager is None:
            cache = self._state.cache
            if facts is None:
                facts = StatusFacts.of(config, environ=cache.environ)
            rows = cached_status_rows(
                facts,
                summaries=cache.summaries_by_hash,
                failures=lambda enabled: self._failures.get_many(
                    {name: config.servers[name] for name in enabled}
                ),
                now=self._failures.now(),
                listing=frozenset(self._state.listing()),
                needs_auth=lambda name: self._oauth().needs_auth(name),
                known_from_entry=self._known_from_entry,
            )
            return StatusReport(servers=rows, config_errors=facts.errors)
        servers, invalid = config.servers, config.invalid_servers
        rows_live = [self._status_of(n, e, invalid.get(n), manager) for n, e in servers.items()]
        rows_live += [
            self._status_of(n, None, error, manager)
            for n, error in invalid.items()
            if n not in servers
        ]
        return StatusReport(
            servers=tuple(rows_live),
            config_errors=tuple(str(e) for e in config.errors),
            running_tasks=manager.running_tasks() if manager is not None else (),
        )

    def explain_miss(self, name: str, server: str | None = None) -> str:
        """Why a tool called ``name`` (of ``server``, when the caller named it) may be
        missing, and what to do: servers that failed or were never listed, or tool lists read
        from the cache that may be stale. Empty when there is nothing to add. Written in the
        proxy tool's syntax, as every engine hint (the CLI rewords it into ``pi-mcp``
        commands)."""
        # Untrusted servers count as disabled, but a person trusting the file wants to know.
        shown = [n for n, e in self._servers.items() if e.is_enabled or e.untrusted is not None]
        statuses = [self.of(n) for n in shown]
        if server is not None:
            wanted = [s for s in statuses if s.name == server]
        else:
            wanted = [s for s in statuses if self._names_tool_of(name, s.name)]
        rows = wanted or statuses
        failed = [s for s in rows if s.status in ("failed", "needs-auth") and s.tool_count == 0]
        never = [s for s in rows if s.status in ("not-cached", "connecting")]
        cached = [s for s in rows if s.status == "cached"]
        untrusted = [s for s in rows if s.status == "untrusted"]
        lines: list[str] = []
        for row in untrusted:
            lines.append(f"MCP server {row.name!r} {row.error}; its tools are unknown until then.")
        for row in failed:
            reason = (row.error or "unknown error").splitlines()[0]
            lines.append(
                f"MCP server {row.name!r} failed ({reason}); its tools are unknown. Retry with "
                f'mcp({{connect: "{row.name}"}}).'
            )
        for row in never:
            lines.append(
                f"MCP server {row.name!r} has not been listed yet; list it with "
                f'mcp({{connect: "{row.name}"}}).'
            )
        if cached and wanted:
            names = ", ".join(repr(s.name) for s in cached)
            first = cached[0].name
            lines.append(
                f"The tools of {names} come from the metadata cache and may be stale: refresh "
                f'with mcp({{connect: "{first}"}}).'
            )
        return "\n".join(lines)

    def _names_tool_of(self, name: str, server: str) -> bool:
        entry = self._servers[server]
        return carries_prefix_of(
            name,
            server,
            mode=entry.tool_prefix or self._settings.tool_prefix,
            separator=self._settings.tool_separator,
        )

    def unknown_server_message(self, server: str) -> str:
        """What an unknown server name gets told: the servers there are."""
        known = ", ".join(sorted(self._servers)) or "none configured"
        return f"Unknown MCP server {server!r}. Configured servers: {known}"
