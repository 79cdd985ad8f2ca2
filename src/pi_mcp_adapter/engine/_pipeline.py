"""One call pipeline: lookup (waiting for listings in progress), argument checks, the
definition-change block, approval, the call itself, statistics and the trace.

Every host and surface calls tools through :meth:`CallPipeline.call`, so a call is refused,
approved, recorded and traced by the same rules wherever it came from. The pipeline never
raises for a tool's failure: it returns a :class:`CallOutcome` with an ``error_kind``; the
surfaces render it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import anyio

from pi_mcp_adapter._errors import (
    AmbiguousToolError,
    ServerReportedError,
    ServerUnavailableError,
    ToolNotFoundError,
)
from pi_mcp_adapter._secrets import redact_model
from pi_mcp_adapter.catalog import ToolInfo, observed_result_shape, shape_is_observed
from pi_mcp_adapter.config import ServerEntry, Settings
from pi_mcp_adapter.servers import ServerManager, allow_prompts

from ._approval import ApprovalScope, Ask, ToolApprovals
from ._arguments import argument_problems
from ._caller import current_caller
from ._catalog_state import CatalogState
from ._replays import CallClaim, Replayed, claim_call
from ._telemetry import upstream_call_span
from ._trace import CallTrace
from ._validate import validate_arguments
from ._values import CallOutcome

if TYPE_CHECKING:
    from ._stats import CallStats

_CONNECTED = "connected"


class CallPipeline:
    """Runs tool calls for one adapter (see the module docstring)."""

    def __init__(
        self,
        *,
        state: CatalogState,
        manager: Callable[[], ServerManager],
        entries: Callable[[], Mapping[str, ServerEntry]],
        settings: Callable[[], Settings],
        approvals: ToolApprovals,
        asker: Callable[[], Ask | None],
        stats: Callable[[], CallStats | None],
        trace: CallTrace | None,
        may_prompt: Callable[[], bool],
        listing_timeout_s: Callable[[], float],
        explain_miss: Callable[[str, str | None], str],
        questions_during: Callable[[str], AbstractContextManager[object]],
    ) -> None:
        self._state = state
        self._manager = manager
        self._entries = entries
        self._settings = settings
        self._approvals = approvals
        self._asker = asker
        self._stats = stats
        self._trace = trace
        self._may_prompt = may_prompt
        self._listing_timeout_s = listing_timeout_s
        self._explain_miss = explain_miss
        self._questions_during = questions_during

    async def resolve(self, name: str, *, server: str | None = None) -> ToolInfo:
        """``name`` by the catalog's rules (among ``server``'s tools only, when given); a miss
        while servers are being listed waits for them (bounded), and a final miss says why
        tools may be missing.

        Raises:
            ToolNotFoundError: no such tool (with suggestions and the reason).
            AmbiguousToolError: several tools match (with candidates).
        """
        # Each listing that ends may bring the tool: look again after each one, so a tool of
        # a healthy server is found without waiting for a slow or hanging one.
        with anyio.move_on_after(self._listing_timeout_s()):
            while True:
                try:
                    return self._state.catalog.lookup(name, server=server)
                except ToolNotFoundError:
                    if not await self._state.wait_for_any_listing():
                        break
        return self.lookup_explained(name, server=server)

    def lookup_explained(self, name: str, *, server: str | None = None) -> ToolInfo:
        """``name`` from what is known now; a miss says why the tool may be missing."""
        try:
            return self._state.catalog.lookup(name, server=server)
        except ToolNotFoundError as exc:
            why = self._explain_miss(name, server)
            if not why:
                raise
            raise ToolNotFoundError(
                exc.name, f"{exc.message}\n{why}", suggestions=exc.suggestions
            ) from None

    async def ask_approvals(self, names: Iterable[str], scope: ApprovalScope) -> None:
        """Ask now about each tool in ``names`` that needs approval, the answers kept in
        ``scope`` for the calls made under it (a script's, asked before it runs). A name that
        is no single tool, or a tool its calls would be refused anyway, is left to the call,
        which says why."""
        settings = self._settings()
        for name in dict.fromkeys(names):
            try:
                tool = await self.resolve(name)  # the caller's view: a denied tool is unknown
            except (ToolNotFoundError, AmbiguousToolError):
                continue
            if self.refused_for_change(name, tool) is not None:
                continue
            await self._approvals.check(
                tool,
                {},
                entry=self._entries().get(tool.server),
                settings=settings,
                ask=self._asker(),
                scope=scope,
            )

    async def call(
        self,
        name: str,
        args: Mapping[str, Any] | None = None,
        *,
        server: str | None = None,
        approval_scope: ApprovalScope | None = None,
    ) -> CallOutcome:
        """Call a tool by (any accepted form of) its name, among ``server``'s tools only when
        given. Never raises for tool errors.

        Calls that share an ``approval_scope`` (one script's) ask the person once per tool."""
        arguments = dict(args or {})
        try:
            tool = await self.resolve(name, server=server)
        except ToolNotFoundError as exc:
            self.record_denied(name, server)
            return CallOutcome(
                name, error_kind="unknown_tool", message=str(exc), suggestions=exc.suggestions
            )
        except AmbiguousToolError as exc:
            return CallOutcome(
                name, error_kind="ambiguous_tool", message=str(exc), candidates=exc.candidates
            )
        settings = self._settings()
        # Text JSON cannot carry, or nesting that would exhaust the encoder's stack, is the
        # caller's mistake: it is never sent (a server would get a broken connection).
        problems = argument_problems(arguments)
        if not problems and settings.validate_args and not tool.is_resource:
            problems = validate_arguments(tool.input_schema, arguments)
        if problems:
            return CallOutcome(
                name,
                tool,
                error_kind="invalid_arguments",
                message=f"Invalid arguments for {tool.name}",
                problems=tuple(problems),
            )
        blocked = self.refused_for_change(name, tool)
        if blocked is not None:
            return blocked
        refusal = await self._approvals.check(
            tool,
            arguments,
            entry=self._entries().get(tool.server),
            settings=settings,
            ask=self._asker(),
            scope=approval_scope,
        )
        if refusal is not None:
            return CallOutcome(name, tool, error_kind="approval_denied", message=refusal)
        # Questions the server asks during the call (elicitation, sampling) reach the person.
        caller = current_caller()
        with (
            allow_prompts(self._may_prompt()),
            self._questions_during(tool.server),
            upstream_call_span(
                tool,
                self._entries().get(tool.server),
                arguments,
                client=caller.name if caller is not None else None,
            ) as finish_span,
        ):
            outcome = await self._call_server(name, tool, arguments)
            finish_span(outcome)
        self._record(tool, outcome)
        self._observe_shape(tool, outcome)
        return outcome

    def _observe_shape(self, tool: ToolInfo, outcome: CallOutcome) -> None:
        """A tool without a useful ``outputSchema``: the shape of its result (types and keys)
        goes to its cache entry, so its signature can say what it returns."""
        content = getattr(outcome.result, "content", None)  # a resource read has none
        if not shape_is_observed(tool) or outcome.is_error or not isinstance(content, list):
            return
        shape = observed_result_shape(content, getattr(outcome.result, "structured_content", None))
        if shape is not None:
            self._state.cache.record_observed_shape(tool.server, tool.original_name, shape)

    def record_denied(self, name: str, server: str | None = None) -> None:
        """A caller's miss that names a tool its policy hides: the caller was told "not
        found" (its catalog view has no such tool), the operator's trace says what it was."""
        caller = current_caller()
        if caller is None:
            return
        try:
            tool = self._state.full_catalog.lookup(name, server=server)
        except (ToolNotFoundError, AmbiguousToolError):
            return
        if not caller.permits(tool):
            self._record(tool, CallOutcome(name, tool, error_kind="policy_denied"))

    def _record(self, tool: ToolInfo, outcome: CallOutcome) -> None:
        stats = self._stats()
        if stats is not None and outcome.error_kind not in ("definition_changed", "policy_denied"):
            stats.record(
                tool.server,
                tool.original_name,
                latency_ms=outcome.latency_ms,
                ok=not outcome.is_error,
                bytes_out=result_bytes(outcome),
                connect_ms=outcome.connect_ms,
            )
        trace = self._trace
        if trace is not None and trace.traces(self._entries().get(tool.server)):
            failed = outcome.error_kind is not None
            trace.record(
                server=tool.server,
                tool=tool.original_name,
                duration_ms=outcome.latency_ms + outcome.connect_ms,
                bytes_out=result_bytes(outcome),
                outcome="failed" if failed else ("error" if outcome.is_error else "ok"),
                error=outcome.error_kind,
                client=caller.name if (caller := current_caller()) is not None else None,
            )

    async def _call_server(
        self, requested: str, tool: ToolInfo, arguments: dict[str, Any]
    ) -> CallOutcome:
        manager = self._manager()
        entry = self._entries()[tool.server]
        started = time.perf_counter()
        called = started
        connect_ms = 0.0
        claim = CallClaim()
        try:
            if manager.state(tool.server).status != _CONNECTED:
                # The manager publishes what the server lists before it returns the
                # connection, so the check below sees the live definitions.
                await manager.connect(tool.server)
                connect_ms = (time.perf_counter() - started) * 1000
                blocked = self.refused_for_change(requested, tool)
                if blocked is not None:
                    return blocked
            # A request a load balancer replayed after a replica failed runs again only when
            # the tool is safe to repeat (engine/_replays.py); this records the call first.
            claim = await claim_call(tool, entry, arguments)
            if claim.replayed is not None:
                return _replayed_outcome(requested, tool, claim.replayed)
            called = time.perf_counter()
            result: Any
            if tool.resource_uri is not None:
                result = await manager.read_resource(tool.server, tool.resource_uri)
            else:
                result = await manager.call_tool(
                    tool.server,
                    tool.original_name,
                    arguments,
                    timeout_s=entry.request_timeout_s,
                )
            await claim.finish(result)
        except ServerUnavailableError as exc:
            await claim.finish(error=str(exc))
            return CallOutcome(
                requested,
                tool,
                error_kind="server_unavailable",
                message=str(exc),
                latency_ms=_elapsed_ms(started) - connect_ms,
                connect_ms=connect_ms,
            )
        except ServerReportedError as exc:
            await claim.finish(error=str(exc))
            return CallOutcome(
                requested,
                tool,
                error_kind="server_error",
                message=str(exc),
                error_code=exc.code,
                latency_ms=_elapsed_ms(started) - connect_ms,
                connect_ms=connect_ms,
            )
        return CallOutcome(
            requested,
            tool,
            # A server may quote what the adapter gave it (an injected key, a token).
            redact_model(result),
            latency_ms=_elapsed_ms(called),
            connect_ms=connect_ms,
        )

    def refused_for_change(self, requested: str, tool: ToolInfo) -> CallOutcome | None:
        """Under ``onDefinitionChange: "block"``, the refusal of a tool changed since trusted."""
        if self._settings().on_definition_change != "block" or tool.is_resource:
            return None
        record = self._state.changes(tool.server)
        if not record:
            return None
        changed = {c.name: c.fields for c in record.changed}
        if tool.original_name in changed:
            how = f"its {', '.join(changed[tool.original_name])} changed"
        elif tool.original_name in record.added:
            how = "it is new"
        else:
            return None
        return CallOutcome(
            requested,
            tool,
            error_kind="definition_changed",
            message=(
                f"Tool {tool.name} was not called: {how} since its server {tool.server!r} was "
                f'last trusted, and settings.onDefinitionChange is "block". Ask the user to '
                f"review the change (`pi-mcp status`) and trust it with "
                f"`pi-mcp trust {tool.server} {tool.original_name}` (or `/mcp trust "
                f"{tool.server} {tool.original_name}`)."
            ),
        )


def _replayed_outcome(requested: str, tool: ToolInfo, replayed: Replayed) -> CallOutcome:
    """What a replayed request gets: the first attempt's result, or why it gets none."""
    if replayed.result is not None:
        import mcp_types

        result = mcp_types.CallToolResult.model_validate(replayed.result)
        return CallOutcome(requested, tool, result)
    return CallOutcome(requested, tool, error_kind="outcome_unknown", message=replayed.message)


def _elapsed_ms(since: float) -> float:
    return max(0.0, (time.perf_counter() - since) * 1000)


def result_bytes(outcome: CallOutcome) -> int:
    """UTF-8 size of the text a server answered with (what a model would read)."""
    result = outcome.result
    if result is None:
        return len(outcome.message.encode())
    total = 0
    blocks = getattr(result, "content", None) or getattr(result, "contents", None) or []
    for block in blocks:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            total += len(text.encode())
    return total
