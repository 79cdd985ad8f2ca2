"""Tool approval: ask the user before calling the tools ``approveTools`` names.

``approveTools`` is ``true`` (every tool) or a list of names and globs (matched like
``includeTools``: original or prefixed name, ``-`` also matching ``_``), per server or in
``settings`` (a server's own value wins). Before such a call the engine asks a
:class:`Question` with four answers: allow once, allow for this session, always allow, deny.

Who answers: the ``ask`` callback given to :class:`~pi_mcp_adapter.engine.McpAdapter` (a
Python host's own prompt), else the host when it implements :class:`AsksQuestions` (the CLI
asks on its terminal; the MCP gateway asks its client's user through elicitation). With nobody
to ask, or an asker that cannot reach anyone (``None``), the call is refused: it fails closed,
with a message naming the setting that would let it through.

"Always" answers are kept in ``<agent dir>/mcp-approvals.json``, each bound to the server's
``configHash``: pointing the server somewhere else (another url, command or token) asks again.
The question shows the arguments, shortened; answers are never written with arguments.

What a question shows is built so that nothing in it can hide the call: the tool and its
arguments come first, whatever else follows (a script, shortened to a few lines after them),
every part is bounded in characters and lines, and control characters (ANSI escapes, carriage
returns, bidirectional overrides) from a script, a server or a tool's name are shown escaped,
so they cannot move a terminal's cursor or clear its screen. :class:`Question` enforces the
escaping itself, for every asker: a terminal, the gateway's elicitation, a host's dialog.

A script that calls one tool many times is asked about once: its calls share an
:class:`ApprovalScope`, which remembers every answer (allow once included) until the script ends.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import anyio

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._files import write_atomically
from pi_mcp_adapter.catalog import ToolFilter, ToolInfo, config_hash
from pi_mcp_adapter.config import ServerEntry, Settings

from ._telemetry import approval_span

__all__ = [
    "APPROVALS_FILE_NAME",
    "APPROVAL_OPTIONS",
    "ApprovalChoice",
    "ApprovalScope",
    "Ask",
    "AsksQuestions",
    "Question",
    "QuestionOption",
    "ToolApprovals",
    "approval_setting",
    "requires_approval",
]

logger = logging.getLogger("pi_mcp_adapter.approval")

APPROVALS_FILE_NAME = "mcp-approvals.json"
_FILE_VERSION = 1
_SHARED_TABLE = "approvals"
ARGUMENTS_PREVIEW_CHARS = 500
ARGUMENTS_PREVIEW_LINES = 12
SCRIPT_PREVIEW_CHARS = 800
SCRIPT_PREVIEW_LINES = 12
"""A script is shown after the calls it makes, and only its start: a terminal must keep the
call, the question and its answers on one screen, however long the script."""
CALL_SITES_SHOWN = 5
CALL_SITE_CHARS = 160

ApprovalChoice = Literal["allow_once", "allow_session", "allow_always", "deny"]


@dataclass(frozen=True, slots=True)
class QuestionOption:
    """One possible answer: ``id`` is what the asker returns, ``label`` what a person reads."""

    id: str
    label: str


@dataclass(frozen=True, slots=True)
class Question:
    """A question for the user, with a fixed set of answers.

    ``kind`` says what is asked (``"tool_approval"``), ``context`` carries machine-readable
    details (server, tool, name) for askers that render their own dialog.
    """

    kind: str
    title: str
    text: str
    options: tuple[QuestionOption, ...]
    context: Mapping[str, str]

    def __post_init__(self) -> None:
        # One place for every asker: a question may quote a script, a server or a tool's
        # name, and none of them may rewrite the terminal or the dialog it is shown in.
        object.__setattr__(self, "title", escape_controls(self.title, keep=""))
        object.__setattr__(self, "text", escape_controls(self.text))
        object.__setattr__(
            self,
            "options",
            tuple(QuestionOption(o.id, escape_controls(o.label, keep="")) for o in self.options),
        )

    def option(self, answer: str | None) -> QuestionOption | None:
        """The option an answer names, by id or (case-insensitively) by label."""
        if answer is None:
            return None
        wanted = answer.strip().lower()
        return next((o for o in self.options if wanted in (o.id.lower(), o.label.lower())), None)


Ask = Callable[[Question], Awaitable[str | None]]
"""Ask the user; return the chosen option's id, or None when nobody can answer."""


@runtime_checkable
class AsksQuestions(Protocol):
    """The optional host ability to ask the user a question and wait for the answer.

    Returns the chosen option's ``id``, or None when no one can answer (no terminal, a client
    without elicitation, a declined or cancelled dialog): the engine then refuses the call.
    """

    async def ask(self, question: Question) -> str | None: ...


APPROVAL_OPTIONS = (
    QuestionOption("allow_once", "Allow once"),
    QuestionOption("allow_session", "Allow for this session"),
    QuestionOption("allow_always", "Always allow"),
    QuestionOption("deny", "Deny"),
)


@dataclass(slots=True)
class ApprovalScope:
    """Answers that hold for a group of calls (one script): the person is asked once per
    tool, and "allow once" covers every call of that tool in the group. A refusal is kept too,
    so a script that retries a denied tool is refused without asking again."""

    script: str | None = None
    """The code the calls come from. The question shows it instead of one call's arguments:
    the answer covers every call of the tool the script makes."""
    granted: set[tuple[str, str]] = field(default_factory=set)
    refused: dict[tuple[str, str], str] = field(default_factory=dict)
    # Concurrent calls of one tool (asyncio.gather in a script) must share one question.
    lock: anyio.Lock = field(default_factory=anyio.Lock)


def _selects(patterns: bool | tuple[str, ...] | None, tool: ToolInfo) -> bool:
    if patterns is True:
        return True
    if not patterns:
        return False
    return ToolFilter(include=patterns).allows(tool.original_name, tool.name)


def requires_approval(entry: ServerEntry | None, settings: Settings, tool: ToolInfo) -> bool:
    """Whether calling ``tool`` must be approved (the server's ``approveTools`` wins)."""
    if entry is not None and entry.approve_tools is not None:
        return _selects(entry.approve_tools, tool)
    return _selects(settings.approve_tools, tool)


def approval_setting(entry: ServerEntry | None, server: str) -> str:
    """The setting a user changes to call without being asked."""
    if entry is not None and entry.approve_tools is not None:
        return f"mcpServers.{server}.approveTools"
    return "settings.approveTools"


def escape_controls(text: str, *, keep: str = "\n") -> str:
    """``text`` with every control or invisible formatting character (ANSI escapes, carriage
    returns, backspaces, bidirectional overrides, line separators) shown as its Python escape,
    except those in ``keep``: such text cannot move a terminal's cursor or clear its screen."""
    if text.isprintable() and not any(c in text for c in keep):
        return text
    return "".join(c if c in keep or c.isprintable() else repr(c)[1:-1] for c in text)


def _shown(text: str, limit_chars: int, limit_lines: int) -> str:
    text = escape_controls(text)
    lines = text.split("\n")
    shown = "\n".join(lines[:limit_lines])[:limit_chars]
    if shown == text:
        return text
    return f"{shown}\n… (cut: {len(lines)} lines, {len(text)} characters in all)"


def _preview(arguments: Mapping[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, indent=2, default=str)
    return _shown(text, ARGUMENTS_PREVIEW_CHARS, ARGUMENTS_PREVIEW_LINES)


def _call_sites(script: str, tool: ToolInfo) -> list[str]:
    """The script's ``call(...)`` expressions that name ``tool``, one shortened line each."""
    import ast

    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    names = {tool.name, tool.original_name}
    sites: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "call"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in names
        ):
            continue
        source = " ".join((ast.get_source_segment(script, node) or "").split())
        if len(source) > CALL_SITE_CHARS:
            source = source[: CALL_SITE_CHARS - 1] + "…"
        sites.append((node.lineno, f"  line {node.lineno}: {escape_controls(source, keep='')}"))
    shown = [site for _, site in sorted(sites)[:CALL_SITES_SHOWN]]
    if len(sites) > CALL_SITES_SHOWN:
        shown.append(f"  … and {len(sites) - CALL_SITES_SHOWN} more")
    return shown


def _script_question_text(tool: ToolInfo, arguments: Mapping[str, Any], script: str) -> str:
    """The call first (its arguments, or the script's calls of the tool), then the script."""
    parts = [
        f"A script wants to run {tool.original_name} of {tool.server}; the answer holds for "
        "each call of it the script makes."
    ]
    if arguments:
        parts.append(f"This call's arguments:\n{_preview(arguments)}")
    sites = _call_sites(script, tool)
    if sites:
        parts.append("The script's calls of it:\n" + "\n".join(sites))
    elif not arguments:
        parts.append("The script computes the call; read it below.")
    shown = _shown(script.strip(), SCRIPT_PREVIEW_CHARS, SCRIPT_PREVIEW_LINES)
    parts.append(f"The script:\n{shown}")
    return "\n".join(parts)


class ToolApprovals:
    """Decides, asks and remembers approvals for one adapter (one session)."""

    def __init__(self, agent_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.path = agent_dir / APPROVALS_FILE_NAME
        self._clock = clock
        self._session: set[tuple[str, str]] = set()

    def question(
        self, tool: ToolInfo, arguments: Mapping[str, Any], *, script: str | None = None
    ) -> Question:
        if script is None:
            text = f"{tool.server} wants to run {tool.original_name} with:\n{_preview(arguments)}"
        else:
            text = _script_question_text(tool, arguments, script)
        return Question(
            kind="tool_approval",
            title=f"Allow the MCP tool {tool.name} (server {tool.server})?",
            text=text,
            options=APPROVAL_OPTIONS,
            context={"server": tool.server, "tool": tool.original_name, "name": tool.name},
        )

    async def check(
        self,
        tool: ToolInfo,
        arguments: Mapping[str, Any],
        *,
        entry: ServerEntry | None,
        settings: Settings,
        ask: Ask | None,
        scope: ApprovalScope | None = None,
    ) -> str | None:
        """None when the call may go ahead, else the refusal message for the model.

        Within ``scope`` the first answer about a tool stands for the scope's other calls."""
        if not requires_approval(entry, settings, tool):
            return None
        key = (tool.server, tool.original_name)
        if key in self._session:
            return None
        if scope is None:
            return await self._decide(tool, arguments, entry=entry, ask=ask)
        async with scope.lock:
            if key in scope.granted:
                return None
            if key in scope.refused:
                return scope.refused[key]
            refusal = await self._decide(tool, arguments, entry=entry, ask=ask, script=scope.script)
            if refusal is None:
                scope.granted.add(key)
            else:
                scope.refused[key] = refusal
            return refusal

    async def _decide(
        self,
        tool: ToolInfo,
        arguments: Mapping[str, Any],
        *,
        entry: ServerEntry | None,
        ask: Ask | None,
        script: str | None = None,
    ) -> str | None:
        key = (tool.server, tool.original_name)
        fingerprint = config_hash(entry) if entry is not None else ""
        if self._always(tool.server, tool.original_name) == fingerprint:
            return None
        setting = approval_setting(entry, tool.server)
        if ask is None:
            return (
                f"Calling {tool.name} needs the user's approval ({setting}), and there is no "
                "one to ask here (no terminal, or a client without elicitation). The call was "
                f"not made. To allow it without asking, remove it from {setting}."
            )
        question = self.question(tool, arguments, script=script)
        with approval_span(tool) as asked:
            try:
                answer = await ask(question)
            except Exception as exc:  # an asker must never let a call through by failing
                logger.warning("asking for approval of %s failed: %s", tool.name, exc)
                answer = None
            option = question.option(answer)
            choice = option.id if option is not None else None
            asked.answer = (
                "denied" if choice == "deny" else "allowed" if choice is not None else "none"
            )
        if choice == "allow_once":
            return None
        if choice == "allow_session":
            self._session.add(key)
            return None
        if choice == "allow_always":
            self._session.add(key)
            self._remember(tool.server, tool.original_name, fingerprint)
            return None
        if choice == "deny":
            return f"The user denied the call of {tool.name}. Do not retry it unasked."
        return (
            f"Calling {tool.name} needs the user's approval ({setting}), and no answer came. "
            f"The call was not made. To allow it without asking, remove it from {setting}."
        )

    # -- "always" answers --------------------------------------------------------------------

    def _read(self) -> dict[str, Any]:
        # With shared state, an "always" given through one replica holds on every replica.
        shared = shared_state.active()
        if shared is not None and (always := shared.table(_SHARED_TABLE)) is not None:
            return always
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable %s: %s", self.path, exc)
            return {}
        if not isinstance(data, dict) or data.get("version") != _FILE_VERSION:
            return {}
        always = data.get("always")
        return always if isinstance(always, dict) else {}

    def _always(self, server: str, tool: str) -> str | None:
        record = self._read().get(server, {})
        entry = record.get(tool) if isinstance(record, dict) else None
        value = entry.get("configHash") if isinstance(entry, dict) else None
        return value if isinstance(value, str) else None

    def _remember(self, server: str, tool: str, fingerprint: str) -> None:
        always = self._read()
        always.setdefault(server, {})[tool] = {
            "configHash": fingerprint,
            "at": int(self._clock() * 1000),
        }
        shared = shared_state.active()
        if shared is not None:
            shared.put(_SHARED_TABLE, server, always[server])
        data = json.dumps({"version": _FILE_VERSION, "always": always}, indent=2)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, data.encode("utf-8"))
        except OSError as exc:
            logger.warning("cannot remember the approval in %s: %s", self.path, exc)
