"""Every runnable example under ``examples/`` runs to its answer, offline, with real servers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_leaked_processes")]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        pytest.param("export_openai_chat.py", "in Tokyo.", id="openai-chat"),
        pytest.param("export_openai_responses.py", "09:30 UTC is", id="openai-responses"),
        pytest.param("export_anthropic.py", "in São Paulo.", id="anthropic-deferred"),
        pytest.param("export_mcp.py", "18:00 in Kolkata is", id="mcp"),
        pytest.param("pi_python_extension.py", "in Sydney.", id="pi-python"),
        pytest.param("pydantic_ai_agent.py", "in Nairobi.", id="pydantic-ai"),
        pytest.param("openai_agents_agent.py", "midnight in Seoul", id="openai-agents"),
    ],
)
def test_example_runs_offline_to_its_answer(script: str, expected: str, tmp_path: Path) -> None:
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONWARNINGS": "error::RuntimeWarning"}
    env.pop("PI_MCP_CONFIG", None)
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        capture_output=True,
        text=True,
        timeout=90,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert expected in done.stdout
