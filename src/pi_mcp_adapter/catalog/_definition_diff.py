"""How a tool's definition differs from the one the user last trusted, in a few words.

A server can change a tool's description (instructions the model reads) or its parameters at
any time; the metadata cache records such changes with the trusted definition as a baseline
(see :class:`~pi_mcp_adapter.catalog.DefinitionChanges`). This module turns a record into
short, typed differences: the words added to and removed from the description, and the
parameters added, removed or changed. Surfaces render them; nothing here is wording for a
model.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._cache import DefinitionChanges

__all__ = ["ToolDefinitionDiff", "diff_definitions"]

MAX_RUNS = 3
"""Description fragments kept per side: enough to show an injected sentence."""
MAX_RUN_CHARS = 80
MAX_PARAMETERS = 5

ChangeKind = Literal["added", "removed", "changed"]


@dataclass(frozen=True, slots=True)
class ToolDefinitionDiff:
    """One tool's change since it was last trusted (by the server's own tool name)."""

    tool: str
    kind: ChangeKind
    fields: tuple[str, ...] = ()
    """For ``changed``: the definition fields that differ (``description``, ``inputSchema``,
    ``outputSchema``, ``annotations``, ``title``)."""
    description: str = ""
    """The description now (for ``added``: what the new tool says it does)."""
    description_added: tuple[str, ...] = ()
    """Runs of words the description gained, each cut to :data:`MAX_RUN_CHARS`."""
    description_removed: tuple[str, ...] = ()
    parameters_added: tuple[str, ...] = ()
    """``name (type)`` of each new parameter."""
    parameters_removed: tuple[str, ...] = ()
    parameters_changed: tuple[str, ...] = ()
    """``name: string -> integer``, ``name: now required``, ``name: description changed``."""


def diff_definitions(
    changes: DefinitionChanges, current_tools: Sequence[Mapping[str, Any]]
) -> tuple[ToolDefinitionDiff, ...]:
    """The differences ``changes`` records, against the server's ``current_tools`` (wire shape).

    A record written before baselines were kept yields the changed field names only.
    """
    now = {t["name"]: t for t in current_tools if isinstance(t.get("name"), str)}
    diffs: list[ToolDefinitionDiff] = []
    for change in changes.changed:
        before = changes.baseline.get(change.name)
        after = now.get(change.name)
        if before is None or after is None:
            diffs.append(ToolDefinitionDiff(change.name, "changed", fields=change.fields))
            continue
        diffs.append(_changed(change.name, change.fields, before, after))
    for name in changes.added:
        description = _text(now.get(name, {}).get("description"))
        diffs.append(ToolDefinitionDiff(name, "added", description=description))
    for name in changes.removed:
        diffs.append(ToolDefinitionDiff(name, "removed"))
    return tuple(diffs)


def _changed(
    name: str, fields: tuple[str, ...], before: Mapping[str, Any], after: Mapping[str, Any]
) -> ToolDefinitionDiff:
    added, removed = _word_runs(_text(before.get("description")), _text(after.get("description")))
    params_added, params_removed, params_changed = _parameter_changes(
        _mapping(before.get("inputSchema")), _mapping(after.get("inputSchema"))
    )
    return ToolDefinitionDiff(
        name,
        "changed",
        fields=fields,
        description=_text(after.get("description")),
        description_added=added,
        description_removed=removed,
        parameters_added=params_added,
        parameters_removed=params_removed,
        parameters_changed=params_changed,
    )


def _word_runs(before: str, after: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    old, new = before.split(), after.split()
    added: list[str] = []
    removed: list[str] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("replace", "delete"):
            removed.append(_cut(" ".join(old[i1:i2])))
        if op in ("replace", "insert"):
            added.append(_cut(" ".join(new[j1:j2])))
    return tuple(added[:MAX_RUNS]), tuple(removed[:MAX_RUNS])


def _parameter_changes(
    before: Mapping[str, Any], after: Mapping[str, Any]
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    old, new = _mapping(before.get("properties")), _mapping(after.get("properties"))
    old_required, new_required = _required(before), _required(after)
    added = [f"{n} ({_type(new[n])})" for n in new if n not in old]
    removed = [str(n) for n in old if n not in new]
    changed: list[str] = []
    for name in (n for n in new if n in old):
        was, now = _mapping(old[name]), _mapping(new[name])
        if _type(was) != _type(now):
            changed.append(f"{name}: {_type(was)} -> {_type(now)}")
        if (name in old_required) != (name in new_required):
            changed.append(f"{name}: now {'required' if name in new_required else 'optional'}")
        rest_was = {k: v for k, v in was.items() if k != "type"}
        rest_now = {k: v for k, v in now.items() if k != "type"}
        if rest_was != rest_now:
            what = (
                "description"
                if rest_was.get("description") != rest_now.get("description")
                else "constraints"
            )
            changed.append(f"{name}: {what} changed")
    if not (added or removed or changed) and before != after:
        changed.append("schema changed outside its parameters")
    return (
        tuple(added[:MAX_PARAMETERS]),
        tuple(removed[:MAX_PARAMETERS]),
        tuple(changed[:MAX_PARAMETERS]),
    )


def _type(schema: Any) -> str:
    value = _mapping(schema).get("type")
    if isinstance(value, list):
        return " | ".join(str(v) for v in value)
    return str(value) if value is not None else "any"


def _required(schema: Mapping[str, Any]) -> set[str]:
    value = schema.get("required")
    return {str(v) for v in value} if isinstance(value, list) else set()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _cut(text: str) -> str:
    return text if len(text) <= MAX_RUN_CHARS else text[: MAX_RUN_CHARS - 1] + "…"
