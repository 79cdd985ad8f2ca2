"""Servers that plugins and packages bring: Claude Code plugin bundles, agent plugins, pi packages.

Three places besides config files declare MCP servers, read as the TypeScript adapter (2.36)
reads them:

- **Claude Code plugins**, listed in a config file's top-level ``claudePlugins`` as
  ``{"path": DIR, "mcp": true}``: the plugin's root ``.mcp.json`` (servers named as written;
  ``${CLAUDE_PLUGIN_ROOT}`` is the plugin directory, and a stdio server gets it in its
  environment). ``.claude-plugin/plugin.json``, when present, names the plugin.
- **Agent plugins**, listed in ``settings.agentPluginPaths``: a directory with ``plugin.json``
  and ``mcp.json`` following the agent-plugins.org 1.0.0 schemas. Servers are named
  ``<plugin>__<server>``; a stdio command is bare or ``./`` inside the plugin, runs in the
  plugin directory by default and gets ``PLUGIN_ROOT`` and ``PLUGIN_DATA``
  (``<agent dir>/agent-plugin-data/<plugin>``); ``${PLUGIN_ROOT}`` and ``${PLUGIN_DATA}`` are the
  only variables in its ``args``, ``env``, ``cwd`` and ``headers``, which are otherwise literal.
- **pi packages**, listed in ``packages`` of ``<project>/.pi/settings.json`` and
  ``<agent dir>/settings.json``: a package whose ``package.json`` has ``pi.mcp`` (a path, or a
  list of paths, to MCP config files inside the package). Servers are named
  ``<package>__<server>``.

Every file is read as untrusted input: a path that resolves outside its plugin or package
directory is refused, and a broken plugin costs only its own servers (the problem is reported
and loading goes on). Whether the servers may run is decided by the loader with the project
trust rules: a plugin listed by a project file, or living inside the project, is project-level.
"""

from __future__ import annotations

import os.path
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pi_mcp_adapter._errors import ConfigError

from ._hosts import _without_transport_type, read_file_text
from ._jsonc import JsoncDocument, JsoncSyntaxError, JsonPath, parse_jsonc
from ._locations import Where
from ._validate import LineLookup, RawEntry, json_type

__all__ = [
    "LITERAL_SOURCE_PREFIX",
    "PLUGIN_PLACE_VARIABLES",
    "ClaudePluginSpec",
    "PluginKind",
    "PluginRead",
    "parse_claude_plugins",
    "read_agent_plugins",
    "read_claude_plugins",
    "read_packages",
]

PluginKind = Literal["claude-plugin", "agent-plugin", "package", "pi-settings"]

LITERAL_SOURCE_PREFIX = "agent-plugin:"
"""Layers whose ``args``, ``env``, ``cwd`` and ``headers`` are used as written (no variables)."""

PLUGIN_PLACE_VARIABLES = frozenset({"env.PLUGIN_ROOT", "env.PLUGIN_DATA", "env.CLAUDE_PLUGIN_ROOT"})
"""Environment the plugin loaders give a server: directories, not secrets, so not masked."""

_PLUGIN_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/plugin.schema.json"
_MCP_SCHEMA = "https://agent-plugins.org/schemas/1.0.0/mcp.schema.json"
_AGENT_PLUGIN_NAME = re.compile(r"^(?!.*(?:--|\.\.))[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?$")
_CLAUDE_PLUGIN_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
_STDIO_FIELDS = frozenset({"type", "command", "args", "env", "cwd"})
_HTTP_FIELDS = frozenset({"type", "url", "headers"})
_UNSAFE_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
_PLACEHOLDER = re.compile(r"\$\{PLUGIN_(ROOT|DATA)\}")


@dataclass(frozen=True, slots=True)
class ClaudePluginSpec:
    """One ``claudePlugins`` item of a config file."""

    path: str
    mcp: bool
    listed_in: Path


@dataclass(slots=True)
class PluginRead:
    """What one plugin or package contributed: server entries, and problems found on the way."""

    kind: PluginKind
    name: str
    path: Path
    """The MCP config file read, or the plugin directory when there is none to read."""
    exists: bool
    listed_in: Path | None
    """The file that asked for the plugin (a config file or a pi settings file)."""
    entries: list[RawEntry] = field(default_factory=list)
    errors: list[ConfigError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    names_packages: bool = False
    """A pi settings file that lists packages (found or not): where they are is looked for."""

    @property
    def source(self) -> str:
        """The layer name shown by ``pi-mcp config``: ``claude-plugin:<name>`` and so on."""
        return f"{self.kind}:{self.name}"


def parse_claude_plugins(
    value: object, *, path: Path, line_of: LineLookup
) -> tuple[list[ClaudePluginSpec], list[str]]:
    """The ``claudePlugins`` list of one file; a malformed item is skipped with a warning."""
    if not isinstance(value, list):
        line = line_of(("claudePlugins",))
        return [], [f"{path}:{line}: 'claudePlugins' must be a list, not {json_type(value)}"]
    specs: list[ClaudePluginSpec] = []
    warnings: list[str] = []
    for index, item in enumerate(value):
        where = f"{path}:{line_of(('claudePlugins', index))}: claudePlugins[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("path"), str):
            warnings.append(f"{where} must be an object with a non-empty 'path'; it is ignored")
            continue
        plugin_path = item["path"]
        flags = {key: item.get(key) for key in ("mcp", "skills")}
        if not plugin_path.strip() or any(
            v is not None and not isinstance(v, bool) for v in flags.values()
        ):
            warnings.append(f"{where}: 'path' must be non-empty, 'mcp' and 'skills' booleans")
            continue
        if flags["mcp"] is not True and flags["skills"] is not True:
            warnings.append(f"{where}: set 'mcp' (or 'skills') to true; it is ignored")
            continue
        specs.append(ClaudePluginSpec(plugin_path, flags["mcp"] is True, path))
    return specs, warnings


# --- Claude Code plugins -----------------------------------------------------------------------


def read_claude_plugins(specs: Sequence[ClaudePluginSpec], where: Where) -> list[PluginRead]:
    """The servers of every listed Claude Code plugin with ``mcp: true``, first plugin first.

    A server whose name normalises (``-`` as ``_``) to one an earlier plugin already gave is
    skipped with a warning: the first plugin wins.
    """
    reads: list[PluginRead] = []
    seen_roots: set[Path] = set()
    taken: dict[str, str] = {}
    for spec in specs:
        if not spec.mcp:
            continue  # skills only: skill discovery belongs to the pi host, not to MCP
        configured = _expand_user(spec.path, where)
        root = _directory(configured)
        read = PluginRead("claude-plugin", configured.name, configured, False, spec.listed_in)
        reads.append(read)
        if root is None:
            read.warnings.append(f"Claude plugin path is not a directory: {configured}")
            continue
        if root in seen_roots:
            read.warnings.append(f"Claude plugin path is listed more than once: {root}")
            continue
        seen_roots.add(root)
        read.name = root.name
        manifest = _claude_manifest(root, read)
        if manifest is False:
            continue
        if manifest is not None:
            read.name = manifest
        config_path = _contained_file(root, root / ".mcp.json")
        if config_path is None:
            read.warnings.append(f"Claude plugin {read.name!r} has no .mcp.json inside {root}")
            continue
        read.path, read.exists = config_path, True
        document = _read_json(config_path, read)
        servers = _server_map(document, config_path, read)
        for server_name, value in servers.items():
            if not server_name.strip():
                read.warnings.append(f"{config_path}: an empty server name is ignored")
                continue
            key = server_name.replace("-", "_")
            if key in taken:
                read.warnings.append(
                    f"{config_path}: server {server_name!r} is skipped: its name collides with "
                    f"{taken[key]!r} of an earlier Claude plugin (the first plugin wins)"
                )
                continue
            if not isinstance(value, dict) or _transport_count(value) != 1:
                read.warnings.append(
                    f"{config_path}: server {server_name!r} is skipped: it needs exactly one "
                    "non-empty 'command', 'url' or 'socket'"
                )
                continue
            taken[key] = server_name
            # Claude Code's `"type": "stdio" | "http" | "sse"` names what the command or URL
            # already says, as in a project's .mcp.json: dropped, not warned about.
            entry = _replace_strings(
                _without_transport_type(value), "${CLAUDE_PLUGIN_ROOT}", str(root)
            )
            if isinstance(entry.get("command"), str):
                env = entry.get("env")
                entry["env"] = {
                    **(env if isinstance(env, dict) else {}),
                    "CLAUDE_PLUGIN_ROOT": str(root),
                }
            assert document is not None
            read.entries.append(
                RawEntry(
                    server_name,
                    entry,
                    config_path,
                    ("mcpServers", server_name),
                    document.line_of,
                )
            )
    return reads


def _claude_manifest(root: Path, read: PluginRead) -> str | Literal[False] | None:
    """The plugin's name from ``.claude-plugin/plugin.json``; None without one; False when it
    is broken (the plugin is then skipped, as the reference skips it)."""
    manifest_path = root / ".claude-plugin" / "plugin.json"
    if not manifest_path.exists():
        return None
    contained = _contained_file(root, manifest_path)
    if contained is None:
        read.warnings.append(f"Claude plugin manifest is not a file inside {root}: {manifest_path}")
        return False
    document = _read_json(contained, read)
    data = document.data if document is not None else None
    if not isinstance(data, dict):
        read.warnings.append(f"Claude plugin manifest must be a JSON object: {contained}")
        return False
    name = data.get("name")
    if not isinstance(name, str) or not _CLAUDE_PLUGIN_NAME.fullmatch(name):
        read.warnings.append(
            f"Claude plugin manifest has an invalid name (kebab-case): {contained}"
        )
        return False
    return name


# --- agent plugins -----------------------------------------------------------------------------


def read_agent_plugins(
    paths: Sequence[str], *, listed_in: Path, where: Where, agent_dir: Path
) -> list[PluginRead]:
    """The servers of every agent plugin in ``paths`` (``settings.agentPluginPaths``).

    A normalised server name that an earlier plugin already gave is skipped with a warning.
    """
    reads: list[PluginRead] = []
    taken: set[str] = set()
    for configured in paths:
        root = _real(_expand_user(configured, where))
        read = PluginRead("agent-plugin", root.name, root, False, listed_in)
        reads.append(read)
        name = _agent_manifest(root, read)
        if name is None:
            continue
        read.name = name
        mcp_path = root / "mcp.json"
        if not mcp_path.exists():
            continue
        contained = _contained_file(root, mcp_path)
        if contained is None:
            read.warnings.append(f"agent plugin {name}: mcp.json must be a file inside {root}")
            continue
        read.path, read.exists = contained, True
        document = _read_json(contained, read)
        data = document.data if document is not None else None
        problem = _agent_config_problem(data)
        if problem is not None:
            read.warnings.append(f"agent plugin {name}: invalid mcp.json ({problem}): {contained}")
            continue
        assert isinstance(data, dict)
        assert document is not None
        data_dir = agent_dir / "agent-plugin-data" / name
        for server_name, value in data["mcpServers"].items():
            normalized = f"{_safe_name(name, 'plugin')}__{_safe_name(server_name, 'server')}"
            entry, why = _translate_agent_server(value, root, data_dir)
            if entry is None:
                read.warnings.append(
                    f"agent plugin {name}: server {server_name!r} is skipped: {why}"
                )
                continue
            if normalized in taken:
                read.warnings.append(
                    f"agent plugin {name}: server {server_name!r} is skipped: {normalized!r} "
                    "already exists"
                )
                continue
            taken.add(normalized)
            json_path: JsonPath = ("mcpServers", server_name)
            read.entries.append(
                RawEntry(
                    normalized,
                    entry,
                    contained,
                    json_path,
                    document.line_of,
                    {"httpTransport": (*json_path, "type")},
                )
            )
    return reads


def _agent_manifest(root: Path, read: PluginRead) -> str | None:
    manifest_path = root / "plugin.json"
    contained = _contained_file(root, manifest_path) if manifest_path.exists() else None
    if contained is None:
        read.warnings.append(f"agent plugin at {root} is invalid: no plugin.json file inside it")
        return None
    read.path = contained
    document = _read_json(contained, read)
    data = document.data if document is not None else None
    if not isinstance(data, dict):
        read.warnings.append(f"agent plugin at {root} is invalid: plugin.json must be an object")
        return None
    name = data.get("name")
    problem = None
    if data.get("$schema") != _PLUGIN_SCHEMA:
        problem = f"plugin.json $schema must be {_PLUGIN_SCHEMA}"
    elif not isinstance(name, str) or len(name) > 64 or not _AGENT_PLUGIN_NAME.fullmatch(name):
        problem = "plugin.json name is invalid"
    elif any(
        key in data and not isinstance(data[key], str)
        for key in ("version", "description", "homepage", "repository", "license")
    ):
        problem = "plugin.json version, description, homepage, repository and license are strings"
    if problem is not None:
        read.warnings.append(f"agent plugin at {root} is invalid: {problem}")
        return None
    assert isinstance(name, str)
    return name


def _agent_config_problem(data: object) -> str | None:
    if not isinstance(data, dict):
        return "it must be an object"
    unknown = sorted(set(data) - {"$schema", "mcpServers"})
    if unknown:
        return f"unknown top-level field {unknown[0]!r}"
    if data.get("$schema") != _MCP_SCHEMA:
        return f"$schema must be {_MCP_SCHEMA}"
    if not isinstance(data.get("mcpServers"), dict):
        return "mcpServers must be an object"
    return None


def _translate_agent_server(
    value: object, root: Path, data_dir: Path
) -> tuple[dict[str, object] | None, str]:
    """The entry in our shape, or None and why it cannot be used."""
    if not isinstance(value, dict):
        return None, "an entry must be an object"
    kind = value.get("type")
    if kind == "stdio":
        return _translate_stdio(value, root, data_dir)
    if kind in ("streamable-http", "sse"):
        return _translate_http(value, kind)
    return None, "'type' must be stdio, streamable-http or sse"


def _translate_stdio(
    value: dict[str, object], root: Path, data_dir: Path
) -> tuple[dict[str, object] | None, str]:
    unknown = sorted(set(value) - _STDIO_FIELDS)
    if unknown:
        return None, f"unknown field {unknown[0]!r}"
    command = value.get("command")
    if not isinstance(command, str) or not command:
        return None, "'command' must be a non-empty string"
    args = value.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        return None, "'args' must be a list of strings"
    env = value.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        return None, "'env' must be an object of strings"
    if "PLUGIN_ROOT" in env or "PLUGIN_DATA" in env:
        return None, "'env' must not set PLUGIN_ROOT or PLUGIN_DATA"

    def expand(text: str) -> str:
        return _PLACEHOLDER.sub(lambda m: str(root if m.group(1) == "ROOT" else data_dir), text)

    if command.startswith("./"):
        program = _contained_path(root, root / command)
        if program is None or not program.exists():
            return None, "'command' must name a file inside the plugin directory"
        command = str(program)
    elif "/" in command or "\\" in command or "${PLUGIN_" in command:
        return None, "'command' must be a bare program name or a ./ path inside the plugin"
    cwd = _agent_cwd(value.get("cwd"), root, data_dir, expand)
    if cwd is None:
        return None, "'cwd' must be ./, ${PLUGIN_ROOT} or ${PLUGIN_DATA} and stay inside it"
    return {
        "command": command,
        "args": [expand(a) for a in args],
        "env": {
            **{k: expand(v) for k, v in env.items()},
            "PLUGIN_ROOT": str(root),
            "PLUGIN_DATA": str(data_dir),
        },
        "cwd": str(cwd),
    }, ""


def _agent_cwd(
    value: object, root: Path, data_dir: Path, expand: Callable[[str], str]
) -> Path | None:
    if value is None:
        return root
    if not isinstance(value, str):
        return None
    expanded = expand(value)
    if value.startswith(("./", "${PLUGIN_ROOT}/")) or value == "${PLUGIN_ROOT}":
        found = _contained_path(root, root / expanded)
        return found if found is not None and found.is_dir() else None
    if value == "${PLUGIN_DATA}" or value.startswith("${PLUGIN_DATA}/"):
        return _contained_path(data_dir, Path(expanded), allow_missing=True)
    return None


def _translate_http(value: dict[str, object], kind: object) -> tuple[dict[str, object] | None, str]:
    unknown = sorted(set(value) - _HTTP_FIELDS)
    if unknown:
        return None, f"unknown field {unknown[0]!r}"
    url = value.get("url")
    if not isinstance(url, str) or not _allowed_plugin_url(url):
        return None, "'url' must be an https URL, or http on loopback, without credentials"
    entry: dict[str, object] = {"url": url, "httpTransport": kind}
    headers = value.get("headers")
    if headers is not None:
        if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
            return None, "'headers' must be an object of strings"
        if len({k.lower() for k in headers}) != len(headers):
            return None, "'headers' names a header twice"
        if headers:
            entry["headers"] = dict(headers)
    return entry, ""


def _allowed_plugin_url(url: str) -> bool:
    if "${" in url or "$env:" in url or "{env:" in url:
        return False
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
    except ValueError:
        return False
    if parts.username or parts.password or parts.fragment or not host:
        return False
    if parts.scheme == "https":
        return True
    loopback = host in ("localhost", "::1") or re.fullmatch(r"127(?:\.\d{1,3}){3}", host)
    return parts.scheme == "http" and bool(loopback)


# --- pi packages -------------------------------------------------------------------------------


def read_packages(where: Where, *, agent_dir: Path) -> list[PluginRead]:
    """The servers of the packages listed in the project's and the user's pi settings.

    The project's ``.pi/settings.json`` comes first; a package listed in both is read once, and
    a normalised server name a package already gave is skipped with a warning. The returned
    list starts with one ``pi-settings`` read per settings file (no entries: the file itself).
    """
    reads: list[PluginRead] = []
    roots: dict[Path, Path] = {}  # package root -> the settings file that listed it first
    for scope, base in (("project", where.project_dir / ".pi"), ("user", agent_dir)):
        settings_path = base / "settings.json"
        listing = PluginRead("pi-settings", scope, settings_path, False, None)
        reads.append(listing)
        document = _read_json(settings_path, listing)
        if document is None:
            continue
        listing.exists = True
        data = document.data
        packages = data.get("packages") if isinstance(data, dict) else None
        if not isinstance(data, dict) or not isinstance(packages, list | None):
            listing.errors.append(
                ConfigError("'packages' must be a list; they are ignored", path=str(settings_path))
            )
            continue
        listing.names_packages = bool(packages)
        for index, item in enumerate(packages or []):
            source = item.get("source") if isinstance(item, dict) else item
            root = _package_root(source, base) if isinstance(source, str) else None
            if root is None:
                listing.warnings.append(
                    f"{settings_path}:{document.line_of(('packages', index))}: packages[{index}] "
                    "is not a package this adapter can find; it is ignored"
                )
                continue
            roots.setdefault(root, settings_path)
    taken: set[str] = set()
    for root, settings_path in roots.items():
        reads.extend(_read_package(root, settings_path, taken))
    return reads


def _package_root(source: str, base: Path) -> Path | None:
    source = source.strip()
    if source.startswith("npm:"):
        match = re.match(r"^(@?[^@]+(?:/[^@]+)?)", source[4:].strip())
        modules = base / "npm" / "node_modules"
        return _contained_path(modules, modules / match[1], lexical=True) if match else None
    git = source[4:].strip() if source.startswith("git:") else None
    if git is None and re.match(r"^(?:(?:https?|ssh)://|git@[^:]+:)", source):
        git = source
    if git is not None:
        value = re.sub(r"^ssh://git@", "", git)
        value = re.sub(r"^git@([^:]+):", r"\1/", value)
        value = re.sub(r"^[a-z]+://", "", value, flags=re.IGNORECASE)
        value = re.sub(r"\.git$", "", re.sub(r"@[^/]+$", "", value))
        if not value or value.startswith("/"):
            return None
        return _contained_path(base / "git", base / "git" / value, lexical=True)
    return Path(os.path.normpath(base / source)) if source else None


def _read_package(root: Path, settings_path: Path, taken: set[str]) -> list[PluginRead]:
    manifest_read = PluginRead("package", root.name, root / "package.json", False, settings_path)
    document = _read_json(root / "package.json", manifest_read)
    data = document.data if document is not None else None
    name = data.get("name") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(name, str) or not name:
        return [manifest_read] if manifest_read.errors else []
    pi = data.get("pi")
    declared = pi.get("mcp") if isinstance(pi, dict) else None
    if declared is None:
        return []
    paths = [declared] if isinstance(declared, str) else declared
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        manifest_read.name = name
        manifest_read.warnings.append(
            f"package {name}: 'pi.mcp' must be a path or a list of paths; it is ignored"
        )
        return [manifest_read]
    reads: list[PluginRead] = []
    prefix = _safe_name(name, "package")
    for relative in paths:
        read = PluginRead("package", name, root / relative, False, settings_path)
        reads.append(read)
        config_path = _contained_file(root, root / relative)
        if config_path is None:
            read.warnings.append(
                f"package {name}: MCP config {relative!r} must be a file inside {root}"
            )
            continue
        read.path, read.exists = config_path, True
        config = _read_json(config_path, read)
        for server_name, value in _server_map(config, config_path, read).items():
            normalized = f"{prefix}__{_safe_name(server_name, 'server')}"
            if normalized in taken:
                read.warnings.append(
                    f"package {name}: server {server_name!r} is skipped: {normalized!r} "
                    "already exists"
                )
                continue
            taken.add(normalized)
            assert config is not None
            read.entries.append(
                RawEntry(
                    normalized, value, config_path, ("mcpServers", server_name), config.line_of
                )
            )
    return reads


# --- shared helpers ----------------------------------------------------------------------------


def _read_json(path: Path, read: PluginRead) -> JsoncDocument | None:
    """The parsed file, or None when it is missing, empty or broken (then reported)."""
    try:
        text = read_file_text(path)
    except ConfigError as exc:
        read.errors.append(exc)
        return None
    if text is None:
        return None
    try:
        document = parse_jsonc(text)
    except JsoncSyntaxError as exc:
        read.errors.append(
            ConfigError(f"invalid JSON: {exc.message}", path=str(path), line=exc.line)
        )
        return None
    return document


def _server_map(
    document: JsoncDocument | None, path: Path, read: PluginRead
) -> Mapping[str, object]:
    if document is None:
        return {}
    data = document.data
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        read.errors.append(
            ConfigError(
                "must be an object with an 'mcpServers' object; it is ignored", path=str(path)
            )
        )
        return {}
    return servers


def _transport_count(value: Mapping[str, object]) -> int:
    return sum(
        1
        for key in ("command", "url", "socket")
        if isinstance(value.get(key), str) and str(value[key]).strip()
    )


def _replace_strings(value: dict[str, object], old: str, new: str) -> dict[str, object]:
    def replace(item: object) -> object:
        if isinstance(item, str):
            return item.replace(old, new)
        if isinstance(item, list):
            return [replace(i) for i in item]
        if isinstance(item, dict):
            return {k: replace(v) for k, v in item.items()}
        return item

    return {k: replace(v) for k, v in value.items()}


def _safe_name(name: str, fallback: str) -> str:
    return _UNSAFE_NAME_CHARS.sub("_", name).strip("_-") or fallback


def _expand_user(path: str, where: Where) -> Path:
    if path == "~":
        return where.home
    if path.startswith("~/"):
        return where.home / path[2:]
    candidate = Path(path)
    return candidate if candidate.is_absolute() else where.project_dir / candidate


def _real(path: Path) -> Path:
    try:
        return path.resolve(strict=True)
    except (OSError, RuntimeError):
        return path.absolute()


def _directory(path: Path) -> Path | None:
    real = _real(path)
    return real if real.is_dir() else None


def _contained_path(
    root: Path, candidate: Path, *, allow_missing: bool = False, lexical: bool = False
) -> Path | None:
    """``candidate`` when it stays inside ``root`` once ``..`` and symlinks are resolved."""
    if lexical:
        normalized = Path(os.path.normpath(candidate))
        try:
            normalized.relative_to(os.path.normpath(root))
        except ValueError:
            return None
        return normalized
    try:
        real_root = root.resolve()
        real = candidate.resolve(strict=not allow_missing)
        real.relative_to(real_root)
    except (OSError, RuntimeError, ValueError):
        return None
    return real


def _contained_file(root: Path, candidate: Path) -> Path | None:
    found = _contained_path(root, candidate)
    return found if found is not None and found.is_file() else None
