"""Run ``pi-mcp`` as the client of one scenario of the official MCP conformance suite.

The suite (``@modelcontextprotocol/conformance client --command "<this> " --scenario auth/...``)
starts an authorization server and a protected MCP server, then runs this script with the
server URL as the last argument, ``MCP_CONFORMANCE_SCENARIO`` naming the scenario and, when the
scenario hands out credentials, ``MCP_CONFORMANCE_CONTEXT`` (JSON with ``client_id`` and
``client_secret`` or ``private_key_pem``).

The script writes a config file for one server ``conformance`` in a fresh agent directory and
runs the real command line, as a person would: ``pi-mcp auth conformance``, then
``pi-mcp tools conformance`` and ``pi-mcp call conformance_test-tool``. ``BROWSER`` points at
``browser.py``, which follows the authorization server's redirects back to the loopback
callback (the suite's server approves without a person). Exits non-zero at the first failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SERVER = "conformance"
CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""The client ID metadata document URL the suite accepts without fetching it."""
STEP_TIMEOUT_S = 60


def authorization_server_of(url: str) -> str:
    """The first authorization server the MCP server's protected-resource metadata names."""
    parts = urllib.parse.urlsplit(url)
    metadata = f"{parts.scheme}://{parts.netloc}/.well-known/oauth-protected-resource{parts.path}"
    with urllib.request.urlopen(metadata, timeout=STEP_TIMEOUT_S) as response:
        return str(json.load(response)["authorization_servers"][0])


def oauth_settings(scenario: str, context: dict[str, Any], url: str) -> dict[str, Any]:
    """The ``oauth`` object of the server entry for ``scenario``."""
    client_id = context.get("client_id")
    if scenario.startswith("auth/client-credentials"):
        # The key or the secret travels through the environment, not the file.
        if context.get("private_key_pem"):
            return {
                "grantType": "client_credentials",
                "clientId": client_id,
                "clientPrivateKey": "${CONFORMANCE_CLIENT_KEY}",
            }
        return {
            "grantType": "client_credentials",
            "clientId": client_id,
            "clientSecret": "${CONFORMANCE_CLIENT_SECRET}",
        }
    if "idp_id_token" in context:
        # Enterprise-managed authorization: the authorization server is configuration that
        # an administrator provisions; here it is read from the server's resource metadata.
        return {
            "grantType": "identity_assertion",
            "clientId": client_id,
            "clientSecret": "${CONFORMANCE_CLIENT_SECRET}",
            "authServerMetadataUrl": authorization_server_of(url),
            "idp": {
                "tokenEndpoint": context["idp_token_endpoint"],
                "clientId": context.get("idp_client_id"),
                "idToken": "${CONFORMANCE_ID_TOKEN}",
            },
        }
    if client_id:
        # Pre-registered client: the secret travels through the environment, not the file.
        return {"clientId": client_id, "clientSecret": "${CONFORMANCE_CLIENT_SECRET}"}
    settings: dict[str, Any] = {"clientMetadataUrl": CIMD_URL}
    if scenario.startswith("auth/2025-03-26-"):
        # The suite's 2025-03-26 server publishes, at the root metadata location, an issuer
        # with a path (/oauth); RFC 8414 §3.3 forbids that and the SDK refuses it by default.
        settings["skipIssuerMetadataValidation"] = True
    return settings


def run(argv: list[str], env: dict[str, str], *, stdin: str = "") -> None:
    print("$ pi-mcp " + " ".join(argv[4:]), file=sys.stderr, flush=True)
    completed = subprocess.run(
        argv,
        env=env,
        input=stdin,
        text=True,
        capture_output=True,
        timeout=STEP_TIMEOUT_S,
        check=False,
    )
    sys.stderr.write(completed.stdout + completed.stderr)
    if completed.returncode != 0:
        raise SystemExit(completed.returncode)


def main(args: list[str]) -> None:
    url = args[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="pi-mcp-conformance-") as tmp:
        root = Path(tmp)
        agent_dir = root / "agent"
        agent_dir.mkdir()
        config = {
            "mcpServers": {
                SERVER: {
                    "url": url,
                    "auth": "oauth",
                    "oauth": oauth_settings(scenario, context, url),
                }
            },
            "settings": {"autoAuth": True},
        }
        (agent_dir / "mcp.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        browser = root / "browser"
        browser.write_text(
            f'#!/bin/sh\nexec "{sys.executable}" "{HERE / "browser.py"}" "$@"\n', encoding="utf-8"
        )
        browser.chmod(0o755)
        env = {
            **os.environ,
            "BROWSER": str(browser),
            "CONFORMANCE_CLIENT_SECRET": str(context.get("client_secret") or ""),
            "CONFORMANCE_CLIENT_KEY": str(context.get("private_key_pem") or ""),
            "CONFORMANCE_ID_TOKEN": str(context.get("idp_id_token") or ""),
        }
        base = [sys.executable, "-m", "pi_mcp_adapter", "--agent-dir", str(agent_dir)]
        base += ["--project", str(root)]
        run([*base, "auth", SERVER], env)
        run([*base, "tools", SERVER], env)
        run([*base, "call", f"{SERVER}_test-tool", "{}"], env)


if __name__ == "__main__":
    main(sys.argv[1:])
