"""``includeTools`` / ``excludeTools``: which of a server's tools exist for the adapter at all.

A filtered-out tool never enters the catalog, so no surface lists, searches, describes or calls
it. Patterns are exact names or shell-style globs (``*``, ``?``, ``[...]``, case-sensitive),
matched against a tool's original name and its prefixed name. Include is applied first (an
empty or absent list includes everything), then exclude.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pi_mcp_adapter.config import ServerEntry

__all__ = ["ToolFilter", "keywords_for"]

_GLOB_CHARS = frozenset("*?[")


def _compile(patterns: Iterable[str]) -> tuple[frozenset[str], re.Pattern[str] | None]:
    exact: set[str] = set()
    globs: list[str] = []
    for pattern in patterns:
        if _GLOB_CHARS.isdisjoint(pattern):
            exact.add(pattern)
        else:
            globs.append(fnmatch.translate(pattern))
    # One alternation per list: a tool is matched once per list, not once per pattern.
    combined = re.compile("|".join(f"(?:{g})" for g in globs)) if globs else None
    return frozenset(exact), combined


@dataclass(frozen=True, slots=True)
class ToolFilter:
    """A server's include and exclude patterns, compiled once."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    _include_exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _include_glob: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude_exact: frozenset[str] = field(init=False, repr=False, compare=False)
    _exclude_glob: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        include_exact, include_glob = _compile(self.include)
        exclude_exact, exclude_glob = _compile(self.exclude)
        object.__setattr__(self, "_include_exact", include_exact)
        object.__setattr__(self, "_include_glob", include_glob)
        object.__setattr__(self, "_exclude_exact", exclude_exact)
        object.__setattr__(self, "_exclude_glob", exclude_glob)

    @classmethod
    def for_entry(cls, entry: ServerEntry | None) -> ToolFilter:
        include = tuple(entry.include_tools or ()) if entry is not None else ()
        exclude = tuple(entry.exclude_tools or ()) if entry is not None else ()
        if not include and not exclude:
            return _NO_FILTER  # most servers: nothing to compile, once per server per build
        return cls(include=include, exclude=exclude)

    @property
    def is_empty(self) -> bool:
        return not self.include and not self.exclude

    def allows(self, *names: str) -> bool:
        """Whether a tool known by any of ``names`` passes include, then exclude.

        A ``-`` in a tool's name also matches a ``_`` in a pattern (``get_sum`` selects
        ``get-sum``), the same forgiveness the tool lookup has.
        """
        candidates = {*names, *(n.replace("-", "_") for n in names)}
        if self.include and not self._matches(candidates, self._include_exact, self._include_glob):
            return False
        return not (
            self.exclude and self._matches(candidates, self._exclude_exact, self._exclude_glob)
        )

    @staticmethod
    def _matches(candidates: set[str], exact: frozenset[str], glob: re.Pattern[str] | None) -> bool:
        if not exact.isdisjoint(candidates):
            return True
        return glob is not None and any(glob.match(c) for c in candidates)


def keywords_for(selectors: Mapping[str, Iterable[str]] | None, *names: str) -> tuple[str, ...]:
    """The ``searchKeywords`` of every selector (exact name or glob) matching one of ``names``.

    Selectors match as ``includeTools`` patterns do: the original or the prefixed name, with
    ``-`` in a name also matching ``_``. Keywords keep their order, without repeats.
    """
    if not selectors:
        return ()
    candidates = {*names, *(n.replace("-", "_") for n in names)}
    found: dict[str, None] = {}
    for selector, keywords in selectors.items():
        exact, glob = _compile((selector,))
        if not exact.isdisjoint(candidates) or (
            glob is not None and any(glob.match(c) for c in candidates)
        ):
            found.update(dict.fromkeys(keywords))
    return tuple(found)


_NO_FILTER = ToolFilter()
