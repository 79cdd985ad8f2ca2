"""The CLI answers servers' elicitation requests on its terminal.

Form mode: the server's message, then one prompt per field (title, description, type, enum
choices, the default in brackets); Enter takes the default (SEP-1034), booleans take y/n,
numbers and enums are checked and asked again, a required field without a default must be
filled in. The result is "accept" with the content. "n" at the first prompt declines; end of
input (Ctrl-D) cancels; Ctrl-C ends the command (the call is cancelled upstream).

URL mode (per the spec): the URL and the message are shown and the person consents (accept)
or not (decline); nothing is opened automatically, the person opens the URL themselves.

Questions are written to stderr (stdout carries the command's result, which may be piped) and
answers read from stdin, only when both are terminals. Otherwise the elicitation is declined
and stderr says which server asked what and how to answer (run the command at a terminal).

When the call a form belongs to ends while the form is open (the server withdrew its question,
the command is ending), the form is closed: a line says so, and what was typed ahead is
discarded, so the keystrokes meant for the form do not reach the shell after the command exits.

Sampling is not offered: the CLI has no model, so servers are not told it can sample.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread

from pi_mcp_adapter.engine import FormValue, describe_question, form_fields

if TYPE_CHECKING:
    import mcp_types as types

__all__ = ["ask_in_thread", "elicit_on_terminal", "read_answer_line"]

_T = TypeVar("_T")

ATTEMPTS = 3
"""Invalid answers to one field before the form counts as cancelled."""

_YES = ("y", "yes", "true", "1")
_NO = ("n", "no", "false", "0")


class _Cancelled(Exception):
    """End of input, or too many invalid answers: nobody is answering."""


async def elicit_on_terminal(server: str, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Ask on the terminal (see the module docstring); decline without one."""
    import mcp_types as types

    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        sys.stderr.write(
            f"warning: {describe_question(server, params)}; declined: run the command at a "
            "terminal to answer\n"
        )
        sys.stderr.flush()
        return types.ElicitResult(action="decline")
    if params.mode == "url":
        return await ask_in_thread(_ask_url, server, params)
    return await ask_in_thread(_ask_form, server, params)


async def ask_in_thread(ask: Callable[..., _T], *args: Any) -> _T:
    """Run the blocking prompt ``ask(*args)`` in a thread; if the waiting caller is cancelled
    (its call ended), close the prompt on the terminal instead of leaving it open."""
    try:
        return await anyio.to_thread.run_sync(ask, *args, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        _close_abandoned_prompt()
        _wake_abandoned_reader()
        raise


_abandon_pipe: tuple[int, int] | None = None
"""Written to when a prompt is abandoned, so the thread reading its answer returns (a thread
blocked in ``readline`` would keep the process alive after the command ended)."""


def _abandon_fds() -> tuple[int, int]:
    global _abandon_pipe
    if _abandon_pipe is None:
        _abandon_pipe = os.pipe()
    return _abandon_pipe


def _wake_abandoned_reader() -> None:
    with contextlib.suppress(OSError):
        os.write(_abandon_fds()[1], b"x")


def read_answer_line() -> str:
    """One line typed at the terminal; "" at end of input, or when the prompt was abandoned."""
    try:
        wake = _abandon_fds()[0]
        ready, _, _ = select.select([sys.stdin, wake], [], [])
    except (OSError, ValueError, TypeError):
        return sys.stdin.readline()  # no select on this stdin: read as before
    if wake in ready:
        os.read(wake, 1)
        return ""
    return sys.stdin.readline()


def _close_abandoned_prompt() -> None:
    """The reading thread cannot be stopped: say the prompt is closed and drop typed-ahead
    input, which would otherwise be read by the shell once the command exits."""
    try:
        sys.stderr.write("\n(closed: the call this question belonged to has ended)\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        import termios

        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (ImportError, OSError, ValueError):
        pass  # not a terminal, or not POSIX: nothing typed ahead to drop


def _write(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _read(prompt: str) -> str:
    _write(prompt)
    line = read_answer_line()
    if not line:
        raise _Cancelled
    return line.strip()


def _consent(prompt: str) -> bool:
    for _ in range(ATTEMPTS):
        answer = _read(prompt).lower()
        if answer in ("", *_YES):
            return True
        if answer in _NO:
            return False
    raise _Cancelled


def _ask_url(server: str, params: types.ElicitRequestURLParams) -> types.ElicitResult:
    import mcp_types as types

    _write(
        f"\nMCP server {server!r} asks you to open a page:\n  {params.message}\n"
        f"  URL: {params.url}\n"
        "Open it yourself in a browser; check the address before you enter anything there.\n"
    )
    try:
        agreed = _consent("Will you open it? [Y/n]: ")
    except _Cancelled:
        return types.ElicitResult(action="cancel")
    return types.ElicitResult(action="accept" if agreed else "decline")


def _ask_form(server: str, params: types.ElicitRequestFormParams) -> types.ElicitResult:
    import mcp_types as types

    fields = form_fields(params)
    required = set(params.requested_schema.get("required") or ())
    _write(
        f"\nMCP server {server!r} asks:\n  {params.message}\n"
        "(Enter takes the value in [brackets]; Ctrl-D cancels)\n"
    )
    try:
        if not _consent("Answer? [Y/n]: "):
            return types.ElicitResult(action="decline")
        content: dict[str, FormValue] = {}
        for name, schema in fields.items():
            value = _ask_field(name, schema, required=name in required)
            if value is not None:
                content[name] = value
    except _Cancelled:
        return types.ElicitResult(action="cancel")
    return types.ElicitResult(action="accept", content=dict(content))


def _choices(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """``(value, label)`` pairs of a single-choice field (``enum`` or titled ``oneOf``)."""
    if isinstance(schema.get("enum"), list):
        names = schema.get("enumNames")
        values = [str(v) for v in schema["enum"]]
        labels = [str(n) for n in names] if isinstance(names, list) else values
        return list(zip(values, labels, strict=False))
    options = schema.get("oneOf") or schema.get("anyOf")
    if isinstance(options, list):
        return [
            (str(o["const"]), str(o.get("title", o["const"])))
            for o in options
            if isinstance(o, dict) and "const" in o
        ]
    return []


def _multi_choices(schema: dict[str, Any]) -> list[tuple[str, str]]:
    items = schema.get("items")
    return _choices(items) if schema.get("type") == "array" and isinstance(items, dict) else []


def _shown(value: FormValue, kind: str) -> str:
    if kind == "boolean":
        return "y" if value else "n"
    if isinstance(value, list):
        return ", ".join(value)
    return str(value)


def _ask_field(name: str, schema: dict[str, Any], *, required: bool) -> FormValue:
    kind = str(schema.get("type", "string"))
    title = str(schema.get("title") or name)
    description = schema.get("description")
    choices = _choices(schema)
    multi = _multi_choices(schema)
    _write(f"\n  {title}" + (f": {description}" if description else "") + "\n")
    for number, (option, label) in enumerate(choices or multi, 1):
        _write(f"    {number}) {label}" + (f" ({option})" if label != option else "") + "\n")
    hint = {"boolean": "y/n", "integer": "whole number", "number": "number"}.get(kind, "")
    if multi:
        hint = "numbers or values, separated by commas"
    has_default = "default" in schema
    default = schema.get("default")
    prompt = f"  {name}" + (f" ({hint})" if hint else "")
    prompt += f" [{_shown(default, kind)}]" if has_default else (" (required)" if required else "")
    prompt += ": "
    for _ in range(ATTEMPTS):
        answer = _read(prompt)
        if not answer:
            if has_default:
                value: FormValue = default
                return value
            if not required:
                return None
            _write("    a value is required\n")
            continue
        parsed, problem = _parse(answer, kind, schema, choices, multi)
        if problem is None:
            return parsed
        _write(f"    {problem}\n")
    raise _Cancelled


def _parse(
    answer: str,
    kind: str,
    schema: dict[str, Any],
    choices: list[tuple[str, str]],
    multi: list[tuple[str, str]],
) -> tuple[FormValue, str | None]:
    if multi:
        picked = [_pick(part.strip(), multi) for part in answer.split(",") if part.strip()]
        if None in picked:
            return None, "choose from the listed options"
        return [p for p in picked if p is not None], None
    if choices:
        chosen = _pick(answer, choices)
        return (chosen, None) if chosen is not None else (None, "choose one of the options")
    if kind == "boolean":
        lowered = answer.lower()
        if lowered in _YES:
            return True, None
        if lowered in _NO:
            return False, None
        return None, "answer y or n"
    if kind in ("integer", "number"):
        number: int | float
        try:
            number = int(answer) if kind == "integer" else float(answer)
        except ValueError:
            return None, f"enter a {'whole ' if kind == 'integer' else ''}number"
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and number < low:
            return None, f"the smallest allowed value is {low}"
        if isinstance(high, int | float) and number > high:
            return None, f"the largest allowed value is {high}"
        return number, None
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(answer) < low:
        return None, f"at least {low} characters"
    if isinstance(high, int) and len(answer) > high:
        return None, f"at most {high} characters"
    return answer, None


def _pick(answer: str, choices: list[tuple[str, str]]) -> str | None:
    if answer.isdigit() and 1 <= int(answer) <= len(choices):
        return choices[int(answer) - 1][0]
    wanted = answer.lower()
    return next((v for v, label in choices if wanted in (v.lower(), label.lower())), None)
