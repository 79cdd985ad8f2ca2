"""One execution per call across gateway replicas: what a replayed request is, and what it gets.

A load balancer in front of several replicas sends a request again to another replica when the
one it chose fails before answering (nginx ``proxy_next_upstream error ... non_idempotent``,
haproxy ``retry-on conn-failure empty-response``). The first replica may already have sent the
call upstream, or finished it: running the replay would run a ``delete_repo`` or a payment
twice. The rule, applied by the call pipeline to every upstream call (a direct tool, the
``mcp`` proxy, a script's calls):

- A request is *the same request* when it carries the same client credentials (their SHA-256,
  never the token), the same MCP session id (if any), the same proxy request id (the
  ``X-Request-Id`` header the shipped nginx and haproxy configurations set, unique per client
  request and kept on every retry) and the same body (JSON-RPC id and arguments included).
  The n-th upstream call made while answering it is the same call as the n-th call of a replay.
- Before a call that is not safe to repeat is sent upstream, its key is recorded in Redis
  (``SET NX`` with an expiry, state ``started``); when the call ends the record becomes
  ``finished`` with the result (up to :data:`KEPT_RESULT_BYTES`).
- A replay that finds ``started`` is not run: it answers at once with an ``outcome_unknown``
  error saying the first attempt may have taken effect. One that finds ``finished`` gets the
  recorded result (or, when the result was too large to keep, an ``outcome_unknown`` error
  saying that the call ran) -- when its identity is exact (a proxy request id or a session id).
  Without either, the same client may legitimately send the same body twice (a new stateless
  session starts its ids again), so only the ``started`` state counts there.
- Safe to repeat, recorded nothing and run again on a replay: resources read as tools, tools
  the server annotates ``readOnlyHint`` or ``idempotentHint``, and tools the server's
  ``idempotentTools`` setting names.

Outside a gateway request, or without ``settings.sharedState``, nothing is recorded: one
process sees no replays. While Redis does not answer, calls run unrecorded (a replica keeps
serving); a replay then cannot be recognised.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any, Final

import anyio

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.config import ServerEntry

if TYPE_CHECKING:
    import mcp_types as types

logger = logging.getLogger("pi_mcp_adapter.replays")

KEPT_RESULT_BYTES: Final = 256 * 1024
"""A finished call's result is kept for a replay up to this size (as JSON); a larger one is
not copied to Redis, and a replay is told the call ran."""
FINISHED_TTL_S: Final = 300.0
"""How long a finished call is remembered. A balancer replays at once when a replica fails,
so minutes are ample; the record holds a tool's result, so it is not kept longer."""
STARTED_MARGIN_S: Final = 60.0
"""A started record lives the call's request timeout plus this, so a replay that arrives
while the first attempt may still be running upstream is recognised."""
_REPLICA: Final = f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class ServedRequest:
    """The HTTP request a gateway replica is answering, as every replica it reaches sees it."""

    client: str
    """SHA-256 of the ``Authorization`` header (empty string without one)."""
    session: str | None = None
    proxy_request_id: str | None = None
    body: bytearray = field(default_factory=bytearray)
    """Filled while the request is read; complete before any handler runs."""
    upstream_calls: int = 0

    @property
    def exact(self) -> bool:
        """Whether no other request can share this one's identity (a proxy request id, or a
        session, within which JSON-RPC ids are unique)."""
        return bool(self.proxy_request_id) or bool(self.session)

    def next_call_key(self, tool: ToolInfo, arguments: Mapping[str, Any]) -> str:
        """The key of the next upstream call made while answering this request."""
        self.upstream_calls += 1
        digest = hashlib.sha256()
        arguments_json = json.dumps(arguments, sort_keys=True, default=str)
        for part in (
            self.client,
            self.session or "",
            self.proxy_request_id or "",
            hashlib.sha256(self.body).hexdigest(),
            str(self.upstream_calls),
            tool.server,
            tool.original_name,
            arguments_json,
        ):
            digest.update(part.encode("utf-8", errors="surrogatepass") + b"\0")
        return digest.hexdigest()


_served: ContextVar[ServedRequest | None] = ContextVar("pi_mcp_served_request", default=None)


def served_request() -> ServedRequest | None:
    """The gateway request being answered; None outside one (a CLI call, a Python host)."""
    return _served.get()


@contextmanager
def serving(request: ServedRequest) -> Iterator[None]:
    """Make the block's calls part of ``request`` (the gateway's HTTP layer enters this)."""
    token = _served.set(request)
    try:
        yield
    finally:
        _served.reset(token)


def is_safe_to_repeat(tool: ToolInfo, entry: ServerEntry | None) -> bool:
    """Whether a replay of a call to ``tool`` may run it again: a resource read, a tool its
    server annotates read-only or idempotent, or one its ``idempotentTools`` names."""
    if tool.is_resource:
        return True
    annotations = tool.annotations or {}
    if annotations.get("readOnlyHint") is True or annotations.get("idempotentHint") is True:
        return True
    globs = entry.idempotent_tools if entry is not None else None
    names = (tool.original_name, tool.name)
    return bool(globs) and any(fnmatchcase(n, g) for g in globs or () for n in names)


@dataclass(slots=True)
class Replayed:
    """What a replay gets instead of running the call again."""

    result: Mapping[str, Any] | None
    """The first attempt's result (the wire shape of a ``CallToolResult``); None: unknown."""
    message: str


@dataclass(slots=True)
class CallClaim:
    """The record of one upstream call; :meth:`finish` it with the call's outcome."""

    key: str | None = None
    ttl_s: float = FINISHED_TTL_S
    replayed: Replayed | None = None

    async def finish(
        self, result: types.CallToolResult | None = None, *, error: str | None = None
    ) -> None:
        if self.key is None:
            return
        shared = shared_state.active()
        if shared is None:
            return
        record: dict[str, Any] = {"state": "finished", "replica": _REPLICA}
        if result is not None:
            wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            if len(json.dumps(wire)) <= KEPT_RESULT_BYTES:
                record["result"] = wire
        if error is not None:
            record["error"] = error
        key = self.key
        await anyio.to_thread.run_sync(lambda: shared.settle(_CALLS, key, record, ttl_s=self.ttl_s))


_CALLS: Final = "call"


async def claim_call(
    tool: ToolInfo, entry: ServerEntry | None, arguments: Mapping[str, Any]
) -> CallClaim:
    """Record that the call is about to be sent upstream, or find that this request is a
    replay (see the module docstring). Never raises: when nothing can be recorded the call
    runs as it always did."""
    request = served_request()
    if request is None or is_safe_to_repeat(tool, entry):
        return CallClaim()
    shared = shared_state.active()
    if shared is None:
        return CallClaim()
    key = request.next_call_key(tool, arguments)
    timeout_s = entry.request_timeout_s if entry is not None else 60.0
    started = {"state": "started", "replica": _REPLICA}
    claimed, existing = await anyio.to_thread.run_sync(
        lambda: shared.claim(_CALLS, key, started, ttl_s=timeout_s + STARTED_MARGIN_S)
    )
    if claimed or not isinstance(existing, dict):
        # Claimed, or Redis did not answer (served unrecorded), or a record another version
        # wrote: run the call.
        return CallClaim(key if claimed else None)
    state = existing.get("state")
    if state == "finished" and not request.exact:
        # The same client sent the same body again; without a request id nothing tells a
        # replay from a new request, and a finished call is no replay in flight: this is a
        # new call, recorded as the first was.
        await anyio.to_thread.run_sync(
            lambda: shared.settle(_CALLS, key, started, ttl_s=timeout_s + STARTED_MARGIN_S)
        )
        return CallClaim(key)
    logger.warning(
        "replayed request for %s/%s (%s by %s): not run again",
        tool.server,
        tool.original_name,
        state,
        existing.get("replica"),
    )
    return CallClaim(replayed=_replayed(tool, existing))


def _replayed(tool: ToolInfo, record: Mapping[str, Any]) -> Replayed:
    never_again = (
        "Do not repeat the call blindly: check whether it took effect first. (Tools their "
        "server marks read-only or idempotent, or that the server's idempotentTools setting "
        "names, are run again instead.)"
    )
    what = f"Tool {tool.name} (server {tool.server!r})"
    if record.get("state") == "finished":
        result = record.get("result")
        if isinstance(result, dict):
            return Replayed(result, "")
        error = record.get("error")
        ended = f" and ended with an error: {error}" if isinstance(error, str) else ""
        return Replayed(
            None,
            f"{what} was not run again: this request is a replay of one a gateway replica "
            f"already ran{ended}, and its answer was lost before it reached you. " + never_again,
        )
    return Replayed(
        None,
        f"{what} was not run: this request is a replay of one a gateway replica had already "
        "sent to the server when it stopped answering, so the call may or may not have taken "
        "effect. Its outcome is unknown. " + never_again,
    )
