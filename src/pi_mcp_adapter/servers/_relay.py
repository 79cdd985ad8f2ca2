"""Relaying a server's requests and notifications to whoever made the call they belong to.

While a server handles a tool call it may ask its client for things (an LLM completion via
``sampling/createMessage``, user input via ``elicitation/create``) and send log messages. A
gateway serving many clients must send those to the client that made the call, not to every
client and not to none. The caller states where they go by entering :func:`relay_calls` around
the call; the connection notes each relayed call while it is in flight and routes what the
server sends during it.

MCP over stdio does not say which request a server-initiated message belongs to. The rule is
therefore: while every relayed call in flight on a connection comes from the same caller, that
caller gets the message; while calls from several callers are in flight, sampling and
elicitation are refused with an error that says why (sending one client's prompt to another
client would leak it), and log messages go to the gateway's own log.

The relay is carried in a context variable so that the engine and the server manager between
the caller and the connection need no extra parameters: the call runs in the caller's task.

A call's ``requestTimeoutMs`` measures the server, not the person: while a question the board
routed to a caller is being answered (a form, an approval, a model's completion), the
deadlines of that caller's calls in flight on the connection stand still (:meth:`RelayBoard.
asking`). The same rule covers questions sent as requests (2025 era), embedded in a result
(``input_required``) and asked by a task, in every host, because they all pass through here.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from mcp import MCPError
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.message import ServerMessageMetadata

if TYPE_CHECKING:
    from mcp.server.session import ServerSession

SamplingRelay = Callable[
    [types.CreateMessageRequestParams],
    Awaitable[types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData],
]
ElicitationRelay = Callable[
    [types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]
]
LogRelay = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]


@dataclass(frozen=True, slots=True, eq=False)
class CallRelay:
    """Where the server-initiated traffic of the calls made under it goes.

    ``caller`` identifies the downstream peer (one client connection); two relays with the
    same caller may share a connection's messages. ``progress`` is used for calls made without
    their own progress callback. A missing function means the caller cannot take that kind of
    request: the server gets an error saying so. ``sent`` is told each time a request goes to
    a server under this relay: a caller that can only ask its client questions before any
    server is reached (a 2026-07-28 client, asked through ``input_required``) needs to know.
    """

    caller: object
    progress: ProgressFnT | None = None
    sampling: SamplingRelay | None = None
    elicitation: ElicitationRelay | None = None
    log: LogRelay | None = None
    sent: Callable[[], None] | None = None


# What a relay does with a server's question is the same for every downstream client session
# (the gateway's clients, the pool's): one function each, so both send the same request.


def sampling_to_client(session: ServerSession, request_id: types.RequestId | None) -> SamplingRelay:
    """Relay a server's ``sampling/createMessage`` to the client of ``session`` as part of its
    request ``request_id`` (the call the server is working on), and give back its answer.

    A request that offers the model tools (``tools``, ``toolChoice``) expects a result that may
    use them. The client's own refusal (an MCP error) goes back to the server as that error.
    """
    related = ServerMessageMetadata(related_request_id=request_id)

    async def sampling(
        params: types.CreateMessageRequestParams,
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        request = types.CreateMessageRequest(params=params)
        try:
            if params.tools or params.tool_choice:
                return await session.send_request(
                    request, types.CreateMessageResultWithTools, metadata=related
                )
            return await session.send_request(request, types.CreateMessageResult, metadata=related)
        except MCPError as exc:
            return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)

    return sampling


def elicitation_to_client(
    session: ServerSession, request_id: types.RequestId | None
) -> ElicitationRelay:
    """Relay a server's ``elicitation/create`` to the client of ``session`` as part of its
    request ``request_id``, and give back the client's answer as it sent it (or its refusal,
    an MCP error, as that error)."""
    related = ServerMessageMetadata(related_request_id=request_id)

    async def elicitation(
        params: types.ElicitRequestParams,
    ) -> types.ElicitResult | types.ErrorData:
        try:
            return await session.send_request(
                types.ElicitRequest(params=params), types.ElicitResult, metadata=related
            )
        except MCPError as exc:
            return types.ErrorData(code=exc.code, message=exc.message, data=exc.data)

    return elicitation


_current_relay: ContextVar[CallRelay | None] = ContextVar("pi_mcp_call_relay", default=None)


@contextmanager
def relay_calls(relay: CallRelay) -> Iterator[CallRelay]:
    """Route the server-initiated traffic of every call made in this block to ``relay``."""
    token = _current_relay.set(relay)
    try:
        yield relay
    finally:
        _current_relay.reset(token)


def current_relay() -> CallRelay | None:
    """The relay the calling task entered, if any."""
    return _current_relay.get()


class AmbiguousCallerError(Exception):
    """Calls from several callers are in flight: a server request cannot be attributed."""


class _PausableDeadline:
    """A call's deadline (a cancel scope) that stops while its caller answers a question.

    Pauses nest (two questions at once): the clock runs again when the last one is answered,
    with the seconds that were left when the first began.
    """

    __slots__ = ("_pauses", "_remaining_s", "_scope")

    def __init__(self, scope: anyio.CancelScope) -> None:
        self._scope = scope
        self._pauses = 0
        self._remaining_s = math.inf

    def pause(self) -> None:
        if self._pauses == 0:
            self._remaining_s = self._scope.deadline - anyio.current_time()
            self._scope.deadline = math.inf
        self._pauses += 1

    def resume(self) -> None:
        self._pauses -= 1
        if self._pauses == 0:
            self._scope.deadline = anyio.current_time() + self._remaining_s


@dataclass(frozen=True, slots=True, eq=False)
class _InFlight:
    relay: CallRelay
    deadline: _PausableDeadline | None


class RelayBoard:
    """The relayed calls in flight on one connection."""

    def __init__(self) -> None:
        self._entries: list[_InFlight] = []

    @property
    def _in_flight(self) -> list[CallRelay]:
        return [entry.relay for entry in self._entries]

    @contextmanager
    def calling(
        self, relay: CallRelay | None, deadline: anyio.CancelScope | None = None
    ) -> Iterator[None]:
        """Note ``relay`` as in flight for the duration of the block; ``deadline`` (the call's
        timeout scope) stands still while the caller answers a question (:meth:`asking`)."""
        if relay is None:
            yield
            return
        if relay.sent is not None:
            relay.sent()
        entry = _InFlight(relay, _PausableDeadline(deadline) if deadline is not None else None)
        self._entries.append(entry)
        try:
            yield
        finally:
            self._entries.remove(entry)

    @contextmanager
    def asking(self, relay: CallRelay) -> Iterator[None]:
        """While the block runs, ``relay``'s caller is answering a server's question: the
        deadlines of its calls in flight here stop (the person's time is not the server's)."""
        paused = [
            entry.deadline
            for entry in self._entries
            if entry.relay.caller is relay.caller and entry.deadline is not None
        ]
        for deadline in paused:
            deadline.pause()
        try:
            yield
        finally:
            for deadline in paused:
                deadline.resume()

    def route(self) -> CallRelay | None:
        """The relay of the one caller with calls in flight; ``None`` when there is none.

        Raises:
            AmbiguousCallerError: calls from more than one caller are in flight.
        """
        if not self._in_flight:
            return None
        caller = self._in_flight[0].caller
        if any(r.caller is not caller for r in self._in_flight[1:]):
            raise AmbiguousCallerError(
                f"calls from {len({id(r.caller) for r in self._in_flight})} different clients "
                "are in flight on this server, so the request cannot be attributed to one"
            )
        # The newest call's relay: it carries the freshest functions of that caller.
        return self._in_flight[-1]
