"""One rule in one place: the stop signals and the relay of a server's questions.

A rule written twice drifts: a fix to how the gateway forwards a server's sampling request (or
refuses it) that misses the pool's copy leaves one path open. These tests read the source
(nothing runs) and fail when a second copy appears:

- only ``pi_mcp_adapter/_signals.py`` waits for signals in an event loop or spells the set of
  signals that end a process (SIGINT, SIGTERM, SIGHUP);
- only ``servers/_relay.py`` sends a client ``sampling/createMessage`` or
  ``elicitation/create`` on a server's behalf (the gateway and the pool both call it).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "pi_mcp_adapter"
STOP_SIGNAL_NAMES = {"SIGINT", "SIGTERM", "SIGHUP"}
STANDALONE_SCRIPTS = {"servers/_reaper.py"}
"""Run as ``python -I -S <file>`` (no package to import): the stdio servers' supervisor, which
gives its child back the default action of the handlers it set itself."""


def _modules() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(SRC)): ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted(SRC.rglob("*.py"))
    }


def _attribute_names(node: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _called_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute):
                names.add(node.func.attr)
            elif isinstance(node.func, ast.Name):
                names.add(node.func.id)
    return names


def test_only_the_signals_module_waits_for_signals_in_an_event_loop() -> None:
    waiting = sorted(
        name for name, tree in _modules().items() if "open_signal_receiver" in _called_names(tree)
    )
    assert waiting == ["_signals.py"]


def test_only_the_signals_module_spells_the_set_of_signals_that_end_a_process() -> None:
    spelled = sorted(
        name
        for name, tree in _modules().items()
        if name not in STANDALONE_SCRIPTS
        for node in ast.walk(tree)
        if isinstance(node, ast.Tuple | ast.Set | ast.Dict)
        and _attribute_names(node) >= STOP_SIGNAL_NAMES
    )
    assert spelled == ["_signals.py"]


def _relayed_request_kinds(tree: ast.Module) -> set[str]:
    """The server-to-client requests that a function of ``tree`` both builds and sends."""
    kinds: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            called = _called_names(node)
            if "send_request" in called:
                kinds |= {"CreateMessageRequest", "ElicitRequest"} & called
    return kinds


def test_only_the_relay_sends_a_client_a_servers_sampling_or_elicitation_request() -> None:
    sending = {
        name: sorted(kinds)
        for name, tree in _modules().items()
        if (kinds := _relayed_request_kinds(tree))
    }
    assert sending == {"servers/_relay.py": ["CreateMessageRequest", "ElicitRequest"]}
