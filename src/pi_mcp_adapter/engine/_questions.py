"""Questions servers ask a person: ``elicitation/create`` and ``sampling/createMessage``.

While a server runs a tool call it may ask its client for input (elicitation: a form, or a
URL the person should open) or for an LLM completion (sampling). The engine routes these to
whoever the host named when it created :class:`~pi_mcp_adapter.engine.McpAdapter`:

- ``elicit(server, params) -> ElicitResult``: a person answers (the CLI's terminal form, a
  Python binding's callback, pi's UI);
- ``sample(server, params) -> CreateMessageResult``: a model answers.

Giving either tells servers this client can elicit (form and URL modes: without ``elicit``
every elicitation is declined, and the person told); only ``sample`` tells them it can sample,
so servers that check take their other path when no model is there. Without either, the
client advertises neither. The MCP gateway relays both
to its own client instead (``relay_server_requests``); an engine-level answerer never takes a
question that a relay has claimed.

Form defaults (SEP-1034): a form's schema may give each property a ``default``. An accepted
answer is completed with the defaults of the fields it leaves out, so "accept" with an empty
form means "accept the defaults", whoever rendered it.

Who cannot answer raises :class:`NoOneToAsk` with the reason: the engine then declines the
elicitation (refuses the sampling request with an error the server sees) and tells the person
why through ``tell``. An answerer that fails otherwise gets the server an error, never a hang.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import mcp_types as types

__all__ = [
    "Elicit",
    "FormValue",
    "NoOneToAsk",
    "Sample",
    "ServerQuestions",
    "decline_elicitation",
    "describe_question",
    "form_defaults",
    "form_fields",
    "with_form_defaults",
]

logger = logging.getLogger("pi_mcp_adapter.questions")

FormValue = str | int | float | bool | list[str] | None
"""A value an elicitation form may carry back (the schema allows flat primitives only)."""

Elicit = Callable[[str, "types.ElicitRequestParams"], Awaitable["types.ElicitResult"]]
"""``(server, params) -> ElicitResult``: ask the person; ``params`` is form or URL mode."""

Sample = Callable[
    [str, "types.CreateMessageRequestParams"],
    Awaitable["types.CreateMessageResult | types.CreateMessageResultWithTools"],
]
"""``(server, params) -> CreateMessageResult``: have a model answer the server's messages."""

SAMPLING_REJECTED = -1
"""The error code the spec's examples use when a client rejects a sampling request."""


class NoOneToAsk(Exception):
    """Raised by an answerer that has nobody to ask (no terminal, no UI): the engine declines.

    ``reason`` says how to make the question answerable ("run at a terminal to answer").
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


async def decline_elicitation(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """An :data:`Elicit` for hosts without a way to ask: every question is declined, and the
    engine tells the person which server asked what."""
    raise NoOneToAsk("this host has no way to ask; pass an elicit= callback to answer")


def form_fields(params: types.ElicitRequestFormParams) -> dict[str, dict[str, Any]]:
    """The form's fields (property name -> its JSON schema), in the server's order."""
    properties = params.requested_schema.get("properties")
    if not isinstance(properties, Mapping):
        return {}
    return {str(k): dict(v) for k, v in properties.items() if isinstance(v, Mapping)}


def form_defaults(params: types.ElicitRequestFormParams) -> dict[str, FormValue]:
    """The ``default`` of every field that has one (SEP-1034)."""
    return {
        name: field["default"] for name, field in form_fields(params).items() if "default" in field
    }


def with_form_defaults(
    params: types.ElicitRequestParams, result: types.ElicitResult
) -> types.ElicitResult:
    """``result`` with the defaults of the form fields an accepted answer left out."""
    if params.mode != "form" or result.action != "accept":
        return result
    defaults = form_defaults(params)
    content = {**defaults, **(result.content or {})}
    if content == (result.content or {}):
        return result
    return result.model_copy(update={"content": content})


def describe_question(server: str, params: types.ElicitRequestParams) -> str:
    """One line naming the server and what it asked, for notices and stderr."""
    if params.mode == "url":
        return f"MCP server {server!r} asked you to open {params.url} ({params.message})"
    return f"MCP server {server!r} asked for input ({params.message})"


class ServerQuestions:
    """Routes one adapter's server questions to its answerers (see the module docstring).

    ``tell`` reaches the person (the host's notices, or the log) when a question is declined
    because nobody can answer.
    """

    def __init__(
        self,
        elicit: Elicit | None,
        sample: Sample | None,
        *,
        tell: Callable[[str], None],
    ) -> None:
        self._elicit = elicit
        self._sample = sample
        self._tell = tell

    @property
    def active(self) -> bool:
        """Whether servers are told this client can be asked (an answerer was given)."""
        return self._elicit is not None or self._sample is not None

    @property
    def samples(self) -> bool:
        """Whether servers are told this client can sample."""
        return self._sample is not None

    @contextmanager
    def asked_during(self, server: str) -> Iterator[None]:
        """Route the questions ``server`` asks during this block (a call of this task) here.

        A relay the caller entered itself (the gateway's, for its client) keeps precedence.
        """
        if not self.active:
            yield
            return
        from pi_mcp_adapter.servers import CallRelay, current_relay, relay_calls

        if current_relay() is not None:
            yield
            return
        # One caller (this object) for every call of the adapter: concurrent calls to a
        # server then share its questions instead of refusing them as ambiguous.
        relay = CallRelay(
            caller=self,
            elicitation=partial(self.elicit, server),
            sampling=partial(self.sample, server) if self._sample is not None else None,
        )
        with relay_calls(relay):
            yield

    async def elicit(
        self, server: str, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        """Answer ``server``'s elicitation: the answerer's result (form defaults filled in),
        a decline when no one can answer, an error when the answerer failed."""
        import mcp_types as types

        answer = self._elicit or decline_elicitation
        try:
            result = await answer(server, params)
        except NoOneToAsk as exc:
            self._tell(f"{describe_question(server, params)}; declined: {exc.reason}")
            return types.ElicitResult(action="decline")
        except Exception as exc:
            logger.warning("answering %s failed", describe_question(server, params), exc_info=True)
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=f"The client failed to ask its user: {exc}"
            )
        completed: types.ElicitResult = with_form_defaults(params, result)
        return completed

    async def sample(
        self, server: str, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        """Answer ``server``'s sampling request, or refuse it with a reason the server sees."""
        import mcp_types as types

        if self._sample is None:
            reason = "this client has no model to sample with"
        else:
            try:
                return await self._sample(server, params)
            except NoOneToAsk as exc:
                reason = exc.reason
            except Exception as exc:
                logger.warning("sampling for MCP server %r failed", server, exc_info=True)
                return types.ErrorData(
                    code=types.INTERNAL_ERROR, message=f"The client failed to sample: {exc}"
                )
        self._tell(f"MCP server {server!r} asked for an LLM completion; declined: {reason}")
        return types.ErrorData(code=SAMPLING_REJECTED, message=f"Sampling declined: {reason}")
