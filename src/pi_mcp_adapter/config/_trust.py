"""Project trust: configuration that arrives with cloned code runs nothing until trusted.

A repository's ``.mcp.json`` can name any command, ``!command`` header or env value, and
``requestHeadersCommand``; running them on the first ``pi-mcp search`` would let a cloned
repository execute code. So servers with a field from a *project-level file* (``.mcp.json``,
``.pi/mcp.json``, a host file inside the project such as ``.vscode/mcp.json``, and whatever
host files a project file imports) are *untrusted* until the person trusts that file's current
content, as direnv ``allow`` and Claude Code's project-server approval do. An untrusted server
is treated as disabled: no process, no ``!command``, no request carrying its headers, no cached
tools offered; status views show it as ``untrusted`` with the command that trusts it.

Trust is recorded per file path and SHA-256 of the file's bytes in ``<agent dir>/mcp-trust.json``
(0600, replaced atomically under a lock), so an edit of the file asks again. The path is the
file's *real* path: a project file that is a symbolic link is trusted only for the file it
points to, and the relative ``command`` and ``cwd`` of that file resolve where it really lies
(:func:`real_project_dir`), so a repository that links its ``.mcp.json`` to a file trusted
elsewhere cannot make ``"command": "./run.sh"`` run its own ``run.sh``.

Settings are gated by the same decision: while a project file is untrusted only the settings in
:data:`UNTRUSTED_PROJECT_SETTINGS` take effect (an allow-list, so a new setting is out until
someone decides it is harmless); the loader ignores the others with one warning per file.

``settings.projectTrust`` (``ask``, the default; ``always``; ``never``) comes from user- and
agent-level files only: a project file may make it stricter, never looser, since a file cannot
vouch for itself. ``PI_MCP_PROJECT_TRUST`` overrides every file (for CI).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._files import read_regular_file, write_atomically

__all__ = [
    "PROJECT_TRUST_ENV",
    "PROJECT_TRUST_MODES",
    "TRUST_FILE_NAME",
    "UNTRUSTED_PROJECT_SETTINGS",
    "ProjectFile",
    "ProjectTrust",
    "ProjectTrustMode",
    "TrustStore",
    "file_digest",
    "is_inside",
    "project_trust_from_env",
    "real_project_dir",
    "stricter_mode",
    "trust_command",
]

logger = logging.getLogger("pi_mcp_adapter.config")

ProjectTrustMode = Literal["ask", "always", "never"]
PROJECT_TRUST_MODES: tuple[ProjectTrustMode, ...] = ("ask", "always", "never")
_STRICTNESS: Mapping[ProjectTrustMode, int] = {"always": 0, "ask": 1, "never": 2}

PROJECT_TRUST_ENV = "PI_MCP_PROJECT_TRUST"
TRUST_FILE_NAME = "mcp-trust.json"
TRUST_FILE_VERSION = 1
_SHARED_TABLE = "trust"
LOCK_TIMEOUT_S = 5.0
"""Writers hold the lock for milliseconds; the person waits on a trust answer, not on this."""

UNTRUSTED_PROJECT_SETTINGS = frozenset(
    {
        "idle_timeout",
        "health_check_interval_ms",
        "startup_concurrency",
        "surface",
        "namespace_proxy_tools",
        "toon_encode",
        "tool_search_limit",
        "tool_search_budget_tokens",
        "search_ranking",
    }
)
"""Settings (Python field names of ``Settings``) an untrusted project file may set: each only
changes how long servers live or how the catalog is presented, never a safeguard (approval,
``onDefinitionChange``, ``validateArgs``, the output guard and limits, ``toolPrefix`` and
``toolSeparator``, which approval lists and gateway policies match against), a path that is
written or read (``captureStats``, ``trace``, ``agentPluginPaths``), the network or sign-in
(``autoAuth``, ``oauthStore``) or what runs (``scriptMode``). ``projectTrust`` has its own rule
(stricter only), and ``sharedState``/``gatewayClients``/``gatewayJwt`` never come from a
project file. Everything else, unknown keys included, waits for trust."""


def project_trust_from_env(environ: Mapping[str, str]) -> ProjectTrustMode | None:
    """``PI_MCP_PROJECT_TRUST`` when set to a known mode (case-insensitive), else None."""
    value = environ.get(PROJECT_TRUST_ENV, "").strip().lower()
    return next((mode for mode in PROJECT_TRUST_MODES if mode == value), None)


def stricter_mode(current: ProjectTrustMode, proposed: ProjectTrustMode) -> ProjectTrustMode:
    """The stricter of two modes: what a project file's ``projectTrust`` may change it to."""
    return proposed if _STRICTNESS[proposed] > _STRICTNESS[current] else current


def trust_command(project_dir: Path) -> str:
    """The command that trusts a project's files, to quote in messages."""
    return f"pi-mcp trust --project {_shell_quote(str(project_dir))}"


def _shell_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def file_digest(path: Path) -> str | None:
    """SHA-256 of the file's bytes (hex), or None when it cannot be read."""
    try:
        return hashlib.sha256(read_regular_file(path)).hexdigest()
    except OSError:
        return None


@dataclass(frozen=True, slots=True)
class ProjectFile:
    """One project-level file that defines (or changes) servers, and its trust state."""

    path: Path
    sha256: str | None
    """None when the file could not be read again for hashing (then it is not trusted)."""
    trusted: bool
    servers: tuple[str, ...] = ()
    """Servers with at least one field from this file."""

    @property
    def real_path(self) -> Path:
        """Where the file really is (symbolic links followed): what trust is recorded for."""
        return Path(_key(self.path))


@dataclass(frozen=True, slots=True)
class ProjectTrust:
    """The trust decision of one load: the mode in effect and every project-level file."""

    mode: ProjectTrustMode = "ask"
    mode_source: str = "default"
    """``default``, ``env`` (``PI_MCP_PROJECT_TRUST``), or the layer name that set it."""
    project_dir: Path | None = None
    files: tuple[ProjectFile, ...] = ()

    @property
    def untrusted_files(self) -> tuple[ProjectFile, ...]:
        return tuple(f for f in self.files if not f.trusted)

    @property
    def command(self) -> str:
        """The command that trusts this project (``pi-mcp trust --project DIR``)."""
        return trust_command(self.project_dir or Path("."))


class TrustStore:
    """``<agent dir>/mcp-trust.json``: trusted project files by resolved path and SHA-256.

    A missing or unreadable file trusts nothing. Writers take ``mcp-trust.json.lock``, write a
    temporary file (0600, as ``mkstemp`` creates it) and move it into place.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def in_agent_dir(cls, agent_dir: Path) -> TrustStore:
        return cls(agent_dir / TRUST_FILE_NAME)

    def is_trusted(self, path: Path, sha256: str | None) -> bool:
        if sha256 is None:
            return False
        record = self._read().get(_key(path))
        return (
            isinstance(record, dict)
            and record.get("sha256") == sha256
            and record.get("declined") is not True
        )

    def was_declined(self, path: Path, sha256: str | None) -> bool:
        """Whether the person said no to this exact content: the terminal does not ask again
        (``pi-mcp trust --project`` still trusts it)."""
        record = self._read().get(_key(path))
        return (
            isinstance(record, dict)
            and record.get("sha256") == sha256
            and record.get("declined") is True
        )

    def decline(self, files: Iterable[tuple[Path, str]]) -> None:
        """Record a "no" for each ``(path, sha256)``; the file stays untrusted.

        Raises:
            OSError: the file could not be written.
        """
        now = datetime.now(UTC).isoformat(timespec="seconds")

        def update(records: dict[str, Any]) -> None:
            for path, digest in files:
                records[_key(path)] = {"sha256": digest, "declined": True, "declinedAt": now}

        self._modify(update)

    def trust(self, files: Iterable[tuple[Path, str]]) -> None:
        """Record each ``(path, sha256)`` as trusted, replacing an older hash of that path.

        Raises:
            OSError: the file could not be written (the caller says so; nothing was trusted).
        """
        now = datetime.now(UTC).isoformat(timespec="seconds")

        def update(records: dict[str, Any]) -> None:
            for path, digest in files:
                records[_key(path)] = {"sha256": digest, "trustedAt": now}

        self._modify(update)

    def revoke(self, paths: Sequence[Path]) -> tuple[Path, ...]:
        """Forget the trust of ``paths``; returns those that had a record.

        Raises:
            OSError: the file could not be written.
        """
        removed: list[Path] = []

        def update(records: dict[str, Any]) -> None:
            for path in paths:
                if records.pop(_key(path), None) is not None:
                    removed.append(path)

        self._modify(update)
        return tuple(removed)

    def _read(self) -> dict[str, Any]:
        # With shared state every replica trusts what was trusted through one of them (the
        # records name resolved paths: replicas share them when they share the project path).
        shared = shared_state.active()
        if shared is not None and (records := shared.table(_SHARED_TABLE)) is not None:
            return records
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or data.get("version") != TRUST_FILE_VERSION:
            return {}
        files = data.get("files")
        return files if isinstance(files, dict) else {}

    def _modify(self, update: Any) -> None:
        import filelock  # only writers need it; every load reads the file

        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with filelock.FileLock(f"{self.path}.lock", timeout=LOCK_TIMEOUT_S):
                records = self._read()
                before = dict(records)
                update(records)
                shared = shared_state.active()
                if shared is not None:
                    shared.sync(_SHARED_TABLE, before, records)
                self._write(records)
        except filelock.Timeout as exc:
            raise OSError(f"{self.path} is locked by another process; try again") from exc

    def _write(self, records: Mapping[str, Any]) -> None:
        data = json.dumps(
            {"version": TRUST_FILE_VERSION, "files": records}, ensure_ascii=False, indent=1
        ).encode("utf-8")
        write_atomically(self.path, data)


def _key(path: Path) -> str:
    try:
        return str(path.resolve())
    except OSError:
        return str(path.absolute())


def real_project_dir(path: Path, project_dir: Path) -> Path:
    """The directory a project file's relative ``command`` and ``cwd`` resolve against: the
    project directory as seen from where the file really lies.

    For ``<project>/.mcp.json`` that is the (resolved) project directory itself. When the file,
    or a directory on its way (``.pi``), is a symbolic link, it is the directory the link
    target sits in at the same depth (``/elsewhere/proj`` for a link to
    ``/elsewhere/proj/.mcp.json``), else the target's own directory: the place the person saw
    when trusting that content, never the linking repository.
    """
    real = Path(_key(path))
    try:
        relative = path.absolute().relative_to(project_dir.absolute())
    except ValueError:
        return real.parent
    depth = len(relative.parts)
    if depth and real.parts[-depth:] == relative.parts and len(real.parents) >= depth:
        return real.parents[depth - 1]
    return real.parent


def is_inside(path: Path, directory: Path) -> bool:
    """Whether ``path`` lies under ``directory`` (both resolved)."""
    try:
        path.resolve().relative_to(directory.resolve())
    except (OSError, ValueError):
        return False
    return True
