"""What a configuration was loaded from: the variables a load looks up, whether it read more
than its files, and the digest of its files (``config/_inputs.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pi_mcp_adapter.config import RecordingEnviron, files_digest, inputs_digest, load_config


def test_a_recording_environment_notes_each_name_looked_up_and_a_listing() -> None:
    environ = RecordingEnviron({"A": "1", "B": "2"})

    assert environ.get("A") == "1"
    assert environ["B"] == "2"
    assert "C" not in environ
    assert environ.get("D") is None
    assert environ.read == {"A", "B", "C", "D"}
    assert not environ.listed
    assert sorted(environ) == ["A", "B"]
    assert environ.listed


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


def _load(root: Path, environ: dict[str, str]) -> tuple[bool, RecordingEnviron]:
    recording = RecordingEnviron(environ)
    loaded = load_config(
        agent_dir=root / "agent",
        project_dir=root / "project",
        config_path=root / "mcp.json",
        home=root / "home",
        environ=recording,
    )
    return loaded.inputs_known, recording


def test_a_load_records_the_variables_it_reads_and_lists_none(tmp_path: Path) -> None:
    _write(
        tmp_path / "mcp.json",
        {"mcpServers": {"a": {"url": "https://example.test/${REGION}/mcp"}}},
    )
    environ = {"REGION": "eu", "UNRELATED_SECRET_TOKEN": "x" * 32}

    known, recording = _load(tmp_path, environ)

    assert known
    assert "REGION" in recording.read
    assert "PI_MCP_PROJECT_TRUST" in recording.read  # the trust mode may come from it
    assert "UNRELATED_SECRET_TOKEN" not in recording.read
    # Registering the environment's secrets reads every variable, but not through it.
    assert not recording.listed


@pytest.mark.parametrize(
    "document",
    [
        {"imports": ["cursor"], "mcpServers": {}},
        {"claudePlugins": [{"path": "~/plugin", "mcp": True}], "mcpServers": {}},
        {"settings": {"agentPluginPaths": ["plugins"]}, "mcpServers": {}},
    ],
    ids=["host import", "claude plugin", "agent plugins"],
)
def test_a_load_that_looks_beyond_its_files_says_so(
    tmp_path: Path, document: dict[str, Any]
) -> None:
    _write(tmp_path / "mcp.json", document)

    assert not _load(tmp_path, {})[0]


def test_a_settings_file_that_names_a_package_makes_the_load_look_beyond_its_files(
    tmp_path: Path,
) -> None:
    _write(tmp_path / "mcp.json", {"mcpServers": {}})
    _write(tmp_path / "agent" / "settings.json", {"packages": []})
    assert _load(tmp_path, {})[0]

    _write(tmp_path / "agent" / "settings.json", {"packages": ["npm:not-installed"]})
    assert not _load(tmp_path, {})[0]


def _digest(root: Path, code: tuple[str, ...] = ("v1",)) -> str:
    return files_digest(
        agent_dir=root / "agent",
        project_dir=root / "project",
        config_path=root / "mcp.json",
        home=root / "home",
        environ={},
        exclusive=None,
        code=code,
    )


def test_the_files_digest_changes_with_each_file_and_where_it_lies(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    _write(tmp_path / "mcp.json", {"mcpServers": {}})
    seen = {_digest(tmp_path)}
    assert _digest(tmp_path) in seen  # the same files, the same digest

    def changed() -> bool:
        digest = _digest(tmp_path)
        fresh = digest not in seen
        seen.add(digest)
        return fresh

    _write(tmp_path / "mcp.json", {"mcpServers": {"a": {"command": "a"}}})
    assert changed()
    _write(tmp_path / "home" / ".agents" / "mcp.json", {"mcpServers": {}})  # a layer appears
    assert changed()
    _write(tmp_path / "project" / ".mcp.json", {"mcpServers": {}})
    assert changed()
    _write(tmp_path / "agent" / "mcp-trust.json", {"version": 1, "files": {}})
    assert changed()
    _write(tmp_path / "project" / ".pi" / "settings.json", {"packages": []})
    assert changed()
    # The same bytes, lying elsewhere (trust is recorded for where a file really lies).
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes((tmp_path / "project" / ".mcp.json").read_bytes())
    (tmp_path / "project" / ".mcp.json").unlink()
    (tmp_path / "project" / ".mcp.json").symlink_to(elsewhere)
    assert changed()
    assert _digest(tmp_path, code=("v2",)) not in seen


def test_the_inputs_digest_changes_with_a_value_read_and_holds_none(tmp_path: Path) -> None:
    files = _digest(tmp_path)
    first = inputs_digest(files, {"A": "secret-one", "B": "x"}, ["A"])

    assert inputs_digest(files, {"A": "secret-one", "B": "y"}, ["A"]) == first
    assert inputs_digest(files, {"A": "secret-two", "B": "x"}, ["A"]) != first
    assert inputs_digest(files, {"B": "x"}, ["A"]) != first  # unset is not empty
    assert inputs_digest(files, {"A": "", "B": "x"}, ["A"]) != inputs_digest(files, {}, ["A"])
    assert "secret-one" not in first
