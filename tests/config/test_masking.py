from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pi_mcp_adapter.cli import app
from pi_mcp_adapter.config import MASK, mask_secrets
from pi_mcp_adapter.config._masking import looks_like_credential, mask_args, mask_headers, mask_url

from .conftest import Machine

# Deliberately not random-looking, so only the name-based rules can hide it.
SECRET = "OpenSesameCanary"
SECRET_ENV = {"CANARY_VALUE": SECRET}

CANARY_CONFIG = f"""{{
  // every place a secret can hide
  "mcpServers": {{
    "stdio": {{
      "command": "server",
      "args": ["--token", "{SECRET}", "--api-key={SECRET}", "--verbose"],
      "env": {{"PLAIN": "{SECRET}", "FROM_ENV": "${{CANARY_VALUE}}"}}
    }},
    "http": {{
      "url": "https://user:{SECRET}@api.example/mcp?access_token={SECRET}&v=1",
      "headers": {{
        "Authorization": "{SECRET}",
        "X-Api-Key": "{SECRET}",
        "Cookie": "session=${{CANARY_VALUE}}",
        "X-Trace": "Bearer {SECRET}"
      }},
      "bearerToken": "{SECRET}",
      "oauth": {{"clientId": "app", "clientSecret": "{SECRET}"}}
    }},
    "extras": {{"command": "x", "tuning": {{"depth": 2, "clientSecret": "{SECRET}"}}}},
    "broken-env": {{"command": "x", "env": {{"A": "{SECRET}", "B": 1}}}},
    "broken-headers": {{"url": "https://x", "headers": "{SECRET}"}},
    "broken-token": {{"url": "https://x", "bearerToken": ["{SECRET}"]}},
    "no-transport": {{"env": {{"K": "{SECRET}"}}}}
  }},
  "settings": {{"apiKey": "{SECRET}"}}
}}
"""


@pytest.fixture
def canary_machine(machine: Machine) -> Machine:
    machine.environ.update(SECRET_ENV)
    machine.write_layer("agent", CANARY_CONFIG)
    # A broken file right next to a secret: the syntax error must not quote the text.
    machine.write_layer("project", f'{{"mcpServers": {{"p": {{"env": {{"K": "{SECRET}" "x"}}}}}}}}')
    return machine


def test_the_canary_config_really_contains_the_secret(canary_machine: Machine) -> None:
    config = canary_machine.load()
    assert config.servers["http"].bearer_token == SECRET
    assert config.servers["stdio"].env == {"PLAIN": SECRET, "FROM_ENV": SECRET}
    assert set(config.invalid_servers) == {
        "broken-env",
        "broken-headers",
        "broken-token",
        "no-transport",
    }
    assert config.errors  # the broken entries and the broken project file


def test_no_repr_error_warning_or_masked_view_shows_the_secret(canary_machine: Machine) -> None:
    config = canary_machine.load()
    shown = [
        repr(config),
        str(config.settings),
        *(repr(entry) for entry in config.servers.values()),
        *(str(entry) for entry in config.servers.values()),
        *(json.dumps(mask_secrets(entry)) for entry in config.servers.values()),
        *(str(error) for error in config.errors),
        *(repr(error) for error in config.errors),
        *(str(error) for error in config.invalid_servers.values()),
        *config.warnings,
    ]
    leaks = [text for text in shown if SECRET in text]
    assert leaks == []


def test_masked_views_keep_what_is_not_secret(canary_machine: Machine) -> None:
    config = canary_machine.load()
    stdio = mask_secrets(config.servers["stdio"])
    assert stdio["args"] == ["--token", MASK, f"--api-key={MASK}", "--verbose"]
    assert stdio["env"] == {"PLAIN": MASK, "FROM_ENV": "${CANARY_VALUE}"}
    http = mask_secrets(config.servers["http"])
    assert http["headers"] == {
        "Authorization": MASK,
        "X-Api-Key": MASK,
        "Cookie": "session=${CANARY_VALUE}",
        "X-Trace": MASK,
    }
    assert http["url"] == f"https://user:{MASK}@api.example/mcp?access_token={MASK}&v=1"
    # The oauth object shows its public fields and hides the client secret.
    assert http["oauth"] == {"clientId": "app", "clientSecret": MASK}
    assert http["bearerToken"] == MASK
    extras = mask_secrets(config.servers["extras"])
    assert extras["tuning"] == {"depth": 2, "clientSecret": MASK}


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"Accept": "text/plain"}, {"Accept": "text/plain"}, id="ordinary"),
        pytest.param({"Proxy-Authorization": "x"}, {"Proxy-Authorization": MASK}, id="proxy-auth"),
        pytest.param({"X-Client-Secret": "x"}, {"X-Client-Secret": MASK}, id="secret-name"),
        pytest.param({"X-Whatever": "ghp_abc"}, {"X-Whatever": MASK}, id="github-token-value"),
        pytest.param(
            {"X-Id": "a1b2c3d4e5f6a7b8c9d0e1f2a3b4"}, {"X-Id": MASK}, id="random-looking-value"
        ),
        pytest.param({"Authorization": ""}, {"Authorization": ""}, id="empty-stays-visible"),
    ],
)
def test_header_masking_by_name_and_by_value(
    headers: dict[str, str], expected: dict[str, str]
) -> None:
    assert mask_headers(headers) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        pytest.param("https://h/p?q=1", "https://h/p?q=1", id="plain"),
        pytest.param("https://u:p@h/", f"https://u:{MASK}@h/", id="password"),
        pytest.param("https://tok@h/", f"https://{MASK}@h/", id="userinfo-only"),
        pytest.param("https://h/?key=v&page=2", f"https://h/?key={MASK}&page=2", id="query-key"),
    ],
)
def test_url_masking(url: str, expected: str) -> None:
    assert mask_url(url) == expected


def test_arguments_that_are_paths_or_flags_stay_visible() -> None:
    args = ["-y", "@scope/pkg@1.2.3", "/very/long/path/to/a/directory/of/files", "--port", "80"]
    assert mask_args(args) == args
    assert not looks_like_credential("https://example.com/a/long/path/segment/1234")


def _cli_env(machine: Machine) -> dict[str, str]:
    return {"HOME": str(machine.home), "PI_CODING_AGENT_DIR": str(machine.agent_dir), **SECRET_ENV}


@pytest.mark.parametrize("as_json", [pytest.param(False, id="text"), pytest.param(True, id="json")])
def test_pi_mcp_config_never_prints_the_secret(canary_machine: Machine, as_json: bool) -> None:
    args = ["--project", str(canary_machine.project), "config"] + (["--json"] if as_json else [])
    result = CliRunner().invoke(app, args, env=_cli_env(canary_machine))
    assert result.exit_code == 1  # the canary config has broken entries
    assert "stdio" in result.stdout
    assert "broken-env" in (result.stdout + result.stderr)
    assert SECRET not in result.stdout
    assert SECRET not in result.stderr
    if as_json:
        report = json.loads(result.stdout)
        assert report["servers"]["http"]["config"]["bearerToken"] == MASK
        assert report["errors"]


def test_the_installed_command_never_prints_the_secret(canary_machine: Machine) -> None:
    pi_mcp = Path(sys.executable).with_name("pi-mcp")
    env = {**os.environ, **_cli_env(canary_machine)}
    for extra in ([], ["--json"]):
        done = subprocess.run(
            [str(pi_mcp), "--project", str(canary_machine.project), "config", *extra],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.returncode == 1
        assert "http" in done.stdout
        assert SECRET not in done.stdout
        assert SECRET not in done.stderr


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param(
            f"postgresql://app:{SECRET}@db/x", "postgresql://app:********@db/x", id="url-password"
        ),
        pytest.param(
            f"--dsn=redis://:{SECRET}@cache:6379", "--dsn=redis://:********@cache:6379", id="flag"
        ),
        pytest.param(
            f"Authorization: Bearer {SECRET}", "Authorization: Bearer ********", id="bearer"
        ),
        pytest.param(f"x?token={SECRET}&v=1", "x?token=********&v=1", id="token-pair"),
        pytest.param(f"api_key={SECRET}", "api_key=********", id="api-key-pair"),
        pytest.param("postgresql://app:${PASS}@db/x", "postgresql://app:${PASS}@db/x", id="ref"),
        pytest.param("http://host:8080/path", "http://host:8080/path", id="port-not-password"),
        pytest.param("the token expired", "the token expired", id="prose"),
    ],
)
def test_mask_text_hides_secrets_inside_free_text(text: str, shown: str) -> None:
    from pi_mcp_adapter.config._masking import mask_text

    assert mask_text(text) == shown


def test_values_from_the_environment_are_shown_as_their_references(machine: Machine) -> None:
    machine.environ.update(SECRET_ENV)
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "db": {
                    "command": "psql-mcp",
                    "args": ["postgresql://app:${CANARY_VALUE}@db/x", "--team=${CANARY_VALUE}"],
                    "cwd": "/srv/${CANARY_VALUE}",
                },
                "api": {
                    "url": "https://api.example/mcp",
                    "headers": {
                        "X-Custom": "${CANARY_VALUE}",
                        "X-Honeycomb-Team": "${CANARY_VALUE}",
                    },
                },
            }
        },
    )
    config = machine.load()
    db = mask_secrets(config.servers["db"])
    assert db["args"] == ["postgresql://app:${CANARY_VALUE}@db/x", "--team=${CANARY_VALUE}"]
    assert db["cwd"] == "/srv/${CANARY_VALUE}"
    api = mask_secrets(config.servers["api"])
    assert api["headers"] == {"X-Custom": "${CANARY_VALUE}", "X-Honeycomb-Team": "${CANARY_VALUE}"}
    assert SECRET not in json.dumps([db, api])
    # The entries themselves still carry the values the servers need.
    assert config.servers["db"].args[0] == f"postgresql://app:{SECRET}@db/x"
