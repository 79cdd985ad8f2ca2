"""The CLI answers in a blink: help, version and cache-only commands never import the MCP SDK,
which alone costs most of a second (``bench/bench_cli_start.py`` measures the time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog._search_rankings import RANKINGS
from pi_mcp_adapter.cli._eval_cmds import RANKING_NAMES

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "mcp_fixture.py"
PROBE = """
import atexit, sys
def report():
    heavy = sorted(m for m in sys.modules if m in ("mcp", "mcp_types", "httpx2", "jsonschema")
                   or m.startswith(("mcp.", "mcp_types.")))
    sys.stderr.write("IMPORTED " + json.dumps(heavy) + "\\n")
import json
atexit.register(report)
from pi_mcp_adapter.cli import main
main(sys.argv[1:])
"""


def heavy_imports(home: Path, *args: str) -> list[str]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, "--project", str(home / "project"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next(x for x in out.stderr.splitlines() if x.startswith("IMPORTED "))
    imported: list[str] = json.loads(line.removeprefix("IMPORTED "))
    return imported


@pytest.mark.slow
def test_help_version_and_cache_only_commands_do_not_import_the_sdk(tmp_path: Path) -> None:
    (tmp_path / "agent").mkdir()
    (tmp_path / "project").mkdir()
    config = {"mcpServers": {"fx": {"command": sys.executable, "args": [str(FIXTURE)]}}}
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    assert heavy_imports(tmp_path, "--help") == []
    assert heavy_imports(tmp_path, "--version") == []
    # The first run lists the server (that needs the SDK); later ones answer from the cache.
    assert "mcp" in heavy_imports(tmp_path, "tools")
    for args in (
        ("search", "echo"),
        ("describe", "fx_echo"),
        ("status",),
        ("tools",),
        ("search", "--help"),
    ):
        assert heavy_imports(tmp_path, *args) == [], args
    assert "mcp" in heavy_imports(tmp_path, "call", "fx_echo", '{"message": "x"}')


def test_the_rankings_listed_in_help_are_the_catalogs() -> None:
    assert sorted(RANKING_NAMES) == sorted(RANKINGS)
