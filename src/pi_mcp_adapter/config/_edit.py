"""Changing config files from the command line: add, remove, enable, disable, edit.

Every change is planned as new text for one file (:class:`ConfigFileChange`), made with the
comment-preserving edits of :mod:`._jsonc`, checked with the same validation a load runs, then
written atomically, and only if the file still holds the text the plan was made from.

Scopes name the file a change goes to, as the TypeScript adapter's install targets do:

- ``user``: ``<agent dir>/mcp.json``, or the ``--config`` file when one is given;
- ``project``: ``<project>/.mcp.json`` for server definitions, and ``<project>/.pi/mcp.json``
  for ``enabled``/``disabled`` overrides, so a person's switch does not edit the file the team
  commits. In exclusive mode only the user file is read, so the project scope is refused.

Project trust: a project file runs nothing until its content is trusted (``_trust.py``). When
the person changes a project file through these commands and its previous content was trusted
(or there was no file, or nothing in it), the new content is recorded as trusted too: what the
person had accepted plus what they just wrote. A file that was not trusted stays untrusted,
since recording it would vouch for cloned content nobody reviewed.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pi_mcp_adapter._errors import ConfigError, UsageError
from pi_mcp_adapter._files import write_atomically

from ._hosts import read_file_text
from ._jsonc import (
    JsoncEditError,
    JsoncSyntaxError,
    parse_jsonc,
    remove_jsonc_member,
    set_jsonc_value,
)
from ._masking import mask_config_text
from ._trust import TrustStore

__all__ = [
    "SCOPES",
    "ConfigFileChange",
    "Scope",
    "check_config_text",
    "config_file_for",
    "derive_package_server_name",
    "derive_server_name",
    "normalize_server_url",
    "plan_add_server",
    "plan_remove_server",
    "plan_server_fields",
    "server_name_problem",
    "trust_written_project_file",
    "write_config_change",
]

Scope = Literal["user", "project"]
SCOPES: tuple[Scope, ...] = ("user", "project")

_SERVER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def server_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a new server's name (the reference's install rule), or None."""
    if _SERVER_NAME.match(name):
        return None
    return (
        f"server name {name!r} must be 1-64 letters, digits, '_' or '-', starting with a letter "
        "or digit"
    )


def normalize_server_url(url: str) -> str:
    """``url`` checked as the reference's installer checks it, in its canonical form.

    Raises:
        UsageError: not an absolute http(s) URL; credentials or a fragment in it; plain HTTP to
            anything but a loopback address.
    """
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{url!r} is not an absolute http:// or https:// URL")
    if parts.username is not None or parts.password is not None:
        raise UsageError(
            "the URL must not contain credentials: add it without them, then store a token "
            "with `pi-mcp token set SERVER` or put it in a header"
        )
    if parts.fragment:
        raise UsageError("the URL must not contain a #fragment")
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
        raise UsageError("the URL must use https:// (plain http:// only for loopback servers)")
    path = parts.path or "/"
    return urlunsplit((parts.scheme, parts.netloc.lower(), path, parts.query, ""))


def derive_server_name(url: str) -> str:
    """A server name from a URL: the first label of its host (``mcp.linear.app`` ->
    ``mcp``; ``api.example.com`` -> ``api``), ``local-mcp`` for loopback, as the reference."""
    host = (urlsplit(url).hostname or "").strip("[]")
    label = "local-mcp" if host in _LOOPBACK_HOSTS else host.split(".")[0]
    name = re.sub(r"[^a-z0-9_-]+", "-", (label or "mcp").lower()).strip("-")[:64]
    return name or "mcp"


def derive_package_server_name(package: str) -> str:
    """A server name from a package name: without scope and the usual MCP affixes
    (``@modelcontextprotocol/server-memory`` -> ``memory``, ``mcp-server-time`` -> ``time``,
    ``wikipedia-mcp`` -> ``wikipedia``)."""
    base = package.rsplit("/", 1)[-1].lower()
    for prefix in ("mcp-server-", "server-", "mcp-"):
        if base.startswith(prefix) and len(base) > len(prefix):
            base = base[len(prefix) :]
            break
    for suffix in ("-mcp-server", "-server-mcp", "-mcp"):
        if base.endswith(suffix) and len(base) > len(suffix):
            base = base[: -len(suffix)]
            break
    name = re.sub(r"[^a-z0-9_-]+", "-", base).strip("-")[:64]
    return name or "mcp"


def config_file_for(
    scope: Scope,
    *,
    agent_dir: Path,
    project_dir: Path,
    config_path: Path | None,
    exclusive: bool,
    override: bool = False,
) -> Path:
    """The file a change of ``scope`` goes to (see the module docstring); ``override`` picks
    the project file for ``enabled``/``disabled`` switches.

    Raises:
        UsageError: the project scope in exclusive mode, where project files are not read.
    """
    if scope == "user":
        return config_path if config_path is not None else agent_dir / "mcp.json"
    if exclusive:
        raise UsageError(
            "project files are not read in exclusive mode (--exclusive or "
            "PI_MCP_CONFIG_MODE=exclusive); use --scope user"
        )
    return project_dir / ".pi" / "mcp.json" if override else project_dir / ".mcp.json"


@dataclass(frozen=True, slots=True)
class ConfigFileChange:
    """The planned new text of one config file."""

    path: Path
    before: str | None
    """The file's text when the change was planned; ``None`` when it did not exist."""
    after: str

    @property
    def changed(self) -> bool:
        return self.after != (self.before or "")

    def diff(self, *, masked: bool = False) -> str:
        """The change as a unified diff (empty when nothing changes); with ``masked``, every
        value shown as ``pi-mcp config`` shows it (:func:`~._masking.mask_config_text`), for
        printing: the file's other servers pass through the diff's context lines."""
        if not self.changed:
            return ""
        before, after = self.before or "", self.after
        if masked:
            before, after = mask_config_text(before), mask_config_text(after)
        lines = difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=str(self.path) if self.before is not None else "/dev/null",
            tofile=str(self.path),
        )
        return "".join(lines)


def _servers_key(data: object) -> str:
    """The key a file keeps its servers under: ``mcp-servers`` only when the file already
    uses that spelling alone."""
    if isinstance(data, dict) and "mcp-servers" in data and "mcpServers" not in data:
        return "mcp-servers"
    return "mcpServers"


def _read(path: Path) -> tuple[str | None, dict[str, object]]:
    text = read_file_text(path)
    if text is None:
        return None, {}
    try:
        document = parse_jsonc(text)
    except JsoncSyntaxError as exc:
        raise ConfigError(
            f"invalid JSON: {exc.message} (column {exc.column}); fix it first "
            "(`pi-mcp edit` opens it)",
            path=str(path),
            line=exc.line,
        ) from None
    if document is None:
        return text, {}
    if not isinstance(document.data, dict):
        raise ConfigError("the top level must be an object", path=str(path), line=1)
    return text, document.data


def _servers_of(path: Path, data: Mapping[str, object]) -> tuple[str, dict[str, object]]:
    key = _servers_key(data)
    servers = data.get(key, {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{key!r} must be an object of servers", path=str(path), field=key)
    return key, servers


def plan_add_server(
    path: Path, name: str, entry: Mapping[str, object], *, replace: bool = False
) -> ConfigFileChange:
    """Add ``name`` with ``entry`` to the file at ``path`` (created when missing).

    Raises:
        ConfigError: the file cannot be read or parsed, or already defines ``name`` and
            ``replace`` is false.
    """
    text, data = _read(path)
    key, servers = _servers_of(path, data)
    if name in servers and not replace:
        raise ConfigError(
            f"server {name!r} is already defined here; remove it first, pick another name, "
            "or use --replace",
            path=str(path),
        )
    try:
        after = set_jsonc_value(text or "", (key, name), dict(entry))
    except JsoncEditError as exc:
        raise ConfigError(str(exc), path=str(path)) from None
    return ConfigFileChange(path, text, after)


def plan_remove_server(path: Path, name: str) -> ConfigFileChange:
    """Remove ``name`` from the file at ``path`` (no change when the file does not define it).

    Raises:
        ConfigError: the file cannot be read or parsed.
    """
    text, data = _read(path)
    if text is None:
        return ConfigFileChange(path, None, "")
    key, servers = _servers_of(path, data)
    if name not in servers:
        return ConfigFileChange(path, text, text)
    return ConfigFileChange(path, text, remove_jsonc_member(text, (key, name)))


def plan_server_fields(
    path: Path,
    name: str,
    *,
    set_fields: Mapping[str, object] | None = None,
    remove_fields: Sequence[str] = (),
) -> ConfigFileChange:
    """Set and remove fields of ``name``'s entry in the file at ``path``. Setting a field
    where the file has no entry for ``name`` writes an override entry with just that field
    (files merge field by field); an entry left empty is removed.

    Raises:
        ConfigError: the file cannot be read or parsed, or the entry is not an object.
    """
    text, data = _read(path)
    key, servers = _servers_of(path, data)
    entry = servers.get(name)
    if entry is not None and not isinstance(entry, dict):
        raise ConfigError(f"server {name!r} is not an object", path=str(path), field=key)
    current = dict(entry or {})
    after = text or ""
    try:
        for field in remove_fields:
            if field in current:
                after = remove_jsonc_member(after, (key, name, field))
                del current[field]
        for field, value in (set_fields or {}).items():
            if current.get(field, object()) != value or field not in current:
                after = set_jsonc_value(after, (key, name, field), value)
                current[field] = value
    except JsoncEditError as exc:
        raise ConfigError(str(exc), path=str(path)) from None
    if not current and entry is not None:
        after = remove_jsonc_member(after, (key, name))
    if text is None and not set_fields:
        return ConfigFileChange(path, None, "")
    return ConfigFileChange(path, text, after)


def check_config_text(text: str, path: Path) -> tuple[list[ConfigError], list[str]]:
    """What loading ``text`` as the config file ``path`` would report: errors and warnings.

    The file is checked on its own (syntax, structure, every entry's and setting's fields), as
    the loader checks each layer before merging.
    """
    from ._loader import _Collector, _layer_from_document, _structural_error
    from ._locations import FileLayer

    try:
        document = parse_jsonc(text)
    except JsoncSyntaxError as exc:
        message = f"invalid JSON: {exc.message} (column {exc.column})"
        return [ConfigError(message, path=str(path), line=exc.line)], []
    if document is None:
        return [], []
    structural = _structural_error(document, path)
    if structural is not None:
        return [structural], []
    collector = _Collector()
    _layer_from_document(FileLayer("edit", path), document, collector)
    return list(collector.errors), list(collector.warnings)


def write_config_change(change: ConfigFileChange, *, retry: str = "try again") -> None:
    """Write ``change.after`` to its file, atomically, keeping the file's permissions (a
    symlinked file stays a symlink: its target is rewritten). ``retry`` ends the message when
    the file changed meanwhile.

    Raises:
        ConfigError: the file changed since the change was planned (nothing is written), or it
            cannot be written.
    """
    if not change.changed:
        return
    try:
        current = read_file_text(change.path)
    except ConfigError:
        current = None
    if current != change.before:
        raise ConfigError(
            f"the file changed after the change was planned; nothing was written, {retry}",
            path=str(change.path),
        )
    target = change.path.resolve() if change.path.is_symlink() else change.path
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = target.stat().st_mode & 0o7777 if target.exists() else None
        write_atomically(target, change.after.encode("utf-8"))
        # mkstemp creates 0600; a new config file gets the usual 0644 (less the umask), an
        # existing one keeps whatever it had.
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        target.chmod(mode)
    except OSError as exc:
        raise ConfigError(f"cannot be written: {exc.strerror}", path=str(change.path)) from None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def trust_written_project_file(change: ConfigFileChange, agent_dir: Path) -> bool:
    """After ``change`` was written to a project file: record its new content as trusted when
    its previous content was trusted or held nothing (see the module docstring). Returns
    whether the new content is now trusted.

    Raises:
        OSError: the trust record could not be written.
    """
    store = TrustStore.in_agent_dir(agent_dir)
    before = change.before
    was_empty = before is None or _holds_nothing(before)
    if not was_empty and not store.is_trusted(change.path, _digest(before or "")):
        return False
    store.trust([(change.path, _digest(change.after))])
    return True


def _holds_nothing(text: str) -> bool:
    try:
        return parse_jsonc(text) is None
    except JsoncSyntaxError:
        return False
