"""``pi-mcp init``: find other hosts' MCP configs and add them to ``imports``.

The change is planned first (the new text and a unified diff), then applied. The edit is made
in the text itself, so comments and formatting elsewhere in the file survive; only when that is
not possible is the file regenerated from its parsed content (comments are then lost, and the
plan says so). Writes are atomic: a temporary file in the same directory, then a rename.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pi_mcp_adapter._errors import ConfigError

from ._edit import ConfigFileChange, write_config_change
from ._hosts import read_file_text, read_import
from ._jsonc import JsoncDocument, JsoncSyntaxError, parse_jsonc
from ._locations import IMPORT_KINDS, ImportKind, Where
from ._validate import json_type

__all__ = [
    "HostConfig",
    "ImportsChange",
    "apply_imports_change",
    "discover_host_configs",
    "plan_imports_change",
]


@dataclass(frozen=True, slots=True)
class HostConfig:
    """A host config file on this machine that defines at least one MCP server."""

    kind: ImportKind
    path: Path
    servers: tuple[str, ...]


def discover_host_configs(
    home: Path,
    project_dir: Path,
    *,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    on_problem: Callable[[ConfigError], None] | None = None,
) -> list[HostConfig]:
    """Every host file that exists and defines servers, in ``IMPORT_KINDS`` order.

    Files that exist but cannot be read or parsed are left out and passed to ``on_problem``
    (``load_config`` reports them too once they are imported). Nothing is written.
    """
    where = Where(
        home=home,
        project_dir=project_dir,
        platform=platform if platform is not None else sys.platform,
        environ=environ if environ is not None else os.environ,
    )
    found: list[HostConfig] = []
    for kind in IMPORT_KINDS:
        for read in read_import(kind, where):
            if on_problem is not None:
                for error in read.errors:
                    on_problem(error)
            names = tuple(dict.fromkeys(entry.name for entry in read.entries))
            if names:
                found.append(HostConfig(kind, read.file.path, names))
    return found


@dataclass(frozen=True, slots=True)
class ImportsChange:
    """The planned edit of one config file's ``imports``."""

    path: Path
    before: str | None
    """The file's text when the change was planned; ``None`` when it did not exist."""
    after: str
    added: tuple[ImportKind, ...]
    already_listed: tuple[ImportKind, ...]
    reformatted: bool
    """True when the file had to be regenerated, which loses its comments and layout."""

    @property
    def changed(self) -> bool:
        return bool(self.added)

    def diff(self) -> str:
        """The change as a unified diff (empty when nothing changes)."""
        if not self.changed:
            return ""
        before = (self.before or "").splitlines(keepends=True)
        after = self.after.splitlines(keepends=True)
        lines = difflib.unified_diff(
            before,
            after,
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path),
        )
        return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def plan_imports_change(config_file: Path, kinds: Sequence[ImportKind]) -> ImportsChange:
    """Plan adding ``kinds`` to the ``imports`` of ``config_file`` (created when missing).

    Kinds already listed are left alone. Nothing is written.

    Raises:
        ConfigError: the file exists but cannot be read, is not valid JSONC, or its top level
            or ``imports`` has the wrong type; it is never overwritten in that case.
    """
    wanted = list(dict.fromkeys(kinds))
    before = read_file_text(config_file)
    document = _parse_target(config_file, before)
    if document is None:
        added = tuple(wanted)
        prefix = "" if not before else before + ("" if before.endswith("\n") else "\n")
        after = prefix + json.dumps({"imports": list(added)}, indent=2) + "\n"
        return ImportsChange(config_file, before, after, added, (), reformatted=False)
    assert before is not None
    data = document.data
    assert isinstance(data, dict)
    current = data.get("imports") or []
    added = tuple(k for k in wanted if k not in current)
    already = tuple(k for k in wanted if k in current)
    if not added:
        return ImportsChange(config_file, before, before, (), already, reformatted=False)
    after = _insert_imports(before, document, added)
    reformatted = False
    if not _is_same_plus(after, data, added):
        # The text edit did not produce the intended document; regenerate it instead.
        after = json.dumps({**data, "imports": [*current, *added]}, indent=2) + "\n"
        reformatted = True
    return ImportsChange(config_file, before, after, added, already, reformatted)


def apply_imports_change(change: ImportsChange) -> None:
    """Write a planned change atomically. A change with nothing added writes nothing.

    A symlinked config file stays a symlink: its target is rewritten.

    Raises:
        ConfigError: the file changed since the change was planned, or cannot be written.
    """
    if not change.changed:
        return
    planned = ConfigFileChange(change.path, change.before, change.after)
    write_config_change(planned, retry="run init again")


def _parse_target(path: Path, text: str | None) -> JsoncDocument | None:
    if text is None:
        return None
    try:
        document = parse_jsonc(text)
    except JsoncSyntaxError as exc:
        raise ConfigError(
            f"invalid JSON: {exc.message} (column {exc.column}); fix it before running init",
            path=str(path),
            line=exc.line,
        ) from None
    if document is None:
        return None
    if not isinstance(document.data, dict):
        raise ConfigError(
            f"the top level must be an object, not {json_type(document.data)}",
            path=str(path),
            line=1,
        )
    imports = document.data.get("imports")
    if imports is not None and not isinstance(imports, list):
        raise ConfigError(
            f"'imports' must be a list of host names, not {json_type(imports)}",
            path=str(path),
            line=document.line_of(("imports",)),
            field="imports",
        )
    return document


def _insert_imports(text: str, document: JsoncDocument, added: Sequence[str]) -> str:
    data = document.data
    assert isinstance(data, dict)
    items = [json.dumps(kind) for kind in added]
    imports = data.get("imports")
    if isinstance(imports, list) and imports:
        last_start, last_end = document.value_spans[("imports", len(imports) - 1)]
        first_start, _ = document.value_spans[("imports", 0)]
        list_start, _ = document.value_spans[("imports",)]
        if "\n" in text[list_start:first_start]:
            indent = _indent_at(text, last_start)
            insertion = "".join(f",\n{indent}{item}" for item in items)
        else:
            insertion = "".join(f", {item}" for item in items)
        return text[:last_end] + insertion + text[last_end:]
    if isinstance(imports, list):
        start, end = document.value_spans[("imports",)]
        return text[:start] + "[" + ", ".join(items) + "]" + text[end:]
    root_start, root_end = document.value_spans[()]
    member = f'"imports": [{", ".join(items)}]'
    if not data:
        return text[: root_start + 1] + f"\n  {member}\n" + text[root_end - 1 :]
    first_key = next(iter(data))
    first_key_start = document.key_offsets[(first_key,)]
    indent = _indent_at(text, first_key_start)
    if "\n" in text[root_start:first_key_start]:
        return text[: root_start + 1] + f"\n{indent}{member}," + text[root_start + 1 :]
    return text[: root_start + 1] + f" {member}," + text[root_start + 1 :]


def _indent_at(text: str, offset: int) -> str:
    line_start = text.rfind("\n", 0, offset) + 1
    prefix = text[line_start:offset]
    return prefix if not prefix.strip() else "  "


def _is_same_plus(after: str, data: Mapping[str, object], added: Sequence[str]) -> bool:
    try:
        document = parse_jsonc(after)
    except JsoncSyntaxError:
        return False
    if document is None or not isinstance(document.data, dict):
        return False
    current = data.get("imports") or []
    assert isinstance(current, list)
    expected = {**data, "imports": [*current, *added]}
    return document.data == expected
