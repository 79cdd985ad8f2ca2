"""Every ``auth/*`` client scenario of the official MCP conformance suite, with ``pi-mcp`` as
the client (through ``conformance_client.py``).

The suite (``@modelcontextprotocol/conformance``, run with the Node 22 from ``tests/npm``)
starts its own authorization and MCP servers and checks each step of the flow; a scenario
passes when the suite reports no failed and no warning checks and exits 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
NPM_BIN = HERE.parent / "npm" / "node_modules" / ".bin"
NODE = NPM_BIN / "node"
CONFORMANCE = NPM_BIN / "conformance"
DRIVER = HERE / "conformance_client.py"

PASSING = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-basic",
    "auth/client-credentials-jwt",
    "auth/cross-app-access-complete-flow",
]
UNSUPPORTED: dict[str, str] = {}
"""Scenarios this client does not pass, with the reason (an expected failure each)."""

needs_suite = pytest.mark.skipif(
    not (NODE.exists() and CONFORMANCE.exists()),
    reason="the conformance suite is not installed (make npm)",
)
pytestmark = [pytest.mark.slow, pytest.mark.npm, needs_suite]


def _suite(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(NODE), str(CONFORMANCE), *args],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def test_the_scenario_lists_cover_every_auth_scenario_of_the_suite() -> None:
    listed = _suite("list").stdout + _suite("list").stderr
    names = {word for word in listed.split() if word.startswith("auth/")}
    assert names == set(PASSING) | set(UNSUPPORTED)


@pytest.mark.parametrize(
    "scenario",
    [
        *(pytest.param(name, id=name) for name in PASSING),
        *(
            pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, reason=reason))
            for name, reason in UNSUPPORTED.items()
        ),
    ],
)
def test_pi_mcp_passes_the_conformance_scenario(scenario: str, tmp_path: Path) -> None:
    completed = _suite(
        "client",
        "--command",
        f"{sys.executable} {DRIVER}",
        "--scenario",
        scenario,
        "--timeout",
        "90000",
        "-o",
        str(tmp_path),
    )
    [checks_file] = tmp_path.rglob("checks.json")
    checks = json.loads(checks_file.read_text())
    bad = [
        f"{c['status']} {c['id']}: {c.get('description', '')}"
        for c in checks
        if c["status"] in ("FAILURE", "WARNING")
    ]
    assert bad == [], completed.stderr[-4000:]
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert any(c["status"] == "SUCCESS" for c in checks)
