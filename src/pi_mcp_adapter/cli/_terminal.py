"""The CLI's standard streams: every write redacted, and inert on a terminal.

Server text (descriptions, results, stderr tails, prompts) reaches the person's terminal
through plain writes. A hostile server could clear the screen, move the cursor over an earlier
line, set the window title or plant a hyperlink, so on a terminal every control character is
shown as its escape (``\\x1b[2J``), except newline, tab and colour (SGR) sequences, which rich
writes and which cannot move anything. The CLI's own cursor work goes through
:meth:`TerminalStream.write_control`. Output to a file or a pipe is left as written: the bytes
are the data there.
"""

from __future__ import annotations

import re
from typing import IO

from pi_mcp_adapter._secrets import RedactingStream

__all__ = ["TerminalStream", "inert_on_terminal", "write_control"]

_CONTROLS = re.compile(
    r"\x1b\[[0-9;]*m"  # colour: kept
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]"
)


def inert_on_terminal(text: str) -> str:
    """``text`` with every control character but newline, tab and colour shown as its escape."""
    return _CONTROLS.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    found = match.group(0)
    return found if len(found) > 1 else repr(found)[1:-1]


class TerminalStream(RedactingStream):
    """A :class:`RedactingStream` that also makes server text inert when it is a terminal."""

    def __init__(self, inner: IO[str]) -> None:
        super().__init__(inner)
        try:
            self._terminal = inner.isatty()
        except (AttributeError, ValueError, OSError):
            self._terminal = False

    def write(self, text: str) -> int:
        return super().write(inert_on_terminal(text) if self._terminal else text)

    def write_control(self, sequence: str) -> None:
        """Write the CLI's own cursor control (a progress line's ``\\r``, an erase), as is."""
        self.inner.write(sequence)


def write_control(stream: IO[str], sequence: str) -> None:
    """Write the CLI's own cursor control to ``stream``, past the escaping of a terminal stream."""
    if isinstance(stream, TerminalStream):
        stream.write_control(sequence)
    else:
        stream.write(sequence)
