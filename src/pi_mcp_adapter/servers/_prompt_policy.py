"""Whether an OAuth sign-in may ask a person right now.

A context variable, kept apart from the OAuth client so that the engine can scope it around a
call without importing the SDK (commands answered from the cache never load it).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

_PROMPTS_ALLOWED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "pi_mcp_adapter_oauth_prompts_allowed", default=False
)


def prompts_allowed() -> bool:
    """Whether the current context lets an OAuth flow open a browser or read stdin."""
    return _PROMPTS_ALLOWED.get()


@contextlib.contextmanager
def allow_prompts(allowed: bool = True) -> Iterator[None]:
    """Let OAuth flows started inside this block ask a person (open a browser, read stdin).

    Everywhere else (startup connects, health checks, background reconnects) a server that
    needs a new authorization fails at once with ``NeedsAuthError``. The setting is a context
    variable, so connections started inside the block (and their transport tasks) inherit it.
    """
    # Only ever widens: an outer block that allowed prompts (``pi-mcp auth``) stays in force.
    token = _PROMPTS_ALLOWED.set(allowed or _PROMPTS_ALLOWED.get())
    try:
        yield
    finally:
        _PROMPTS_ALLOWED.reset(token)
