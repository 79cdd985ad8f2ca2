"""``pi-mcp status`` keeps what it reads of the configuration (``mcp-status-facts.json``) and
shows the next status from it without loading the configuration, exactly as loading would
show it; any change to what the configuration is loaded from loads it again.

Each status runs the real CLI in a fresh process, under a probe that counts the loads of the
configuration: a second status of an unchanged configuration loads none, and after a change it
loads one and shows what a status with nothing kept shows.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.catalog import MetadataCache, ServerMetadata
from pi_mcp_adapter.servers import FailureMemory

from ._kept_facts_support import STATUS_FACTS as FACTS
from ._kept_facts_support import Workspace, write_json

CANARY = "canary-7f3a9c1e5b"
"""A secret value: in a header, a variable and a bearer token; never in the kept facts."""


def _servers() -> dict[str, Any]:
    return {
        "alpha": {"command": "/bin/false", "args": ["alpha"]},
        "beta": {"url": "http://127.0.0.1:9/${BETA_PATH}/mcp"},
        "eta": {"url": "http://127.0.0.1:9/eta", "bearerTokenEnv": "ETA_TOKEN"},
        "gamma": {"command": "/bin/false", "enabled": False},
        "delta": {"args": ["no command or url"]},
        "epsilon": {
            "command": "/bin/false",
            "args": ["epsilon"],
            "headers": {"X-Key": CANARY},
            "env": {"KEY": "${SECRET_VALUE}"},
        },
    }


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    variables = {
        "BETA_PATH": "one",
        "ETA_TOKEN": f"{CANARY}-token",
        "SECRET_VALUE": f"{CANARY}-env",
    }
    space = Workspace.made(tmp_path, variables, _servers())
    # And a project server (untrusted).
    write_json(space.project / ".mcp.json", {"mcpServers": {"proj": {"command": "./serve.sh"}}})
    space.cache_servers(["alpha", "beta", "eta"])
    FailureMemory(space.agent / "mcp-failures.json").record(
        "epsilon", space.loaded().servers["epsilon"], "connection refused"
    )
    return space


@pytest.mark.parametrize("args", [(), ("--json",)])
def test_a_second_status_shows_the_same_without_loading_the_configuration(
    workspace: Workspace, args: tuple[str, ...]
) -> None:
    first_out, first_err, first_loads = workspace.status(*args)
    second_out, second_err, second_loads = workspace.status(*args)

    assert (first_loads, second_loads) == (1, 0)
    assert second_out == first_out
    assert second_err == first_err
    assert "config: " in first_err  # the broken layer's error, shown by both
    facts = workspace.agent / FACTS
    assert facts.stat().st_mode & 0o777 == 0o600
    if args:  # every kind of row took part
        statuses = {row["status"] for row in json.loads(first_out)["servers"]}
        assert statuses == {"cached", "disabled", "invalid", "failed", "untrusted"}


def _edit_config(space: Workspace) -> None:
    servers = _servers()
    servers["alpha"]["enabled"] = False
    write_json(space.config, {"mcpServers": servers})


def _add_user_layer(space: Workspace) -> None:
    write_json(
        space.home / ".agents" / "mcp" / "mcp.json", {"mcpServers": {"zeta": {"command": "z"}}}
    )


def _add_project_pi_layer(space: Workspace) -> None:
    write_json(space.project / ".pi" / "mcp.json", {"mcpServers": {"theta": {"command": "t"}}})


def _trust_project(space: Workspace) -> None:
    space.cli("trust", "--project", str(space.project))


def _link_trusted_file_from_elsewhere(space: Workspace) -> None:
    # The same bytes, but trust is recorded for where a file really lies.
    elsewhere = space.root / "elsewhere" / ".mcp.json"
    elsewhere.parent.mkdir()
    shutil.move(space.project / ".mcp.json", elsewhere)
    (space.project / ".mcp.json").symlink_to(elsewhere)


def _list_a_package(space: Workspace) -> None:
    write_json(space.agent / "settings.json", {"packages": ["npm:some-package"]})


def _nothing(_space: Workspace) -> None:
    pass


@dataclass(frozen=True)
class Mutation:
    change: Callable[[Workspace], None] = _nothing
    variables: dict[str, str | None] | None = None
    """Variables set (None: unset) for the status after the change."""
    before: Callable[[Workspace], None] = _nothing
    """Done before the first status."""
    shows: bool = True
    """Whether the status shows the change (a package listed but not installed adds
    nothing, yet where it is must be looked for again)."""


MUTATIONS = {
    "config file edited": Mutation(_edit_config),
    "variable in a url": Mutation(variables={"BETA_PATH": "two"}),
    "variable of a bearer token": Mutation(variables={"ETA_TOKEN": "another"}),
    "variable unset": Mutation(variables={"BETA_PATH": None}),
    "user layer added": Mutation(_add_user_layer),
    "project layer added": Mutation(_add_project_pi_layer),
    "project trusted": Mutation(_trust_project),
    "project trusted by the environment": Mutation(variables={"PI_MCP_PROJECT_TRUST": "always"}),
    "trusted file linked from elsewhere": Mutation(
        _link_trusted_file_from_elsewhere, before=_trust_project
    ),
    "package listed": Mutation(_list_a_package, shows=False),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_a_change_to_what_the_configuration_is_loaded_from_loads_it_again(
    workspace: Workspace, mutation: str
) -> None:
    case = MUTATIONS[mutation]
    case.before(workspace)
    before = workspace.status("--json")
    assert before[2] == 1
    assert workspace.status("--json")[2] == 0  # kept
    case.change(workspace)
    env = dict(workspace.env)
    for name, value in (case.variables or {}).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value

    out, err, loads = workspace.status("--json", env=env)

    assert loads == 1
    if case.shows:  # what was kept would be wrong
        assert (out, err) != before[:2]
    assert (out, err) == workspace.fresh_status("--json", env=env)


def test_the_status_after_a_change_is_kept_for_the_next(workspace: Workspace) -> None:
    workspace.status()
    _edit_config(workspace)
    changed, _err, loads = workspace.status()
    again, _err, loads_again = workspace.status()

    assert (loads, loads_again) == (1, 0)
    assert again == changed


def _import_a_host(space: Workspace) -> None:
    write_json(space.config, {"imports": ["cursor"], "mcpServers": _servers()})


def _filter_tools(space: Workspace) -> None:
    servers = _servers()
    servers["alpha"]["includeTools"] = ["alpha_tool"]
    write_json(space.config, {"mcpServers": servers})


def _sign_in_explicitly(space: Workspace) -> None:
    servers = _servers()
    servers["iota"] = {"url": "http://127.0.0.1:9/iota", "auth": "oauth"}
    write_json(space.config, {"mcpServers": servers})


def _agent_plugins(space: Workspace) -> None:
    (space.root / "plugins").mkdir()
    settings = {"agentPluginPaths": [str(space.root / "plugins")]}
    write_json(space.config, {"mcpServers": _servers(), "settings": settings})


NOT_KEPT: dict[str, Callable[[Workspace], None]] = {
    "a host import": _import_a_host,
    "a package listed": _list_a_package,
    "agent plugins": _agent_plugins,
    "a server whose filter decides its tools": _filter_tools,
    "a server signed in explicitly": _sign_in_explicitly,
}


@pytest.mark.parametrize("case", sorted(NOT_KEPT))
def test_a_configuration_that_reads_more_than_its_files_is_always_loaded(
    workspace: Workspace, case: str
) -> None:
    NOT_KEPT[case](workspace)

    first, _err, first_loads = workspace.status("--json")
    second, _err, second_loads = workspace.status("--json")

    assert (first_loads, second_loads) == (1, 1)
    assert second == first
    assert not (workspace.agent / FACTS).exists()


def test_kept_facts_hold_no_secret_and_the_status_from_them_shows_none(
    workspace: Workspace,
) -> None:
    first, first_err, _loads = workspace.status("--json")
    second, second_err, loads = workspace.status("--json")

    assert loads == 0
    kept = (workspace.agent / FACTS).read_bytes()
    assert CANARY.encode() not in kept
    for text in (first, first_err, second, second_err):
        assert CANARY not in text


def test_a_damaged_facts_file_is_ignored_and_written_again(workspace: Workspace) -> None:
    shown, _err, _loads = workspace.status()
    facts = workspace.agent / FACTS
    document = json.loads(facts.read_text())
    damaged = {
        "not json": "{ not json",
        "a column cut short": json.dumps(
            {
                **document,
                "servers": {**document["servers"], "enabled": document["servers"]["enabled"][1:]},
            }
        ),
        "another version": json.dumps({**document, "version": 99}),
    }
    for text in damaged.values():
        facts.write_text(text, encoding="utf-8")
        again, _err, loads = workspace.status()
        assert (loads, again) == (1, shown)
        assert json.loads(facts.read_text()) == document  # written again as it was


def test_a_server_whose_summary_cannot_tell_has_the_configuration_loaded_as_before(
    workspace: Workspace,
) -> None:
    workspace.status("--json")
    facts = workspace.agent / FACTS
    kept = facts.stat().st_mtime_ns
    # A relisting with a description changed: the change awaits review, and its diff is
    # read from the entry, which kept facts cannot name.
    cache = MetadataCache(workspace.agent / "mcp-cache.json", environ=workspace.env)
    changed = ({"name": "alpha_tool", "description": "now different"},)
    cache.store("alpha", workspace.loaded().servers["alpha"], ServerMetadata(tools=changed))
    cache.flush()

    out, err, loads = workspace.status("--json")

    assert loads == 1
    alpha = next(row for row in json.loads(out)["servers"] if row["name"] == "alpha")
    assert alpha["changedTools"] == ["alpha_tool"]
    assert (out, err) == workspace.fresh_status("--json")
    assert facts.stat().st_mtime_ns == kept  # still current: not written again


def test_a_status_creates_no_agent_dir(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    write_json(tmp_path / "mcp.json", {"mcpServers": {"alpha": {"command": "/bin/false"}}})
    space = Workspace(tmp_path, {**os.environ, "HOME": str(tmp_path), "PI_MCP_WARM": "0"})

    first = space.status()
    second = space.status()

    assert not space.agent.exists()  # nothing kept: each status loads the configuration
    assert (first[2], second[2]) == (1, 1)
    assert second[:2] == first[:2]
