"""The ``pi-mcp`` command line."""

from __future__ import annotations

import importlib

from ._app import app

# Each module registers its commands on ``app`` when imported.
_MODULES = (
    "_config_cmds",
    "_engine_cmds",
    "_eval_cmds",
    "_stats_cmds",
    "_trust_cmds",
    "_prompt_cmds",
    "_serve_cmd",
    "_auth_cmds",
)
for _module in _MODULES:
    try:
        importlib.import_module(f"{__name__}.{_module}")
    except ModuleNotFoundError as exc:  # a command group not present in this build
        if exc.name != f"{__name__}.{_module}":
            raise


def main() -> None:
    app()


__all__ = ["app", "main"]
