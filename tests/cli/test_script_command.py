"""``pi-mcp script FILE|-``, run as a real subprocess against mcp-server-git and mcp-server-time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"

CHAIN = """
log = await call("git_log", {"repo_path": REPO, "max_count": 3})
dates = [line[6:] for line in log.splitlines() if line.startswith("Date: ")]
for date in dates:
    print("converting", date[:16])
converted = [
    await call("time_convert_time",
               {"source_timezone": "UTC", "time": d[11:16], "target_timezone": "Asia/Tokyo"})
    for d in dates
]
[d[:10] + " " + c["target"]["datetime"][11:16] for d, c in zip(dates, converted)]
"""


def pi_mcp(home: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "PI_CODING_AGENT_DIR": str(home / "agent")}
    return subprocess.run(
        [sys.executable, "-m", "pi_mcp_adapter", "--project", str(home / "project"), *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
    )


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("home")
    (home / "project").mkdir()
    (home / "agent").mkdir()
    repo = home / "repo"
    subprocess.run([sys.executable, str(FIXTURES / "git_repo.py"), str(repo)], check=True)
    servers = {
        "git": {
            "command": sys.executable,
            "args": ["-m", "mcp_server_git", "--repository", str(repo)],
        },
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
    }
    (home / "agent" / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (home / "chain.py").write_text(CHAIN.replace("REPO", json.dumps(str(repo))))
    return home


def test_a_script_file_chains_two_servers_and_prints_its_value(home: Path) -> None:
    done = pi_mcp(home, "script", str(home / "chain.py"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        "2024-04-01 19:00",
        "2024-03-01 19:00",
        "2024-02-01 19:00",
    ]
    # What the script printed is progress, on stderr.
    assert "converting 2024-04-01 10:00\nconverting 2024-03-01 10:00\n" in done.stderr


def test_a_script_from_stdin_reports_json(home: Path) -> None:
    done = pi_mcp(home, "script", "--json", "-", stdin=(home / "chain.py").read_text())
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert report["calls"] == 4
    assert report["result"][0] == "2024-04-01 19:00"
    assert report["output"].startswith("converting 2024-04-01 10:00\n")


@pytest.mark.parametrize(
    ("code", "options", "expected"),
    [
        pytest.param(
            'open("/etc/passwd").read()',
            (),
            "error: script failed: PermissionError: Permission denied: '/etc/passwd'",
            id="escape",
        ),
        pytest.param(
            'for i in range(5):\n    await call("time_get_current_time", {"timezone": "UTC"})',
            ("--max-calls", "2"),
            "error: script stopped: the script went over its call budget of 2 calls",
            id="budget",
        ),
    ],
)
def test_a_failing_script_exits_1_with_one_clear_error(
    home: Path, code: str, options: tuple[str, ...], expected: str
) -> None:
    done = pi_mcp(home, "script", *options, "-", stdin=code)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(expected), done.stderr


def test_bad_input_is_a_usage_error(home: Path) -> None:
    missing = pi_mcp(home, "script", str(home / "nope.py"))
    assert missing.returncode == 2
    assert "cannot read" in missing.stderr
    bad = pi_mcp(home, "script", "--timeout", "0", "-", stdin="1")
    assert bad.returncode == 2
    assert "--timeout must be a positive number of seconds, got 0.0" in bad.stderr
