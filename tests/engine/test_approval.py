"""``approveTools``: who is asked, what each answer does, and that nothing runs unasked.

Calls go through a real adapter to the real workbench server (tests/surface/workbench_server.py)
over stdio; the askers are the two an embedding program uses: a Python callback given to the
adapter, and a host that implements ``AsksQuestions``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from pi_mcp_adapter.catalog._metadata import ToolInfo
from pi_mcp_adapter.config import ServerEntry, Settings, load_config
from pi_mcp_adapter.engine import McpAdapter, Question
from pi_mcp_adapter.engine._approval import requires_approval
from pi_mcp_adapter.hosts import ExportHost

WORKBENCH = Path(__file__).resolve().parents[1] / "surface" / "workbench_server.py"

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Asker:
    """A Python callback asker that answers from a script and records the questions."""

    def __init__(self, *answers: str | None) -> None:
        self.answers = list(answers)
        self.questions: list[Question] = []

    async def __call__(self, question: Question) -> str | None:
        self.questions.append(question)
        return self.answers.pop(0)


def _adapter(
    tmp_path: Path, server: dict[str, Any], settings: dict[str, Any] | None = None, **kwargs: Any
) -> McpAdapter:
    agent, project = tmp_path / "agent", tmp_path / "project"
    agent.mkdir(exist_ok=True)
    project.mkdir(exist_ok=True)
    entry = {"command": sys.executable, "args": [str(WORKBENCH)], **server}
    body: dict[str, Any] = {"mcpServers": {"workbench": entry}}
    if settings:
        body["settings"] = settings
    (agent / "mcp.json").write_text(json.dumps(body))
    config = load_config(agent_dir=agent, project_dir=project, home=tmp_path, environ={})
    return McpAdapter(config=config, agent_dir=agent, project_dir=project, **kwargs)


def _echo(text: str) -> ToolInfo:
    return ToolInfo(name=f"workbench_{text}", original_name=text, server="workbench")


@pytest.mark.parametrize(
    ("server", "global_", "tool", "expected"),
    [
        pytest.param(None, False, "echo", False, id="off-by-default"),
        pytest.param(True, False, "echo", True, id="server-true"),
        pytest.param(("ec*",), False, "echo", True, id="server-glob"),
        pytest.param(("workbench_echo",), False, "echo", True, id="prefixed-name"),
        pytest.param(("add",), True, "echo", False, id="server-list-beats-global-true"),
        pytest.param(None, ("echo",), "echo", True, id="global-list"),
        pytest.param(False, True, "echo", False, id="server-false-beats-global"),
    ],
)
def test_which_tools_need_approval(server: Any, global_: Any, tool: str, expected: bool) -> None:
    entry = ServerEntry(command="x", approve_tools=server)
    settings = Settings(approve_tools=global_)
    assert requires_approval(entry, settings, _echo(tool)) is expected


@pytest.mark.slow
async def test_a_python_callback_is_asked_and_each_answer_does_what_it_says(
    tmp_path: Path,
) -> None:
    asker = Asker("allow_once", "deny", "Allow for this session")
    async with _adapter(tmp_path, {"approveTools": ["echo"]}, ask=asker) as adapter:
        once = await adapter.call("workbench_echo", {"message": "one"})
        denied = await adapter.call("workbench_echo", {"message": "two"})
        session = await adapter.call("workbench_echo", {"message": "three"})
        remembered = await adapter.call("workbench_echo", {"message": "four"})
        unasked = await adapter.call("workbench_add", {"a": 1, "b": 2})
    assert once.error_kind is None
    assert (denied.error_kind, "denied" in denied.message) == ("approval_denied", True)
    assert session.error_kind is None
    assert remembered.error_kind is None
    assert unasked.error_kind is None
    assert len(asker.questions) == 3  # the session answer covered the fourth call
    question = asker.questions[0]
    assert question.context == {"server": "workbench", "tool": "echo", "name": "workbench_echo"}
    assert '"message": "one"' in question.text
    assert [o.id for o in question.options] == [
        "allow_once",
        "allow_session",
        "allow_always",
        "deny",
    ]


@pytest.mark.slow
async def test_a_host_that_can_ask_is_asked_when_no_callback_is_given(tmp_path: Path) -> None:
    class AskingHost(ExportHost):
        def __init__(self) -> None:
            super().__init__()
            self.asked: list[str] = []

        async def ask(self, question: Question) -> str | None:
            self.asked.append(question.title)
            return "allow_once"

    host = AskingHost()
    async with _adapter(tmp_path, {"approveTools": True}, host=host) as adapter:
        outcome = await adapter.call("workbench_echo", {"message": "via host"})
    assert outcome.error_kind is None
    assert host.asked == ["Allow the MCP tool workbench_echo (server workbench)?"]


@pytest.mark.slow
@pytest.mark.parametrize("answer", [None, "maybe"], ids=["nobody-answers", "unknown-answer"])
async def test_no_answer_fails_closed(tmp_path: Path, answer: str | None) -> None:
    async with _adapter(
        tmp_path, {}, settings={"approveTools": True}, ask=Asker(answer)
    ) as adapter:
        outcome = await adapter.call("workbench_echo", {"message": "x"})
    assert outcome.error_kind == "approval_denied"
    assert "settings.approveTools" in outcome.message
    assert outcome.result is None


@pytest.mark.slow
async def test_an_asker_that_raises_never_lets_the_call_through(tmp_path: Path) -> None:
    async def broken(question: Question) -> str | None:
        raise RuntimeError("the dialog crashed")

    async with _adapter(tmp_path, {"approveTools": True}, ask=broken) as adapter:
        outcome = await adapter.call("workbench_echo", {"message": "x"})
    assert outcome.error_kind == "approval_denied"


@pytest.mark.slow
async def test_always_is_kept_per_server_configuration(tmp_path: Path) -> None:
    async with _adapter(tmp_path, {"approveTools": True}, ask=Asker("allow_always")) as adapter:
        assert (await adapter.call("workbench_echo", {"message": "x"})).error_kind is None
    nobody = Asker()
    async with _adapter(tmp_path, {"approveTools": True}, ask=nobody) as adapter:
        assert (await adapter.call("workbench_echo", {"message": "y"})).error_kind is None
    assert nobody.questions == []
    # The same server pointed at another program is a new server: asked again.
    changed = {"approveTools": True, "env": {"VARIANT": "2"}}
    with anyio.fail_after(60):
        async with _adapter(tmp_path, changed, ask=Asker(None)) as adapter:
            outcome = await adapter.call("workbench_echo", {"message": "z"})
    assert outcome.error_kind == "approval_denied"
