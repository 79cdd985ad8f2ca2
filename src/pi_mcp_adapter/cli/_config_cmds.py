"""``pi-mcp config`` (the merged configuration and where each part came from) and ``pi-mcp init``.

Both print only masked values: secrets from the configuration never reach the terminal.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pi_mcp_adapter._errors import ConfigError

from ._app import (
    JsonOption,
    app,
    fail,
    get_context,
    print_error,
    print_json,
    print_warning,
)

if TYPE_CHECKING:
    from pi_mcp_adapter.config import (
        ConfigSource,
        HostConfig,
        ImportsChange,
        LoadedConfig,
        ServerEntry,
        ServerProvenance,
    )


@app.command("config", short_help="The merged configuration and where it came from.")
def config_command(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the merged configuration, where each server came from, and any problems.

    Secrets are masked. Exits with status 1 when a file or server has errors.
    """
    loaded = get_context(ctx).load_config()
    if as_json:
        print_json(config_report(loaded))
    else:
        _print_config(loaded)
    if loaded.errors or loaded.invalid_servers:
        raise typer.Exit(1)


def config_report(loaded: LoadedConfig) -> dict[str, Any]:
    """The JSON shape of ``pi-mcp config --json`` (masked)."""
    from pi_mcp_adapter.config import mask_secrets
    from pi_mcp_adapter.config._masking import mask_extra

    from ._project_trust import trust_json

    servers: dict[str, Any] = {}
    for name, entry in loaded.servers.items():
        servers[name] = {
            "enabled": entry.is_enabled,
            "trusted": entry.untrusted is None,
            "untrusted": entry.untrusted.message if entry.untrusted is not None else None,
            "transport": entry.transport_kind,
            "config": mask_secrets(entry),
            **_provenance_json(loaded.provenance.get(name)),
        }
    invalid: dict[str, Any] = {
        name: {**_error_json(error), **_provenance_json(loaded.provenance.get(name))}
        for name, error in loaded.invalid_servers.items()
    }
    settings = loaded.settings.model_dump(mode="json", by_alias=True)
    for key in loaded.settings.model_extra or {}:
        settings[key] = mask_extra(key, settings[key])
    return {
        "servers": servers,
        "invalidServers": invalid,
        "settings": settings,
        "imports": list(loaded.imports),
        "sources": [_source_json(source) for source in loaded.sources],
        "errors": [_error_json(error) for error in loaded.errors],
        "warnings": list(loaded.warnings),
        "projectTrust": trust_json(loaded),
    }


def _provenance_json(provenance: ServerProvenance | None) -> dict[str, Any]:
    if provenance is None:
        return {}
    origin = provenance.origin
    return {
        "source": {"name": origin.source, "path": str(origin.path), "line": origin.line},
        "importedFrom": provenance.imported_from,
        "layers": [
            {"source": c.source, "path": str(c.path), "line": c.line, "fields": list(c.fields)}
            for c in provenance.layers
        ],
        "fieldSources": dict(provenance.field_sources),
        "dropped": [
            {"source": d.source, "fields": list(d.fields), "reason": d.reason}
            for d in provenance.dropped
        ],
    }


def _error_json(error: ConfigError) -> dict[str, Any]:
    return {
        "message": error.message,
        "path": error.path,
        "line": error.line,
        "field": error.field,
        "text": str(error),
    }


def _source_json(source: ConfigSource) -> dict[str, Any]:
    return {
        "name": source.name,
        "kind": source.kind,
        "path": str(source.path),
        "status": source.status,
        "servers": list(source.servers),
    }


def _print_config(loaded: LoadedConfig) -> None:
    from pi_mcp_adapter.config._masking import mask_extra

    out: list[str] = []
    if loaded.servers:
        out.append(f"Servers ({len(loaded.servers)}):")
        for name, entry in loaded.servers.items():
            out.extend(_server_lines(name, entry, loaded.provenance.get(name)))
    else:
        out.append("No servers configured.")
    if loaded.invalid_servers:
        out.append("")
        out.append(f"Servers that cannot be used ({len(loaded.invalid_servers)}):")
        for name, error in loaded.invalid_servers.items():
            out.append(f"  {name}: {error}")
    if loaded.imports:
        out.append("")
        out.append("Imports: " + ", ".join(loaded.imports))
    settings = loaded.settings.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    if settings:
        out.append("")
        out.append("Settings (other than defaults):")
        for key, value in settings.items():
            shown = mask_extra(key, value) if key in (loaded.settings.model_extra or {}) else value
            out.append(f"  {key}: {_compact(shown)}")
    trust = loaded.project_trust
    if trust.files:
        out.append("")
        out.append(f"Project trust (projectTrust: {trust.mode}, from {trust.mode_source}):")
        for project_file in trust.files:
            state = "trusted" if project_file.trusted else "untrusted"
            out.append(f"  {state:<9} {project_file.path}")
        if trust.untrusted_files:
            out.append(f"  Servers from untrusted files run nothing; trust: {trust.command}")
    out.append("")
    out.append("Files (lowest precedence first):")
    for source in loaded.sources:
        count = f" ({len(source.servers)} servers)" if source.servers else ""
        out.append(f"  {source.status:<9} {source.name:<21} {source.path}{count}")
    typer.echo("\n".join(out))
    for error in loaded.errors:
        print_error(str(error))
    for warning in loaded.warnings:
        print_warning(warning)


def _server_lines(name: str, entry: ServerEntry, provenance: ServerProvenance | None) -> list[str]:
    from pi_mcp_adapter.config import mask_secrets

    state = "enabled" if entry.is_enabled else "disabled"
    if entry.untrusted is not None and entry.enabled and not entry.disabled:
        state = "untrusted"
    lines = [f"  {name} ({entry.transport_kind}, {state})"]
    for key, value in mask_secrets(entry).items():
        lines.append(f"      {key}: {_compact(value)}")
    if provenance is not None:
        for contribution in provenance.layers:
            where = (
                f"{contribution.path}:{contribution.line}"
                if contribution.line
                else str(contribution.path)
            )
            fields = ", ".join(contribution.fields)
            lines.append(f"      from {contribution.source} {where}: {fields}")
        for dropped in provenance.dropped:
            lines.append(
                f"      dropped {', '.join(dropped.fields)} ({dropped.source}: {dropped.reason})"
            )
    return lines


def _compact(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "[" + ", ".join(_compact(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_compact(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


@app.command("init", short_help="Import the MCP configs of other hosts.")
def init_command(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Show the change, write nothing."),
    as_json: JsonOption = False,
) -> None:
    """Find MCP configs of other hosts on this machine and add them to "imports".

    The agent-dir mcp.json (or the --config file) is created if needed. The change is shown as
    a unified diff before it is written; comments and layout are kept where possible.
    """
    from pi_mcp_adapter.config import (
        ImportKind,
        apply_imports_change,
        discover_host_configs,
        plan_imports_change,
    )

    cli = get_context(ctx)
    target = cli.config_path or cli.agent_dir / "mcp.json"
    problems: list[ConfigError] = []
    found = discover_host_configs(
        Path.home(), cli.project_dir, environ=os.environ, on_problem=problems.append
    )
    for problem in problems:
        print_warning(f"cannot import {problem} (left out)")
    kinds: list[ImportKind] = list(dict.fromkeys(host.kind for host in found))
    try:
        change = plan_imports_change(target, kinds)
        written = False
        if change.changed and not dry_run:
            if not as_json:
                _print_init(found, change, dry_run=False, before_write=True)
            apply_imports_change(change)
            written = True
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if as_json:
        print_json(
            {
                "target": str(target),
                "found": [
                    {"kind": h.kind, "path": str(h.path), "servers": list(h.servers)} for h in found
                ],
                "added": list(change.added),
                "alreadyListed": list(change.already_listed),
                "diff": change.diff(),
                "reformatted": change.reformatted,
                "dryRun": dry_run,
                "written": written,
            }
        )
    elif written:
        typer.echo(f"Wrote {target} (added: {', '.join(change.added)}).")
    else:
        _print_init(found, change, dry_run=dry_run, before_write=False)


def _print_init(
    found: list[HostConfig], change: ImportsChange, *, dry_run: bool, before_write: bool
) -> None:
    if not found:
        typer.echo("No MCP configs of other hosts were found on this machine.")
        return
    typer.echo("Host configs found:")
    for host in found:
        names = ", ".join(host.servers)
        typer.echo(f"  {host.kind:<15} {host.path} ({len(host.servers)} servers: {names})")
    if change.already_listed:
        typer.echo(f"Already imported in {change.path}: {', '.join(change.already_listed)}")
    if not change.changed:
        typer.echo(f"Nothing to add to {change.path}.")
        return
    typer.echo("")
    typer.echo(change.diff(), nl=False)
    if change.reformatted:
        typer.echo("note: the file is rewritten from its parsed content; comments are not kept.")
    if dry_run:
        typer.echo("Dry run: nothing was written.")
    elif not before_write:
        typer.echo(f"Wrote {change.path}.")
