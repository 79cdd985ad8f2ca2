"""Secrets never print: a canary value in every place a configuration can hold one is looked
for in every command's plain and ``--json`` output, its error messages, the logs and the files
the adapter writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "mcp_fixture.py"
# Not random-looking, so that only the rules about where values come from can hide it.
CANARY = "OpenSesameCanary"
RUN_FIXTURE = (
    "import runpy, sys; fixture = sys.argv[1]; sys.argv = [fixture]; "
    "sys.path.insert(0, fixture.rsplit('/', 1)[0]); runpy.run_path(fixture, run_name='__main__')"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("canary")
    (home / "agent").mkdir()
    (home / "project").mkdir()
    workdir = home / f"dir-{CANARY}"
    workdir.mkdir()
    servers: dict[str, Any] = {
        "fx": {
            "command": sys.executable,
            "args": [
                "-c",
                RUN_FIXTURE,
                str(FIXTURE),
                "postgresql://app:${CANARY_PASS}@db.internal/app",
                "Authorization: Bearer ${CANARY_TOKEN}",
                "--level=${CANARY_PLAIN}",
                f"https://user:{CANARY}@literal.example/x?token={CANARY}",
            ],
            "env": {"FX_TOKEN": "${CANARY_TOKEN}", "FX_PLAIN": "${CANARY_PLAIN}"},
            "cwd": "${CANARY_DIR}",
        },
        "remote": {
            "url": "http://user:${CANARY_PASS}@127.0.0.1:9/mcp?token=${CANARY_TOKEN}",
            "headers": {
                "X-Custom": "${CANARY_PLAIN}",
                "X-Honeycomb-Team": "${CANARY_TOKEN}",
                "Authorization": "Bearer ${CANARY_TOKEN}",
                "X-Literal": f"Bearer {CANARY}",
            },
        },
        "broken": {
            "command": sys.executable,
            "args": ["-c", "import sys; sys.exit(3)", "--password=${CANARY_PASS}"],
        },
    }
    (home / "agent" / "mcp.json").write_text(
        json.dumps({"mcpServers": servers, "settings": {"captureStats": True}})
    )
    return home


def pi_mcp(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(home / "agent"),
        "CANARY_PASS": CANARY,
        "CANARY_TOKEN": CANARY,
        "CANARY_PLAIN": CANARY,
        "CANARY_DIR": str(home / f"dir-{CANARY}"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


COMMANDS = [
    ("tools",),
    ("status",),
    ("search", "echo"),
    ("search", "nothing-matches-this"),
    ("describe", "fx_echo"),
    ("describe", "fx_ecko"),
    ("call", "fx_echo", '{"message": "hello"}'),
    ("call", "remote_anything", "{}"),
    ("call", "fx_echo", '{"message": "\\ud800"}'),
    ("connect", "fx"),
    ("connect", "remote"),
    ("connect", "broken"),
    ("reconnect",),
    ("tokens",),
    ("config",),
    ("auth", "remote"),
    ("init", "--dry-run"),
]


def test_no_command_output_error_log_or_file_contains_a_secret(home: Path) -> None:
    seen: list[str] = []
    for command in COMMANDS:
        for variant in (command, (*command, "--json")):
            out = pi_mcp(home, *variant)
            seen.append(" ".join(variant))
            assert "Traceback" not in out.stderr, (variant, out.stderr)
            for stream, text in (("stdout", out.stdout), ("stderr", out.stderr)):
                assert CANARY not in text.replace(f"dir-{CANARY}", "dir-x"), (variant, stream, text)
    config = pi_mcp(home, "config").stdout
    # Values from the environment are shown as the reference that was written.
    assert "postgresql://app:${CANARY_PASS}@db.internal/app" in config
    assert "Authorization: Bearer ${CANARY_TOKEN}" in config
    assert "X-Custom: ${CANARY_PLAIN}" in config
    assert "cwd: ${CANARY_DIR}" in config
    assert "https://user:********@literal.example/x?token=********" in config
    # Everything the adapter wrote (the user's own config file is the only input there).
    written = [p for p in (home / "agent").rglob("*") if p.is_file() and p.name != "mcp.json"]
    assert any(p.name == "mcp-cache.json" for p in written)
    assert any(p.name == "mcp-failures.json" for p in written)
    assert any(p.suffix == ".log" for p in written)
    for path in written:
        assert CANARY.encode() not in path.read_bytes(), path
    assert len(seen) == 2 * len(COMMANDS)
