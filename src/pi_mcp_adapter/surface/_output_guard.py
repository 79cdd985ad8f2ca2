"""Keep a huge tool result from flooding the model's context.

A tool that returns a whole log or database dump would otherwise fill the context window in
one call. Text beyond the limits is cut at a line boundary and the full text is written to a
private file, so nothing is lost: the model sees the beginning, plus a note saying where the
rest is and how to read it in pieces.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pi_mcp_adapter._secrets import redact_bytes
from pi_mcp_adapter.config import Settings
from pi_mcp_adapter.config._models import OutputGuardSettings
from pi_mcp_adapter.engine import ContentPart, TextPart, ToolResult

__all__ = [
    "DEFAULT_LIMIT_BYTES",
    "DEFAULT_LIMIT_LINES",
    "format_size",
    "guard_output",
    "output_guard_limits",
    "write_private_file",
]

DEFAULT_LIMIT_BYTES = 50 * 1024
DEFAULT_LIMIT_LINES = 2000

SPILL_MAX_AGE_S = 86400.0
"""Files in the shared output directory older than this are removed: a day is long enough for
a model (or a person) to read a spilled result, and short enough that dumps do not pile up."""

_default_dir: Path | None = None
_default_dir_lock = threading.Lock()


def output_guard_limits(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> tuple[int, int] | None:
    """``(bytes, lines)`` the guard enforces, or None when the user turned it off.

    ``MCP_OUTPUT_GUARD`` (``0/false/no/off`` or ``1/true/yes/on``) overrides
    ``settings.outputGuard``, which is ``false`` (off), ``true`` or an object whose positive
    ``maxBytes``/``maxLines`` replace ``outputLimitBytes``/``outputLimitLines``.
    """
    env = os.environ if environ is None else environ
    switch = env.get("MCP_OUTPUT_GUARD", "").strip().lower()
    configured = settings.output_guard
    enabled = configured is not False
    if switch in ("0", "false", "no", "off"):
        enabled = False
    elif switch in ("1", "true", "yes", "on"):
        enabled = True
    if not enabled:
        return None
    limit_bytes, limit_lines = settings.output_limit_bytes, settings.output_limit_lines
    if isinstance(configured, OutputGuardSettings):
        if configured.max_bytes is not None and configured.max_bytes > 0:
            limit_bytes = configured.max_bytes
        if configured.max_lines is not None and configured.max_lines > 0:
            limit_lines = configured.max_lines
    return limit_bytes, limit_lines


def write_private_file(
    data: bytes, *, directory: Path | None = None, prefix: str = "output-", suffix: str = ""
) -> Path:
    """Write ``data`` to a new file only the current user can read (0600) and return its path.

    With no ``directory`` the file goes to one private directory per user under the system
    temp dir (0700, ``pi-mcp-output-<uid>``), shared by every process of that user; files in it
    older than a day are removed when a process first uses it. A given ``directory`` is created
    with 0700 if it does not exist; an existing one is used as it is.

    Raises:
        OSError: the directory or file could not be created or written.
    """
    target = directory if directory is not None else _process_dir()
    if directory is not None:
        target.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target, prefix=prefix, suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(redact_bytes(data))
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)


def _process_dir() -> Path:
    global _default_dir
    with _default_dir_lock:
        # A temp cleaner may have removed it during a long session.
        if _default_dir is None or not _default_dir.is_dir():
            _default_dir = _shared_dir()
            remove_old_files(_default_dir, max_age_s=SPILL_MAX_AGE_S)
        return _default_dir


def _shared_dir() -> Path:
    """The user's private output directory, or a fresh one if that name is not safe to use."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    path = Path(tempfile.gettempdir()) / f"pi-mcp-output-{uid}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    try:
        info = path.lstat()
    except OSError:
        return Path(tempfile.mkdtemp(prefix="pi-mcp-output-"))
    # Someone else could have made it first in a shared /tmp: use it only if it is ours alone.
    private = stat.S_ISDIR(info.st_mode) and not stat.S_IMODE(info.st_mode) & 0o077
    if not private or (hasattr(os, "getuid") and info.st_uid != uid):
        return Path(tempfile.mkdtemp(prefix="pi-mcp-output-"))
    return path


def remove_old_files(directory: Path, *, max_age_s: float, now: float | None = None) -> int:
    """Delete regular files in ``directory`` not modified for ``max_age_s``; returns how many."""
    cutoff = (time.time() if now is None else now) - max_age_s
    removed = 0
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
    return removed


@dataclass(frozen=True, slots=True)
class _Cut:
    """How much of the text was kept."""

    parts: tuple[ContentPart, ...]
    shown_lines: int
    shown_bytes: int
    last_line_partial: bool


def guard_output(
    result: ToolResult,
    *,
    limit_bytes: int = DEFAULT_LIMIT_BYTES,
    limit_lines: int = DEFAULT_LIMIT_LINES,
    spill_dir: Path | None = None,
) -> ToolResult:
    """``result`` with its text cut to the limits, and the full text saved to a file.

    The text parts together (joined by newlines, as :attr:`ToolResult.text_content` does) are
    measured in UTF-8 bytes and lines. Within both limits, ``result`` itself is returned.
    Otherwise the parts keep their order, text is kept up to the limits, cut after a whole line
    (inside a line only when the first line alone is over the byte limit, and then between
    characters), later text parts are dropped, non-text parts are kept, and a note is appended
    telling the model how much it sees, where the full text is and how to read the rest. The
    note counts against the limits: shown text and note together stay within them (only a
    limit smaller than the note itself is exceeded, by the note alone). ``details`` gains
    ``truncated``,
    ``fullOutputPath`` (None when the file could not be written), ``totalLines``,
    ``totalBytes``, ``shownLines`` and ``shownBytes``.

    A limit of 0 (or below) means no limit of that kind, as ``idleTimeout: 0`` means never;
    configuration loading rejects negative values before they get here.
    """
    if limit_bytes <= 0 and limit_lines <= 0:
        return result
    limit_bytes = limit_bytes if limit_bytes > 0 else 2**62
    limit_lines = limit_lines if limit_lines > 0 else 2**62
    texts = [part.text for part in result.content if isinstance(part, TextPart)]
    if not texts:
        return result
    full_text = "\n".join(texts)
    full_bytes = full_text.encode("utf-8", "replace")
    total_lines = _count_lines(full_text)
    if len(full_bytes) <= limit_bytes and total_lines <= limit_lines:
        return result

    path: Path | None
    try:
        path = write_private_file(full_bytes, directory=spill_dir, suffix=".txt")
        save_error = None
    except OSError as exc:
        path, save_error = None, exc
    cut, note = _fit_with_note(
        result.content,
        full_text,
        limit_bytes=limit_bytes,
        limit_lines=limit_lines,
        describe=lambda c: _note(c, total_lines, len(full_bytes), path, save_error),
    )
    details: dict[str, Any] = {
        **result.details,
        "truncated": True,
        "fullOutputPath": str(path) if path is not None else None,
        "totalLines": total_lines,
        "totalBytes": len(full_bytes),
        "shownLines": cut.shown_lines,
        "shownBytes": cut.shown_bytes,
    }
    return ToolResult((*cut.parts, TextPart(note)), is_error=result.is_error, details=details)


def _fit_with_note(
    parts: tuple[ContentPart, ...],
    full_text: str,
    *,
    limit_bytes: int,
    limit_lines: int,
    describe: Callable[[_Cut], str],
) -> tuple[_Cut, str]:
    """The longest cut whose text and note together stay within both limits.

    The note's size depends a little on the numbers it quotes, so the budget shrinks by
    what the last try went over (two or three tries at most). When the note alone is over the
    limits, no text is shown and the note is returned as it is.
    """
    budget_bytes, budget_lines = limit_bytes, limit_lines
    while True:
        if budget_bytes < 1 or budget_lines < 1:
            cut = _Cut(tuple(p for p in parts if not isinstance(p, TextPart)), 0, 0, False)
            return cut, describe(cut)
        cut = _cut(parts, full_text, limit_bytes=budget_bytes, limit_lines=budget_lines)
        note = describe(cut)
        shown = "\n".join([p.text for p in cut.parts if isinstance(p, TextPart)] + [note])
        over_bytes = len(shown.encode("utf-8", "replace")) - limit_bytes
        over_lines = _count_lines(shown) - limit_lines
        if over_bytes <= 0 and over_lines <= 0:
            return cut, note
        budget_bytes -= max(0, over_bytes)
        budget_lines -= max(0, over_lines)


def _count_lines(text: str) -> int:
    """Lines as an editor numbers them: a final newline does not start another line."""
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _cut(
    parts: tuple[ContentPart, ...], full_text: str, *, limit_bytes: int, limit_lines: int
) -> _Cut:
    keep_chars, partial = _prefix_length(full_text, limit_bytes, limit_lines)
    shown = full_text[:keep_chars]
    kept: list[ContentPart] = []
    start = 0  # where the current text part begins in full_text
    for part in parts:
        if not isinstance(part, TextPart):
            kept.append(part)
            continue
        if start < keep_chars:  # the part begins inside the shown text (even if empty)
            kept.append(TextPart(part.text[: keep_chars - start]))
        start += len(part.text) + 1  # the newline text_content puts between parts
    return _Cut(
        tuple(kept),
        shown_lines=_count_lines(shown),
        shown_bytes=len(shown.encode("utf-8", "replace")),
        last_line_partial=partial,
    )


def _prefix_length(text: str, limit_bytes: int, limit_lines: int) -> tuple[int, bool]:
    """Characters of ``text`` to show, and whether the last shown line is cut short.

    Whole lines are kept while both budgets allow. Only if not even the first line fits (a
    minified JSON document, say) is that line cut, between characters.
    """
    end = 0
    used_bytes = 0
    for _ in range(limit_lines):
        newline = text.find("\n", end)
        line_end = len(text) if newline < 0 else newline + 1
        size = len(text[end:line_end].encode("utf-8", "replace"))
        if used_bytes + size > limit_bytes:
            break
        used_bytes += size
        end = line_end
        if end == len(text):
            break
    if end > 0:
        return end, False
    # A character is at least one byte, so limit_bytes characters hold the byte budget.
    head = text[:limit_bytes].encode("utf-8", "replace")[:limit_bytes].decode("utf-8", "ignore")
    return len(head), True


def _note(
    cut: _Cut, total_lines: int, total_bytes: int, path: Path | None, error: OSError | None
) -> str:
    shown = f"{format_size(cut.shown_bytes)} of {format_size(total_bytes)}"
    if cut.shown_bytes == 0:
        what = (
            f"nothing of {total_lines} lines ({format_size(total_bytes)}); the limit leaves no room"
        )
    elif cut.last_line_partial:
        what = f"the first {shown} (line 1 of {total_lines} is longer than the limit)"
    else:
        what = f"lines 1-{cut.shown_lines} of {total_lines} ({shown})"
    if path is None:
        reason = error.strerror or str(error) if error is not None else "unknown error"
        return (
            f"\n[Output truncated: showing {what}. The full output could not be saved ({reason}).]"
        )
    if cut.last_line_partial:
        start = cut.shown_bytes + 1
        how = (
            f"read that file from byte {start} in chunks "
            f"(e.g. `tail -c +{start} {path} | head -c {cut.shown_bytes or 1024}`)"
        )
    else:
        start = cut.shown_lines + 1
        how = (
            f"read that file from line {start} in chunks (a file-reading tool's offset and "
            f"limit, or `sed -n '{start},{start + 199}p' {path}`)"
        )
    return (
        f"\n[Output truncated: showing {what}. Full output saved to {path}. "
        f"To see more, {how}, or search it with grep.]"
    )


def format_size(n_bytes: int) -> str:
    """``512 B``, ``50.0 KiB``, ``1.2 MiB``: sizes as the notes to the model show them."""
    if n_bytes < 1024:
        return f"{n_bytes} B"
    if n_bytes < 1024 * 1024:
        return f"{n_bytes / 1024:.1f} KiB"
    return f"{n_bytes / (1024 * 1024):.1f} MiB"
