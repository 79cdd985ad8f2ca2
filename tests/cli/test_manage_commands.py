"""``pi-mcp add``, ``remove``, ``enable``, ``disable``, ``edit`` on real files and servers."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from ._manage_support import MCP_FIXTURE, NPM_DIR, Machine, new_machine

USER_FILE = """\
{
  // my own servers
  "mcpServers": {
    "keep": { "command": "true" } // do not touch
  }
}
"""


def statuses(machine: Machine, project: Path | None = None) -> dict[str, str]:
    rows = json.loads(machine.run("status", "--json", project=project).stdout)["servers"]
    return {row["name"]: row["status"] for row in rows}


def test_a_url_is_added_under_its_host_s_name_and_the_file_keeps_its_comments(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    machine.user_file.write_text(USER_FILE)
    result = json.loads(machine.run("add", "https://mcp.linear.app/mcp", "--json").stdout)
    assert result["server"] == "mcp"
    assert result["entry"] == {"url": "https://mcp.linear.app/mcp"}
    text = machine.user_file.read_text()
    assert text.startswith(USER_FILE.split('"keep"')[0])
    assert '"keep": { "command": "true" }, // do not touch' in text
    loopback = machine.run("add", "http://localhost:8931/mcp", "--json").stdout
    assert json.loads(loopback)["server"] == "local-mcp"
    config = json.loads(machine.run("config", "--json").stdout)
    assert {"keep", "mcp", "local-mcp"} <= set(config["servers"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("x", "http://example.com/mcp"), "https://", id="plain-http-off-loopback"),
        pytest.param(("x", "https://me:pw@example.com/mcp"), "credentials", id="credentials"),
        pytest.param(("x", "https://example.com/mcp#a"), "fragment", id="fragment"),
        pytest.param(("-bad", "https://example.com/mcp"), "server name", id="bad-name"),
        pytest.param(("lonely",), "not a URL or package", id="name-alone"),
    ],
)
def test_a_bad_add_is_a_usage_error_and_writes_nothing(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    machine = new_machine(tmp_path)
    machine.user_file.write_text(USER_FILE)
    proc = machine.run("add", "--", *args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert machine.user_file.read_text() == USER_FILE


def test_adding_a_name_that_exists_needs_replace(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    machine.user_file.write_text(USER_FILE)
    proc = machine.run("add", "keep", "https://example.com/mcp", check=False)
    assert proc.returncode == 1
    assert "already defined" in proc.stderr
    machine.run("add", "--replace", "keep", "https://example.com/mcp")
    assert json.loads(machine.run("config", "--json").stdout)["servers"]["keep"]["config"] == {
        "url": "https://example.com/mcp"
    }


@pytest.mark.slow
def test_a_command_added_after_double_dash_is_called(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    machine.run("add", "--env", "GREETING=hello", "fx", "--", sys.executable, str(MCP_FIXTURE))
    entry = json.loads(machine.user_file.read_text())["mcpServers"]["fx"]
    assert entry == {
        "command": sys.executable,
        "args": [str(MCP_FIXTURE)],
        "env": {"GREETING": "hello"},
    }
    called = machine.run("call", "fx_env", '{"name": "GREETING"}')
    assert "hello" in called.stdout


@pytest.mark.slow
@pytest.mark.skipif(
    not (NPM_DIR / "node_modules" / "@modelcontextprotocol" / "server-memory").is_dir(),
    reason="npm test servers not installed (make npm)",
)
def test_an_npm_package_is_added_as_npx_and_located_as_npx_would(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    added = machine.run("--project", str(NPM_DIR), "add", "npm:@modelcontextprotocol/server-memory")
    assert "Added memory" in added.stdout
    assert "node_modules/@modelcontextprotocol/server-memory" in added.stdout
    entry = json.loads(machine.user_file.read_text())["mcpServers"]["memory"]
    assert entry == {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"]}
    listed = machine.run("tools", "memory", "--json", project=NPM_DIR, cwd=NPM_DIR)
    assert "memory_read_graph" in {tool["name"] for tool in json.loads(listed.stdout)}


def test_an_npm_package_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    proc = machine.run(
        "add",
        "npm:./not-a-package",
        check=False,
    )
    assert proc.returncode == 2
    assert "not an npm package name" in proc.stderr
    assert not machine.user_file.exists()


@pytest.mark.slow
def test_a_pypi_package_runs_its_installed_console_script_when_no_runner_is_on_path(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    venv_bin = str(Path(sys.executable).parent)
    assert shutil.which("uvx", path=venv_bin) is None
    machine.run("add", "pypi:mcp-server-time", env={"PATH": venv_bin})
    entry = json.loads(machine.user_file.read_text())["mcpServers"]["time"]
    assert entry == {"command": str(Path(venv_bin) / "mcp-server-time")}
    called = machine.run("call", "time_get_current_time", '{"timezone": "UTC"}')
    assert "UTC" in called.stdout
    missing = machine.run("add", "pypi:no-such-pkg-xyz", env={"PATH": venv_bin}, check=False)
    assert missing.returncode == 2
    assert "neither uvx nor pipx" in missing.stderr


def test_a_project_file_written_by_the_person_stays_trusted_and_a_cloned_one_does_not(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    added = machine.run("add", "--scope", "project", "own", "https://example.com/mcp")
    assert "recorded as trusted" in added.stdout
    assert statuses(machine)["own"] != "untrusted"
    machine.run("add", "--scope", "project", "second", "https://example.org/mcp")
    assert statuses(machine)["second"] != "untrusted"

    cloned = tmp_path / "cloned"
    cloned.mkdir()
    (cloned / ".mcp.json").write_text('{"mcpServers": {"theirs": {"command": "evil"}}}\n')
    added = machine.run(
        "--project", str(cloned), "add", "--scope", "project", "mine", "https://example.com/mcp"
    )
    assert "is not trusted" in added.stdout
    assert "pi-mcp trust --project" in added.stdout
    assert statuses(machine, cloned) == {"theirs": "untrusted", "mine": "untrusted"}


def test_the_project_scope_is_refused_in_exclusive_mode(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    proc = machine.run(
        "--exclusive", "add", "--scope", "project", "x", "https://example.com/mcp", check=False
    )
    assert proc.returncode == 2
    assert "exclusive" in proc.stderr
    assert not (machine.project / ".mcp.json").exists()


def test_disable_enable_and_remove_edit_the_entry_in_place(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    machine.user_file.write_text(USER_FILE)
    machine.run("disable", "keep")
    assert '"disabled": true' in machine.user_file.read_text()
    assert "// do not touch" in machine.user_file.read_text()
    assert statuses(machine)["keep"] == "disabled"
    assert "already disabled" in machine.run("disable", "keep").stdout
    machine.run("enable", "keep")
    assert machine.user_file.read_text() == USER_FILE
    assert statuses(machine)["keep"] != "disabled"
    removed = json.loads(machine.run("remove", "keep", "--json").stdout)
    assert removed == {
        "action": "remove",
        "server": "keep",
        "files": [str(machine.user_file)],
        "stillConfiguredIn": [],
    }
    assert "// my own servers" in machine.user_file.read_text()
    assert "keep" not in json.loads(machine.run("config", "--json").stdout)["servers"]


def test_a_server_from_a_shared_file_is_disabled_and_enabled_by_overrides(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    shared = tmp_path / ".config" / "mcp" / "mcp.json"
    shared.parent.mkdir(parents=True)
    shared.write_text('{"mcpServers": {"team": {"command": "true", "disabled": true}}}\n')
    assert statuses(machine)["team"] == "disabled"
    proc = machine.run("remove", "team", check=False)
    assert proc.returncode == 1
    assert str(shared) in proc.stderr
    assert "pi-mcp disable team" in proc.stderr
    machine.run("enable", "team")
    assert json.loads(machine.user_file.read_text()) == {
        "mcpServers": {"team": {"disabled": False}}
    }
    assert statuses(machine)["team"] != "disabled"
    assert shared.read_text().count("disabled") == 1  # the shared file is never written
    machine.run("disable", "--scope", "project", "team")
    override = json.loads((machine.project / ".pi" / "mcp.json").read_text())
    assert override == {"mcpServers": {"team": {"disabled": True}}}


EDITOR = """\
import pathlib, sys
plan = pathlib.Path(sys.argv[1])
target = pathlib.Path(sys.argv[2])
calls = plan / "calls"
n = int(calls.read_text()) if calls.exists() else 0
calls.write_text(str(n + 1))
step = plan / f"{n}.json"
if step.exists():
    target.write_text(step.read_text())
"""


def scripted_editor(tmp_path: Path, *contents: str) -> tuple[str, Path]:
    plan = tmp_path / "plan"
    plan.mkdir()
    for index, text in enumerate(contents):
        (plan / f"{index}.json").write_text(text)
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    return f"{sys.executable} {script} {plan}", plan / "calls"


def test_edit_reopens_an_invalid_file_and_saves_the_fixed_one(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    machine.user_file.write_text(USER_FILE)
    fixed = USER_FILE.replace('"keep"', '"renamed"')
    editor, calls = scripted_editor(tmp_path, '{"mcpServers": {', fixed)
    proc = machine.run("edit", stdin="\n", env={"EDITOR": editor, "VISUAL": ""})
    assert calls.read_text() == "2"
    assert "invalid JSON" in proc.stderr
    assert "Saved" in proc.stdout
    assert machine.user_file.read_text() == fixed
    assert not list(machine.agent.glob(".mcp.edit-*"))


@pytest.mark.parametrize("answer", [pytest.param("n\n", id="no"), pytest.param("", id="eof")])
def test_edit_leaves_the_file_as_it_was_when_the_person_gives_up(
    tmp_path: Path, answer: str
) -> None:
    machine = new_machine(tmp_path)
    machine.user_file.write_text(USER_FILE)
    bad_type = '{"mcpServers": {"keep": {"command": "true", "lifecycle": 5}}}'
    editor, calls = scripted_editor(tmp_path, bad_type)
    proc = machine.run("edit", stdin=answer, env={"EDITOR": editor, "VISUAL": ""}, check=False)
    assert proc.returncode == 1
    assert "lifecycle" in proc.stderr
    assert "unchanged" in proc.stderr
    assert calls.read_text() == "1"
    assert machine.user_file.read_text() == USER_FILE


def test_edit_of_a_new_project_file_records_its_trust(tmp_path: Path) -> None:
    machine = new_machine(tmp_path)
    content = '{\n  "mcpServers": {\n    "p": {"command": "true"}\n  }\n}\n'
    editor, _ = scripted_editor(tmp_path, content)
    proc = machine.run("edit", "--scope", "project", "--json", env={"EDITOR": editor})
    assert json.loads(proc.stdout) == {
        "action": "edit",
        "file": str(machine.project / ".mcp.json"),
        "changed": True,
        "trusted": True,
    }
    assert statuses(machine)["p"] != "untrusted"


def test_a_file_with_a_broken_entry_still_takes_other_changes_but_no_new_breakage(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    broken = '{"mcpServers": {"odd": {"command": "x", "lifecycle": "sometimes"}}}\n'
    machine.user_file.write_text(broken)
    machine.run("add", "web", "https://example.com/mcp")
    assert "web" in json.loads(machine.run("config", "--json", check=False).stdout)["servers"]
    proc = machine.run("enable", "odd", check=False)
    assert proc.returncode == 1
    assert "cannot be used" in proc.stderr
    assert "lifecycle" in proc.stderr
    bad_header = machine.run("add", "-H", "X-Empty", "h", "https://example.com/x", check=False)
    assert bad_header.returncode == 2
    assert "NAME:VALUE" in bad_header.stderr or "KEY:VALUE" in bad_header.stderr


def test_a_dry_run_prints_the_diff_writes_nothing_and_masks_a_literal_secret(
    tmp_path: Path,
) -> None:
    machine = new_machine(tmp_path)
    machine.user_file.write_text(USER_FILE)
    secret = "literal-secret-5b1e07c9"
    proc = machine.run(
        "add",
        "--dry-run",
        "-H",
        f"Authorization: Bearer {secret}",
        "-H",
        "X-Team: ${TEAM}",
        "api",
        "https://api.example.com/mcp",
    )
    assert machine.user_file.read_text() == USER_FILE
    assert '+    "api": {' in proc.stdout
    assert '"X-Team": "${TEAM}"' in proc.stdout
    assert secret not in proc.stdout + proc.stderr
    assert "prefer a ${VARIABLE} reference" in proc.stderr
    assert "X-Team" not in proc.stderr  # a reference is not warned about
