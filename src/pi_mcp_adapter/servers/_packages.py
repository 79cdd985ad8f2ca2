"""The command that runs an MCP server published as an npm or PyPI package (``pi-mcp add``).

npm: the entry is what every MCP README writes, ``npx -y <spec> [args]``, and the package is
located the way :func:`~._npx.resolve_npx_command` will locate it at each start (the project's
``node_modules``, the resolution cache, npm's npx cache, else a first install into that cache).
A spec it cannot locate is refused: npx itself would fail the same way at the first start.

PyPI has no ``npx`` in the standard library, so the runner is chosen in this order:

1. ``uvx`` on ``PATH``: ``uvx <pkg>``, or ``uvx --from <spec> <script>`` when the console script
   is not named like the package or a version is pinned;
2. ``pipx`` on ``PATH``: ``pipx run <pkg>`` / ``pipx run --spec <spec> <script>``;
3. the package installed in the environment pi-mcp runs in: its console script, by absolute path.

The console script's name comes from the installed package's metadata when it is installed,
else it is taken to be the package name (the convention ``uvx`` and ``pipx run`` rely on).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from pi_mcp_adapter._errors import UsageError

from ._npx import parse_npx_invocation, resolve_npx_command

__all__ = ["PackageCommand", "PackageKind", "resolve_package_command", "split_package_target"]

PackageKind = Literal["npm", "pypi"]
_PYPI_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?:(==|@)\s*(\S+))?$")


@dataclass(frozen=True, slots=True)
class PackageCommand:
    """What to write into the entry, and what was found while resolving it."""

    command: str
    args: tuple[str, ...]
    package: str
    """The package name, without version or scope markers."""
    runs: str
    """What actually runs, for the person: a resolved binary, a runner, a console script."""


def split_package_target(target: str) -> tuple[PackageKind, str] | None:
    """``npm:<spec>`` or ``pypi:<spec>`` -> (kind, spec); None for anything else."""
    for kind in ("npm", "pypi"):
        prefix = f"{kind}:"
        if target.startswith(prefix):
            spec = target[len(prefix) :].strip()
            if not spec:
                raise UsageError(f"{target!r} names no package; write {prefix}<package>")
            return ("npm" if kind == "npm" else "pypi"), spec
    return None


async def resolve_package_command(
    kind: PackageKind,
    spec: str,
    extra_args: Sequence[str],
    *,
    npx_cache_path: Path,
    environ: Mapping[str, str],
    cwd: Path,
    check: bool = True,
) -> PackageCommand:
    """The command for the package ``spec`` (see the module docstring).

    ``check=False`` writes the npm entry without locating the package.

    Raises:
        UsageError: the spec is malformed, the npm package cannot be located or installed, or
            no runner for a PyPI package is available.
    """
    if kind == "npm":
        return await _npm_command(
            spec, extra_args, npx_cache_path=npx_cache_path, environ=environ, cwd=cwd, check=check
        )
    return _pypi_command(spec, extra_args, environ=environ)


async def _npm_command(
    spec: str,
    extra_args: Sequence[str],
    *,
    npx_cache_path: Path,
    environ: Mapping[str, str],
    cwd: Path,
    check: bool,
) -> PackageCommand:
    args = ("-y", spec, *extra_args)
    invocation = parse_npx_invocation("npx", args)
    if invocation is None:
        raise UsageError(
            f"{spec!r} is not an npm package name (a git, file or tarball spec can be added as "
            f"a command: pi-mcp add NAME -- npx -y {spec})"
        )
    if not check:
        return PackageCommand("npx", args, invocation.package_name, "npx (not checked)")
    resolved = await resolve_npx_command(
        "npx", args, cache_path=npx_cache_path, environ=environ, cwd=cwd
    )
    if not resolved.resolved:
        raise UsageError(
            f"npm package {spec!r} could not be found or installed (is the name right, and "
            "npm reachable?); add it without this check with --no-check"
        )
    version = f"@{resolved.version}" if resolved.version else ""
    runs = f"{resolved.package or invocation.package_name}{version}: " + " ".join(
        (resolved.command, *resolved.args[:1])
    )
    return PackageCommand("npx", args, invocation.package_name, runs)


def _pypi_command(
    spec: str, extra_args: Sequence[str], *, environ: Mapping[str, str]
) -> PackageCommand:
    match = _PYPI_SPEC.match(spec.strip())
    if match is None:
        raise UsageError(f"{spec!r} is not a PyPI requirement (write name or name==version)")
    name, _, version = match.groups()
    pinned = f"{name}=={version}" if version else None
    installed = _installed_distribution(name)
    script = _console_script(installed, name)
    path = environ.get("PATH")
    uvx = shutil.which("uvx", path=path)
    if uvx is not None:
        if pinned is None and script == name:
            return PackageCommand("uvx", (name, *extra_args), name, f"uvx {name}")
        args = ("--from", pinned or name, script, *extra_args)
        return PackageCommand("uvx", args, name, f"uvx --from {pinned or name} {script}")
    if shutil.which("pipx", path=path) is not None:
        if pinned is None and script == name:
            return PackageCommand("pipx", ("run", name, *extra_args), name, f"pipx run {name}")
        args = ("run", "--spec", pinned or name, script, *extra_args)
        return PackageCommand("pipx", args, name, f"pipx run --spec {pinned or name} {script}")
    if installed is None:
        raise UsageError(
            f"PyPI package {name!r} is not installed here and neither uvx nor pipx is on PATH: "
            f"install uv (https://docs.astral.sh/uv/), or `pip install {name}` into this "
            "environment"
        )
    if version is not None and installed.version != version:
        raise UsageError(
            f"{name} {installed.version} is installed here, not {version}, and neither uvx nor "
            "pipx is on PATH to run another version"
        )
    program = _script_path(script)
    if program is None:
        raise UsageError(
            f"{name} is installed here but has no console script to run; add the server as a "
            f"command: pi-mcp add NAME -- {sys.executable} -m <module>"
        )
    return PackageCommand(
        str(program), tuple(extra_args), name, f"{program} ({name} {installed.version})"
    )


def _installed_distribution(name: str) -> metadata.Distribution | None:
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


def _console_script(distribution: metadata.Distribution | None, name: str) -> str:
    """The script a runner should start: the one named like the package, else the only one."""
    if distribution is None:
        return name
    scripts = [ep.name for ep in distribution.entry_points if ep.group == "console_scripts"]
    normalized = _normalize(name)
    for script in scripts:
        if _normalize(script) == normalized:
            return script
    return scripts[0] if len(scripts) == 1 else name


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _script_path(script: str) -> Path | None:
    """Where this environment installed ``script`` (beside the running interpreter)."""
    candidate = Path(sys.executable).parent / script
    if candidate.is_file():
        return candidate
    found = shutil.which(script)
    return Path(found) if found else None
