"""Values produced by a command: ``"!op read op://vault/token"`` in a header, env or token.

A value written with a leading ``!`` is not sent anywhere as written: the rest is a command,
run when the server connects, and its standard output (trimmed) is the value. ``!!`` escapes
a literal leading ``!``. This is how the TypeScript adapter reads such values, so a shared
config means the same in both.

The command runs without a shell, split like a shell would split it (``shlex``), unless it
uses shell syntax (pipes, redirections, ``&&``, ``$(...)``, variables): then it is handed to
``/bin/sh -c`` (``cmd /c`` on Windows) as the user wrote it, as the reference always does.
Limits: 10 seconds and 1 MiB of output. The output is a secret like any ``${VAR}`` value: it
is registered (:mod:`pi_mcp_adapter._secrets`) and so replaced by the mask in every output,
and errors name the field, never the output.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from dataclasses import dataclass

from pi_mcp_adapter._errors import ConfigError
from pi_mcp_adapter._secrets import MASK, register_secret

__all__ = [
    "COMMAND_OUTPUT_LIMIT_BYTES",
    "COMMAND_TIMEOUT_S",
    "CommandValue",
    "command_value",
    "resolve_command_value",
]

COMMAND_TIMEOUT_S = 10.0
"""A secret helper (a password manager CLI) answers in well under a second; ten means stuck."""

COMMAND_OUTPUT_LIMIT_BYTES = 1024 * 1024

_SHELL_SYNTAX = re.compile(r"[|&;<>()`$*?\[\]{}~\n]")


@dataclass(frozen=True, slots=True)
class CommandValue:
    """A ``!command`` value: the command text, run only when the value is needed."""

    command: str

    @property
    def uses_shell(self) -> bool:
        return bool(_SHELL_SYNTAX.search(self.command))

    def argv(self) -> list[str]:
        if self.uses_shell:
            if sys.platform == "win32":  # pragma: no cover - POSIX test machines
                return ["cmd", "/c", self.command]
            return ["/bin/sh", "-c", self.command]
        return shlex.split(self.command)


def command_value(value: str) -> CommandValue | None:
    """The command of a ``!command`` value, or None for a plain (or ``!!``-escaped) value."""
    if value.startswith("!") and not value.startswith("!!"):
        return CommandValue(value[1:])
    return None


def resolve_command_value(value: str, *, what: str) -> str:
    """``value`` itself, ``!!x`` as ``!x``, or the trimmed output of a ``!command``.

    ``what`` names the field in errors (``server 'github': header 'Authorization'``).

    Raises:
        ConfigError: the command could not start, timed out, failed, printed more than 1 MiB
            or printed nothing. The message never contains the output.
    """
    if value.startswith("!!"):
        register_secret(value[1:], MASK)
        return value[1:]
    command = command_value(value)
    if command is None:
        return value
    try:
        argv = command.argv()
    except ValueError as exc:
        raise ConfigError(f"{what}: the command after '!' cannot be split: {exc}") from exc
    if not argv:
        raise ConfigError(f"{what}: '!' must be followed by a command")
    try:
        completed = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            timeout=COMMAND_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ConfigError(
            f"{what}: the command timed out after {COMMAND_TIMEOUT_S:g} seconds"
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"{what}: the command failed to start ({exc.strerror or type(exc).__name__})"
        ) from exc
    if completed.returncode != 0:
        raise ConfigError(f"{what}: the command exited with code {completed.returncode}")
    if len(completed.stdout) > COMMAND_OUTPUT_LIMIT_BYTES:
        raise ConfigError(f"{what}: the command's output exceeded 1 MiB")
    resolved = completed.stdout.decode("utf-8", "replace").strip()
    if not resolved:
        raise ConfigError(f"{what}: the command printed nothing")
    # Registered before anyone can see it: the value is about to go into a header or env.
    register_secret(resolved, MASK)
    return resolved
