"""MCP Apps views in a browser: the loopback host page, driven by headless Chromium.

The app server (tests/fixtures/app_server.py) serves a view written with the official
``App`` class of ``@modelcontextprotocol/ext-apps``; Chromium loads the host page, the view
receives the tool result and calls tools back through the bridge, and those calls go through
the adapter's pipeline (an ``approveTools`` question is asked; the server records them).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter.config import load_config
from pi_mcp_adapter.engine import McpAdapter, Question
from pi_mcp_adapter.surface._apps import AppViews

APP_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "app_server.py"
EXT_APPS = (
    Path(__file__).resolve().parents[1]
    / "npm/node_modules/@modelcontextprotocol/ext-apps/dist/src/app-with-deps.js"
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Asker:
    def __init__(self) -> None:
        self.questions: list[Question] = []

    async def __call__(self, question: Question) -> str | None:
        self.questions.append(question)
        return "allow_once"


def _adapter(tmp_path: Path, asker: Asker, log: Path) -> McpAdapter:
    agent, project = tmp_path / "agent", tmp_path / "project"
    agent.mkdir()
    project.mkdir()
    entry = {
        "command": sys.executable,
        "args": [str(APP_SERVER)],
        "env": {"APP_SERVER_LOG": str(log)},
        "approveTools": ["save_chart"],
    }
    body = {"mcpServers": {"apps": entry}, "settings": {"captureStats": True}}
    (agent / "mcp.json").write_text(json.dumps(body))
    config = load_config(agent_dir=agent, project_dir=project, home=tmp_path, environ={})
    return McpAdapter(config=config, agent_dir=agent, project_dir=project, ask=asker)


def _calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


async def _bridge_log_when_done(url: str, profile: Path, *, done: str) -> str:
    """Open ``url`` in headless Chromium and return the host page's bridge log once it
    mentions ``done``, read over the DevTools protocol (``--dump-dom`` does not wait for the
    page's own fetches)."""
    websockets = pytest.importorskip("websockets", reason="drives Chromium over DevTools")
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--remote-debugging-port=0",
        url,
    ]
    # Output unread would fill its pipe and stall Chromium.
    browser = await anyio.open_process(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    async with browser:
        try:
            active = profile / "DevToolsActivePort"
            while not active.exists() or not active.read_text().strip():
                await anyio.sleep(0.1)
            port = active.read_text().split()[0]
            async with httpx.AsyncClient() as client:
                while True:
                    pages = (await client.get(f"http://127.0.0.1:{port}/json/list")).json()
                    page = next((p for p in pages if p.get("url") == url), None)
                    if page is not None:
                        break
                    await anyio.sleep(0.1)
            async with websockets.connect(page["webSocketDebuggerUrl"], max_size=None) as cdp:
                expression = (
                    "[...document.querySelectorAll('#log li')].map(e => e.textContent).join('\\n')"
                )
                for ident in range(1, 10_000):
                    request = {"id": ident, "method": "Runtime.evaluate"}
                    request["params"] = {"expression": expression, "returnByValue": True}
                    await cdp.send(json.dumps(request))
                    while (answer := json.loads(await cdp.recv())).get("id") != ident:
                        pass
                    text = str(answer["result"]["result"].get("value", ""))
                    if done in text:
                        return text
                    await anyio.sleep(0.1)
                raise AssertionError(text)
        finally:
            browser.terminate()


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (apt-get install chromium)")
@pytest.mark.skipif(not EXT_APPS.exists(), reason="needs the npm test packages (make npm)")
async def test_a_view_gets_the_tool_result_and_its_own_calls_pass_the_pipeline(
    tmp_path: Path,
) -> None:
    asker, log = Asker(), tmp_path / "calls.jsonl"
    async with _adapter(tmp_path, asker, log) as adapter, anyio.create_task_group() as tg:
        views = AppViews(adapter, tg)
        view = await views.open("apps_show_chart", {"title": "Q3"})
        assert view.url.startswith("http://127.0.0.1:")
        assert view.result["structuredContent"] == {"title": "Q3", "values": [3, 1, 4]}
        with anyio.fail_after(60):
            log_text = await _bridge_log_when_done(
                view.url, tmp_path / "profile", done="reset_charts"
            )
        assert adapter.stats is not None
        counted = {(t.tool, t.calls) for t in adapter.stats.session_stats()}
        tg.cancel_scope.cancel()
    assert "tool-result sent" in log_text
    # Counted in the call statistics like any call.
    assert ("save_chart", 1) in counted
    # The view called save_chart with the title it read from the tool result it was sent.
    assert {"tool": "save_chart", "arguments": {"title": "Q3"}} in _calls(log)
    assert "tools/call save_chart: ok" in log_text
    # approveTools applied to the view's call as to any call.
    assert [q.context.get("tool") for q in asker.questions] == ["save_chart"]
    # A model-only tool is refused to the view and never reaches the server.
    assert "tools/call reset_charts: error" in log_text
    assert all(c["tool"] != "reset_charts" for c in _calls(log))


async def test_the_rpc_endpoint_answers_only_its_own_address_and_token(tmp_path: Path) -> None:
    asker, log = Asker(), tmp_path / "calls.jsonl"
    async with _adapter(tmp_path, asker, log) as adapter, anyio.create_task_group() as tg:
        views = AppViews(adapter, tg)
        view = await views.open("apps_show_chart", {"title": "Q3"})
        rpc = view.url + "/rpc"
        call = {"method": "tools/call", "params": {"name": "show_chart", "arguments": {}}}
        async with httpx.AsyncClient() as client:
            page = await client.get(view.url)
            wrong_token = await client.post(rpc.replace(view.token, "x" * 32), json=call)
            rebound = await client.post(rpc, json=call, headers={"Host": "evil.example:80"})
            cross_site = await client.post(rpc, json=call, headers={"Origin": "http://evil"})
            ok = await client.post(rpc, json=call)
            unknown = await client.post(rpc, json={"method": "sampling/createMessage"})
        tg.cancel_scope.cancel()
    assert page.status_code == 200
    assert "ui/initialize" in page.text
    assert (wrong_token.status_code, rebound.status_code) == (404, 404)
    assert cross_site.status_code == 403
    assert ok.json()["result"]["structuredContent"] == {"title": "Sales", "values": [3, 1, 4]}
    assert unknown.json()["error"]["code"] == -32601


async def test_a_tool_without_a_view_is_a_usage_error(tmp_path: Path) -> None:
    asker, log = Asker(), tmp_path / "calls.jsonl"
    async with _adapter(tmp_path, asker, log) as adapter, anyio.create_task_group() as tg:
        with pytest.raises(UsageError, match="no MCP Apps view"):
            await AppViews(adapter, tg).open("apps_reset_charts")
    assert _calls(log) == []


@pytest.mark.parametrize(
    ("meta", "callable_"),
    [
        pytest.param(None, True, id="no-meta"),
        pytest.param({"ui": {"resourceUri": "ui://x"}}, True, id="no-visibility"),
        pytest.param({"ui": {"visibility": ["model", "app"]}}, True, id="both"),
        pytest.param({"ui": {"visibility": ["app"]}}, True, id="app-only"),
        pytest.param({"ui": {"visibility": ["model"]}}, False, id="model-only"),
        pytest.param({"ui": {"visibility": "app"}}, False, id="not-a-list"),
        pytest.param({"ui": {"visibility": ["app", "other"]}}, False, id="unknown-entry"),
    ],
)
def test_which_tools_a_view_may_call(meta: dict[str, Any] | None, callable_: bool) -> None:
    from pi_mcp_adapter.catalog._metadata import ToolInfo
    from pi_mcp_adapter.surface._apps import _visible_to_app

    tool = ToolInfo(name="s_t", original_name="t", server="s", meta=meta)
    assert _visible_to_app(tool) is callable_
