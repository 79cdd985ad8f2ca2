"""Keep URL credentials out of the log records of the libraries that carry our connections.

The SDK's HTTP transports log the endpoint URL at debug level, and a configured URL may hold a
password (``user:pass@host``) or a token in its query. Our own messages use
:func:`~._translate.redact_url`; for the libraries' records, a filter on their loggers rewrites
every URL in a record the same way before any handler sees it.
"""

from __future__ import annotations

import logging
import re

from ._translate import redact_url

LIBRARY_LOGGERS = (
    "mcp.client.streamable_http",
    "mcp.client.sse",
    "mcp.client.auth",
    "httpx2",
    "httpcore2",
)
"""Loggers that name request URLs (filters do not apply to records of child loggers)."""

_URL = re.compile(r"[a-z][a-z0-9+.-]*://[^\s'\"<>]+", re.IGNORECASE)


class RedactUrlCredentials(logging.Filter):
    """Rewrites URLs in a record without userinfo, query and fragment."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = _URL.sub(lambda match: redact_url(match.group(0)), message)
        if redacted != message:
            record.msg = redacted
            record.args = None
        return True


def install_log_redaction() -> None:
    """Add the filter to every library logger once (idempotent)."""
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactUrlCredentials) for f in logger.filters):
            logger.addFilter(RedactUrlCredentials())
