"""``pi-mcp trust``: accept a server's recorded tool-definition changes (``trust SERVER
[TOOL]``), or trust a project's config files so their servers may run (``trust --project
[DIR]``, undone with ``--revoke``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._app import JsonOption, app, fail, get_context, print_json, print_warning
from ._engine_cmds import run

if TYPE_CHECKING:
    from pi_mcp_adapter.engine import McpAdapter


_MORE_FILES_ROUNDS = 3
"""Plugin paths listed by a project file can list no further files, so one round suffices;
the bound keeps a surprise from looping."""


@app.command()
def trust(
    ctx: typer.Context,
    server: Annotated[
        str | None,
        typer.Argument(
            metavar="SERVER|DIR",
            help="Server whose changed tools to trust; with --project, the project directory "
            "(default: the project directory).",
        ),
    ] = None,
    tool: Annotated[
        str | None, typer.Argument(help="Only this tool (its own or its prefixed name).")
    ] = None,
    project: Annotated[
        bool,
        typer.Option(
            "--project",
            help="Trust the current content of the project's MCP config files (.mcp.json, "
            ".pi/mcp.json and the host files they bring in), so their servers may run.",
        ),
    ] = False,
    revoke: Annotated[
        bool, typer.Option("--revoke", help="With --project: forget that trust.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Accept the changed tool definitions `pi-mcp status` shows, as the new trusted ones;
    or, with --project, let a project's config files run their servers."""
    if project:
        if tool is not None:
            raise fail("trust --project takes one directory, not a tool", code=2)
        _trust_project(ctx, Path(server) if server else None, revoke=revoke, as_json=as_json)
        return
    if revoke:
        raise fail("--revoke goes with --project: `pi-mcp trust --project --revoke`", code=2)
    if server is None:
        raise fail(
            "name a server whose changed tools to trust (`pi-mcp trust SERVER`), or trust "
            "this project's config files with `pi-mcp trust --project`",
            code=2,
        )
    chosen = server

    async def body(adapter: McpAdapter) -> tuple[str, ...]:
        if not adapter.definition_changes(chosen):
            return ()  # nothing changed: the wanted state holds already, which is no error
        return adapter.trust(chosen, tool)

    names = run(ctx, body, connect_missing=False, quiet=as_json, ask_trust=False)
    if as_json:
        print_json({"server": server, "trusted": list(names)})
    elif not names:
        sys.stdout.write(f"Nothing to trust: {server} has no changed tool definitions.\n")
    else:
        sys.stdout.write(f"Trusted the current definitions of {server}: {', '.join(names)}\n")


def _trust_project(
    ctx: typer.Context, directory: Path | None, *, revoke: bool, as_json: bool
) -> None:
    from pi_mcp_adapter.config._trust import TrustStore

    from ._project_trust import describe_project_file

    cli = get_context(ctx)
    project_dir = directory.expanduser().resolve() if directory else cli.project_dir
    if not project_dir.is_dir():
        raise fail(f"{project_dir} is not a directory; give the project directory to trust", code=2)
    loaded = cli.load_config(project_dir=project_dir)
    files = loaded.project_trust.files
    store = TrustStore.in_agent_dir(cli.agent_dir)
    try:
        if not files:
            changed: tuple[Path, ...] = ()  # nothing to record: leave the trust file alone
        elif revoke:
            changed = store.revoke([f.path for f in files])
        else:
            changed = tuple(f.path for f in files if f.sha256 is not None)
            store.trust((f.path, f.sha256) for f in files if f.sha256 is not None)
            # Settings of a file apply only once it is trusted, and one of them
            # (agentPluginPaths) can bring in more of the project's files: trust those too,
            # as the person asked for the project's configuration as a whole.
            for _round in range(_MORE_FILES_ROUNDS if loaded.project_trust.mode == "ask" else 0):
                loaded = cli.load_config(project_dir=project_dir)
                more = [f for f in loaded.project_trust.untrusted_files if f.sha256 is not None]
                if not more:
                    break
                store.trust((f.path, f.sha256) for f in more if f.sha256 is not None)
                changed += tuple(f.path for f in more)
            files = loaded.project_trust.files
    except OSError as exc:
        raise fail(f"cannot write {store.path}: {exc}") from None
    done = [f for f in files if f.path in changed]
    if as_json:
        print_json(
            {
                "project": str(project_dir),
                "revoked" if revoke else "trusted": [
                    {"path": str(f.path), "sha256": f.sha256, "servers": list(f.servers)}
                    for f in done
                ],
                "mode": loaded.project_trust.mode,
            }
        )
    elif not files:
        sys.stdout.write(f"Nothing to trust: {project_dir} has no project-level MCP config.\n")
    elif revoke:
        if not done:
            sys.stdout.write(f"Nothing to revoke: no file of {project_dir} was trusted.\n")
        for f in done:
            sys.stdout.write(f"No longer trusted: {f.path}\n")
    else:
        sys.stdout.write("Trusted, as they are now (an edit makes them untrusted again):\n")
        for f in done:
            sys.stdout.write("\n".join(describe_project_file(loaded, f)) + "\n")
    if not revoke and files and loaded.project_trust.mode == "never":
        print_warning(
            "projectTrust is 'never' ("
            + loaded.project_trust.mode_source
            + "), so project servers still do not run; set it to 'ask' to use this trust"
        )
