"""A hostile gateway client: what its policy denies, it can neither call nor see.

A real ``pi-mcp serve`` over HTTP with two upstream servers (``fix`` behind the ``mcp__fix``
namespace tool, ``fox`` with direct tools, both the SDK server of
``_client_policy_support.py``) and three clients: ``model`` (the ``mcp`` proxy) and
``searcher`` (ToolSearch) whose policy denies ``*delete_repo*``, and ``admin`` (no policy).
Every path of every surface is probed for the denied tool by the names a client would guess;
no answer may name it, describe it, count it or show its view, and it never runs upstream,
while the allowed tools still answer. The lists of paths are derived from the surfaces' own
schemas and the gateway's request handlers, so a new mode, parameter or method fails the
coverage test until it is probed here.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, MCPError

from gateway.conftest import GatewayWorkspace, run_http_gateway, text_of
from pi_mcp_adapter.engine import McpAdapter
from pi_mcp_adapter.hosts._gateway import McpGateway
from pi_mcp_adapter.surface._namespace import NAMESPACE_PARAMETERS
from pi_mcp_adapter.surface._proxy import PROXY_PARAMETERS, select_mode
from pi_mcp_adapter.surface._script import SCRIPT_PARAMETERS
from pi_mcp_adapter.surface._toolsearch import TOOL_SEARCH_PARAMETERS

from . import _client_policy_support as support

pytestmark = pytest.mark.anyio

SERVER_SCRIPT = Path(support.__file__)
MODEL_TOKEN = "model-token-4b1e9d"
SEARCHER_TOKEN = "searcher-token-90aa1c"
ADMIN_TOKEN = "admin-token-c3d2f7"

PROXY_PROBES: Mapping[str, list[dict[str, Any]]] = {
    "status": [{}],
    "call": [
        {"tool": "fix_delete_repo", "args": {"name": "alpha"}},
        {"tool": "delete_repo", "args": '{"name": "alpha"}'},
        {"tool": "fix_delete_rpo"},
        {"tool": "fox_delete_repo", "args": {"name": "alpha"}},
    ],
    "prompt": [
        {"prompt": "fix_delete_repo_confirm", "args": {"name": "alpha"}},
        {"prompt": "fix_delete_rpo_confirm"},
    ],
    "connect": [{"connect": "fix"}],
    "describe": [
        {"describe": "fix_delete_repo"},
        {"describe": "delete_repo"},
        {"describe": "fix_delete_rpo"},
        # Signature lines: of whole servers, and of several names at once.
        {"describe": "fix"},
        {"describe": "fox"},
        {"describe": ["fix_delete_repo", "fix_star_repo", "fox_delete_repo"]},
        {"describe": "delete_repo, fix_delete_rpo,fix_star_repo"},
    ],
    "instructions": [{"instructions": "fix"}],
    "search": [
        {"search": "obliterate repository history"},
        {"search": "delete repo", "server": "fix", "includeSchemas": True, "limit": 50},
        {"search": "delete.*", "regex": True, "offset": 0},
    ],
    "list": [{"server": "fix"}, {"server": "fox"}],
    "servers": [{"servers": "all"}],
}
"""Per ``mcp`` mode, the calls that try to reach the denied tool through it."""

TOOL_SEARCH_PROBES: list[dict[str, Any]] = [
    {"query": "select:fix_delete_repo"},
    {"query": "select:fox_delete_repo,fox_list_repos"},
    {"query": "obliterate repository history"},
    {"query": "delete repo"},
]

SCRIPT_PROBES: list[str] = [
    "await search('obliterate repository history')",
    "await search('delete repo', limit=50)",
    "await describe('fix_delete_repo')",
    "await describe('fix_delete_rpo')",
    "await call('fix_delete_repo', {'name': 'alpha'})",
    "await call('delete_repo', {'name': 'alpha'})",
    "[t for t in await search('repo', limit=50)]",
]

NAMESPACE_PROBES: list[dict[str, Any]] = [
    {"tool": "delete_repo", "args": {"name": "alpha"}},
    {"tool": "delete_rpo"},
    {"tool": "fix_delete_repo"},
    {"tool": ""},
]

DIRECT_PROBES: list[str] = ["fox_delete_repo", "fix_delete_repo", "delete_repo", "fox_delete_rpo"]

NO_CATALOG_CONTENT = frozenset(
    {"ping", "server/discover", "resources/unsubscribe", "subscriptions/listen", "logging/setLevel"}
)
"""Gateway methods whose answers name nothing from the catalog."""
PROBED_METHODS = frozenset(
    {
        "tools/list",
        "tools/call",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "completion/complete",
    }
)
"""Gateway methods :func:`_probe_gateway_methods` probes."""


@pytest.fixture
def gw_workspace(tmp_path: Path) -> GatewayWorkspace:
    return GatewayWorkspace(tmp_path)


def _server(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER_SCRIPT)], "lifecycle": "eager", **extra}


def _client(name: str, token: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "tokenSha256": hashlib.sha256(token.encode()).hexdigest(), **extra}


def _write_config(workspace: GatewayWorkspace, call_log: Path, trace: Path) -> None:
    env = {support.CALL_LOG_ENV: str(call_log)}
    workspace.write_config(
        {"fix": _server(env=env), "fox": _server(env=env, directTools=True)},
        {
            "gatewayClients": [
                _client("model", MODEL_TOKEN, deny=support.DENY_GLOBS),
                _client("searcher", SEARCHER_TOKEN, deny=support.DENY_GLOBS, surface="toolsearch"),
                _client("admin", ADMIN_TOKEN),
            ],
            "scriptMode": True,
            "namespaceProxyTools": True,
            "trace": {"enabled": True, "file": str(trace)},
        },
    )


class Answers:
    """Every answer one client got, each with the words its request sent."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, list[str], str]] = []

    def add(self, path: str, sent: list[str], answer: str) -> str:
        self.rows.append((path, sent, answer))
        return answer

    def leaks(self) -> list[str]:
        return [
            f"{path}: {found}"
            for path, sent, answer in self.rows
            if (found := support.leaks(answer, sent))
        ]


def _dump(result: Any) -> str:
    return (
        result.model_dump_json(by_alias=True) if hasattr(result, "model_dump_json") else str(result)
    )


async def _call(session: Client, answers: Answers, path: str, tool: str, args: Any) -> str:
    sent = [tool, *support.strings_in(args)]
    try:
        result = await session.call_tool(tool, args)
    except MCPError as exc:
        return answers.add(path, sent, f"MCPError: {exc.error.message}")
    return answers.add(path, sent, _dump(result))


async def _ask(answers: Answers, path: str, sent: list[str], request: Any) -> str:
    try:
        result = await request
    except MCPError as exc:
        return answers.add(path, sent, f"MCPError: {exc.error.message}")
    return answers.add(path, sent, _dump(result))


async def _probe_gateway_methods(session: Client, answers: Answers) -> None:
    answers.add("tools/list", [], _dump(await session.list_tools()))
    answers.add("prompts/list", [], _dump(await session.list_prompts()))
    answers.add("resources/list", [], _dump(await session.list_resources()))
    answers.add("resources/templates/list", [], _dump(await session.list_resource_templates()))
    for name in ("fix_delete_repo_confirm", "delete_repo_confirm", "fix_delete_rpo_confirm"):
        await _ask(answers, "prompts/get", [name], session.get_prompt(name, {"name": "alpha"}))
    for uri in (
        "repo://delete_repo/log",
        "repo://delete_repo/alpha",
        support.VIEW_OF_DENIED,
    ):
        await _ask(answers, "resources/read", [uri], session.read_resource(uri))
        await _ask(answers, "resources/subscribe", [uri], session.subscribe_resource(uri))
    for ref, about in (
        (types.PromptReference(type="ref/prompt", name="fix_delete_repo_confirm"), "name"),
        (
            types.ResourceTemplateReference(type="ref/resource", uri="repo://delete_repo/{name}"),
            "name",
        ),
    ):
        sent = [getattr(ref, "name", None) or getattr(ref, "uri", "")]
        await _ask(
            answers,
            "completion/complete",
            sent,
            session.complete(ref, {"name": about, "value": "al"}),
        )
    # The tools/call paths are the surfaces' own, probed by the callers.


async def _probe_proxy(session: Client, answers: Answers) -> None:
    for mode, probes in PROXY_PROBES.items():
        for probe in probes:
            await _call(session, answers, f"mcp {mode} {probe}", "mcp", probe)


async def _probe_scripts(session: Client, answers: Answers) -> None:
    for code in SCRIPT_PROBES:
        sent = re.findall(r"'([^']*)'", code)
        try:
            result = await session.call_tool("mcp_script", {"code": code})
        except MCPError as exc:
            answers.add(f"mcp_script {code}", sent, f"MCPError: {exc.error.message}")
            continue
        answers.add(f"mcp_script {code}", sent, _dump(result))


async def _probe_namespace(session: Client, answers: Answers) -> None:
    for probe in NAMESPACE_PROBES:
        await _call(session, answers, f"mcp__fix {probe}", "mcp__fix", probe)


async def _probe_direct(session: Client, answers: Answers) -> None:
    for name in DIRECT_PROBES:
        await _call(session, answers, f"direct {name}", name, {"name": "alpha"})


async def _probe_toolsearch(session: Client, answers: Answers) -> None:
    for probe in TOOL_SEARCH_PROBES:
        await _call(session, answers, f"ToolSearch {probe}", "ToolSearch", probe)
    # What ToolSearch loaded is listed now: the list must still hide the denied tool.
    answers.add("tools/list after ToolSearch", [], _dump(await session.list_tools()))


def _tool_counts(status: str) -> dict[str, int]:
    """``{server: tools}`` from the ``mcp({})`` status text."""
    return {m[1]: int(m[2]) for m in re.finditer(r"(\w+) \((\d+) tools?", status)}


def test_every_path_of_every_surface_is_probed(tmp_path: Path) -> None:
    """Fails when a surface gains a mode, a parameter or the gateway a method that the probes
    of this file do not reach (add probes for it, then update the lists here)."""
    properties = set(PROXY_PARAMETERS["properties"])
    modes = {select_mode({name: "x"}) for name in properties} | {"status"}
    assert set(PROXY_PROBES) == modes, "a new mcp mode needs probes in PROXY_PROBES"
    used = {key for probes in PROXY_PROBES.values() for probe in probes for key in probe}
    assert properties <= used, f"mcp parameters never probed: {sorted(properties - used)}"
    assert set(TOOL_SEARCH_PARAMETERS["properties"]) == {"query"}
    forms = {
        "select" if p["query"].startswith("select:") else "keywords" for p in TOOL_SEARCH_PROBES
    }
    assert forms == {"select", "keywords"}
    assert set(SCRIPT_PARAMETERS["properties"]) == {"code"}
    for function in ("search(", "describe(", "call("):
        assert any(function in code for code in SCRIPT_PROBES), function
    assert set(NAMESPACE_PARAMETERS["properties"]) <= {"tool", "args"}

    config = tmp_path / "mcp.json"
    config.write_text('{"mcpServers": {}}')
    adapter = McpAdapter(config_path=config, agent_dir=tmp_path, project_dir=tmp_path)
    methods = set(McpGateway(adapter).server._request_handlers)
    unclassified = methods - NO_CATALOG_CONTENT - PROBED_METHODS
    assert not unclassified, f"gateway methods nobody probes: {sorted(unclassified)}"


@pytest.mark.slow
# resources/subscribe is a handshake-era method, still served to the clients of that era.
@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_a_denied_tool_is_invisible_on_every_path_while_allowed_tools_still_work(
    gw_workspace: GatewayWorkspace,
) -> None:
    call_log = gw_workspace.root / "upstream-calls.log"
    trace = gw_workspace.root / "trace.jsonl"
    _write_config(gw_workspace, call_log, trace)
    with run_http_gateway(gw_workspace) as gateway:
        model = Answers()
        async with gateway.client(token=MODEL_TOKEN) as session:
            await _probe_gateway_methods(session, model)
            await _probe_proxy(session, model)
            await _probe_scripts(session, model)
            await _probe_namespace(session, model)
            await _probe_direct(session, model)
            listed = {t.name for t in (await session.list_tools()).tools}
            assert {"mcp", "mcp_script", "mcp__fix", "fox_list_repos", "fox_star_repo"} <= listed

            # The allowed tools answer on every surface.
            direct = await session.call_tool("fox_list_repos", {"org": "acme"})
            assert text_of(direct) == "repos of acme: alpha, beta"
            proxied = await session.call_tool(
                "mcp", {"tool": "fix_star_repo", "args": {"name": "a"}}
            )
            assert "starred a" in text_of(proxied)
            scripted = await session.call_tool(
                "mcp_script", {"code": "await call('fix_list_repos', {'org': 'x'})"}
            )
            assert "repos of x" in text_of(scripted)
            searched = await session.call_tool(
                "mcp_script", {"code": "await search('lists repositories of an organisation')"}
            )
            assert "fix_list_repos" in text_of(searched)
            namespaced = await session.call_tool(
                "mcp__fix", {"tool": "star_repo", "args": {"name": "b"}}
            )
            assert "starred b" in text_of(namespaced)
            described = await session.call_tool("mcp", {"describe": "fix_star_repo"})
            assert "Stars a repository" in text_of(described)
            view = await session.read_resource(support.VIEW_OF_ALLOWED)
            assert "repository list" in _dump(view)
            prompt = await session.get_prompt("fix_summarize_repos", {"org": "acme"})
            assert "Summarize the repositories of acme" in _dump(prompt)

            # Counts are the client's: fewer tools on each server than admin sees.
            counted = _tool_counts(text_of(await session.call_tool("mcp", {})))

        searcher = Answers()
        async with gateway.client(token=SEARCHER_TOKEN) as session:
            await _probe_gateway_methods(session, searcher)
            await _probe_toolsearch(session, searcher)
            await _probe_scripts(session, searcher)
            await _probe_namespace(session, searcher)
            await _probe_direct(session, searcher)
            loaded = await session.call_tool("ToolSearch", {"query": "select:fix_star_repo"})
            assert "fix_star_repo" in text_of(loaded)
            starred = await session.call_tool("fix_star_repo", {"name": "c"})
            assert text_of(starred) == "starred c"

        async with gateway.client(token=ADMIN_TOKEN) as session:
            # The same gateway shows and runs the tool for a client the policy lets call it.
            listed = {t.name for t in (await session.list_tools()).tools}
            assert "fox_delete_repo" in listed
            described = text_of(await session.call_tool("mcp", {"describe": "fix_delete_repo"}))
            assert "ZQX-WIPE" in described
            admin_counted = _tool_counts(text_of(await session.call_tool("mcp", {})))

    # The tool, its log resource and its view: three entries fewer per server.
    assert counted == {server: n - 3 for server, n in admin_counted.items()}
    assert not model.leaks(), "\n".join(model.leaks())
    assert not searcher.leaks(), "\n".join(searcher.leaks())
    assert len(model.rows) > 40
    assert len(searcher.rows) > 30
    ran = call_log.read_text().split() if call_log.exists() else []
    assert "delete_repo" not in ran
    assert {"list_repos", "star_repo"} <= set(ran)
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    denied = {(r["client"], r["tool"]) for r in records if r.get("error") == "policy_denied"}
    assert ("model", "delete_repo") in denied


@pytest.mark.slow
async def test_a_denied_tool_is_answered_as_a_tool_that_does_not_exist(
    gw_workspace: GatewayWorkspace,
) -> None:
    """The refusal itself must not confirm the tool exists: the answers for the denied name
    and for a name no server has differ only by the name."""
    _write_config(gw_workspace, gw_workspace.root / "calls.log", gw_workspace.root / "t.jsonl")
    with run_http_gateway(gw_workspace) as gateway:
        async with gateway.client(token=MODEL_TOKEN) as session:
            for surface, denied, absent in (
                ("mcp", {"tool": "fix_delete_repo"}, {"tool": "fix_delete_repx"}),
                ("mcp", {"describe": "fix_delete_repo"}, {"describe": "fix_delete_repx"}),
                ("mcp__fix", {"tool": "delete_repo"}, {"tool": "delete_repx"}),
                ("fox_delete_repo", {}, {}),
            ):
                name = surface if surface != "fox_delete_repo" else "fox_delete_repx"
                refused = text_of(await session.call_tool(surface, denied))
                unknown = text_of(await session.call_tool(name, absent))
                assert refused.replace("delete_repo", "delete_repx") == unknown
