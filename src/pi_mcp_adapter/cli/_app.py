"""The typer application and the options every command shares.

Command groups live in their own modules (``_config_cmds``, ``_engine_cmds``, ``_eval_cmds``) and
register themselves on :data:`app`; ``cli/__init__`` imports them all.

Start-up time matters here: every command pays it. Modules of this package import only typer
and the standard library at the top; the configuration layer, the engine and the MCP SDK are
imported inside the commands that use them, so ``--help`` and ``--version`` cost little more
than typer itself, and cache-only commands never load the SDK (``bench/bench_cli_start.py``).

Conventions shared by every command: results go to stdout (with ``--json``, nothing but the
JSON document); each failure is printed once, to stderr; the exit code is 0 on success, 1 for a
failed operation and 2 for a usage error.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from pi_mcp_adapter.config import LoadedConfig

EXIT_FAILED = 1
EXIT_USAGE = 2

app = typer.Typer(
    name="pi-mcp",
    help="Use hundreds of MCP tools from an agent without burning its context window.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help: no rich import on every --help, no box drawing in a pipe.
    rich_markup_mode=None,
)


@dataclass(frozen=True, slots=True)
class CliContext:
    """Global options, resolved once by the callback and passed to every command."""

    config_path: Path | None
    agent_dir: Path
    project_dir: Path
    exclusive: bool = False

    @property
    def environ(self) -> dict[str, str]:
        """This process's environment, with ``--exclusive`` as the config layer reads it."""
        environ = dict(os.environ)
        if self.exclusive:
            environ["PI_MCP_CONFIG_MODE"] = "exclusive"
        return environ

    def load_config(
        self, *, project_dir: Path | None = None, environ: Mapping[str, str] | None = None
    ) -> LoadedConfig:
        """Every configuration layer as the global options name them (``project_dir``
        instead of ``--project`` when given; ``environ``, a wrapper of :attr:`environ` such
        as a ``RecordingEnviron``, instead of it)."""
        from pi_mcp_adapter.config import load_config

        return load_config(
            agent_dir=self.agent_dir,
            project_dir=project_dir if project_dir is not None else self.project_dir,
            config_path=self.config_path,
            environ=environ if environ is not None else self.environ,
        )

    @property
    def console(self) -> Console:
        from rich.console import Console

        return Console(soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        from pi_mcp_adapter import __version__

        sys.stdout.write(f"pi-mcp {__version__}\n")
        raise typer.Exit()


@app.callback()
def _global_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="PATH",
            help="Use this one config file instead of the agent-dir file.",
        ),
    ] = None,
    agent_dir: Annotated[
        Path | None,
        typer.Option(
            "--agent-dir",
            metavar="DIR",
            help="Agent directory (default $PI_CODING_AGENT_DIR or ~/.pi/agent).",
        ),
    ] = None,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project", metavar="DIR", help="Project directory (default: the current directory)."
        ),
    ] = None,
    exclusive: Annotated[
        bool,
        typer.Option(
            "--exclusive",
            help="Read only the --config file (or the agent-dir file): no shared, project or "
            "other files. Same as PI_MCP_CONFIG_MODE=exclusive.",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            is_eager=True,
            callback=_print_version,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    from pi_mcp_adapter.config._locations import default_agent_dir

    redact_standard_streams()
    # `init` creates the file; every other command would run with no configuration at all.
    if config is not None and ctx.invoked_subcommand != "init" and not config.expanduser().exists():
        raise fail(f"config file not found: {config} (given with --config)", code=EXIT_USAGE)
    ctx.obj = CliContext(
        exclusive=exclusive,
        config_path=config.expanduser().resolve() if config else None,
        agent_dir=(agent_dir.expanduser() if agent_dir else default_agent_dir()).resolve(),
        project_dir=(project or Path.cwd()).expanduser().resolve(),
    )


def redact_standard_streams() -> None:
    """Route stdout and stderr through secret redaction, once per stream, and make server text
    inert on a terminal (:mod:`._terminal`).

    The one choke point of the CLI's output: our printers, rich tables, typer's usage errors and
    log handlers that write to the streams all pass through it.
    """
    from pi_mcp_adapter._secrets import RedactingStream

    from ._terminal import TerminalStream

    if not isinstance(sys.stdout, RedactingStream):
        sys.stdout = TerminalStream(sys.stdout)
    if not isinstance(sys.stderr, RedactingStream):
        sys.stderr = TerminalStream(sys.stderr)


def get_context(ctx: typer.Context) -> CliContext:
    obj = ctx.find_root().obj
    assert isinstance(obj, CliContext)
    return obj


JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
ToolNameArgument = Annotated[str, typer.Argument(metavar="NAME", help="Tool name.")]
ToolArgsArgument = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="ARGS",
        help=(
            "Arguments as one JSON object (- reads it from stdin, @FILE from a file), or as "
            "key=value words, each value typed by the tool's schema (count=3, tags='[\"a\"]')."
        ),
        show_default=False,
    ),
]
"""A tool to call and its arguments, as ``call`` and ``app`` take them."""


def print_json(data: Any) -> None:
    """Write ``data`` as JSON to stdout (not through rich, so it is never wrapped)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def print_error(message: str) -> None:
    """Print one failure to stderr, as ``error: <message>``."""
    sys.stderr.write(f"error: {message.rstrip()}\n")
    sys.stderr.flush()


def print_warning(message: str) -> None:
    sys.stderr.write(f"warning: {message.rstrip()}\n")
    sys.stderr.flush()


def report_config_problems(loaded: LoadedConfig) -> None:
    """Print each configuration error and warning once, to stderr (every command that loads
    the configuration calls this once, so a misspelled key is noticed wherever it bites)."""
    for error in loaded.errors:
        print_warning(f"config: {error}")
    for warning in loaded.warnings:
        print_warning(warning)


def require_known_server(servers: Collection[str], server: str | None) -> None:
    """A usage error for a ``SERVER`` argument that names no configured server."""
    if server is not None and server not in servers:
        from pi_mcp_adapter._errors import UsageError

        known = ", ".join(sorted(servers)) or "none configured"
        raise UsageError(f"unknown server {server!r} (configured: {known})")


def only_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one error inside ``group`` (task groups wrap what failed), or ``group`` itself
    when several failed."""
    errors: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        current = pending.pop()
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        else:
            errors.append(current)
    return errors[0] if len(errors) == 1 else group


def fail(message: str, *, code: int = EXIT_FAILED) -> typer.Exit:
    """Print an error to stderr and return the exit to raise (1 failed, 2 usage error)."""
    print_error(message)
    return typer.Exit(code)
