"""Running the real ``pi-mcp`` against a throwaway home, agent directory and project."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NPM_DIR = REPO / "tests" / "npm"
MCP_FIXTURE = REPO / "tests" / "fixtures" / "mcp_fixture.py"


@dataclass(frozen=True)
class Machine:
    home: Path

    @property
    def agent(self) -> Path:
        return self.home / "agent"

    @property
    def project(self) -> Path:
        return self.home / "project"

    @property
    def user_file(self) -> Path:
        return self.agent / "mcp.json"

    def run(
        self,
        *args: str,
        check: bool = True,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        project: Path | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        environ = {
            **os.environ,
            "HOME": str(self.home),
            "PI_CODING_AGENT_DIR": str(self.agent),
            "PI_MCP_PROJECT_TRUST": "",
            **(env or {}),
        }
        environ.pop("MCP_DIRECT_TOOLS", None)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "pi_mcp_adapter",
                "--project",
                str(project or self.project),
                *args,
            ],
            env=environ,
            input=stdin if stdin is not None else "",
            capture_output=True,
            text=True,
            timeout=120,
            cwd=cwd or self.home,
        )
        if check:
            assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc


def new_machine(tmp_path: Path) -> Machine:
    machine = Machine(tmp_path)
    machine.agent.mkdir(parents=True, exist_ok=True)
    machine.project.mkdir(parents=True, exist_ok=True)
    return machine


OAUTH_FIXTURE = REPO / "tests" / "fixtures" / "oauth_server.py"
FAULTS_FIXTURE = REPO / "tests" / "fixtures" / "http_faults.py"
