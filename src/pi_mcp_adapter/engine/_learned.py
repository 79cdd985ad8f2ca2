"""Search that learns from use: which words led to which tool.

Part of the call statistics (``settings.captureStats``): when a call follows a search that
found the called tool, the search's plain words (``catalog/_search_learned.py``: letters only,
no filler, no known secret; never a call's arguments) are counted for that tool. Later searches
pass what was learned to the ranking, which moves a tool those words led to into the first
five.

Where it is kept: ``<agent dir>/mcp-search-learned.json`` (beside ``mcp-stats.json``, private
to the agent dir), and, with ``settings.sharedState``, in the team's Redis table
``search-learned``, which every replica reads instead of the file, again at most every
:data:`SHARED_REFRESH_S` while it searches: what one replica learns, the others use.

How it is forgotten: a word not used for a tool for :data:`FORGET_AFTER_DAYS` days is dropped
when the file is next written or read, and each tool keeps at most :data:`MAX_WORDS_PER_TOOL`
words (the most recently used). ``pi-mcp stats --clear-learned`` deletes it all, file and
shared table.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import filelock

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._files import write_atomically
from pi_mcp_adapter.catalog import ToolInfo
from pi_mcp_adapter.catalog._search_learned import LearnedWords, ToolKey, learnable_terms

__all__ = [
    "FORGET_AFTER_DAYS",
    "LEARNED_FILE",
    "MAX_WORDS_PER_TOOL",
    "SHARED_REFRESH_S",
    "SearchMemory",
    "clear_learned",
]

logger = logging.getLogger(__name__)

LEARNED_FILE = "mcp-search-learned.json"
LEARNED_FORMAT_VERSION = 1
FORGET_AFTER_DAYS = 90
MAX_WORDS_PER_TOOL = 64
RECENT_SEARCHES = 8
"""Searches a call is matched against: the agent searches, then calls what it found."""
SEARCH_FRESH_S = 15 * 60
"""A call this long after a search no longer counts as following it."""
SHARED_REFRESH_S = 5.0
"""How often a replica reads the team's learned words again (one ``HGETALL`` of a table of a
few kilobytes per tool learned): soon enough for a colleague's session, rare next to searches."""
_SHARED_TABLE = "search-learned"
_LOCK_TIMEOUT_S = 5.0

# One tool's words: stem -> [uses, last use in Unix milliseconds].
Words = dict[str, list[int]]


@dataclass(frozen=True)
class Lesson:
    """What one call teaches: the words of the search that led to ``tool``."""

    tool: ToolKey
    terms: tuple[str, ...]
    at_ms: int


class SearchMemory:
    """This agent's learned words: read once, added to by calls that follow searches.

    :meth:`note_search` and :meth:`lesson_from_call` are cheap enough for the event loop;
    :meth:`learn` writes (a small file under a lock, or the team's Redis) and belongs in a
    worker thread: the lock may be held by another process for up to :data:`_LOCK_TIMEOUT_S`.
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._recent: list[tuple[float, tuple[str, ...], frozenset[ToolKey]]] = []
        self._stored = self._read_all()
        self._words = _learned(self._stored, self._clock())
        self._read_at = self._clock()

    @classmethod
    def in_agent_dir(cls, agent_dir: Path) -> SearchMemory:
        return cls(agent_dir / LEARNED_FILE)

    @property
    def words(self) -> LearnedWords:
        """What was learned; with a shared state, what the team learned, read again at most
        every :data:`SHARED_REFRESH_S` (the last answer while Redis is unreachable).

        The team's table is read in a thread of its own, and a search meanwhile ranks by the
        words read last: the thread that searches is often an event loop, which a table of
        thousands of tools' words, or a Redis that stopped answering, would hold up."""
        now = self._clock()
        if now - self._read_at >= SHARED_REFRESH_S and shared_state.active() is not None:
            self._read_at = now
            threading.Thread(
                target=self._read_team_words, name="pi-mcp learned words", daemon=True
            ).start()
        return self._words

    def _read_team_words(self) -> None:
        shared = _read_shared()
        if shared is not None:
            with self._lock:
                self._stored = shared
                self._words = _learned(shared, self._clock())

    def note_search(self, query: str, found: Sequence[ToolInfo]) -> None:
        """Remember a keyword search and what it found, for the calls that may follow."""
        if query.strip().lower().startswith("select:"):
            return  # exact names, not words
        terms = tuple(learnable_terms(query))
        if not terms or not found:
            return
        with self._lock:
            self._recent.append(
                (self._clock(), terms, frozenset((t.server, t.original_name) for t in found))
            )
            del self._recent[:-RECENT_SEARCHES]

    def lesson_from_call(self, tool: ToolInfo) -> Lesson | None:
        """A successful call of ``tool``: the words of the newest fresh search that found it,
        for :meth:`learn` (once: the search is then used up), or None."""
        key = (tool.server, tool.original_name)
        now = self._clock()
        with self._lock:
            for index in range(len(self._recent) - 1, -1, -1):
                at, terms, found = self._recent[index]
                if now - at <= SEARCH_FRESH_S and key in found:
                    del self._recent[index]
                    return Lesson(key, terms, int(now * 1000))
        return None

    def note_call(self, tool: ToolInfo) -> None:
        """:meth:`lesson_from_call` and :meth:`learn` in one, for callers off the event loop."""
        lesson = self.lesson_from_call(tool)
        if lesson is not None:
            self.learn(lesson)

    def learn(self, lesson: Lesson) -> None:
        addition = {lesson.tool: {term: [1, lesson.at_ms] for term in lesson.terms}}
        try:
            if not self._share(addition):
                self._write_merged(addition)
        except (OSError, filelock.Timeout) as exc:
            logger.warning("could not write learned search words to %s: %s", self.path, exc)
            with self._lock:
                _merge_into(self._stored, addition)
        self._words = _learned(self._stored, self._clock())

    def _share(self, addition: Mapping[ToolKey, Words]) -> bool:
        shared = shared_state.active()
        if shared is None:
            return False
        for (server, tool), words in addition.items():

            def combine(current: Any, words: Words = words) -> Any:
                stored = _words_of(current)
                _add(stored, words)
                return _pruned(stored, self._clock())

            if not shared.merge(_SHARED_TABLE, json.dumps([server, tool]), combine):
                return False
        self._stored = _read_shared() or self._stored
        return True

    def _write_merged(self, addition: Mapping[ToolKey, Words]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with filelock.FileLock(f"{self.path}.lock", timeout=_LOCK_TIMEOUT_S):
            stored = _read_file(self.path)
            _merge_into(stored, addition)
            now_s = self._clock()
            document = {
                "version": LEARNED_FORMAT_VERSION,
                "updatedAtMs": int(now_s * 1000),
                "servers": _servers_document(stored, now_s),
            }
            text = json.dumps(document, indent=1, sort_keys=True) + "\n"
            write_atomically(self.path, text.encode("utf-8"))
            self._stored = stored

    def _read_all(self) -> dict[ToolKey, Words]:
        shared = _read_shared()
        if shared is not None:
            return shared
        try:
            return _read_file(self.path)
        except OSError as exc:
            logger.warning("learned search words not read from %s: %s", self.path, exc)
            return {}


def clear_learned(agent_dir: Path) -> bool:
    """Forget every learned word: the agent dir's file and, with a shared state, the team's
    table. Returns whether anything was there."""
    path = agent_dir / LEARNED_FILE
    existed = path.exists()
    path.unlink(missing_ok=True)
    shared = shared_state.active()
    table = shared.table(_SHARED_TABLE) if shared is not None else None
    if shared is not None and table:
        for key in table:
            shared.delete(_SHARED_TABLE, key)
        existed = True
    return existed


def _read_shared() -> dict[ToolKey, Words] | None:
    shared = shared_state.active()
    table = shared.table(_SHARED_TABLE) if shared is not None else None
    if table is None:
        return None
    found: dict[ToolKey, Words] = {}
    for key, value in table.items():
        try:
            server, tool = json.loads(key)
        except (ValueError, TypeError):
            continue
        found[(str(server), str(tool))] = _words_of(value)
    return found


def _read_file(path: Path) -> dict[ToolKey, Words]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError:
        logger.warning("%s is not a learned-words file; starting afresh", path)
        return {}
    if not isinstance(document, dict) or document.get("version") != LEARNED_FORMAT_VERSION:
        return {}
    servers = document.get("servers")
    found: dict[ToolKey, Words] = {}
    if isinstance(servers, dict):
        for server, tools in servers.items():
            if isinstance(tools, dict):
                for tool, words in tools.items():
                    found[(str(server), str(tool))] = _words_of(words)
    return found


def _words_of(value: Any) -> Words:
    words: Words = {}
    if isinstance(value, dict):
        for term, entry in value.items():
            if (
                isinstance(term, str)
                and isinstance(entry, list)
                and len(entry) == 2
                and all(isinstance(v, int) and v >= 0 for v in entry)
            ):
                words[term] = [int(entry[0]), int(entry[1])]
    return words


def _add(stored: Words, words: Words) -> None:
    for term, (uses, last_ms) in words.items():
        before = stored.get(term)
        if before is None:
            stored[term] = [uses, last_ms]
        else:
            stored[term] = [before[0] + uses, max(before[1], last_ms)]


def _merge_into(stored: dict[ToolKey, Words], addition: Mapping[ToolKey, Words]) -> None:
    for key, words in addition.items():
        _add(stored.setdefault(key, {}), words)


def _pruned(words: Words, now_s: float) -> Words:
    """``words`` without those unused for :data:`FORGET_AFTER_DAYS`, the most recent
    :data:`MAX_WORDS_PER_TOOL` kept."""
    oldest_ms = int((now_s - FORGET_AFTER_DAYS * 86400) * 1000)
    fresh = sorted(
        ((t, e) for t, e in words.items() if e[1] >= oldest_ms), key=lambda te: -te[1][1]
    )
    return dict(fresh[:MAX_WORDS_PER_TOOL])


def _servers_document(stored: Mapping[ToolKey, Words], now_s: float) -> dict[str, Any]:
    servers: dict[str, dict[str, Words]] = {}
    for (server, tool), words in sorted(stored.items()):
        kept = _pruned(words, now_s)
        if kept:
            servers.setdefault(server, {})[tool] = kept
    return servers


def _learned(stored: Mapping[ToolKey, Words], now_s: float) -> LearnedWords:
    return LearnedWords.from_pairs(
        (term, key, float(entry[0]))
        for key, words in stored.items()
        for term, entry in _pruned(words, now_s).items()
    )
