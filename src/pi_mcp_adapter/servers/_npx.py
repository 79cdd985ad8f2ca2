"""Run ``npx`` / ``npm exec`` servers through the package's own binary.

A server configured as ``npx -y @scope/pkg args`` normally runs as a tree of npm, a shell and
node; npm alone costs tens of megabytes and most of a second per start. The package npx would
run is already on disk, so :func:`resolve_npx_command` finds it and returns a command that runs
it directly (``node <bin> args`` for JavaScript bins).

Where the package is looked for, in the order npx itself uses:

1. Only for a server that the project's own (trusted) file defines (``project_code``): the
   project around ``cwd``: for a bare unscoped name, a ``node_modules/.bin/<name>`` in ``cwd``
   or any ancestor; then ``<project>/node_modules/<pkg>``, where ``<project>`` is the nearest
   ancestor holding a ``package.json`` or ``node_modules``. These lookups are a few ``stat``
   calls, so they run every time and are never cached. For any other server, code found in
   the project arrived with the project (a cloned repository) and is never run: this step is
   skipped, a resolution recorded in step 2 under ``cwd`` or a ``node_modules`` npx would
   search from there is not reused, and npm runs from the agent dir, so the project's
   ``.npmrc`` does not choose the cache or the registry the package comes from.
2. The resolution cache ``cache_path`` (``<agent dir>/mcp-npx-cache.json``, shared with the
   reference adapter): entries live 24 hours, and only while their bin exists and, for an exact
   version spec, their version matches.
3. npm's npx cache, ``<npm cache>/_npx/*/node_modules/<pkg>``: first the install npx made for
   this very spec, then the others, newest first.
4. If nothing fits, ``npm exec --yes --package <spec> -- node -e 1`` installs the package into
   the npx cache (as npx would on first use), and step 3 runs again.

Version rules: an exact version (``pkg@1.2.3``) must equal the installed one; a bare name takes
any installed version; a tag or range (``@latest``, ``@^1.2``) is only matched by the install
npx made for that same spec, because only the registry can say whether another copy satisfies
it. Like the reference, a bare name or tag keeps using the installed copy for up to 24 hours
even if a newer release appears; pin a version to control upgrades.

Anything unexpected (another npx flag, a git or file spec, an ambiguous bin, npm missing, a
failed or slow install) leaves the command unchanged: resolution is an optimisation and never
the reason a server fails to start.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio

__all__ = [
    "NPX_CACHE_TTL_S",
    "NpxInvocation",
    "ResolvedCommand",
    "parse_npx_invocation",
    "resolve_npx_command",
]

_log = logging.getLogger(__name__)

NPX_CACHE_TTL_S = 24 * 60 * 60
"""How long a resolution in ``mcp-npx-cache.json`` is trusted without looking again."""

_CACHE_FORMAT_VERSION = 2  # the reference writes version 2; other versions are discarded

# A cold install downloads the whole dependency tree; 30 s is what the reference allows before
# it gives up and lets npx do the work at spawn time.
_INSTALL_TIMEOUT_S = 30.0
# `npm config get cache` only reads npmrc files (about 0.3 s); a hang means a broken npm.
_NPM_CONFIG_TIMEOUT_S = 10.0

# Servers are resolved concurrently at startup; writers in this process take turns so that
# none drops another's entry. Across processes, a lost entry only costs one more lookup.
_CACHE_WRITE_LOCK = threading.Lock()

_JS_SUFFIXES = frozenset({".js", ".mjs", ".cjs"})
_SHEBANG_PROBE_BYTES = 256

# npm package names: lowercase for new packages, but legacy names may contain capitals.
_NAME_RE = re.compile(r"^(?:@[A-Za-z0-9][\w.~-]*/)?[A-Za-z0-9][\w.~-]*$")
_TARBALL_RE = re.compile(r"\.(?:tgz|tar|tar\.gz)$", re.IGNORECASE)
# What npm calls a "version" spec (semver.valid in loose mode: any run of `v`, `=` and spaces
# before it, so `=v1.2.3` pins 1.2.3 as it does in npm and the reference); build metadata is
# left out because npm drops it from published versions.
_EXACT_VERSION_RE = re.compile(r"^[v=\s]*(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)(?:\+[0-9A-Za-z.-]+)?$")
_BIN_NAME_RE = re.compile(r"^[\w@~+][\w@.~+-]*$")

_Runner = Literal["npx", "npm"]


@dataclass(frozen=True, slots=True)
class ResolvedCommand:
    """The command to spawn for a server.

    ``resolved`` is False when ``command`` and ``args`` are the configured ones, unchanged;
    when True, ``package`` names the npm package that provides the binary and ``version`` is
    its installed version when known.

    Raises:
        TypeError: ``args`` is not a tuple.
        ValueError: ``resolved`` is True but ``package`` is None.
    """

    command: str
    args: tuple[str, ...]
    resolved: bool
    package: str | None = None
    version: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.args, tuple):
            raise TypeError("ResolvedCommand.args must be a tuple of strings")
        if self.resolved and self.package is None:
            raise ValueError("a resolved command must name the package it came from")


@dataclass(frozen=True, slots=True)
class NpxInvocation:
    """What an ``npx`` / ``npm exec`` command line asks npm to run.

    ``package_spec`` is the spec as written (``@scope/pkg@^1.2``), split into ``package_name``
    and ``version_spec`` (None for a bare name). ``bin_name`` is set only when the package was
    given with ``-p``/``--package`` and the command names the bin; ``bin_args`` go to the bin.
    """

    runner: _Runner
    package_spec: str
    package_name: str
    version_spec: str | None
    bin_name: str | None
    bin_args: tuple[str, ...]

    @property
    def exact_version(self) -> str | None:
        """The version an exact spec pins (``1.2.3`` for ``pkg@v1.2.3``), else None."""
        if self.version_spec is None:
            return None
        return _exact_version(self.version_spec)

    @property
    def cache_key(self) -> str:
        """The key of this invocation in ``mcp-npx-cache.json`` (the reference's key format)."""
        key = [self.runner, self.package_spec, self.bin_name or ""]
        return json.dumps(key, separators=(",", ":"), ensure_ascii=False)


def parse_npx_invocation(command: str, args: Sequence[str]) -> NpxInvocation | None:
    """Read an ``npx`` or ``npm exec`` command line.

    Understands ``-y``/``--yes``, ``-p``/``--package X``/``--package=X`` (once), a ``--``
    separator, scoped names and version specs. Returns None for anything else: another runner,
    any other flag, several packages, or a spec that is not a registry package (git, file, URL,
    alias).
    """
    runner = _runner_of(command)
    if runner is None:
        return None
    rest = list(args)
    if runner == "npm":
        if not rest or rest[0] not in ("exec", "x"):
            return None
        rest = rest[1:]

    package_option: str | None = None
    separated = False
    index = 0
    while index < len(rest):
        arg = rest[index]
        if arg == "--":
            separated = True
            index += 1
            break
        if not arg.startswith("-") or arg == "-":
            break
        if arg in ("-y", "--yes"):
            index += 1
            continue
        if arg in ("-p", "--package"):
            if index + 1 >= len(rest):
                return None
            value, index = rest[index + 1], index + 2
        elif arg.startswith(("--package=", "-p=")):
            value, index = arg.partition("=")[2], index + 1
        else:
            return None
        if package_option is not None or not value:
            return None
        package_option = value

    positional = rest[index:]
    if runner == "npm" and not separated:
        # Without `--`, npm reads flags anywhere on the line as its own, and a later `--`
        # ends them; only plain words are certain to reach the command.
        if "--" in positional:
            cut = positional.index("--")
            head, tail = positional[:cut], positional[cut + 1 :]
        else:
            head, tail = positional, []
        if any(word.startswith("-") for word in head):
            return None
        positional = head + tail
    if runner == "npx" and "--" in positional and positional.index("--") == len(positional) - 1:
        # A `--` with nothing after it ends npm's options and passes nothing on (npx drops it).
        positional = positional[:-1]
    if not positional:
        return None

    if package_option is None:
        spec, bin_name, bin_args = positional[0], None, positional[1:]
    else:
        spec, bin_name, bin_args = package_option, positional[0], positional[1:]
        if not _BIN_NAME_RE.fullmatch(bin_name):
            return None
    parts = _split_package_spec(spec)
    if parts is None:
        return None
    name, version = parts
    return NpxInvocation(
        runner=runner,
        package_spec=spec,
        package_name=name,
        version_spec=version,
        bin_name=bin_name,
        bin_args=tuple(bin_args),
    )


async def resolve_npx_command(
    command: str,
    args: Sequence[str],
    *,
    cache_path: Path,
    environ: Mapping[str, str],
    cwd: Path | None = None,
    install_if_missing: bool = True,
    project_code: bool = False,
    clock: Callable[[], float] = time.time,
) -> ResolvedCommand:
    """Return the command that runs what ``command args`` would run, without npm in between.

    ``environ`` is the environment the server will get: it decides the npm cache directory
    (``NPM_CONFIG_CACHE``, else ``npm config get cache``, else ``~/.npm``) and is passed to the
    npm subprocesses. ``cwd`` is where the server will run (default: the current directory);
    the project around it is searched first, as npx does. ``install_if_missing=False`` skips
    the cold ``npm exec`` install. ``project_code`` lets code installed in the project around
    ``cwd`` run: only for a server defined by that project's own trusted file (see the module
    docstring). ``clock`` returns the current Unix time in seconds and ages
    the entries of ``cache_path``.

    Never raises for an unresolvable command: the result then has ``resolved=False`` and the
    original ``command`` and ``args``. Successful lookups in npm's npx cache are recorded in
    ``cache_path`` (written atomically; an unreadable file is ignored and replaced).
    """
    original = ResolvedCommand(command, tuple(args), resolved=False)
    invocation = parse_npx_invocation(command, args)
    if invocation is None:
        return original
    workdir = cwd if cwd is not None else Path.cwd()
    try:
        found = await _locate(
            invocation,
            command=command,
            cache_path=cache_path,
            environ=environ,
            workdir=workdir,
            install_if_missing=install_if_missing,
            project_code=project_code,
            now_s=clock(),
        )
    except (_Unresolvable, OSError) as exc:
        _log.debug("keeping %s for %s: %s", command, invocation.package_spec, exc)
        return original
    if found.is_js:
        program, program_args = "node", (str(found.bin_path), *invocation.bin_args)
    else:
        program, program_args = str(found.bin_path), invocation.bin_args
    return ResolvedCommand(
        program,
        program_args,
        resolved=True,
        package=found.package or invocation.package_name,
        version=found.version,
    )


class _Unresolvable(Exception):
    """npx might run something other than what we could find; keep the original command."""


@dataclass(frozen=True, slots=True)
class _Installed:
    bin_path: Path
    is_js: bool
    version: str | None
    package: str | None = None  # set when it differs from what the command line named


async def _locate(
    invocation: NpxInvocation,
    *,
    command: str,
    cache_path: Path,
    environ: Mapping[str, str],
    workdir: Path,
    install_if_missing: bool,
    project_code: bool,
    now_s: float,
) -> _Installed:
    if project_code:
        local = await anyio.to_thread.run_sync(_find_in_project, invocation, workdir)
        if local is not None:
            return local
        npm_dir = workdir
        foreign: tuple[Path, ...] = ()
    else:
        foreign = _project_code_dirs(workdir)
        # npm reads the .npmrc of the directory it runs in: a project's could name the cache
        # or the registry that the package comes from.
        npm_dir = cache_path.parent
        npm_dir.mkdir(parents=True, exist_ok=True)
    cached = await anyio.to_thread.run_sync(_read_cached, cache_path, invocation, now_s)
    # An entry may have been recorded by a lookup in a project (by an older version, or the
    # reference adapter sharing the file): for a server defined elsewhere it is looked up again.
    if cached is not None and not _is_under(cached.bin_path, foreign):
        return cached

    npm = _npm_executable(command, environ)
    npm_cache = await _npm_cache_dir(npm, environ, npm_dir)
    found = await anyio.to_thread.run_sync(_find_in_npx_cache, invocation, npm_cache)
    if found is None and install_if_missing:
        if npm is None:
            raise _Unresolvable("npm is not on PATH, so the package cannot be installed")
        await _install_into_npx_cache(npm, invocation.package_spec, environ, npm_dir)
        found = await anyio.to_thread.run_sync(_find_in_npx_cache, invocation, npm_cache)
    if found is None:
        raise _Unresolvable(f"no usable install in {npm_cache / '_npx'}")
    await anyio.to_thread.run_sync(_write_cached, cache_path, invocation, found, now_s)
    return found


# --- parsing helpers ---------------------------------------------------------------------------


def _runner_of(command: str) -> _Runner | None:
    # Windows configs name the shims (`npx.cmd`); the basename is read on every platform so a
    # config written on one works on the other.
    base = re.split(r"[\\/]", command)[-1].lower()
    for suffix in (".cmd", ".exe"):
        base = base.removesuffix(suffix)
    if base == "npx":
        return "npx"
    if base == "npm":
        return "npm"
    return None


def _split_package_spec(spec: str) -> tuple[str, str | None] | None:
    if spec.startswith("@"):
        slash = spec.find("/")
        if slash < 0:
            return None
        at = spec.find("@", slash)
    else:
        at = spec.find("@")
    name, version = (spec, None) if at < 0 else (spec[:at], spec[at + 1 :])
    if len(name) > 214 or not _NAME_RE.fullmatch(name) or _TARBALL_RE.search(name):
        return None
    # `pkg@npm:other`, `pkg@github:u/r`, `pkg@file:../x` and URLs are not registry versions.
    if version is not None and (
        not version.strip() or any(ch in version for ch in ":/\\") or not version.isprintable()
    ):
        return None
    return name, version


def _exact_version(version_spec: str) -> str | None:
    match = _EXACT_VERSION_RE.fullmatch(version_spec.strip())
    return match.group(1) if match else None


# --- inspecting installed packages ------------------------------------------------------------


def _read_json_object(path: Path) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _bin_entries(manifest: Mapping[str, object], package_name: str) -> dict[str, str]:
    raw = manifest.get("bin")
    if isinstance(raw, str) and raw:
        return {package_name.rpartition("/")[2]: raw}
    if isinstance(raw, dict):
        return {
            k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str) and k and v
        }
    return {}


def _choose_bin(package_name: str, bins: Mapping[str, str], explicit: str | None) -> str | None:
    if explicit is not None:
        return explicit if explicit in bins else None
    scope, _, unscoped = package_name.rpartition("/")
    preferred = [unscoped, f"{scope.removeprefix('@')}-{unscoped}"] if scope else [unscoped]
    for name in preferred:
        if name in bins:
            return name
    return next(iter(bins), None)


def _is_javascript(path: Path) -> bool:
    if path.suffix.lower() in _JS_SUFFIXES:
        return True
    with path.open("rb") as handle:
        head = handle.read(_SHEBANG_PROBE_BYTES)
    first_line = head.split(b"\n", 1)[0]
    return first_line.startswith(b"#!") and b"node" in first_line


def _inspect_package(
    package_dir: Path, invocation: NpxInvocation, *, installed_for_spec: bool
) -> _Installed | None:
    """The bin of the package in ``package_dir``, if its version fits the invocation."""
    manifest = _read_json_object(package_dir / "package.json")
    if manifest is None:
        return None
    raw_version = manifest.get("version")
    version = raw_version if isinstance(raw_version, str) else None
    if not _version_fits(invocation, version, installed_for_spec=installed_for_spec):
        return None
    bins = _bin_entries(manifest, invocation.package_name)
    bin_name = _choose_bin(invocation.package_name, bins, invocation.bin_name)
    if bin_name is None:
        return None
    root = package_dir.resolve()
    bin_path = (root / bins[bin_name]).resolve()
    # npm refuses bins outside their package; a manifest pointing elsewhere is not trusted.
    if not bin_path.is_relative_to(root) or not bin_path.is_file():
        return None
    is_js = _is_javascript(bin_path)
    if not is_js and not os.access(bin_path, os.X_OK):
        return None
    return _Installed(bin_path, is_js, version)


def _version_fits(
    invocation: NpxInvocation, installed: str | None, *, installed_for_spec: bool
) -> bool:
    if invocation.version_spec is None:
        return True
    exact = invocation.exact_version
    if exact is not None:
        return installed is not None and _exact_version(installed) == exact
    return installed_for_spec


def _find_in_project(invocation: NpxInvocation, workdir: Path) -> _Installed | None:
    """What npx would take from the project around ``workdir``.

    Raises:
        _Unresolvable: the project holds a candidate whose fitness only npm can judge.
    """
    project = _project_root(workdir)
    if invocation.bin_name is None and invocation.version_spec is None:
        local_bin = _project_bin(invocation.package_spec, project, workdir)
        if local_bin is not None:
            package, version = _owning_package(local_bin)
            return _Installed(local_bin, _is_javascript(local_bin), version, package)
    package_dir = project.joinpath("node_modules", *invocation.package_name.split("/"))
    if not (package_dir / "package.json").is_file():
        return None
    if invocation.version_spec is not None and invocation.exact_version is None:
        raise _Unresolvable(
            f"the project has {invocation.package_name}; only the registry can tell whether "
            f"it satisfies {invocation.version_spec!r}"
        )
    return _inspect_package(package_dir, invocation, installed_for_spec=False)


def _project_bin(word: str, project: Path, workdir: Path) -> Path | None:
    """The bin npx runs for a bare ``word`` before treating it as a package name."""
    own = _read_json_object(project / "package.json")
    if own is not None and word in _bin_entries(own, str(own.get("name") or "")):
        raise _Unresolvable("the project's own package.json provides that bin")
    if "/" in word:  # a scoped name never names a bin
        return None
    for directory in (workdir, *workdir.parents):
        link = directory / "node_modules" / ".bin" / word
        if link.is_file():
            return link.resolve()
    return None


def _owning_package(bin_path: Path) -> tuple[str | None, str | None]:
    """Name and version of the installed package that ``bin_path`` belongs to."""
    for directory in bin_path.parents:
        if directory.name == "node_modules":
            break
        manifest = _read_json_object(directory / "package.json")
        if manifest is not None:
            name, version = manifest.get("name"), manifest.get("version")
            return (
                name if isinstance(name, str) else None,
                version if isinstance(version, str) else None,
            )
    return None, None


def _project_code_dirs(workdir: Path) -> tuple[Path, ...]:
    """Where code that came with the project around ``workdir`` may lie: ``workdir`` itself
    and every ``node_modules`` npx would search from there (real paths)."""
    dirs = [workdir.resolve()]
    for directory in (workdir, *workdir.parents):
        modules = directory / "node_modules"
        if modules.is_dir():
            dirs.append(modules.resolve())
    return tuple(dirs)


def _is_under(path: Path, directories: Sequence[Path]) -> bool:
    real = path.resolve()
    return any(real.is_relative_to(directory) for directory in directories)


def _project_root(workdir: Path) -> Path:
    # npm's local prefix: the nearest directory with a package.json or node_modules.
    for directory in (workdir, *workdir.parents):
        if (directory / "package.json").is_file() or (directory / "node_modules").is_dir():
            return directory
    return workdir


def _find_in_npx_cache(invocation: NpxInvocation, npm_cache: Path) -> _Installed | None:
    npx_root = npm_cache / "_npx"
    if not npx_root.is_dir():
        return None
    candidates: list[tuple[bool, float, str, Path]] = []
    for install_dir in npx_root.iterdir():
        package_dir = install_dir.joinpath("node_modules", *invocation.package_name.split("/"))
        if not (package_dir / "package.json").is_file():
            continue
        marker = install_dir / "package.json"
        # npm records the specs an install was made for under `_npx.packages` and rewrites
        # the file on every run, so its mtime says when the install was last used.
        requested = _requested_specs(marker)
        try:
            used_at = (marker if marker.is_file() else install_dir).stat().st_mtime
        except OSError:
            continue
        for_spec = invocation.package_spec in requested
        candidates.append((not for_spec, -used_at, install_dir.name, package_dir))
    for not_for_spec, _, _, package_dir in sorted(candidates):
        found = _inspect_package(package_dir, invocation, installed_for_spec=not not_for_spec)
        if found is not None:
            return found
    return None


def _requested_specs(marker: Path) -> list[str]:
    manifest = _read_json_object(marker)
    npx_info = manifest.get("_npx") if manifest is not None else None
    packages = npx_info.get("packages") if isinstance(npx_info, dict) else None
    if not isinstance(packages, list):
        return []
    return [p for p in packages if isinstance(p, str)]


# --- npm subprocesses -------------------------------------------------------------------------


def _npm_executable(command: str, environ: Mapping[str, str]) -> str | None:
    # A runner given by path (`/opt/node/bin/npx`) has its own npm next to it.
    directory = re.split(r"[\\/]", command)[:-1]
    if directory:
        for name in ("npm", "npm.cmd"):
            sibling = Path(command).parent / name
            if sibling.is_file() and os.access(sibling, os.X_OK):
                return str(sibling)
    return shutil.which("npm", path=environ.get("PATH"))


async def _npm_cache_dir(npm: str | None, environ: Mapping[str, str], workdir: Path) -> Path:
    for key in ("NPM_CONFIG_CACHE", "npm_config_cache"):
        if environ.get(key):
            return _absolute(environ[key], environ, workdir)
    for key, value in environ.items():  # npm reads `npm_config_*` case-insensitively
        if key.lower() == "npm_config_cache" and value:
            return _absolute(value, environ, workdir)
    if npm is not None:
        completed = await _run_bounded(
            [npm, "config", "get", "cache"],
            environ=environ,
            workdir=workdir,
            timeout_s=_NPM_CONFIG_TIMEOUT_S,
            capture_stdout=True,
        )
        if completed is not None and completed[0] == 0:
            lines = completed[1].decode("utf-8", "replace").strip().splitlines()
            if lines and Path(lines[-1].strip()).is_absolute():
                return Path(lines[-1].strip())
    if os.name == "nt" and environ.get("LOCALAPPDATA"):
        return Path(environ["LOCALAPPDATA"]) / "npm-cache"
    home = environ.get("HOME") or environ.get("USERPROFILE")
    return (Path(home) if home else Path.home()) / ".npm"


def _absolute(value: str, environ: Mapping[str, str], workdir: Path) -> Path:
    if value == "~" or value.startswith(("~/", "~\\")):
        home = environ.get("HOME") or environ.get("USERPROFILE") or str(Path.home())
        return Path(home) / value[2:]
    path = Path(value)
    return path if path.is_absolute() else workdir / path


async def _install_into_npx_cache(
    npm: str, package_spec: str, environ: Mapping[str, str], workdir: Path
) -> None:
    """Have npm put ``package_spec`` into the npx cache, exactly as ``npx -y`` would.

    Raises:
        _Unresolvable: npm failed or did not finish within the install budget.
    """
    completed = await _run_bounded(
        [npm, "exec", "--yes", "--package", package_spec, "--", "node", "-e", "1"],
        environ=environ,
        workdir=workdir,
        timeout_s=_INSTALL_TIMEOUT_S,
        capture_stdout=False,
    )
    if completed is None:
        raise _Unresolvable(f"npm did not install {package_spec} within {_INSTALL_TIMEOUT_S:g} s")
    if completed[0] != 0:
        raise _Unresolvable(f"npm could not install {package_spec} (exit status {completed[0]})")


async def _run_bounded(
    argv: Sequence[str],
    *,
    environ: Mapping[str, str],
    workdir: Path,
    timeout_s: float,
    capture_stdout: bool,
) -> tuple[int, bytes] | None:
    """Run ``argv`` to completion; None if it could not start or outlived ``timeout_s``.

    The child gets its own session so that a timeout ends npm together with the node
    processes it started. stdin is closed: when this package serves MCP over stdio, our stdin
    carries the protocol and must never reach npm.
    """
    try:
        process = await anyio.open_process(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture_stdout else subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=dict(environ),
            cwd=workdir,
            start_new_session=os.name != "nt",
        )
    except OSError:
        return None
    try:
        with anyio.move_on_after(timeout_s):
            output = bytearray()
            if process.stdout is not None:
                async for chunk in process.stdout:
                    output += chunk
            returncode = await process.wait()
            return returncode, bytes(output)
        return None
    finally:
        if process.returncode is None:
            _kill_process_tree(process.pid, process.kill)
        with anyio.CancelScope(shield=True):
            await process.aclose()


def _kill_process_tree(pid: int, kill_leader: Callable[[], None]) -> None:
    if os.name == "nt":
        with contextlib.suppress(ProcessLookupError):
            kill_leader()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# --- the resolution cache file ----------------------------------------------------------------


def _load_entries(cache_path: Path) -> dict[str, object]:
    document = _read_json_object(cache_path)
    if document is None or document.get("version") != _CACHE_FORMAT_VERSION:
        return {}
    entries = document.get("entries")
    return dict(entries) if isinstance(entries, dict) else {}


def _entry_age_ok(entry: Mapping[str, object], now_s: float) -> bool:
    resolved_at_ms = entry.get("resolvedAt")
    if isinstance(resolved_at_ms, bool) or not isinstance(resolved_at_ms, int | float):
        return False
    age_s = now_s - resolved_at_ms / 1000
    return 0 <= age_s <= NPX_CACHE_TTL_S


def _read_cached(cache_path: Path, invocation: NpxInvocation, now_s: float) -> _Installed | None:
    entry = _load_entries(cache_path).get(invocation.cache_key)
    if not isinstance(entry, dict) or not _entry_age_ok(entry, now_s):
        return None
    bin_path, is_js, version = (
        entry.get("resolvedBin"),
        entry.get("isJs"),
        entry.get("packageVersion"),
    )
    if not isinstance(bin_path, str) or not isinstance(is_js, bool):
        return None
    if version is not None and not isinstance(version, str):
        return None
    exact = invocation.exact_version
    if exact is not None and (version is None or _exact_version(version) != exact):
        return None
    if not Path(bin_path).is_file():
        return None
    return _Installed(Path(bin_path), is_js, version)


def _write_cached(
    cache_path: Path, invocation: NpxInvocation, found: _Installed, now_s: float
) -> None:
    """Record ``found`` for ``invocation``; a failure to write only costs a later lookup."""
    with _CACHE_WRITE_LOCK:
        entries = {
            key: entry
            for key, entry in _load_entries(cache_path).items()
            if isinstance(entry, dict) and _entry_age_ok(entry, now_s)
        }
        entry: dict[str, object] = {
            "resolvedBin": str(found.bin_path),
            "resolvedAt": int(now_s * 1000),
            "isJs": found.is_js,
        }
        if found.version is not None:
            entry["packageVersion"] = found.version
        entries[invocation.cache_key] = entry
        _replace_file(
            cache_path,
            json.dumps({"version": _CACHE_FORMAT_VERSION, "entries": entries}, indent=2) + "\n",
        )


def _replace_file(path: Path, text: str) -> None:
    # Rename is atomic, so readers see the old file or the new one, never a torn write.
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, temp_name = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    except OSError as exc:
        _log.debug("could not write %s: %s", path, exc)
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp_name, path)
    except OSError as exc:
        _log.debug("could not write %s: %s", path, exc)
        with contextlib.suppress(OSError):
            os.unlink(temp_name)
