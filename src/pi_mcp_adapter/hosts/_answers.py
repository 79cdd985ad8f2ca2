"""Who answers servers' questions in a Python binding: the caller's callbacks, else nobody.

A binding always tells servers it can elicit, so a server's form never goes unanswered: with
the caller's ``elicit`` the person answers; without it every elicitation is declined and the
binding's notice callback hears which server asked what and which option would answer it
(never a hang, never a silent "not supported"). Sampling is offered only with ``sample``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pi_mcp_adapter.engine import Elicit, NotifyLevel, describe_question

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["elicit_or_decline"]


def elicit_or_decline(
    elicit: Elicit | None, reason: str, notify: Callable[[str, NotifyLevel], None]
) -> Elicit:
    """``elicit``, or an answerer that declines, telling ``notify`` who asked what and
    ``reason`` (why no one can answer, and how to answer next time)."""
    if elicit is not None:
        return elicit

    async def decline(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
        import mcp_types as types

        notify(f"{describe_question(server, params)}; declined: {reason}", "warning")
        return types.ElicitResult(action="decline")

    return decline
