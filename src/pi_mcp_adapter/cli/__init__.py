"""The ``pi-mcp`` command line."""

from __future__ import annotations

import importlib
import logging
import os
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


def build_command() -> Any:
    """The click command behind ``pi-mcp``, with plain help text."""
    command = typer.main.get_command(app)
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
    return build_command().main(args=args, prog_name="pi-mcp")


__all__ = ["app", "build_command", "main"]
