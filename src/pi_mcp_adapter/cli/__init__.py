"""The ``pi-mcp`` command line."""

from __future__ import annotations

import copy
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperArgument

from ._app import app

# Each module registers its commands on ``app`` when imported.
_MODULES = (
    "_config_cmds",
    "_engine_cmds",
    "_eval_cmds",
    "_stats_cmds",
    "_trust_cmds",
    "_prompt_cmds",
    "_export_cmd",
    "_serve_cmd",
    "_auth_cmds",
    "_manage_cmds",
    "_token_cmds",
    "_doctor_cmd",
    "_script_cmd",
    "_app_cmd",
)
for _module in _MODULES:
    importlib.import_module(f"{__name__}.{_module}")


class _PlainArgument(TyperArgument):
    """Arguments shown as ``NAME`` / ``[NAME]``, as Unix usage lines write them."""

    def _usage_display_name(self) -> str:
        name = self.metavar or (self.name or "").upper()
        name = name if self.required else f"[{name}]"
        return name + ("..." if self.nargs != 1 else "")

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def _tidy(command: Any) -> None:
    # Typed loosely: typer 0.29 vendors its own click, older versions use the click package.
    for param in command.params:
        if isinstance(param, TyperArgument):
            param.__class__ = _PlainArgument
            if param.metavar is None and param.name:
                param.metavar = param.name.upper()
    for sub in getattr(command, "commands", {}).values():
        _tidy(sub)


_OPTIONS_WITH_VALUES = ("--config", "--agent-dir", "--project")


def _invoked_command(args: Sequence[str]) -> str | None:
    """The command ``args`` run, or None when they ask for help or the version first."""
    rest = iter(args)
    for arg in rest:
        if arg in _OPTIONS_WITH_VALUES:
            next(rest, None)
        elif arg in ("--help", "-h", "--version", "-V"):
            return None
        elif not arg.startswith("-"):
            return arg
    return None


def build_command(only: str | None = None) -> Any:
    """The click command behind ``pi-mcp``, with plain help text.

    With ``only`` (a command's name), the group holds that command alone: typer reads the
    signature of every command it builds, which would cost every run about 10 ms for the
    twenty it does not run. A name that matches no command builds them all, so a typo gets
    typer's own "No such command" answer.
    """
    source = app
    chosen = [
        info
        for info in app.registered_commands
        if only is not None
        and info.callback is not None
        and (info.name or typer.main.get_command_name(info.callback.__name__)) == only
    ]
    if chosen:
        source = copy.copy(app)
        source.registered_commands = chosen
    command = typer.main.get_command(source)
    _tidy(command)
    return command


def _quiet_library_logs() -> None:
    # Failures reach the user once, through the command's own message; library log records
    # would repeat them (Python prints unhandled warnings to stderr). PI_MCP_DEBUG=1 shows them.
    if os.environ.get("PI_MCP_DEBUG"):
        logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    else:
        logging.getLogger().addHandler(logging.NullHandler())


def main(args: Any = None) -> Any:
    _quiet_library_logs()
    argv = list(sys.argv[1:] if args is None else args)
    return build_command(_invoked_command(argv)).main(args=argv, prog_name="pi-mcp")


__all__ = ["app", "build_command", "main"]
