"""The typer application and the options every command shares.

Command groups live in their own modules (``_config_cmds``, ``_engine_cmds``, ``_eval_cmds``) and
register themselves on :data:`app`; ``cli/__init__`` imports them all.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from pi_mcp_adapter.config._locations import default_agent_dir

app = typer.Typer(
    name="pi-mcp",
    help="Use hundreds of MCP tools from an agent without burning its context window.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
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

    @property
    def console(self) -> Console:
        return Console(soft_wrap=True)

    @property
    def err_console(self) -> Console:
        return Console(stderr=True, soft_wrap=True)


@app.callback()
def _global_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="Use this one config file instead of the agent-dir file."),
    ] = None,
    agent_dir: Annotated[
        Path | None,
        typer.Option(
            "--agent-dir", help="Agent directory (default $PI_CODING_AGENT_DIR or ~/.pi/agent)."
        ),
    ] = None,
    project: Annotated[
        Path | None,
        typer.Option("--project", help="Project directory (default: the current directory)."),
    ] = None,
    exclusive: Annotated[
        bool,
        typer.Option(
            "--exclusive",
            help="Read only the --config file (or the agent-dir file): no shared, project or "
            "other files. Same as PI_MCP_CONFIG_MODE=exclusive.",
        ),
    ] = False,
) -> None:
    ctx.obj = CliContext(
        exclusive=exclusive,
        config_path=config.expanduser().resolve() if config else None,
        agent_dir=(agent_dir.expanduser() if agent_dir else default_agent_dir()).resolve(),
        project_dir=(project or Path.cwd()).expanduser().resolve(),
    )


def get_context(ctx: typer.Context) -> CliContext:
    obj = ctx.find_root().obj
    assert isinstance(obj, CliContext)
    return obj


JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def print_json(data: Any) -> None:
    """Write ``data`` as JSON to stdout (not through rich, so it is never wrapped)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


def fail(message: str, *, code: int = 1) -> typer.Exit:
    """Print an error to stderr and return the exit to raise."""
    Console(stderr=True, soft_wrap=True).print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)
