"""Fixtures of the server-layer tests; the helpers live in ``_support``."""

from __future__ import annotations

from ._support import healthy_manager, http_fixtures, make_manager, no_leaked_processes

__all__ = ["healthy_manager", "http_fixtures", "make_manager", "no_leaked_processes"]
