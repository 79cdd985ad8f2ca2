"""``pi-mcp add``, ``remove``, ``enable``, ``disable`` and ``edit``: change config files.

Every change is made in the file's text (comments and layout survive), checked with the
validation a load runs, and written atomically (``config/_edit.py``). ``--scope user`` (the
default) is ``<agent dir>/mcp.json`` or the ``--config`` file; ``--scope project`` is the
project's ``.mcp.json``, and ``.pi/mcp.json`` for enable/disable. A project file written here
stays trusted when it was trusted before (or new); otherwise it stays untrusted and the output
says how to trust it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ._app import (
    EXIT_USAGE,
    CliContext,
    JsonOption,
    app,
    fail,
    get_context,
    print_json,
    print_warning,
)

if TYPE_CHECKING:
    from pi_mcp_adapter.config import LoadedConfig
    from pi_mcp_adapter.config._edit import ConfigFileChange, Scope

ScopeOption = Annotated[
    str | None,
    typer.Option(
        "--scope",
        metavar="user|project",
        help="user: the agent-dir mcp.json (or --config); project: the project's .mcp.json "
        "(.pi/mcp.json for enable/disable).",
    ),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the change as a diff; write nothing.")
]

_NEW_FILE = '{\n  "mcpServers": {\n  }\n}\n'


def _scope(value: str | None) -> Scope | None:
    if value is None:
        return None
    if value == "user":
        return "user"
    if value == "project":
        return "project"
    raise fail(f"--scope is user or project, not {value!r}", code=EXIT_USAGE)


def _file_for(cli: CliContext, scope: Scope, *, override: bool = False) -> Path:
    from pi_mcp_adapter._errors import UsageError
    from pi_mcp_adapter.config._edit import config_file_for

    try:
        return config_file_for(
            scope,
            agent_dir=cli.agent_dir,
            project_dir=cli.project_dir,
            config_path=cli.config_path,
            exclusive=cli.exclusive or _exclusive_env(cli),
            override=override,
        )
    except UsageError as exc:
        raise fail(str(exc), code=EXIT_USAGE) from None


def _exclusive_env(cli: CliContext) -> bool:
    from pi_mcp_adapter.config._locations import is_exclusive_mode

    return is_exclusive_mode(cli.environ)


def _project_files(cli: CliContext) -> tuple[Path, Path]:
    return cli.project_dir / ".mcp.json", cli.project_dir / ".pi" / "mcp.json"


def _editable_files(cli: CliContext, scope: Scope | None) -> list[Path]:
    """The files a change without a single target may touch, lowest precedence first."""
    files: list[Path] = []
    if scope in (None, "user"):
        files.append(_file_for(cli, "user"))
    if scope == "project" or (scope is None and not (cli.exclusive or _exclusive_env(cli))):
        files.extend(p for p in _project_files(cli) if p not in files)
    return files


@dataclass(frozen=True, slots=True)
class _Written:
    path: Path
    trusted: bool | None
    """For a project file: whether its new content is trusted; None for other files."""


def _write(cli: CliContext, change: ConfigFileChange) -> _Written:
    from pi_mcp_adapter._errors import ConfigError
    from pi_mcp_adapter.config._edit import (
        check_config_text,
        trust_written_project_file,
        write_config_change,
    )

    # Only what this change breaks stops it: a file that already had a broken entry can still
    # have another server added or switched.
    earlier, _ = check_config_text(change.before or "", change.path)
    known = {(e.field, e.message) for e in earlier}
    errors = [
        e
        for e in check_config_text(change.after, change.path)[0]
        if (e.field, e.message) not in known
    ]
    if errors:
        raise fail(
            "the change would make the file invalid; nothing was written:\n"
            + "\n".join(f"  {e}" for e in errors)
        )
    try:
        write_config_change(change)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if change.path not in _project_files(cli):
        return _Written(change.path, None)
    try:
        trusted = trust_written_project_file(change, cli.agent_dir)
    except OSError as exc:
        print_warning(f"cannot record the trust of {change.path}: {exc}")
        trusted = False
    return _Written(change.path, trusted)


def _trust_note(cli: CliContext, written: _Written) -> str | None:
    from pi_mcp_adapter.config._trust import trust_command

    if written.trusted is None:
        return None
    if written.trusted:
        return (
            f"{written.path} is recorded as trusted with this change (its earlier content was "
            "trusted, or it had none)."
        )
    return (
        f"{written.path} is not trusted, so its servers do not run: review it, then run "
        f"`{trust_command(cli.project_dir)}`."
    )


def _print_dry_run(changes: Sequence[ConfigFileChange], as_json: bool) -> None:
    # Masked as `pi-mcp config` masks: the diff also shows the file's other servers.
    if as_json:
        print_json(
            {
                "dryRun": True,
                "changes": [{"path": str(c.path), "diff": c.diff(masked=True)} for c in changes],
            }
        )
        return
    shown = [c.diff(masked=True) for c in changes if c.changed]
    sys.stdout.write("".join(shown) if shown else "No change.\n")


def _split_words(words: Sequence[str]) -> tuple[str | None, str, list[str]]:
    """``[NAME] TARGET [ARGS...]`` -> (name, target, args). A first word that is a URL or a
    package names the target itself; anything else there is the server's name."""
    if not words:
        raise fail(
            "say what to add: pi-mcp add [NAME] URL, pi-mcp add NAME -- COMMAND [ARGS...], or "
            "pi-mcp add [NAME] npm:PACKAGE | pypi:PACKAGE",
            code=EXIT_USAGE,
        )
    first, rest = words[0], list(words[1:])
    if _is_url(first) or first.startswith(("npm:", "pypi:")):
        return None, first, rest
    if not rest:
        raise fail(
            f"{first!r} is not a URL or package: give the command after the name "
            f"(pi-mcp add {first} -- COMMAND [ARGS...]) or a URL (pi-mcp add {first} URL)",
            code=EXIT_USAGE,
        )
    return first, rest[0], rest[1:]


def _is_url(word: str) -> bool:
    return word.startswith(("http://", "https://"))


def _pairs(values: Sequence[str], separator: str, what: str) -> dict[str, str]:
    from pi_mcp_adapter._secrets import register_secret
    from pi_mcp_adapter.config._masking import sounds_secret

    pairs: dict[str, str] = {}
    for value in values:
        key, found, item = value.partition(separator)
        key, item = key.strip(), item.strip() if separator == ":" else item
        if not found or not key:
            raise fail(f"{what} {value!r} is not KEY{separator}VALUE", code=EXIT_USAGE)
        if sounds_secret(key) and "${" not in item and not item.startswith("!"):
            register_secret(item)
            print_warning(
                f"{what} {key} holds a secret written on the command line (other users can "
                f"see command lines, and it is stored as written); prefer a ${{VARIABLE}} "
                "reference or `pi-mcp token set`"
            )
        pairs[key] = item
    return pairs


@app.command(short_help="Add a server: a URL, a command, or an npm/PyPI package.")
def add(
    ctx: typer.Context,
    words: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="SPEC",
            help="[NAME] URL, or NAME -- COMMAND [ARGS...], or [NAME] npm:PACKAGE|pypi:PACKAGE "
            "[ARGS...].",
            show_default=False,
        ),
    ] = None,
    scope: ScopeOption = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", "-e", metavar="KEY=VALUE", help="Environment for a command."),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option("--header", "-H", metavar="NAME:VALUE", help="HTTP header for a URL."),
    ] = None,
    bearer_token_store: Annotated[
        bool,
        typer.Option(
            "--bearer-token-store",
            help='Authenticate with a stored bearer token ("auth": "bearer", '
            '"bearerTokenStore": true); store it with `pi-mcp token set NAME`.',
        ),
    ] = False,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace an entry of that name in the file.")
    ] = False,
    no_check: Annotated[
        bool, typer.Option("--no-check", help="Do not locate an npm package first.")
    ] = False,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Add a server to a config file, keeping the file's comments and layout.

    \b
    pi-mcp add linear https://mcp.linear.app/mcp
    pi-mcp add https://mcp.example.com/mcp        (named "mcp", after the host)
    pi-mcp add fs -- npx -y @modelcontextprotocol/server-filesystem ~/src
    pi-mcp add npm:@modelcontextprotocol/server-memory   (named "memory")
    pi-mcp add pypi:mcp-server-time   (uvx, pipx, or the installed script)

    Options go before `--`.
    """
    import anyio

    from pi_mcp_adapter._errors import ConfigError, UsageError
    from pi_mcp_adapter.config import ServerEntry, mask_secrets
    from pi_mcp_adapter.config._edit import (
        derive_package_server_name,
        derive_server_name,
        normalize_server_url,
        plan_add_server,
        server_name_problem,
    )
    from pi_mcp_adapter.servers import resolve_package_command, split_package_target

    cli = get_context(ctx)
    name, target, extra = _split_words(words or [])
    chosen_scope = _scope(scope) or "user"
    path = _file_for(cli, chosen_scope)
    entry: dict[str, Any]
    runs: str
    try:
        package = split_package_target(target)
        if _is_url(target):
            if extra:
                raise UsageError(f"a URL takes no arguments after it (got {' '.join(extra)})")
            url = normalize_server_url(target)
            name = name or derive_server_name(url)
            entry = {"url": url}
            runs = url
        elif package is not None:
            kind, spec = package
            resolved = anyio.run(
                lambda: resolve_package_command(
                    kind,
                    spec,
                    extra,
                    npx_cache_path=cli.agent_dir / "mcp-npx-cache.json",
                    environ=cli.environ,
                    cwd=cli.project_dir,
                    check=not no_check,
                )
            )
            name = name or derive_package_server_name(resolved.package)
            entry = {"command": resolved.command, "args": list(resolved.args)}
            if not resolved.args:
                del entry["args"]
            runs = resolved.runs
        else:
            entry = {"command": target}
            if extra:
                entry["args"] = list(extra)
            runs = " ".join([target, *extra])
    except UsageError as exc:
        raise fail(str(exc), code=EXIT_USAGE) from None
    assert name is not None
    problem = server_name_problem(name)
    if problem is not None:
        raise fail(problem, code=EXIT_USAGE)
    if env:
        if "url" in entry:
            raise fail("--env is for commands; a URL server takes --header", code=EXIT_USAGE)
        entry["env"] = _pairs(env, "=", "--env")
    if header:
        if "url" not in entry:
            raise fail("--header is for URL servers; a command takes --env", code=EXIT_USAGE)
        entry["headers"] = _pairs(header, ":", "--header")
    if bearer_token_store:
        if "url" not in entry:
            raise fail("--bearer-token-store is for URL servers", code=EXIT_USAGE)
        entry |= {"auth": "bearer", "bearerTokenStore": True}
    try:
        change = plan_add_server(path, name, entry, replace=replace)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if dry_run:
        _print_dry_run([change], as_json)
        return
    written = _write(cli, change)
    loaded = cli.load_config()
    shown = mask_secrets(ServerEntry.model_validate(entry))
    if as_json:
        print_json(
            {
                "action": "add",
                "server": name,
                "scope": chosen_scope,
                "file": str(path),
                "entry": shown,
                "runs": runs,
                "trusted": written.trusted,
            }
        )
    else:
        sys.stdout.write(f"Added {name} to {path}\n  runs: {runs}\n")
        note = _trust_note(cli, written)
        if note:
            sys.stdout.write(note + "\n")
        if bearer_token_store:
            sys.stdout.write(f"Store its token with: pi-mcp token set {name}\n")
        sys.stdout.write(f"Check it with: pi-mcp doctor {name}\n")
    _warn_shadowed(loaded, name, path)


def _warn_shadowed(loaded: LoadedConfig, name: str, path: Path) -> None:
    """Say when other files configure the same server: files merge field by field, so their
    fields still apply (a higher one even wins over what was just written)."""
    invalid = loaded.invalid_servers.get(name)
    if invalid is not None:
        print_warning(f"{name} cannot be used as configured now: {invalid}")
    provenance = loaded.provenance.get(name)
    if provenance is None:
        return
    for layer in provenance.layers:
        if layer.path != path:
            print_warning(
                f"{layer.path} also configures {name} ({', '.join(layer.fields)}); files merge "
                "field by field, so those fields still apply"
            )


@app.command(short_help="Remove a server from the config files.")
def remove(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="The server to remove.")],
    scope: ScopeOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Remove SERVER's entry from the user file and the project files (or only those of
    --scope). Servers from shared files and host imports are left alone: disable them."""
    from pi_mcp_adapter._errors import ConfigError
    from pi_mcp_adapter.config._edit import plan_remove_server

    cli = get_context(ctx)
    try:
        changes = [plan_remove_server(p, server) for p in _editable_files(cli, _scope(scope))]
    except ConfigError as exc:
        raise fail(str(exc)) from None
    changes = [c for c in changes if c.changed]
    if dry_run:
        _print_dry_run(changes, as_json)
        return
    if not changes:
        raise fail(_not_here(cli, server, "remove"))
    written = [_write(cli, change) for change in changes]
    loaded = cli.load_config()
    remaining = loaded.provenance.get(server)
    if as_json:
        print_json(
            {
                "action": "remove",
                "server": server,
                "files": [str(w.path) for w in written],
                "stillConfiguredIn": [str(layer.path) for layer in remaining.layers]
                if remaining
                else [],
            }
        )
        return
    for w in written:
        sys.stdout.write(f"Removed {server} from {w.path}\n")
        note = _trust_note(cli, w)
        if note:
            sys.stdout.write(note + "\n")
    if remaining is not None:
        where = ", ".join(f"{layer.source} ({layer.path})" for layer in remaining.layers)
        print_warning(
            f"{server} is still configured by {where}; `pi-mcp disable {server}` turns it off"
        )


def _not_here(cli: CliContext, server: str, verb: str) -> str:
    loaded = cli.load_config()
    provenance = loaded.provenance.get(server)
    if provenance is None:
        known = ", ".join(sorted(loaded.servers)) or "none configured"
        return f"unknown server {server!r} (configured: {known})"
    where = ", ".join(f"{layer.source} ({layer.path})" for layer in provenance.layers)
    return (
        f"cannot {verb} {server}: it comes from {where}, which pi-mcp does not edit; "
        f"`pi-mcp disable {server}` turns it off"
    )


def _switch(
    ctx: typer.Context,
    server: str,
    scope: str | None,
    *,
    enable: bool,
    dry_run: bool,
    as_json: bool,
) -> None:
    from pi_mcp_adapter._errors import ConfigError
    from pi_mcp_adapter.config._edit import plan_server_fields

    cli = get_context(ctx)
    chosen = _scope(scope)
    loaded = cli.load_config()
    if server not in loaded.servers and server not in loaded.invalid_servers:
        known = ", ".join(sorted(loaded.servers)) or "none configured"
        raise fail(f"unknown server {server!r} (configured: {known})", code=EXIT_USAGE)
    target = _file_for(cli, chosen or "user", override=True)
    changes: list[ConfigFileChange] = []
    try:
        if enable:
            # Clear every switch that turns it off in the files in scope, then override
            # what remains below them.
            files = _editable_files(cli, chosen)
            if chosen == "project":
                files = [target]
            for path in files:
                change = plan_server_fields(path, server, remove_fields=("disabled", "enabled"))
                if change.changed:
                    changes.append(change)
        else:
            changes.append(plan_server_fields(target, server, set_fields={"disabled": True}))
    except ConfigError as exc:
        raise fail(str(exc)) from None
    if dry_run:
        _print_dry_run([c for c in changes if c.changed], as_json)
        return
    written = [_write(cli, c) for c in changes if c.changed]
    loaded = cli.load_config()
    entry = loaded.servers.get(server)
    if enable and entry is not None and (entry.disabled or not entry.enabled):
        # Still off: a file below the ones edited switches it off; override it in the target.
        fields: dict[str, object] = {}
        if entry.disabled:
            fields["disabled"] = False
        if not entry.enabled:
            fields["enabled"] = True
        try:
            change = plan_server_fields(target, server, set_fields=fields)
        except ConfigError as exc:
            raise fail(str(exc)) from None
        written.append(_write(cli, change))
        loaded = cli.load_config()
        entry = loaded.servers.get(server)
    now_on = entry is not None and entry.enabled and not entry.disabled
    if as_json:
        print_json(
            {
                "action": "enable" if enable else "disable",
                "server": server,
                "files": [str(w.path) for w in written],
                "enabled": now_on,
                "untrusted": entry is not None and entry.untrusted is not None,
            }
        )
    else:
        verb = "Enabled" if enable else "Disabled"
        if not written:
            sys.stdout.write(f"{server} is already {'enabled' if enable else 'disabled'}.\n")
        for w in written:
            sys.stdout.write(f"{verb} {server} in {w.path}\n")
            note = _trust_note(cli, w)
            if note:
                sys.stdout.write(note + "\n")
    invalid = loaded.invalid_servers.get(server)
    if enable and entry is None and invalid is not None:
        raise fail(f"{server} is enabled but cannot be used: {invalid}")
    if now_on != enable:
        sources = loaded.provenance[server].field_sources if server in loaded.provenance else {}
        source = sources.get("disabled") or sources.get("enabled") or "another file"
        hint = " (try --scope project)" if chosen != "project" else ""
        raise fail(
            f"{server} is still {'disabled' if enable else 'enabled'}: {source} decides it{hint}"
        )
    if enable and entry is not None and entry.untrusted is not None:
        print_warning(f"{server} {entry.untrusted.message}")


@app.command(short_help="Turn a server on again.")
def enable(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="The server to enable.")],
    scope: ScopeOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Enable SERVER: remove the disabled/enabled switches the user and project files set
    for it (or those of --scope), and override one a shared file or import sets."""
    _switch(ctx, server, scope, enable=True, dry_run=dry_run, as_json=as_json)


@app.command(short_help="Keep a server configured but never start it.")
def disable(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(help="The server to disable.")],
    scope: ScopeOption = None,
    dry_run: DryRunOption = False,
    as_json: JsonOption = False,
) -> None:
    """Disable SERVER by writing "disabled": true into the user file (--scope project: the
    project's .pi/mcp.json); the rest of its entry is kept."""
    _switch(ctx, server, scope, enable=False, dry_run=dry_run, as_json=as_json)


@app.command(short_help="Open a config file in $EDITOR, checked on save.")
def edit(
    ctx: typer.Context,
    scope: ScopeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Edit the user file (or --scope project: .mcp.json) in $VISUAL or $EDITOR.

    The file is edited as a copy; when the editor exits, the copy is checked as a load would
    check it. A valid copy replaces the file; an invalid one is shown with its errors and
    reopened on Enter, while "n" (or no terminal input) leaves the file as it was.
    """
    import os
    import shlex
    import subprocess
    import tempfile

    from pi_mcp_adapter._errors import ConfigError
    from pi_mcp_adapter.config._edit import ConfigFileChange, check_config_text
    from pi_mcp_adapter.config._hosts import read_file_text

    cli = get_context(ctx)
    path = _file_for(cli, _scope(scope) or "user")
    editor = cli.environ.get("VISUAL") or cli.environ.get("EDITOR") or "vi"
    try:
        before = read_file_text(path)
    except ConfigError as exc:
        raise fail(str(exc)) from None
    text = before if before is not None else _NEW_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp_name = tempfile.mkstemp(prefix=f".{path.stem}.edit-", suffix=".json", dir=path.parent)
    os.close(fd)
    temp = Path(temp_name)
    try:
        while True:
            temp.write_text(text, encoding="utf-8")
            try:
                status = subprocess.run([*shlex.split(editor), str(temp)], check=False).returncode
            except OSError as exc:
                raise fail(
                    f"cannot run the editor {editor!r}: {exc.strerror}; set $EDITOR"
                ) from None
            if status != 0:
                raise fail(f"the editor exited with status {status}; {path} is unchanged")
            edited = temp.read_text(encoding="utf-8")
            errors, warnings = check_config_text(edited, path)
            if not errors:
                break
            for error in errors:
                sys.stderr.write(f"error: {error}\n")
            sys.stderr.write("Edit again? [Y/n] (n leaves the file as it was) ")
            sys.stderr.flush()
            answer = sys.stdin.readline()
            if not answer or answer.strip().lower() in ("n", "no"):
                raise fail(f"{path} is unchanged")
            text = edited
    finally:
        temp.unlink(missing_ok=True)
    for warning in warnings:
        print_warning(warning)
    if edited == (before if before is not None else _NEW_FILE):
        if as_json:
            print_json({"action": "edit", "file": str(path), "changed": False})
        else:
            sys.stdout.write(f"No change to {path}\n")
        return
    written = _write(cli, ConfigFileChange(path, before, edited))
    if as_json:
        print_json(
            {"action": "edit", "file": str(path), "changed": True, "trusted": written.trusted}
        )
        return
    sys.stdout.write(f"Saved {path}\n")
    note = _trust_note(cli, written)
    if note:
        sys.stdout.write(note + "\n")
