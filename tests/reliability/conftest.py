"""Fixtures of the reliability suite: HTTP fixture servers that are stopped at the end."""

from __future__ import annotations

from servers._support import http_fixtures

__all__ = ["http_fixtures"]
