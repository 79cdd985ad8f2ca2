from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pi_mcp_adapter._errors import ConfigError
from pi_mcp_adapter.cli import app
from pi_mcp_adapter.config import (
    HostConfig,
    apply_imports_change,
    discover_host_configs,
    plan_imports_change,
)
from pi_mcp_adapter.config._jsonc import parse_jsonc

from .conftest import Machine


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def hosts(machine: Machine) -> Machine:
    """A machine with Cursor, Codex and a project-level VS Code config, plus decoys."""
    machine.write(machine.home / ".cursor" / "mcp.json", {"mcpServers": {"gh": {"command": "g"}}})
    machine.write(
        machine.home / ".codex" / "config.toml",
        "[mcp_servers.docs]\ncommand = 'd'\n[mcp_servers.web]\nurl = 'https://w'\n",
    )
    machine.write(machine.project / ".vscode" / "mcp.json", {"servers": {"fs": {"command": "f"}}})
    # Present but with no servers, or broken: not offered.
    machine.write(machine.home / ".claude.json", {"numStartups": 3})
    machine.write(machine.home / ".windsurf" / "mcp.json", "{ broken")
    return machine


def test_discovery_lists_host_files_that_define_servers(hosts: Machine) -> None:
    found = discover_host_configs(hosts.home, hosts.project, environ={}, platform="linux")
    assert found == [
        HostConfig("cursor", hosts.home / ".cursor" / "mcp.json", ("gh",)),
        HostConfig("codex", hosts.home / ".codex" / "config.toml", ("docs", "web")),
        HostConfig("vscode", hosts.project / ".vscode" / "mcp.json", ("fs",)),
    ]


def test_planning_for_a_missing_file_creates_it_with_the_imports(tmp_path: Path) -> None:
    target = tmp_path / "agent" / "mcp.json"
    change = plan_imports_change(target, ["cursor", "codex"])
    assert change.before is None
    assert json.loads(change.after) == {"imports": ["cursor", "codex"]}
    assert change.diff().startswith(f"--- /dev/null\n+++ {target}\n")
    assert not target.exists()
    apply_imports_change(change)
    assert target.read_text() == change.after


EXISTING = """\
// my servers
{
  "mcpServers": {
    "time": { "command": "mcp-server-time" }, // keep this comment
  },
  "imports": [
    "cursor",
  ],
}
"""


@pytest.mark.parametrize(
    ("before", "expected_after"),
    [
        pytest.param(
            EXISTING,
            EXISTING.replace('    "cursor",\n', '    "cursor",\n    "codex",\n    "vscode",\n'),
            id="multi-line-list-keeps-its-style",
        ),
        pytest.param(
            '{"imports": ["cursor"], "settings": {}}\n',
            '{"imports": ["cursor", "codex", "vscode"], "settings": {}}\n',
            id="one-line-list",
        ),
        pytest.param(
            '{\n  "imports": [],\n  "mcpServers": {}\n}\n',
            '{\n  "imports": ["codex", "vscode"],\n  "mcpServers": {}\n}\n',
            id="empty-list",
        ),
        pytest.param(
            '{\n    /* no imports yet */\n    "mcpServers": {}\n}\n',
            '{\n    "imports": ["codex", "vscode"],\n    /* no imports yet */\n'
            '    "mcpServers": {}\n}\n',
            id="no-imports-key",
        ),
        pytest.param("{}\n", '{\n  "imports": ["codex", "vscode"]\n}\n', id="empty-object"),
        pytest.param(
            "// nothing here yet\n",
            '// nothing here yet\n{\n  "imports": [\n    "codex",\n    "vscode"\n  ]\n}\n',
            id="only-comments",
        ),
    ],
)
def test_planning_edits_the_text_and_keeps_comments(
    tmp_path: Path, before: str, expected_after: str
) -> None:
    target = tmp_path / "mcp.json"
    target.write_text(before)
    already = ["cursor"] if '"cursor"' in before else []
    change = plan_imports_change(target, [*already, "codex", "vscode"])
    assert change.after == expected_after
    assert change.added == ("codex", "vscode")
    assert change.already_listed == tuple(already)
    assert not change.reformatted
    assert target.read_text() == before  # planning writes nothing
    document = parse_jsonc(change.after)
    assert document is not None
    assert isinstance(document.data, dict)
    assert document.data["imports"] == [*already, "codex", "vscode"]


def test_nothing_to_add_means_no_change(tmp_path: Path) -> None:
    target = tmp_path / "mcp.json"
    target.write_text('{"imports": ["cursor"]}')
    change = plan_imports_change(target, ["cursor"])
    assert not change.changed
    assert change.diff() == ""
    apply_imports_change(change)
    assert target.read_text() == '{"imports": ["cursor"]}'


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param('{\n  "imports": [\n}', 3, "invalid JSON", id="bad-json"),
        pytest.param("[]", 1, "top level must be an object", id="not-object"),
        pytest.param('{\n "imports": {}\n}', 2, "'imports' must be a list", id="imports-object"),
    ],
)
def test_a_broken_target_is_refused_and_left_alone(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    target = tmp_path / "mcp.json"
    target.write_text(text)
    with pytest.raises(ConfigError) as caught:
        plan_imports_change(target, ["cursor"])
    assert (caught.value.path, caught.value.line) == (str(target), line)
    assert message in caught.value.message
    assert target.read_text() == text


def test_a_file_changed_after_planning_is_not_overwritten(tmp_path: Path) -> None:
    target = tmp_path / "mcp.json"
    target.write_text("{}")
    change = plan_imports_change(target, ["cursor"])
    target.write_text('{"mcpServers": {"new": {"command": "x"}}}')
    with pytest.raises(ConfigError, match="changed after the change was planned"):
        apply_imports_change(change)
    assert "new" in target.read_text()


def test_a_symlinked_config_stays_a_symlink(tmp_path: Path) -> None:
    real = tmp_path / "dotfiles" / "mcp.json"
    real.parent.mkdir()
    real.write_text("{}")
    link = tmp_path / "mcp.json"
    link.symlink_to(real)
    apply_imports_change(plan_imports_change(link, ["codex"]))
    assert link.is_symlink()
    assert json.loads(real.read_text()) == {"imports": ["codex"]}


def _invoke(machine: Machine, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app,
        ["--agent-dir", str(machine.agent_dir), "--project", str(machine.project), *args],
        env={"HOME": str(machine.home), "XDG_CONFIG_HOME": "", "APPDATA": "", "CODEX_HOME": ""},
    )
    return result.exit_code, result.stdout, result.stderr


def test_init_dry_run_shows_the_diff_and_writes_nothing(hosts: Machine) -> None:
    before = _snapshot(hosts.root)
    code, out, _ = _invoke(hosts, "init", "--dry-run")
    assert code == 0
    assert f"+++ {hosts.agent_dir / 'mcp.json'}" in out
    assert '+    "cursor",' in out
    assert "Dry run: nothing was written." in out
    assert _snapshot(hosts.root) == before


def test_init_writes_exactly_the_diff_it_showed_and_leaves_host_files_alone(
    hosts: Machine,
) -> None:
    target = hosts.agent_dir / "mcp.json"
    hosts.write(target, '{\n  // mine\n  "imports": ["cursor"]\n}\n')
    before = _snapshot(hosts.root)
    code, out, _ = _invoke(hosts, "init", "--dry-run", "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["added"] == ["codex", "vscode"]
    assert shown["alreadyListed"] == ["cursor"]
    assert shown["written"] is False

    code, out, _ = _invoke(hosts, "init")
    assert code == 0
    assert shown["diff"] in out
    after = _snapshot(hosts.root)
    assert after.pop(str(target)) != before.pop(str(target))
    assert after == before  # every host file byte for byte
    assert target.read_text() == '{\n  // mine\n  "imports": ["cursor", "codex", "vscode"]\n}\n'

    code, out, _ = _invoke(hosts, "init")
    assert code == 0
    assert "Nothing to add" in out


def test_init_refuses_a_broken_config_with_a_clear_error(hosts: Machine) -> None:
    target = hosts.write(hosts.agent_dir / "mcp.json", "{ nope")
    code, _, err = _invoke(hosts, "init")
    assert code == 1
    assert f"{target}:1" in err
    assert target.read_text() == "{ nope"
