"""Text that is not well-formed Unicode (lone surrogates: undecodable bytes on a command line,
a ``\\ud800`` escape in a server's JSON) is searched like any text, never a ``TypeError``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog._search_semantic import load_default_embedder, semantic_available

ROOT = Path(__file__).resolve().parents[2]
WORKBENCH = ROOT / "tests" / "surface" / "workbench_server.py"

needs_model = pytest.mark.skipif(
    not semantic_available(), reason="the semantic extra (wordllama) is not installed"
)


@needs_model
def test_the_search_model_embeds_text_with_lone_surrogates() -> None:
    embedder = load_default_embedder()
    assert embedder is not None
    vectors = embedder.embed(["a\udced\udca0\udc80b", "a lone \ud800 high one", "plain"])
    assert len(vectors) == 3


@needs_model
@pytest.mark.slow
def test_search_of_undecodable_command_line_bytes_answers_without_a_traceback(
    tmp_path: Path,
) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "agent").mkdir()
    config = {"mcpServers": {"workbench": {"command": sys.executable, "args": [str(WORKBENCH)]}}}
    (tmp_path / "agent" / "mcp.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "PI_CODING_AGENT_DIR": str(tmp_path / "agent"),
        "PI_MCP_WARM": "0",
    }
    argv = [sys.executable, "-m", "pi_mcp_adapter", "--project", str(tmp_path / "project")]
    for extra in ([], ["--json"]):
        proc = subprocess.run(
            [*argv, "search", *extra, os.fsencode("echo a") + b"\xed\xa0\x80b"],
            env=env,
            capture_output=True,
            timeout=120,
        )
        assert b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
        assert proc.returncode == 0, proc.stderr.decode(errors="replace")
        assert b"workbench_echo" in proc.stdout
