"""The CLI answers the engine's questions (tool approval) on its terminal.

The question goes to stderr (stdout carries the command's result, which may be piped) and the
answer is read from stdin, only when stdin is a terminal: a script or a pipe has nobody to ask,
so the engine refuses the call and says which setting allows it.

The prompt line names the tool again: it sits right above the cursor, so however the question
scrolled, what is being answered is in view when the answer is typed.
"""

from __future__ import annotations

import sys

from pi_mcp_adapter.engine import Question
from pi_mcp_adapter.engine._approval import escape_controls

__all__ = ["ask_on_terminal"]

ATTEMPTS = 3
"""Unrecognised answers before the question counts as unanswered (the call is refused)."""


async def ask_on_terminal(question: Question) -> str | None:
    """Ask on the terminal; the chosen option's id, or None without a terminal or an answer."""
    if not sys.stdin.isatty():
        return None
    from ._elicit import ask_in_thread

    return await ask_in_thread(_prompt, question)


def _prompt(question: Question) -> str | None:
    from ._elicit import read_answer_line

    out = sys.stderr
    options = question.options
    out.write(f"\n{question.title}\n{question.text}\n")
    for number, option in enumerate(options, 1):
        out.write(f"  {number}) {option.label}\n")
    subject = question.context.get("name")
    prompt = f"Allow {escape_controls(subject, keep='')}? " if subject else ""
    for _ in range(ATTEMPTS):
        out.write(f"{prompt}Choose 1-{len(options)}: ")
        out.flush()
        line = read_answer_line()
        if not line:
            return None  # end of input: nobody is there
        answer = line.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(options):
            return options[int(answer) - 1].id
        chosen = question.option(answer)
        if chosen is not None:
            return chosen.id
    return None
