"""Environment-variable references and ``~`` in config values.

Four spellings of a reference are accepted, because users copy entries between hosts that each
use their own: ``${VAR}`` (shell, Claude), ``${env:VAR}`` (VS Code, Cursor, Windsurf),
``$env:VAR`` (PowerShell) and ``{env:VAR}`` (OpenCode). A variable that is not set becomes an
empty string; the caller decides whether that is acceptable for the field (it is not for ``url``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Interpolated", "expand_home", "interpolate"]

_NAME = r"[A-Za-z0-9_]+"  # as the reference reads a name (JavaScript's \w)
_REFERENCE = re.compile(
    rf"\$\{{env:(?P<vscode>{_NAME})\}}"
    rf"|\$\{{(?P<shell>{_NAME})\}}"
    rf"|\$env:(?P<powershell>{_NAME})"
    rf"|\{{env:(?P<opencode>{_NAME})\}}"
)


@dataclass(frozen=True, slots=True)
class Interpolated:
    """The value with references replaced, the names of the variables that were not set, and
    the ``(name, value)`` of every variable that was substituted (secrets to register)."""

    value: str
    missing: tuple[str, ...]
    substituted: tuple[tuple[str, str], ...] = ()


def interpolate(value: str, environ: Mapping[str, str]) -> Interpolated:
    """Replace every variable reference in ``value`` with its value from ``environ``."""
    missing: list[str] = []
    substituted: dict[str, str] = {}

    def replace(match: re.Match[str]) -> str:
        name = next(group for group in match.groups() if group is not None)
        found = environ.get(name)
        if found is None:
            if name not in missing:
                missing.append(name)
            return ""
        substituted[name] = found
        return found

    return Interpolated(_REFERENCE.sub(replace, value), tuple(missing), tuple(substituted.items()))


def expand_home(value: str, home: Path) -> str:
    """Expand a leading ``~`` (alone or followed by a path separator) to ``home``.

    ``~user`` forms are left alone: they name another account, which a config shared between
    machines should not assume.
    """
    if value == "~":
        return str(home)
    if value.startswith(("~/", "~\\")):
        return str(home) + value[1:]
    return value
