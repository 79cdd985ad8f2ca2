"""The catalog: every tool of every server under one unique name, and name resolution.

A :class:`Catalog` is an immutable snapshot. Building and every lookup use dict indexes, so a
catalog of tens of thousands of tools answers in microseconds; only a miss (which ranks
suggestions) does more work. When one server's tools change, :meth:`Catalog.replacing_server`
derives the next snapshot from this one: the indexes are copied as dicts (a C-level copy, a
millisecond at 100,000 tools) and only that server's tools are named and indexed again, so a
relisting costs what the server offers, not what the catalog holds.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, TypeVar

from pi_mcp_adapter._errors import AmbiguousToolError, ToolNotFoundError
from pi_mcp_adapter.config import ServerEntry, Settings

from ._metadata import ServerMetadata, ToolInfo
from ._naming import MAX_TOOL_NAME_LENGTH, build_tool_infos, server_prefix

__all__ = ["Catalog", "NameCollision"]

MAX_SUGGESTIONS = 5
_SUGGESTION_POOL = 50
_MIN_SUGGESTION_SCORE = 0.3
_COMMON_WORD_TOOLS = 1000
_SEPARATOR_RUN = re.compile(r"[-_.\s]+")
_CAMEL_BOUNDARY = re.compile(r"([a-z0-9])([A-Z])")
_GET_WORD = re.compile(r"(?:^|_)get_")


@dataclasses.dataclass(frozen=True, slots=True)
class NameCollision:
    """Two tools wanted the same name; the later one (by server order) was renamed.

    ``kept_by`` is the server whose tool kept ``name``; the tool ``original_name`` of
    ``server`` is callable as ``assigned_name`` instead.
    """

    name: str
    kept_by: str
    server: str
    original_name: str
    assigned_name: str


def _canonical(name: str) -> str:
    # `-`, `_`, `__`, `.` and spaces all mean "word break" to a model guessing a name.
    return _SEPARATOR_RUN.sub("_", name).strip("_")


def _folded(name: str) -> str:
    return _canonical(name).casefold()


def _compact(name: str) -> str:
    """The name with every separator removed: ``getsum`` for ``get-sum``."""
    return _folded(name).replace("_", "")


def _tokens(name: str) -> frozenset[str]:
    spaced = name if name.islower() else _CAMEL_BOUNDARY.sub(r"\1_\2", name)
    return frozenset(t for t in _folded(spaced).split("_") if t)


def _unique_name(wanted: str, tool: ToolInfo, taken: Mapping[str, ToolInfo]) -> str:
    # A hash of the tool's identity keeps the new name stable when unrelated tools come and
    # go, which a running counter would not.
    digest = hashlib.sha256(f"{tool.server}\x00{tool.original_name}".encode()).hexdigest()
    for attempt in range(len(digest) // 6):
        suffix = "_" + digest[attempt * 6 : attempt * 6 + 6]
        candidate = wanted[: MAX_TOOL_NAME_LENGTH - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
    counter = 2
    while True:
        suffix = f"_{counter}"
        candidate = wanted[: MAX_TOOL_NAME_LENGTH - len(suffix)] + suffix
        if candidate not in taken:
            return candidate
        counter += 1


KeyFn = Callable[[str], str]

K = TypeVar("K")
V = TypeVar("V")
_UNSET: Any = object()
_GONE: Any = object()
"""A key a derived mapping removed from its base."""
_FLATTEN_FROM = 256


class _Layered(MutableMapping[K, V]):
    """A mapping that the next catalog snapshot derives from this one in time proportional to
    what changed: a base dict shared by the snapshots, and this snapshot's changes on top.

    Copying every index of a catalog of 100,000 tools (a C-level copy each, but eight of them)
    took 40-70 ms on the event loop per relisting, and left eight large new dicts for the
    garbage collector to walk. The changes are folded into a new base once they reach an
    eighth of it, so lookups stay two dict reads.
    """

    __slots__ = ("_base", "_changes", "_size")

    def __init__(self, base: dict[K, V]) -> None:
        self._base = base
        self._changes: dict[K, V] = {}
        self._size = len(base)

    def derived(self) -> _Layered[K, V]:
        """A copy to change, sharing this one's base (never changed once shared)."""
        copy: _Layered[K, V] = _Layered.__new__(_Layered)
        if len(self._changes) > _FLATTEN_FROM + len(self._base) // 8:
            base = dict(self._base)
            for key, value in self._changes.items():
                if value is _GONE:
                    base.pop(key, None)
                else:
                    base[key] = value
            copy._base, copy._changes = base, {}
        else:
            copy._base, copy._changes = self._base, dict(self._changes)
        copy._size = self._size
        return copy

    def __getitem__(self, key: K) -> V:
        value: V = self._changes.get(key, _UNSET)
        if value is _UNSET:
            return self._base[key]
        if value is _GONE:
            raise KeyError(key)
        return value

    def get(self, key: K, default: Any = None) -> Any:
        value = self._changes.get(key, _UNSET)
        if value is _UNSET:
            return self._base.get(key, default)
        return default if value is _GONE else value

    def __contains__(self, key: object) -> bool:
        value = self._changes.get(key, _UNSET)  # type: ignore[arg-type]
        return key in self._base if value is _UNSET else value is not _GONE

    def __setitem__(self, key: K, value: V) -> None:
        if key not in self:
            self._size += 1
        self._changes[key] = value

    def __delitem__(self, key: K) -> None:
        if key not in self:
            raise KeyError(key)
        self._size -= 1
        self._changes[key] = _GONE

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[K]:
        changes = self._changes
        yield from (k for k in self._base if k not in changes)
        yield from (k for k, v in changes.items() if v is not _GONE)


def _derived(mapping: MutableMapping[K, V]) -> MutableMapping[K, V]:
    """A copy of ``mapping`` to change, at the cost of its changes when it is layered."""
    return mapping.derived() if isinstance(mapping, _Layered) else dict(mapping)


class _Index:
    """Tools by a normalised form (``key``) of their prefixed name and of their original name."""

    __slots__ = ("by_name", "by_original", "key", "server_by_prefix")

    def __init__(self, key: KeyFn) -> None:
        self.key = key
        self.by_name: MutableMapping[str, list[ToolInfo]] = {}
        self.by_original: MutableMapping[str, list[ToolInfo]] = {}
        self.server_by_prefix: MutableMapping[str, set[str]] = {}

    def seal(self) -> None:
        """Built: later snapshots derive their indexes from these (see :meth:`copy`)."""
        self.by_name = _Layered(dict(self.by_name))
        self.by_original = _Layered(dict(self.by_original))
        self.server_by_prefix = _Layered(dict(self.server_by_prefix))

    def add(self, tool: ToolInfo, name_key: str, original_key: str) -> None:
        """Index ``tool`` under keys the caller computed with :attr:`key`."""
        self.by_name.setdefault(name_key, []).append(tool)
        self.by_original.setdefault(original_key, []).append(tool)

    def copy(self) -> _Index:
        """A copy sharing the lists: the caller replaces (never edits) each list it changes."""
        index = _Index(self.key)
        index.by_name = _derived(self.by_name)
        index.by_original = _derived(self.by_original)
        index.server_by_prefix = _derived(self.server_by_prefix)
        return index

    def discard(self, tool: ToolInfo, name_key: str, original_key: str) -> None:
        """Remove ``tool`` (by identity) from the lists of its keys, replacing those lists."""
        for mapping, key in ((self.by_name, name_key), (self.by_original, original_key)):
            kept = [t for t in mapping.get(key, ()) if t is not tool]
            if kept:
                mapping[key] = kept
            else:
                mapping.pop(key, None)

    def add_copying(self, tool: ToolInfo, name_key: str, original_key: str) -> None:
        """Like :meth:`add`, on an index whose lists a previous snapshot may share."""
        self.by_name[name_key] = [*self.by_name.get(name_key, ()), tool]
        self.by_original[original_key] = [*self.by_original.get(original_key, ()), tool]

    def add_server(self, server: str) -> None:
        for prefix in {server, server_prefix(server, "server"), server_prefix(server, "short")}:
            key = self.key(prefix)
            if not key:
                continue
            if isinstance(self.server_by_prefix, _Layered):
                # A new set: an earlier snapshot may share the one there.
                self.server_by_prefix[key] = {*self.server_by_prefix.get(key, ()), server}
            else:
                self.server_by_prefix.setdefault(key, set()).add(server)

    def split_prefix(self, key: str) -> Iterator[tuple[str, str]]:
        """Every (server, rest) where ``key`` starts with that server's prefix and ``_``."""
        for i, char in enumerate(key):
            if char == "_":
                for server in self.server_by_prefix.get(key[:i], ()):
                    yield server, key[i + 1 :]


class Catalog:
    """Every tool the adapter offers, each under exactly one name.

    Build it with :meth:`build`. Tools keep the order of servers (config order) and, within a
    server, the order the server listed them (resources after tools). When two tools want the
    same name, the first keeps it and the later one gets a stable hash suffix; each such case is
    in :attr:`collisions`.
    """

    __slots__ = (
        "__weakref__",  # a long-lived process checks that a replaced catalog was freed
        "_by_name",
        "_by_original",
        "_by_server",
        "_collisions",
        "_name_indexes",
        "_suggest_index",
        "_tools",
    )

    _tools: tuple[ToolInfo, ...] | None
    _by_server: dict[str, tuple[ToolInfo, ...]]
    _by_name: MutableMapping[str, ToolInfo]
    _by_original: MutableMapping[str, list[ToolInfo]]
    _suggest_index: _SuggestIndex | None
    _collisions: tuple[NameCollision, ...]
    _name_indexes: tuple[_Index, _Index] | None

    def __init__(self, tools: Iterable[ToolInfo] = (), *, servers: Iterable[str] = ()) -> None:
        """Index ``tools`` (renaming any whose name is taken) and the names of ``servers``.

        ``servers`` lists servers that have no tools but exist; every tool's server is added.
        """
        by_name: dict[str, ToolInfo] = {}
        by_server: dict[str, list[ToolInfo]] = {s: [] for s in servers}
        collisions: list[NameCollision] = []
        for tool in tools:
            if tool.name in by_name:
                assigned = _unique_name(tool.name, tool, by_name)
                collisions.append(
                    NameCollision(
                        name=tool.name,
                        kept_by=by_name[tool.name].server,
                        server=tool.server,
                        original_name=tool.original_name,
                        assigned_name=assigned,
                    )
                )
                tool = dataclasses.replace(tool, name=assigned)
            by_name[tool.name] = tool
            by_server.setdefault(tool.server, []).append(tool)
        self._by_name = _Layered(by_name)
        self._tools = every_tool = tuple(by_name.values())
        self._by_server = {s: tuple(ts) for s, ts in by_server.items()}
        self._collisions = tuple(collisions)
        by_original: dict[str, list[ToolInfo]] = {}
        for tool in every_tool:
            by_original.setdefault(tool.original_name, []).append(tool)
        self._by_original = _Layered(by_original)
        self._suggest_index = None
        # The indexes of names as typed loosely are built when a name is first missed: most
        # lookups are exact, and building them is a third of a large catalog's build.
        self._name_indexes = None

    def _loose_names(self) -> tuple[_Index, _Index]:
        """The indexes of canonical and case-folded names (built on first use)."""
        if self._name_indexes is None:
            exact, folded = _Index(_canonical), _Index(_folded)
            for tool in self.tools():
                name_key, original_key = _canonical(tool.name), _canonical(tool.original_name)
                exact.add(tool, name_key, original_key)
                # Folding the canonical form equals _folded() of the raw name, at half the cost.
                folded.add(tool, name_key.casefold(), original_key.casefold())
            for index in (exact, folded):
                for server in self._by_server:
                    index.add_server(server)
                index.seal()
            self._name_indexes = (exact, folded)
        return self._name_indexes

    def replacing_server(
        self, server: str, tools: Sequence[ToolInfo], *, servers: Sequence[str]
    ) -> Catalog | None:
        """This catalog with ``server``'s tools replaced by ``tools`` (already named, as
        :func:`build_tool_infos` or a filtered view gives them), in the server order
        ``servers``; the work is proportional to the two tool lists, not to the catalog.

        Returns None when a name is contested (a new tool wants a name another server holds,
        or the server held or lost a contested name before): who keeps a name depends on
        every server's order then, and only a full :meth:`build` decides it.
        """
        old = self._by_server.get(server, ())
        if any(c.server == server or c.kept_by == server for c in self._collisions):
            return None
        by_name = _derived(self._by_name)
        for tool in old:
            by_name.pop(tool.name, None)
        for tool in tools:
            if tool.name in by_name or tool.server != server:
                return None
            by_name[tool.name] = tool
        if len(by_name) != len(self._by_name) - len(old) + len(tools):
            return None  # the new list names one tool twice: build() renames it
        catalog = Catalog.__new__(Catalog)
        catalog._by_name = by_name
        catalog._tools = None
        known = self._by_server
        if server in known and len(servers) == len(known) and list(known) == list(servers):
            # A relisting in an unchanged server order (nearly always): a copy, in C, with
            # one server's tools replaced, not a Python loop over every server (8 ms at
            # 19,641 servers, on the event loop).
            catalog._by_server = known.copy()
            catalog._by_server[server] = tuple(tools)
        else:
            catalog._by_server = {
                s: tuple(tools) if s == server else known.get(s, ())
                for s in servers
                if s in known or s == server
            }
        catalog._collisions = self._collisions
        catalog._by_original = _derived(self._by_original)
        for tool in old:
            kept = [t for t in catalog._by_original.get(tool.original_name, ()) if t is not tool]
            if kept:
                catalog._by_original[tool.original_name] = kept
            else:
                catalog._by_original.pop(tool.original_name, None)
        for tool in tools:
            catalog._by_original[tool.original_name] = [
                *catalog._by_original.get(tool.original_name, ()),
                tool,
            ]
        catalog._suggest_index = None
        catalog._name_indexes = None
        if self._name_indexes is None:
            return catalog  # built from the derived catalog's own tools if ever needed
        exact, folded = (index.copy() for index in self._name_indexes)
        for tool in old:
            name_key, original_key = _canonical(tool.name), _canonical(tool.original_name)
            exact.discard(tool, name_key, original_key)
            folded.discard(tool, name_key.casefold(), original_key.casefold())
        for tool in tools:
            name_key, original_key = _canonical(tool.name), _canonical(tool.original_name)
            exact.add_copying(tool, name_key, original_key)
            folded.add_copying(tool, name_key.casefold(), original_key.casefold())
        if server not in known:
            for index in (exact, folded):
                index.add_server(server)
        catalog._name_indexes = (exact, folded)
        return catalog

    @classmethod
    def build(
        cls,
        metadata: Mapping[str, ServerMetadata],
        entries: Mapping[str, ServerEntry],
        settings: Settings,
    ) -> Catalog:
        """The catalog of every server in ``metadata``, named and filtered per ``entries``.

        Server order (which decides who keeps a contested name) is the order of ``entries``,
        then any server only in ``metadata``. Servers whose entry is disabled are left out.
        """
        order = [s for s in entries if s in metadata] + [s for s in metadata if s not in entries]
        servers: list[str] = []
        tools: list[ToolInfo] = []
        for server in order:
            entry = entries.get(server)
            if entry is not None and not entry.is_enabled:
                continue
            servers.append(server)
            tools += build_tool_infos(server, metadata[server], entry=entry, settings=settings)
        return cls(tools, servers=servers)

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(self._by_server)

    @property
    def collisions(self) -> tuple[NameCollision, ...]:
        return self._collisions

    def tools(self, server: str | None = None) -> Sequence[ToolInfo]:
        """All tools, or those of ``server`` (empty for an unknown server)."""
        if server is None:
            if self._tools is None:
                # A catalog derived by replacing_server() joins its servers' tuples when
                # first asked for every tool (a C-level join, not a Python loop).
                self._tools = tuple(itertools.chain.from_iterable(self._by_server.values()))
            return self._tools
        return self._by_server.get(server, ())

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def get(self, name: str) -> ToolInfo | None:
        """The tool named exactly ``name``, if any."""
        return self._by_name.get(name)

    def lookup(self, name: str, *, server: str | None = None) -> ToolInfo:
        """Resolve the name a model or user typed to one tool.

        Tried in order, the first rule that matches anything wins: the exact name; the
        server's own tool name; the same two with ``-``, ``_``, ``__`` and ``.`` treated
        alike; a server prefix (full or short) plus the server's own tool name; then all of
        that ignoring case. ``server`` restricts every rule to that server's tools. Last, a
        ``get_`` word read as ``read_`` may name a resource tool (``docs_get_readme`` for
        ``docs_read_readme``), the spelling of resource tools in earlier designs.

        Raises:
            AmbiguousToolError: the first matching rule matched several tools (``candidates``).
            ToolNotFoundError: nothing matched (``suggestions`` holds up to 5 close names).
        """
        found = self._find(name, server)
        if found is None:
            found = self._find_resource_alias(name, server)
        if found is None:
            raise self._not_found(name, server)
        return found

    def _find_resource_alias(self, name: str, server: str | None) -> ToolInfo | None:
        folded = _folded(name)
        for match in _GET_WORD.finditer(folded):
            start = match.end() - len("get_")
            alias = f"{folded[:start]}read_{folded[match.end() :]}"
            try:
                tool = self._find(alias, server)
            except AmbiguousToolError:
                continue
            if tool is not None and tool.is_resource:
                return tool
        return None

    def _find(self, name: str, server: str | None) -> ToolInfo | None:
        """The tool the first matching rule of :meth:`lookup` names, or None.

        Raises:
            AmbiguousToolError: that rule matched several tools.
        """

        def allowed(tool: ToolInfo) -> bool:
            return server is None or tool.server == server

        exact = self._by_name.get(name)
        if exact is not None and allowed(exact):
            return exact
        found = self._resolve(name, [t for t in self._by_original.get(name, ()) if allowed(t)])
        if found is not None:
            return found
        for index in self._loose_names():
            key = index.key(name)
            for group in (index.by_name.get(key, ()), index.by_original.get(key, ())):
                found = self._resolve(name, [t for t in group if allowed(t)])
                if found is not None:
                    return found
            split = [
                t
                for prefixed_server, rest in index.split_prefix(key)
                if server is None or prefixed_server == server
                for t in index.by_original.get(rest, ())
                if t.server == prefixed_server
            ]
            found = self._resolve(name, split)
            if found is not None:
                return found
        return None

    def _resolve(self, name: str, candidates: Sequence[ToolInfo]) -> ToolInfo | None:
        unique = list({t.name: t for t in candidates}.values())
        if not unique:
            return None
        if len(unique) == 1:
            return unique[0]
        listed = ", ".join(f"{t.name} (server {t.server})" for t in unique)
        raise AmbiguousToolError(
            name,
            f'"{name}" matches {len(unique)} tools: {listed}. Call one by its full name.',
            candidates=[t.name for t in unique],
        )

    def _not_found(self, name: str, server: str | None) -> ToolNotFoundError:
        where = f' on server "{server}"' if server is not None else ""
        if server is not None and server not in self._by_server:
            return ToolNotFoundError(
                name, f'Tool "{name}" not found: no server "{server}" in the catalog.'
            )
        suggestions = self.suggest(name, server=server)
        if suggestions:
            hint = f" Did you mean: {', '.join(suggestions)}?"
        else:
            hint = " Search the catalog by keyword to find the tool you need."
        return ToolNotFoundError(
            name, f'Tool "{name}" not found{where}.{hint}', suggestions=suggestions
        )

    def suggest(
        self, name: str, *, server: str | None = None, limit: int = MAX_SUGGESTIONS
    ) -> list[str]:
        """Up to ``limit`` tool names that look like ``name``, best first.

        A leading server prefix is stripped first, so ``github_serch_code`` is compared as
        ``serch_code``. Similarity is word overlap plus character similarity of the tools' own
        names; ties go to the shorter, then alphabetically first name.
        """
        folded = self._loose_names()[1]
        key = folded.key(name)
        for _server, rest in folded.split_prefix(key):
            if rest:
                key = rest
                break
        if not key or (server is not None and server not in self._by_server):
            return []
        if self._suggest_index is None:
            # Built on the first miss only: most catalogs never need it.
            self._suggest_index = _SuggestIndex(self.tools())
        return self._suggest_index.suggest(key, server=server, limit=limit)


class _SuggestIndex:
    """Word and spelling indexes over the tools' own names, for "did you mean" suggestions.

    Spelling is corrected per word against the catalog's vocabulary (a few thousand words even
    for huge catalogs) rather than per name, which keeps a miss fast at 25,000 tools.
    """

    __slots__ = ("by_compact", "by_token", "tokens", "tools", "vocabulary")

    def __init__(self, tools: Sequence[ToolInfo]) -> None:
        # Keyed by catalog name: ToolInfo holds dicts, so it is not hashable.
        self.tools: dict[str, ToolInfo] = {}
        self.tokens: dict[str, frozenset[str]] = {}
        self.by_token: dict[str, list[str]] = {}
        self.by_compact: dict[str, list[str]] = {}
        for tool in tools:
            tokens = _tokens(tool.original_name)
            self.tools[tool.name] = tool
            self.tokens[tool.name] = tokens
            for token in tokens:
                self.by_token.setdefault(token, []).append(tool.name)
            self.by_compact.setdefault(_compact(tool.original_name), []).append(tool.name)
        self.vocabulary = list(self.by_token)

    def _word_matches(self, word: str) -> dict[str, float]:
        """Catalog words ``word`` may stand for, with how alike they are (1.0 = same)."""
        if word in self.by_token:
            return {word: 1.0}
        matcher = difflib.SequenceMatcher(None, b=word)
        matches: dict[str, float] = {}
        for close in difflib.get_close_matches(word, self.vocabulary, n=3, cutoff=0.7):
            matcher.set_seq1(close)
            matches[close] = matcher.ratio()
        return matches

    def _candidates(self, word_matches: Mapping[str, Mapping[str, float]]) -> set[str]:
        """Tools sharing a word with the query, found through its least common words.

        A word in thousands of tools ("get", "list") says little and would make every miss
        scan the catalog; it still counts when the candidates are scored.
        """
        lists = sorted(
            (self.by_token[word] for matches in word_matches.values() for word in matches),
            key=len,
        )
        candidates: set[str] = set()
        for names in lists:
            if candidates and len(names) > _COMMON_WORD_TOOLS:
                break
            candidates.update(names[: _COMMON_WORD_TOOLS * 2])
        return candidates

    def suggest(self, key: str, *, server: str | None, limit: int) -> list[str]:
        def allowed(name: str) -> bool:
            return server is None or self.tools[name].server == server

        query_tokens = _tokens(key)
        if not query_tokens:
            return []
        word_matches = {q: self._word_matches(q) for q in query_tokens}
        overlap: dict[str, float] = {}
        for name in self._candidates(word_matches):
            if not allowed(name):
                continue
            tool_tokens = self.tokens[name]
            # A soft Jaccard index: a misspelt word counts by how alike it is.
            hits = sum(
                max((w for t, w in ms.items() if t in tool_tokens), default=0.0)
                for ms in word_matches.values()
            )
            overlap[name] = hits / (len(query_tokens) + len(tool_tokens) - hits)
        best = sorted(overlap.items(), key=lambda pair: -pair[1])[:_SUGGESTION_POOL]
        candidates = dict(best)
        for name in self.by_compact.get(_compact(key), ()):
            if allowed(name):
                candidates.setdefault(name, 0.0)
        scored: list[tuple[float, str]] = []
        matcher = difflib.SequenceMatcher(None, b=key)
        for name, word_overlap in candidates.items():
            matcher.set_seq1(_folded(self.tools[name].original_name))
            score = 0.5 * word_overlap + 0.5 * matcher.ratio()
            if score >= _MIN_SUGGESTION_SCORE:
                scored.append((score, name))
        scored.sort(key=lambda pair: (-pair[0], len(pair[1]), pair[1]))
        return [name for _score, name in scored[:limit]]
