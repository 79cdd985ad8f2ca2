"""A corpus of broken config files, one per validation rule, under ``corpus/``.

Each file is put in the project layer (``.mcp.json``) next to a valid agent-dir file. Loading
must name the broken file, the line and the field (file-level syntax errors have no field), and
the other layer's server must still load. ``pi-mcp config --json`` must report the same error,
exit 1 and never print a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pi_mcp_adapter.cli import app
from pi_mcp_adapter.config import load_config

CORPUS = Path(__file__).with_name("corpus")
GOOD_LAYER = {"mcpServers": {"good": {"command": "fine", "args": ["--serve"]}}}

# file name: (line, field, words the message must contain); None where the rule has no such
# thing (a file that is not UTF-8 has no line; a syntax error concerns no field).
EXPECTED: dict[str, tuple[int | None, str | None, str]] = {
    "invalid-json-missing-comma.json": (5, None, "Expecting ',' delimiter (column 5)"),
    "unterminated-block-comment.json": (4, None, "unterminated /* comment"),
    "nested-too-deep.json": (2, None, "nested too deep"),
    "not-utf8.json": (None, None, "is not UTF-8 text"),
    "top-level-not-object.json": (1, None, "top level must be an object, not array"),
    "servers-not-object.json": (3, "mcpServers", "must be an object of servers, not array"),
    "dash-servers-not-object.json": (3, "mcp-servers", "must be an object of servers"),
    "settings-not-object.json": (4, "settings", "'settings' must be an object, not boolean"),
    "imports-not-list.json": (3, "imports", "must be a list of host names, not string"),
    "import-unknown-host.json": (5, "imports[1]", "unknown import 'notepad'"),
    "import-not-a-string.json": (4, "imports[0]", "unknown import a number"),
    "server-not-object.json": (4, "mcpServers.bad", "must be an object, not string"),
    "server-null.json": (4, "mcpServers.bad", "must be an object, not null"),
    "field-command-not-string.json": (5, "mcpServers.bad.command", "must be a string"),
    "field-args-not-list.json": (6, "mcpServers.bad.args", "must be a list of strings"),
    "field-args-item-not-string.json": (6, "mcpServers.bad.args[1]", "must be a string"),
    "field-env-value-not-string.json": (6, "mcpServers.bad.env.PORT", "must be a string"),
    "field-headers-not-object.json": (6, "mcpServers.bad.headers", "not array"),
    "field-lifecycle-unknown.json": (6, "mcpServers.bad.lifecycle", '"keep-alive"'),
    "field-expose-resources-not-boolean.json": (
        6,
        "mcpServers.bad.exposeResources",
        "must be true or false",
    ),
    "field-timeout-not-number.json": (6, "mcpServers.bad.requestTimeoutMs", "whole number"),
    "field-auth-unknown.json": (6, "mcpServers.bad.auth", '"oauth"'),
    "field-direct-tools-wrong.json": (6, "mcpServers.bad.directTools", "a list of strings"),
    "field-include-tools-not-list.json": (6, "mcpServers.bad.includeTools", "list of strings"),
    "setting-tool-prefix-unknown.json": (5, "settings.toolPrefix", '"short"'),
    "setting-idle-timeout-not-number.json": (4, "settings.idleTimeout", "must be a number"),
    "setting-capture-stats-wrong.json": (4, "settings.captureStats", "or an object"),
    "server-neither-command-nor-url.json": (4, "command", "neither 'command' nor 'url'"),
    "server-both-command-and-url.json": (4, "url", "keep exactly one"),
    "url-unset-variable.json": (4, "url", "PI_MCP_CORPUS_UNSET_HOST, which is not set"),
}


def corpus_files() -> list[Path]:
    return sorted(CORPUS.glob("*.json"))


def test_every_corpus_file_states_its_rule_and_has_an_expectation() -> None:
    names = {path.name for path in corpus_files()}
    assert names == set(EXPECTED)
    for path in corpus_files():
        assert path.read_bytes().startswith(b"// Rule: "), path.name


def project_with(tmp_path: Path, broken: Path) -> tuple[Path, Path, Path]:
    home, agent_dir, project = tmp_path / "home", tmp_path / "agent", tmp_path / "project"
    for directory in (home, agent_dir, project):
        directory.mkdir()
    (agent_dir / "mcp.json").write_text(json.dumps(GOOD_LAYER))
    target = project / ".mcp.json"
    target.write_bytes(broken.read_bytes())
    return home, agent_dir, target


@pytest.mark.parametrize("broken", corpus_files(), ids=lambda p: p.stem)
def test_a_broken_file_is_named_with_line_and_field_and_the_other_layer_loads(
    tmp_path: Path, broken: Path
) -> None:
    home, agent_dir, target = project_with(tmp_path, broken)
    line, field, words = EXPECTED[broken.name]

    loaded = load_config(
        agent_dir=agent_dir, project_dir=target.parent, home=home, environ={"HOME": str(home)}
    )

    problems = [*loaded.errors, *loaded.invalid_servers.values()]
    matching = [e for e in problems if e.path == str(target) and words in e.message]
    assert matching, [str(e) for e in problems]
    error = matching[0]
    assert (error.line, error.field) == (line, field)
    assert str(error).startswith(f"{target}:{line}" if line is not None else str(target))
    assert loaded.servers["good"].args == ("--serve",)
    assert "bad" not in loaded.servers


@pytest.mark.parametrize("broken", corpus_files(), ids=lambda p: p.stem)
def test_pi_mcp_config_reports_the_broken_file_without_a_traceback(
    tmp_path: Path, broken: Path
) -> None:
    home, agent_dir, target = project_with(tmp_path, broken)
    line, field, words = EXPECTED[broken.name]

    result = CliRunner().invoke(
        app,
        ["--agent-dir", str(agent_dir), "--project", str(target.parent), "config", "--json"],
        env={"HOME": str(home), "PI_MCP_CORPUS_UNSET_HOST": None},
    )

    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.stderr
    report = json.loads(result.stdout)
    assert "good" in report["servers"]
    reported = [*report["errors"], *report["invalidServers"].values()]
    assert any(
        e["path"] == str(target) and e["line"] == line and e["field"] == field
        for e in reported
        if words in e["message"]
    ), reported
