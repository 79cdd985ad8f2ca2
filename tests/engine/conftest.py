from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest

from pi_mcp_adapter.engine import NotifyLevel
from pi_mcp_adapter.hosts import ExportHost
from servers._support import HttpFixtures, http_fixtures, pid_is_running
from surface.conftest import (  # tests/ is on sys.path: the surface tests are package "surface"
    Workspace,
    fixture_entry,
    make_workspace,
    time_entry,
    workbench_entry,
)

__all__ = [
    "HttpFixtures",
    "RecordingHost",
    "Workspace",
    "fixture_entry",
    "http_fixtures",
    "pid_is_running",
    "time_entry",
    "workbench_entry",
]


@dataclass
class RecordingHost(ExportHost):
    """An :class:`ExportHost` that keeps every status line and wakes tests waiting on one."""

    statuses: list[str | None] = field(default_factory=list)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def notify(self, message: str, level: NotifyLevel = "info") -> None:
        super().notify(message, level)
        self._wake()

    def set_status(self, text: str | None) -> None:
        super().set_status(text)
        self.statuses.append(text)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def wait_for(self, condition: Callable[[], bool], *, timeout_s: float = 30) -> None:
        """Wait until ``condition()`` holds after a notice or a status line."""
        with anyio.fail_after(timeout_s):
            while not condition():
                await self._changed.wait()

    def notices_with(self, text: str) -> list[tuple[NotifyLevel, str]]:
        return [(level, message) for level, message in self.notices if text in message]


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return make_workspace(tmp_path)
