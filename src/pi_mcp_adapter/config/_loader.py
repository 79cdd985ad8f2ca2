"""Loading the configuration: every layer, host imports, merge, interpolation, validation.

Loading never raises for a bad file or entry. Problems are collected so that one broken file
costs only what is broken: a file that cannot be parsed is skipped whole, an entry with a
wrong-typed field is skipped in that file only, and a server that cannot be used (no ``command``
or ``url``, an unset variable in its ``url``) is reported in ``invalid_servers`` while the others
load.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from pi_mcp_adapter._collector import collector_paused
from pi_mcp_adapter._errors import ConfigError
from pi_mcp_adapter._secrets import (
    MASK,
    is_place_variable,
    register_environment_secrets,
    register_secret,
)

from ._command_values import command_value
from ._hosts import HostRead, read_file_text, read_import
from ._inputs import unrecorded
from ._interpolate import expand_home, interpolate
from ._jsonc import JsoncDocument, JsoncSyntaxError, parse_jsonc
from ._locations import (
    IMPORT_KINDS,
    FileLayer,
    ImportKind,
    Where,
    file_layers,
    is_exclusive_mode,
)
from ._masking import is_pem_text
from ._merge import DroppedFields, LayerContribution, MergedEntry, merge_entries
from ._models import (
    WRITTEN_KEYS,
    CaptureStats,
    IdentityProviderConfig,
    OAuthConfig,
    RequestHeadersCommand,
    ServerEntry,
    Settings,
    TraceSettings,
    UntrustedOrigin,
)
from ._plugins import (
    LITERAL_SOURCE_PREFIX,
    PLUGIN_PLACE_VARIABLES,
    ClaudePluginSpec,
    PluginRead,
    parse_claude_plugins,
    read_agent_plugins,
    read_claude_plugins,
    read_packages,
)
from ._trust import (
    UNTRUSTED_PROJECT_SETTINGS,
    ProjectFile,
    ProjectTrust,
    ProjectTrustMode,
    TrustStore,
    file_digest,
    is_inside,
    project_trust_from_env,
    real_project_dir,
    stricter_mode,
    trust_command,
)
from ._validate import (
    RawEntry,
    ValidEntry,
    did_you_mean,
    empty_name_error,
    format_json_path,
    json_name,
    json_type,
    validate_server_entry,
    validate_settings,
)

__all__ = ["ConfigSource", "LoadedConfig", "ServerProvenance", "SourceStatus", "load_config"]

SourceStatus = Literal["loaded", "missing", "empty", "invalid", "duplicate"]
_SERVER_MAP_KEYS = ("mcp-servers", "mcpServers")
_TOP_LEVEL_KEYS = frozenset({*_SERVER_MAP_KEYS, "imports", "settings", "claudePlugins", "$schema"})
PROJECT_LAYERS = frozenset({"project", "project-pi"})
"""Our layers that live in the project directory: they arrive with cloned code."""


@dataclass(frozen=True, slots=True)
class ConfigSource:
    """One file that was considered, and what became of it."""

    name: str
    """``shared``, ``agents``, ``agents-dir``, ``agent`` (or ``config`` for ``--config``),
    ``project``, ``project-pi``, ``import:<kind>`` for a host file, or for plugins and
    packages ``claude-plugin:<name>``, ``agent-plugin:<name>``, ``package:<name>`` and
    ``pi-settings:project``/``pi-settings:user`` (the settings files that list packages)."""
    kind: Literal["file", "import", "plugin"]
    path: Path
    status: SourceStatus
    """``loaded``; ``missing``; ``empty`` (counts as absent); ``invalid`` (skipped, see
    ``errors``); ``duplicate`` (the same file as an earlier layer, read once)."""
    servers: tuple[str, ...] = ()
    """Names of the servers the file defines, in file order."""

    @property
    def exists(self) -> bool:
        return self.status != "missing"

    @property
    def loaded(self) -> bool:
        return self.status == "loaded"


@dataclass(frozen=True, slots=True)
class ServerProvenance:
    """Where a server's configuration came from, field by field."""

    layers: tuple[LayerContribution, ...]
    """Every layer that set keys on this server, lowest precedence first."""
    dropped: tuple[DroppedFields, ...] = ()
    field_sources: Mapping[str, str] = field(default_factory=dict)
    """JSON key -> name of the layer whose value is in effect."""

    @property
    def origin(self) -> LayerContribution:
        """The lowest layer that defines the server."""
        return self.layers[0]

    @property
    def imported_from(self) -> ImportKind | None:
        """The host the server was imported from, when it was imported."""
        kind = self.origin.source.removeprefix("import:")
        return next((k for k in IMPORT_KINDS if k == kind), None)


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    """The merged configuration and everything learned while loading it."""

    servers: Mapping[str, ServerEntry]
    """Usable entries, enabled or disabled: merged, interpolated, validated."""
    settings: Settings
    provenance: Mapping[str, ServerProvenance]
    """For every server in ``servers``, and for invalid ones that had at least one valid entry."""
    invalid_servers: Mapping[str, ConfigError]
    """Servers that are configured but cannot be used, with the reason."""
    errors: Sequence[ConfigError]
    """Broken files and entries that were skipped."""
    warnings: Sequence[str]
    """Unknown keys, unset variables and other things that did not stop loading."""
    sources: Sequence[ConfigSource]
    """Every file considered, lowest precedence first, host files after our own."""
    imports: tuple[ImportKind, ...] = ()
    """The host imports in effect (the union over all files)."""
    project_trust: ProjectTrust = field(default_factory=ProjectTrust)
    """The ``projectTrust`` mode in effect and every project-level file, trusted or not.
    Servers with a field from an untrusted one carry :attr:`ServerEntry.untrusted`."""
    inputs_known: bool = False
    """Whether the load read nothing but what :func:`~._inputs.inputs_digest` covers (no
    host import, plugin, package or Claude plugin looked for): only then does that digest tell
    that loading again would give this configuration."""


@dataclass(slots=True)
class _FileLayerData:
    source: ConfigSource
    entries: list[tuple[RawEntry, ValidEntry | None, list[ConfigError]]] = field(
        default_factory=list
    )
    settings: dict[str, object] = field(default_factory=dict)
    imports: list[ImportKind] = field(default_factory=list)
    claude_plugins: list[ClaudePluginSpec] | None = None


@dataclass(slots=True)
class _Collector:
    errors: list[ConfigError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_config(
    *,
    agent_dir: Path,
    project_dir: Path,
    config_path: Path | None = None,
    home: Path | None = None,
    environ: Mapping[str, str] | None = None,
    platform: str | None = None,
    exclusive: bool | None = None,
) -> LoadedConfig:
    """Load and merge every config layer and the host imports they ask for.

    Layers, lowest precedence first: ``~/.config/mcp/mcp.json``, ``~/.agents/mcp.json``,
    ``~/.agents/mcp/mcp.json``, ``<agent_dir>/mcp.json`` (replaced by ``config_path`` when
    given), ``<project_dir>/.mcp.json``, ``<project_dir>/.pi/mcp.json``. Servers from host
    imports are added only under names no file defines.

    ``home``, ``environ`` and ``platform`` default to this process's; pass them to load the
    configuration of another environment (tests do). Nothing is written anywhere.

    ``exclusive`` (default: ``PI_MCP_CONFIG_MODE=exclusive`` in ``environ``) reads only the
    agent-dir file, or ``config_path`` when given, and the host imports it lists.

    This function does not raise for bad configuration: problems are in ``errors``,
    ``invalid_servers`` and ``warnings`` of the result.
    """
    # Tens of thousands of servers are hundreds of thousands of objects built at once.
    with collector_paused():
        loaded = _load_config(
            agent_dir=agent_dir,
            project_dir=project_dir,
            config_path=config_path,
            home=home,
            environ=environ,
            platform=platform,
            exclusive=exclusive,
        )
        if len(loaded.servers) >= LONG_LIVED_FROM_SERVERS:
            gc.freeze()
        return loaded


LONG_LIVED_FROM_SERVERS = 1_000
"""From this many servers, a loaded configuration is moved out of the garbage collector's
view (``gc.freeze``) as it is returned. It was built with the collector paused, so the first
collection after the pause walked all of it, about 20 objects a server: 0.07-0.1 s of every
start at 19,641 servers, for objects that live as long as the configuration. A configuration
holds no reference cycle (entries, provenance and the parsed file refer only downwards), so one
that is replaced is still freed by reference counting. Small configurations (tests, a handful
of servers) are left alone: their collections are short."""


def _load_config(
    *,
    agent_dir: Path,
    project_dir: Path,
    config_path: Path | None,
    home: Path | None,
    environ: Mapping[str, str] | None,
    platform: str | None,
    exclusive: bool | None,
) -> LoadedConfig:
    where = Where(
        home=home if home is not None else Path.home(),
        project_dir=project_dir,
        platform=platform if platform is not None else sys.platform,
        environ=environ if environ is not None else os.environ,
    )
    # The servers inherit this environment and may print it: its secrets are masked whether
    # or not the configuration names them (here, because every host loads its configuration).
    register_environment_secrets(unrecorded(where.environ))
    collector = _Collector()
    if exclusive is None:
        exclusive = is_exclusive_mode(where.environ)
    layers = _read_file_layers(
        file_layers(where, agent_dir=agent_dir, config_path=config_path, exclusive=exclusive),
        collector,
    )
    store = TrustStore.in_agent_dir(agent_dir)
    trust_mode = _trust_mode(layers, where=where, collector=collector)
    # Before anything reads a setting (plugins read agentPluginPaths next): what a project
    # file may set depends on whether it is trusted.
    for layer in layers:
        if layer.source.name in PROJECT_LAYERS and layer.source.loaded:
            trusted = _file_trusted(layer.source.path, trust_mode[0], store)
            layer.settings = _project_settings(
                layer.settings,
                path=layer.source.path,
                trusted=trusted,
                may_write_in=_project_write_roots(agent_dir, where.project_dir),
                where=where,
                agent_dir=agent_dir,
                collector=collector,
            )
    sources = [layer.source for layer in layers]
    plugins = _read_plugins(layers, where, agent_dir=agent_dir, exclusive=exclusive)
    for read in (*plugins.packages, *plugins.agents, *plugins.claude):
        if read.exists or read.kind != "pi-settings":  # pi's own settings are often absent
            sources.append(_plugin_source(read))
        collector.errors.extend(read.errors)
        collector.warnings.extend(read.warnings)

    per_server: dict[str, list[tuple[str, Path, ValidEntry]]] = {}
    file_defined: dict[str, None] = {}  # ordered set
    first_errors: dict[str, ConfigError] = {}
    settings: dict[str, object] = {}
    imports: list[ImportKind] = []
    host_reads: dict[ImportKind, dict[str, tuple[RawEntry, ValidEntry]]] = {}
    project_paths: dict[str, set[Path]] = {}
    """Server -> the project-level files that set any of its fields."""
    project_files: dict[Path, None] = {}  # ordered set of every project-level file read

    def add_plugin_entry(read: PluginRead, raw: RawEntry, *, first: bool = False) -> None:
        valid, errors, warnings = validate_server_entry(raw)
        collector.errors.extend(errors)
        collector.warnings.extend(warnings)
        if valid is None:
            return
        contributions = per_server.setdefault(raw.name, [])
        contributions.insert(0 if first else len(contributions), (read.source, raw.path, valid))
        untrusted = {p for p in (read.listed_in, read.path) if p in plugins.project_level}
        if _is_project_host_file(read.path, where):
            untrusted.add(read.path)  # the plugin came with the project's own files
        if untrusted:
            project_paths.setdefault(raw.name, set()).update(untrusted)
            project_files.update(dict.fromkeys(sorted(untrusted)))

    # Plugins and packages sit below every file, as defaults: packages, then agent plugins
    # (which replace a package's server of the same name whole), then the files on top.
    agent_names = {raw.name for read in plugins.agents for raw in read.entries}
    for read in plugins.packages:
        for raw in read.entries:
            if raw.name in agent_names:
                collector.warnings.append(
                    f"{raw.path}: server {raw.name!r} of package {read.name} is skipped: an "
                    "agent plugin defines the same name"
                )
            else:
                add_plugin_entry(read, raw)
    for read in plugins.agents:
        for raw in read.entries:
            add_plugin_entry(read, raw)

    for layer in layers:
        is_project = layer.source.name in PROJECT_LAYERS
        if is_project and layer.source.loaded:
            project_files[layer.source.path] = None
        settings.update(layer.settings)
        imports.extend(kind for kind in layer.imports if kind not in imports)
        # A layer's imports sit just below the layer itself (the first host listed wins a
        # name), so the file that imports a server can override any of its fields.
        imported: dict[str, tuple[ImportKind, RawEntry, ValidEntry]] = {}
        for kind in layer.imports:
            if kind not in host_reads:
                reads = read_import(kind, where)
                sources.extend(_import_source(read) for read in reads)
                host_reads[kind] = _import_entries(reads, collector)
            for name, (host_raw, host_entry) in host_reads[kind].items():
                imported.setdefault(name, (kind, host_raw, host_entry))
        for name, (kind, host_raw, host_entry) in imported.items():
            per_server.setdefault(name, []).append((f"import:{kind}", host_raw.path, host_entry))
            # A host file inside the project is cloned content; any host file a project file
            # pulls in runs only because that project file asked for it.
            untrusted = {layer.source.path} if is_project else set()
            if _is_project_host_file(host_raw.path, where):
                untrusted.add(host_raw.path)
            if untrusted:
                project_paths.setdefault(name, set()).update(untrusted)
                project_files.update(dict.fromkeys(sorted(untrusted)))
        for raw, valid, errors in layer.entries:
            file_defined[raw.name] = None
            if errors:
                first_errors.setdefault(raw.name, errors[0])
            if valid is not None:
                if is_project:
                    valid = _keep_user_approval(
                        raw, valid, per_server.get(raw.name, ()), where, collector
                    )
                per_server.setdefault(raw.name, []).append((layer.source.name, raw.path, valid))
                if is_project:
                    project_paths.setdefault(raw.name, set()).add(raw.path)

    # Claude plugin servers are the lowest defaults of all. One whose name only normalises to
    # a name defined above it (`my-db` under `my_db`) would become a second server with the
    # same tool prefix, so it is left out, as the reference leaves it out.
    above = (
        {name.replace("-", "_"): name for name in (*per_server, *file_defined)}
        if plugins.claude
        else {}
    )
    for read in plugins.claude:
        for raw in read.entries:
            other = above.get(raw.name.replace("-", "_"), raw.name)
            if other != raw.name:
                collector.warnings.append(
                    f"{raw.path}: Claude plugin server {raw.name!r} is shadowed by {other!r}, "
                    "whose name normalises to the same tool prefix; it is left out"
                )
            else:
                add_plugin_entry(read, raw, first=True)

    servers: dict[str, ServerEntry] = {}
    provenance: dict[str, ServerProvenance] = {}
    invalid: dict[str, ConfigError] = {}
    for name in (n for n in file_defined if n not in per_server):
        # Every file's entry for this server was broken: it is configured but unusable.
        invalid[name] = first_errors[name]
    for name, contributions in per_server.items():
        merged = merge_entries(contributions)
        # The merged entry is not kept: its field sources become the provenance's own.
        provenance[name] = ServerProvenance(
            tuple(merged.contributions), tuple(merged.dropped), merged.field_sources
        )
        result = _finish_server(name, merged, where, collector)
        if not isinstance(result, ConfigError):
            result = _resolved_where_trusted(result, merged, where)
        if isinstance(result, ConfigError):
            invalid[name] = result
        else:
            servers[name] = result

    built_settings = _build_settings(settings, collector)
    trust = _decide_project_trust(
        trust_mode, project_files, project_paths, where=where, store=store
    )
    command = trust_command(project_dir)
    trusted_paths = {f.path for f in trust.files if f.trusted}
    for name, paths in project_paths.items():
        entry = servers.get(name)
        pending = tuple(sorted(p for p in paths if p not in trusted_paths))
        if entry is not None and pending:
            entry.with_untrusted(UntrustedOrigin(pending, command, trust.mode))
    if built_settings.project_trust != trust.mode:
        built_settings = built_settings.model_copy(update={"project_trust": trust.mode})

    return LoadedConfig(
        servers=servers,
        settings=built_settings,
        provenance=provenance,
        invalid_servers=invalid,
        errors=tuple(collector.errors),
        warnings=tuple(collector.warnings),
        sources=tuple(sources),
        imports=tuple(imports),
        project_trust=trust,
        inputs_known=not imports and not plugins.probed,
    )


@dataclass(frozen=True, slots=True)
class _Plugins:
    packages: list[PluginRead]
    agents: list[PluginRead]
    claude: list[PluginRead]
    project_level: frozenset[Path]
    """Files that list plugins and come with the project: its config and pi settings files."""
    probed: bool
    """Whether plugins or packages were looked for beyond the settings files that list them
    (a directory, a package root): what was found there is no input of ``_inputs``."""


def _read_plugins(
    layers: Sequence[_FileLayerData], where: Where, *, agent_dir: Path, exclusive: bool
) -> _Plugins:
    """The plugins and packages the configuration asks for (only Claude plugins when
    ``exclusive``: that one file is the whole configuration)."""
    project_level = {
        layer.source.path for layer in layers if layer.source.name in PROJECT_LAYERS
    } | {where.project_dir / ".pi" / "settings.json"}
    # The last file that lists them wins, as `claudePlugins` and settings merge.
    claude_layer = next((la for la in reversed(layers) if la.claude_plugins is not None), None)
    claude = (
        read_claude_plugins(claude_layer.claude_plugins or [], where)
        if claude_layer is not None
        else []
    )
    claude_probed = claude_layer is not None and bool(claude_layer.claude_plugins)
    if exclusive:
        return _Plugins([], [], claude, frozenset(project_level), claude_probed)
    packages = read_packages(where, agent_dir=agent_dir)
    agent_layer = next(
        (la for la in reversed(layers) if la.settings.get("agent_plugin_paths") is not None), None
    )
    agents: list[PluginRead] = []
    if agent_layer is not None:
        paths = agent_layer.settings["agent_plugin_paths"]
        assert isinstance(paths, tuple)
        agents = read_agent_plugins(
            [str(p) for p in paths],
            listed_in=agent_layer.source.path,
            where=where,
            agent_dir=agent_dir,
        )
    # A settings file that names a package (found or not) sends the load to look for it.
    probed = (
        claude_probed
        or agent_layer is not None
        or any(read.kind != "pi-settings" or read.names_packages for read in packages)
    )
    return _Plugins(packages, agents, claude, frozenset(project_level), probed)


def _plugin_source(read: PluginRead) -> ConfigSource:
    status: SourceStatus
    if not read.exists:
        status = "invalid" if read.errors else "missing"
    elif read.errors and not read.entries:
        status = "invalid"
    else:
        status = "loaded"
    names = tuple(dict.fromkeys(raw.name for raw in read.entries))
    return ConfigSource(read.source, "plugin", read.path, status, names)


_USER_ONLY_SETTINGS = {
    "shared_state": "sharedState",
    "gateway_clients": "gatewayClients",
    "gateway_jwt": "gatewayJwt",
    # An endpoint a repository names would receive the user's traces.
    "telemetry": "telemetry",
}


def _is_project_host_file(path: Path, where: Where) -> bool:
    """A host file inside the project directory (``.vscode/mcp.json``, ``.cursor/mcp.json``,
    ``opencode.json``). When the project directory holds the home directory (running in
    ``~`` or ``/``), host files there are the user's own, not a repository's."""
    if is_inside(where.home, where.project_dir):
        return False
    return is_inside(path, where.project_dir)


def _trust_mode(
    layers: Sequence[_FileLayerData], *, where: Where, collector: _Collector
) -> tuple[ProjectTrustMode, str]:
    """The ``projectTrust`` mode in effect and what set it (``default``, ``settings``, a project
    file's path or ``env``); takes ``projectTrust`` out of every project layer's settings.

    A project file's own ``projectTrust`` is applied only when it is stricter than the user's:
    a cloned repository must not be able to vouch for itself.
    """
    user_mode: ProjectTrustMode = "ask"
    proposals: list[tuple[ProjectTrustMode, Path]] = []
    for layer in layers:
        value = layer.settings.get("project_trust")
        mode_value = next((m for m in ("ask", "always", "never") if m == value), None)
        if layer.source.name in PROJECT_LAYERS:
            layer.settings.pop("project_trust", None)
            if mode_value is not None:
                proposals.append((mode_value, layer.source.path))
        elif mode_value is not None:
            user_mode = mode_value
    mode, mode_source = user_mode, "settings" if user_mode != "ask" else "default"
    for proposed, path in proposals:
        stricter = stricter_mode(mode, proposed)
        if stricter != mode:
            mode, mode_source = stricter, str(path)
        elif proposed != mode:
            collector.warnings.append(
                f"{path}: settings.projectTrust {proposed!r} is ignored in a project file (a "
                "repository cannot trust itself); set it in your user config or "
                "PI_MCP_PROJECT_TRUST"
            )
    from_env = project_trust_from_env(where.environ)
    if from_env is not None:
        mode, mode_source = from_env, "env"
    return mode, mode_source


def _file_trusted(
    path: Path, mode: ProjectTrustMode, store: TrustStore, digest: str | None = None
) -> bool:
    if mode != "ask":
        return mode == "always"
    return store.is_trusted(path, digest if digest is not None else file_digest(path))


def _decide_project_trust(
    mode: tuple[ProjectTrustMode, str],
    project_files: Mapping[Path, None],
    project_paths: Mapping[str, set[Path]],
    *,
    where: Where,
    store: TrustStore,
) -> ProjectTrust:
    """Each project-level file's trust under ``mode``, and the servers it touches."""
    files: list[ProjectFile] = []
    for path in project_files:
        digest = file_digest(path)
        trusted = _file_trusted(path, mode[0], store, digest)
        servers = tuple(name for name, paths in project_paths.items() if path in paths)
        files.append(ProjectFile(path, digest, trusted, servers))
    return ProjectTrust(mode[0], mode[1], where.project_dir, tuple(files))


def _project_settings(
    settings: Mapping[str, object],
    *,
    path: Path,
    trusted: bool,
    may_write_in: Sequence[Path],
    where: Where,
    agent_dir: Path,
    collector: _Collector,
) -> dict[str, object]:
    """What of a project file's ``settings`` takes effect: the one place that rule lives.

    Untrusted, only :data:`UNTRUSTED_PROJECT_SETTINGS` (one warning names the rest, which
    apply once the file is trusted). Trusted, everything but the operator's own settings,
    and no file written outside ``may_write_in`` (a repository's ``captureStats`` path must not
    replace ``~/.bashrc``): the user's own file may name such a path, a project file may not.
    """
    kept: dict[str, object] = {}
    waiting: list[str] = []
    for key, value in settings.items():
        json_key = json_name(Settings, key) if key in Settings.model_fields else key
        if key in _USER_ONLY_SETTINGS:
            # Where shared state lives (trust records among it) and who may use the gateway
            # are the operator's: a cloned repository cannot redirect or widen them.
            collector.warnings.append(
                f"{path}: settings.{json_key} is ignored in a project file; "
                "set it in your user config"
            )
            continue
        if not trusted and key not in UNTRUSTED_PROJECT_SETTINGS:
            waiting.append(json_key)
            continue
        target = _written_path(key, value, where=where, agent_dir=agent_dir)
        if target is not None and not any(is_inside(target, root) for root in may_write_in):
            collector.warnings.append(
                f"{path}: settings.{json_key} is ignored: it writes to {target}, outside the "
                "agent directory, the project and the output directory, and only your own "
                "config file may name such a place"
            )
            continue
        kept[key] = value
    if waiting:
        names = ", ".join(f"settings.{key}" for key in waiting)
        collector.warnings.append(
            f"{path}: {names} {'is' if len(waiting) == 1 else 'are'} ignored while this file is "
            "not trusted (an untrusted project file may not change safeguards or name files); "
            f"`{trust_command(where.project_dir)}` applies "
            + ("it" if len(waiting) == 1 else "them")
        )
    return kept


def _written_path(key: str, value: object, *, where: Where, agent_dir: Path) -> Path | None:
    """The file a setting makes this process write, resolved as its user resolves it (the
    call statistics in ``engine/_stats.py``, the trace in ``engine/_trace.py``)."""
    if key == "capture_stats" and isinstance(value, CaptureStats) and value.path:
        return agent_dir / expand_home(value.path, where.home)
    if key == "trace" and value is not False:
        file = value.file if isinstance(value, TraceSettings) else None
        if isinstance(value, TraceSettings) and not value.enabled:
            return None
        if not file:
            # The default place: a `.pi/mcp-traces` link in the repository could lead anywhere.
            return where.project_dir / ".pi" / "mcp-traces"
        written = Path(expand_home(file, where.home))
        return written if written.is_absolute() else where.project_dir / written
    return None


def _project_write_roots(agent_dir: Path, project_dir: Path) -> tuple[Path, ...]:
    """Where a trusted project's settings may make this process write: the agent directory,
    the project itself and the directory results too long for the model are spilled to."""
    import tempfile

    uid = os.getuid() if hasattr(os, "getuid") else 0
    # The output guard's directory (surface/_output_guard.py), named here rather than
    # imported: configuration sits below the surface.
    spill_dir = Path(tempfile.gettempdir()) / f"pi-mcp-output-{uid}"
    return (agent_dir, project_dir, spill_dir)


_USER_SAFEGUARD_FIELDS = {
    "approve_tools": "approveTools",
    "idempotent_tools": "idempotentTools",
    "tool_overrides": "toolOverrides",
}
"""Per-server fields that guard the user's own servers: whether a call is approved, whether a
replayed call may run again, and the names and words the model reads for its tools (a
repository must not rewrite what a tool of the user's says it does). A project file never
changes them for a server the user defines."""


def _keep_user_approval(
    raw: RawEntry,
    valid: ValidEntry,
    below: Sequence[tuple[str, Path, ValidEntry]],
    where: Where,
    collector: _Collector,
) -> ValidEntry:
    """A project file's entry without the safeguard fields (:data:`_USER_SAFEGUARD_FIELDS`)
    when the server is also defined by the user's own files: trusting a repository for what it
    runs does not hand it the approval of the user's servers (the trust question shows
    commands, not this)."""
    dropped = [name for name in _USER_SAFEGUARD_FIELDS if name in valid.fields]
    if not dropped:
        return valid
    owned = any(
        source not in PROJECT_LAYERS and not _is_project_host_file(path, where)
        for source, path, _entry in below
    )
    if not owned:
        return valid
    for name in dropped:
        collector.warnings.append(
            f"{raw.path}: mcpServers.{raw.name}.{_USER_SAFEGUARD_FIELDS[name]} is ignored: "
            f"{raw.name!r} is defined in your own config, and a project file may not change "
            "how its calls are approved or retried, or how its tools are described"
        )
    fields = {k: v for k, v in valid.fields.items() if k not in dropped}
    return ValidEntry(fields, valid.extras, valid.line_of, valid.json_path)


def _resolved_where_trusted(entry: ServerEntry, merged: MergedEntry, where: Where) -> ServerEntry:
    """A project file's relative ``command`` and ``cwd`` made absolute where that file really
    lies (see :func:`real_project_dir`); a server of a linked file with no ``cwd`` runs there
    too, so its relative arguments (``python server.py``) name the files that were trusted."""
    paths: dict[str, Path] = {}
    for contribution in merged.contributions:
        if contribution.source in PROJECT_LAYERS:
            paths[contribution.source] = contribution.path
    if not paths:
        return entry
    command_file = paths.get(merged.field_sources.get("command", ""))
    cwd_file = paths.get(merged.field_sources.get("cwd", ""))
    update: dict[str, object] = {}
    cwd = entry.cwd
    if cwd_file is not None and cwd is not None and not Path(cwd).is_absolute():
        cwd = str(real_project_dir(cwd_file, where.project_dir) / cwd)
        update["cwd"] = cwd
    if command_file is not None and entry.command is not None:
        base = real_project_dir(command_file, where.project_dir)
        if cwd is None and base != _resolved(where.project_dir):
            cwd = str(base)
            update["cwd"] = cwd
        # A bare name is looked up on PATH; one with a directory part (`./run.sh`, which Path
        # would shorten to `run.sh`) names a file beside the config.
        seps = tuple(sep for sep in (os.sep, os.altsep) if sep)
        if not Path(entry.command).is_absolute() and any(s in entry.command for s in seps):
            start = Path(cwd) if cwd is not None else base
            if start.is_absolute():  # else the user's relative cwd: the OS resolves both
                update["command"] = os.path.normpath(start / entry.command)
    if not update:
        return entry
    return (
        entry.model_copy(update=update)
        .with_written(entry.written)
        .with_env_templates(entry.env_templates)
    )


def _read_file_layers(layers: Sequence[FileLayer], collector: _Collector) -> list[_FileLayerData]:
    result: list[_FileLayerData] = []
    seen: dict[Path, str] = {}
    for layer in layers:
        resolved = _resolved(layer.path)
        if resolved in seen and layer.path.exists():
            status: SourceStatus = "duplicate"
            result.append(_FileLayerData(ConfigSource(layer.name, "file", layer.path, status)))
            continue
        seen[resolved] = layer.name
        result.append(_read_file_layer(layer, collector))
    return result


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path.absolute()


def _read_file_layer(layer: FileLayer, collector: _Collector) -> _FileLayerData:
    def skipped(status: SourceStatus, error: ConfigError | None = None) -> _FileLayerData:
        if error is not None:
            collector.errors.append(error)
        return _FileLayerData(ConfigSource(layer.name, "file", layer.path, status))

    try:
        text = read_file_text(layer.path)
    except ConfigError as exc:
        return skipped("invalid", exc)
    if text is None:
        if layer.name == "config":
            missing = ConfigError(
                "config file not found (given with --config)", path=str(layer.path)
            )
            return skipped("missing", missing)
        return skipped("missing")
    try:
        document = parse_jsonc(text)
    except JsoncSyntaxError as exc:
        error = ConfigError(
            f"invalid JSON: {exc.message} (column {exc.column}); this file is ignored",
            path=str(layer.path),
            line=exc.line,
        )
        return skipped("invalid", error)
    if document is None:
        return skipped("empty")
    structural = _structural_error(document, layer.path)
    if structural is not None:
        return skipped("invalid", structural)
    return _layer_from_document(layer, document, collector)


def _structural_error(document: JsoncDocument, path: Path) -> ConfigError | None:
    """The first problem that makes a whole file unusable, if any."""
    data = document.data
    if not isinstance(data, dict):
        return ConfigError(
            f"the top level must be an object, not {json_type(data)}; this file is ignored",
            path=str(path),
            line=1,
        )
    expected = dict.fromkeys(_SERVER_MAP_KEYS, "an object of servers")
    expected |= {"settings": "an object", "imports": "a list of host names"}
    for key, what in expected.items():
        value = data.get(key)
        if value is None:
            continue
        is_right = isinstance(value, list) if key == "imports" else isinstance(value, dict)
        if not is_right:
            return ConfigError(
                f"{key!r} must be {what}, not {json_type(value)}; this file is ignored",
                path=str(path),
                line=document.line_of((key,)),
                field=key,
            )
    return None


def _layer_from_document(
    layer: FileLayer, document: JsoncDocument, collector: _Collector
) -> _FileLayerData:
    data = document.data
    assert isinstance(data, dict)
    path = layer.path
    for key in data:
        if key not in _TOP_LEVEL_KEYS:
            collector.warnings.append(
                f"{path}:{document.line_of((key,))}: unknown top-level key {key!r} is ignored"
                + did_you_mean(key, _TOP_LEVEL_KEYS)
            )
    map_keys: tuple[str, ...] = _SERVER_MAP_KEYS
    if all(data.get(key) is not None for key in _SERVER_MAP_KEYS):
        # As the TypeScript adapter reads such a file: one map, never a mix of both.
        map_keys = ("mcpServers",)
        collector.warnings.append(
            f"{path}:{document.line_of(('mcp-servers',))}: both 'mcpServers' and 'mcp-servers' "
            "are present; only 'mcpServers' is read, 'mcp-servers' is ignored"
        )
    loaded = _FileLayerData(ConfigSource(layer.name, "file", path, "loaded"))
    by_name: dict[str, tuple[RawEntry, ValidEntry | None, list[ConfigError]]] = {}
    line_of = document.line_of
    for map_key in map_keys:
        servers = data.get(map_key)
        if not isinstance(servers, dict):
            continue
        for name, value in servers.items():
            raw = RawEntry(name, value, path, (map_key, name), line_of)
            unnamed = empty_name_error(raw)
            if unnamed is not None:
                collector.errors.append(unnamed)
                continue
            valid, errors, warnings = validate_server_entry(raw)
            if errors or warnings:
                collector.errors.extend(errors)
                collector.warnings.extend(warnings)
            by_name[name] = (raw, valid, errors)
    loaded.entries = list(by_name.values())

    if "settings" in data:
        settings, errors, warnings = validate_settings(
            data["settings"], path=path, line_of=document.line_of
        )
        loaded.settings = settings
        collector.errors.extend(errors)
        collector.warnings.extend(warnings)

    if "claudePlugins" in data:
        specs, warnings = parse_claude_plugins(
            data["claudePlugins"], path=path, line_of=document.line_of
        )
        loaded.claude_plugins = specs
        collector.warnings.extend(warnings)

    for index, kind in enumerate(data.get("imports") or []):
        known = next((k for k in IMPORT_KINDS if k == kind), None)
        if known is None:
            shown = repr(kind) if isinstance(kind, str) else f"a {json_type(kind)}"
            collector.errors.append(
                ConfigError(
                    f"unknown import {shown}; this import is ignored (known: "
                    + ", ".join(IMPORT_KINDS)
                    + ")",
                    path=str(path),
                    line=document.line_of(("imports", index)),
                    field=f"imports[{index}]",
                )
            )
        elif known not in loaded.imports:
            loaded.imports.append(known)
    loaded.source = ConfigSource(layer.name, "file", path, "loaded", tuple(by_name))
    return loaded


def _import_source(read: HostRead) -> ConfigSource:
    status: SourceStatus
    if not read.exists:
        status = "missing"
    elif read.errors and not read.entries:
        status = "invalid"
    else:
        status = "loaded"
    names = tuple(dict.fromkeys(entry.name for entry in read.entries))
    return ConfigSource(f"import:{read.file.kind}", "import", read.file.path, status, names)


def _import_entries(
    reads: Sequence[HostRead], collector: _Collector
) -> dict[str, tuple[RawEntry, ValidEntry]]:
    """One host's servers; a later file's valid entry replaces an earlier one whole."""
    entries: dict[str, tuple[RawEntry, ValidEntry]] = {}
    for read in reads:
        collector.errors.extend(read.errors)
        collector.warnings.extend(read.warnings)
        for raw in read.entries:
            unnamed = empty_name_error(raw)
            if unnamed is not None:
                collector.errors.append(unnamed)
                continue
            valid, errors, warnings = validate_server_entry(raw)
            collector.errors.extend(errors)
            collector.warnings.extend(warnings)
            if valid is not None:
                entries[raw.name] = (raw, valid)
    return entries


def _finish_server(
    name: str, merged: MergedEntry, where: Where, collector: _Collector
) -> ServerEntry | ConfigError:
    """Check the transport, interpolate variables and build the entry."""
    fields = dict(merged.fields)
    # Exactly one transport; counted without building a list, as this runs for every server.
    if (fields.get("command") is None) + (fields.get("url") is None) + (
        fields.get("socket") is None
    ) != 2:
        return _transport_error(name, merged, fields)
    written: dict[str, object] = {}
    for field_name, value in fields.items():
        key = _WRITTEN_KEY_OF.get(field_name)
        if key is not None:
            written[key] = value if type(value) is str else _plain(value)

    missing_by_field: dict[str, tuple[str, ...]] = {}
    templates: dict[str, str] = {}
    # An agent plugin's args, env, cwd and headers are literal (its own placeholders were
    # expanded when it was read), as long as no config file replaced them.
    literal: Collection[str] = ()
    for contribution in merged.contributions:
        if contribution.source.startswith(LITERAL_SOURCE_PREFIX):
            literal = {
                key
                for key in ("args", "env", "cwd", "headers")
                if merged.field_sources.get(key, "").startswith(LITERAL_SOURCE_PREFIX)
            }
            break

    def resolve(value: str, field: str, *, home: bool = False) -> str:
        if _is_literal_text(value) or field.partition(".")[0].partition("[")[0] in literal:
            return value
        result = interpolate(value, where.environ)
        for variable, secret in result.substituted:
            # By value, whatever the field: a token inside a URL path or a command line is
            # as secret as one in a header.
            if not is_place_variable(variable):
                register_secret(secret, f"${{{variable}}}")
        if result.missing:
            missing_by_field[field] = result.missing
        if result.value != value:
            templates[field] = value  # shown instead of the value: it may hold a secret
        return expand_home(result.value, where.home) if home else result.value

    def resolve_secret(value: str, field: str, *, home: bool = False) -> str:
        if field.partition(".")[0] in literal:
            if field not in PLUGIN_PLACE_VARIABLES:
                register_secret(value, MASK)
            return "!" + value if value.startswith("!") else value  # a value, never a command
        # A !command stays as written and runs at connect time (its output is registered
        # then); !! keeps its escape until then.
        if command_value(value) is not None:
            return value
        if value.startswith("!!"):
            resolved = "!!" + resolve(value[2:], field, home=home)
            register_secret(resolved[2:], MASK)
            return resolved
        resolved = resolve(value, field, home=home)
        if field not in templates and field not in PLUGIN_PLACE_VARIABLES:
            # Header values, env values given to servers and bearer tokens are secrets even
            # when written literally; a value with ${VAR} in it registered the variable's value.
            register_secret(resolved, MASK)
        return resolved

    url = fields.get("url")
    if isinstance(url, str):
        fields["url"] = resolve(url, "url")
        if "url" in missing_by_field:
            names = ", ".join(missing_by_field["url"])
            return _invalid_entry(
                name,
                merged,
                f"cannot be used: its 'url' refers to {names}, which is not set in the environment",
                "url",
            )
    for path_field, key in (("socket", "socket"), ("ca_file", "caFile"), ("cwd", "cwd")):
        path_value = fields.get(path_field)
        if isinstance(path_value, str):
            fields[path_field] = resolve(path_value, key, home=True)
    command = fields.get("command")
    if isinstance(command, str) and not _is_literal_text(command):
        fields["command"] = resolve(command, "command", home=True)
    args = fields.get("args")
    if isinstance(args, tuple) and not all(map(_is_literal_text, args)):
        fields["args"] = tuple(resolve(arg, f"args[{i}]", home=True) for i, arg in enumerate(args))
    for mapping_field, key in (("env", "env"), ("headers", "headers")):
        values = fields.get(mapping_field)
        if isinstance(values, dict):
            fields[mapping_field] = {
                k: resolve_secret(v, f"{key}.{k}", home=mapping_field == "env")
                for k, v in values.items()
            }
    headers_command = fields.get("request_headers_command")
    if isinstance(headers_command, RequestHeadersCommand):
        fields["request_headers_command"] = headers_command.model_copy(
            update={
                "command": resolve(headers_command.command, "requestHeadersCommand.command"),
                "args": None
                if headers_command.args is None
                else tuple(
                    resolve(a, f"requestHeadersCommand.args[{i}]")
                    for i, a in enumerate(headers_command.args)
                ),
                "env": None
                if headers_command.env is None
                else {
                    k: resolve(v, f"requestHeadersCommand.env.{k}")
                    for k, v in headers_command.env.items()
                },
            }
        )
    token = fields.get("bearer_token")
    if isinstance(token, str):
        fields["bearer_token"] = resolve_secret(token, "bearerToken")
    oauth = fields.get("oauth")
    if isinstance(oauth, OAuthConfig):
        credentials = {
            name: resolve(
                value, f"oauth.{json_name(OAuthConfig, name)}", home=name == "client_private_key"
            )
            for name in ("client_id", "client_secret", "client_private_key")
            if isinstance(value := getattr(oauth, name), str)
        }
        update: dict[str, object] = dict(credentials)
        if oauth.idp is not None:
            update["idp"] = _resolved_idp(oauth.idp, resolve, resolve_secret)
        if update:
            fields["oauth"] = oauth.model_copy(update=update)
        if "oauth.clientSecret" not in templates:
            register_secret(credentials.get("client_secret"), MASK)
        if "oauth.clientPrivateKey" not in templates:
            # PEM text is the secret; a path is not (the file's content is, once read).
            pem = credentials.get("client_private_key")
            if pem is not None and is_pem_text(pem):
                register_secret(pem, MASK)

    for field_name, unset in missing_by_field.items():
        listed = ", ".join(unset)
        collector.warnings.append(
            f"server {name!r}: {listed} {'is' if len(unset) == 1 else 'are'} not set; "
            f"{field_name!r} uses an empty string in its place"
        )
    try:
        return ServerEntry.from_checked(
            fields, merged.extras, written=written, env_templates=templates
        )
    except ValidationError as exc:
        # Every field was checked per layer, so this is rare; name the fields, never values.
        where_wrong = ", ".join(format_json_path(tuple(e["loc"])) for e in exc.errors())
        return _invalid_entry(name, merged, f"has invalid values in {where_wrong}", where_wrong)


def _transport_error(name: str, merged: MergedEntry, fields: Mapping[str, object]) -> ConfigError:
    """The error of an entry with no transport, or with more than one."""
    transports = [key for key in ("command", "url", "socket") if fields.get(key) is not None]
    if not transports:
        return _invalid_entry(
            name,
            merged,
            "has neither 'command' nor 'url'; set 'command' to run a local server, 'url' "
            "for a remote one or 'socket' for a unix socket",
            "command",
        )
    described = " and ".join(
        f"{key!r} (from {merged.field_sources.get(key, '?')})" for key in transports
    )
    both = "both " if len(transports) == 2 else ""
    return _invalid_entry(name, merged, f"sets {both}{described}; keep exactly one", transports[-1])


def _invalid_entry(name: str, merged: MergedEntry, message: str, field: str) -> ConfigError:
    """An unusable server's error, naming the file (and line) that set ``field`` last."""
    source = merged.field_sources.get(field)
    contribution = next(
        (c for c in reversed(merged.contributions) if c.source == source),
        merged.contributions[-1],
    )
    return ConfigError(
        f"server {name!r} {message}",
        path=str(contribution.path),
        line=contribution.line,
        field=field,
    )


_WRITTEN_KEY_OF = {
    name: key
    for name in ServerEntry.model_fields
    if (key := json_name(ServerEntry, name)) in WRITTEN_KEYS
}
"""Python field name -> JSON key, for the fields hashed as written (:data:`WRITTEN_KEYS`)."""


def _is_literal_text(value: str) -> bool:
    """Whether ``value`` reads the same after interpolation and ``~`` expansion: it holds no
    variable reference (each form starts with ``$`` or ``{``) and does not start with ``~``.
    Most values are such (19,641 servers' commands and arguments were most of the regex
    passes of a load), so they skip the substitution."""
    return "$" not in value and "{" not in value and not value.startswith("~")


def _plain(value: object) -> object:
    """A validated field value back in JSON form (tuples as lists, models as objects)."""
    if type(value) is str:
        return value
    if isinstance(value, RequestHeadersCommand):
        return value.model_dump(by_alias=True, exclude_unset=True)
    if isinstance(value, tuple):
        return [item if type(item) is str else _plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _build_settings(settings: Mapping[str, object], collector: _Collector) -> Settings:
    try:
        return Settings.model_validate(dict(settings))
    except ValidationError as exc:
        wrong = ", ".join(format_json_path(tuple(e["loc"])) for e in exc.errors())
        collector.errors.append(
            ConfigError(f"settings could not be combined ({wrong}); defaults are used")
        )
        return Settings()


def _resolved_idp(
    idp: IdentityProviderConfig,
    resolve: Callable[[str, str], str],
    resolve_secret: Callable[[str, str], str],
) -> IdentityProviderConfig:
    """``oauth.idp`` with its variables expanded; the ID token and the secret are registered
    as secrets, and a ``!command`` among them stays as written (it runs when a token is
    needed)."""
    prefix = "oauth.idp."
    return idp.model_copy(
        update={
            "token_endpoint": idp.token_endpoint
            and resolve(idp.token_endpoint, prefix + "tokenEndpoint"),
            "client_id": idp.client_id and resolve(idp.client_id, prefix + "clientId"),
            "id_token": idp.id_token and resolve_secret(idp.id_token, prefix + "idToken"),
            "client_secret": idp.client_secret
            and resolve_secret(idp.client_secret, prefix + "clientSecret"),
        }
    )
