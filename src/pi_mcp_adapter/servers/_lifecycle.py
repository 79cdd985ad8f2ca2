"""Lifecycle policy: which servers start early, when they close, how soon they are retried.

Modes (``lifecycle`` of a server entry):

===================  =============  =====================================  ===========
mode                 connects       after a drop                           idle close
===================  =============  =====================================  ===========
``lazy``             on first use   on the next use                        yes
``eager``            at start       at the end of the next turn            never
``keep-alive``       at start       health checks, 30 s doubling to 5 min  never
``lazy-keep-alive``  on first use   as keep-alive, once it has connected   never
===================  =============  =====================================  ===========

A per-server ``idleTimeout`` applies to lazy servers only.

These are pure functions of the entry, the settings and a failure count; the manager applies
them. Keeping them here lets the policy be read (and tested) in one place.
"""

from __future__ import annotations

from pi_mcp_adapter.config import ServerEntry, Settings

KEEP_ALIVE_RETRY_BASE_S = 30.0
KEEP_ALIVE_RETRY_MAX_S = 300.0

HEALTH_PING_TIMEOUT_S = 10.0
"""How long a health-check ping may take before the server is judged slow (not dead: a slow
server is left alone, only a lost connection triggers a reconnect)."""

SHUTDOWN_TIMEOUT_S = 10.0
"""Bound on closing every connection when the manager exits; each stdio close is itself
bounded (about 4.5 s worst case) and they run in parallel."""


def connects_at_start(entry: ServerEntry) -> bool:
    """Eager and keep-alive servers connect when the manager starts."""
    return entry.is_enabled and entry.lifecycle in ("eager", "keep-alive")


def is_kept_alive(entry: ServerEntry, *, has_connected: bool) -> bool:
    """Whether health checks watch the server and reconnect it when it drops.

    Keep-alive servers always are; lazy-keep-alive servers from their first connection on.
    """
    if not entry.is_enabled:
        return False
    return entry.lifecycle == "keep-alive" or (
        entry.lifecycle == "lazy-keep-alive" and has_connected
    )


def idle_timeout_s(entry: ServerEntry, settings: Settings) -> float:
    """Seconds without use after which a server is closed; 0 means never.

    Only lazy servers are closed when idle. The per-server ``idleTimeout`` (minutes) overrides
    the global ``settings.idleTimeout``; 0 in either place disables idle closing.
    """
    if entry.lifecycle != "lazy":
        return 0.0
    minutes = entry.idle_timeout if entry.idle_timeout is not None else settings.idle_timeout
    return max(0.0, minutes * 60.0)


def keep_alive_retry_delay_s(consecutive_failures: int) -> float:
    """Delay before the next reconnect attempt of a keep-alive server.

    30 s after the first failure, doubling with each further failure, capped at 5 minutes.
    """
    if consecutive_failures <= 0:
        return 0.0
    exponent = min(consecutive_failures - 1, 16)
    return float(min(KEEP_ALIVE_RETRY_MAX_S, KEEP_ALIVE_RETRY_BASE_S * 2**exponent))


def health_check_interval_s(settings: Settings) -> float:
    """Seconds between health checks; 0 disables the loop."""
    return max(0.0, settings.health_check_interval_ms / 1000.0)
