"""Attacks on what a start reads once instead of per server: the failures file, the
configuration's key positions and the configHash written in a fixed member order.

- a forged or stale failures file cannot put a server into backoff, and names that are not
  configured cost nothing (no digest);
- a configuration file replaced after loading cannot move the lines reported later: positions
  come from the text that was parsed, which no ``repr`` shows;
- the configHash of entries with keys that sort differently by code point and by UTF-16 unit,
  lone surrogates and variables is the digest the TypeScript reference computes (pinned).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pi_mcp_adapter.catalog import config_hash
from pi_mcp_adapter.config import ServerEntry, load_config
from pi_mcp_adapter.servers import FailureMemory, ServerManager, _failures

CANARY = "canary-5e1d-start-cost-s3cret"


def configured(count: int) -> dict[str, ServerEntry]:
    return {
        f"server-{i:03d}": ServerEntry(command="/bin/false", args=(str(i),)) for i in range(count)
    }


async def test_a_forged_failures_file_puts_no_server_into_backoff(tmp_path: Path) -> None:
    entries = configured(5)
    path = tmp_path / "mcp-failures.json"
    real_digest = _failures.entry_digest(entries["server-001"])
    forged = {
        "server-000": {"failedAt": 1, "reason": "x", "attempts": 1, "configHash": "0" * 64},
        "server-001": {"failedAt": "soon", "reason": "x", "attempts": 1, "configHash": real_digest},
        "server-002": {
            "failedAt": 9e15,
            "reason": "x",
            "attempts": True,
            "configHash": _failures.entry_digest(entries["server-002"]),
        },
        "server-003": ["not", "a", "record"],
    }
    path.write_text(json.dumps({"version": 1, "servers": forged}), encoding="utf-8")

    async with ServerManager(entries, log_dir=tmp_path, failures=FailureMemory(path)) as manager:
        assert all(manager.state(name).status != "failed" for name in entries)


def test_names_in_the_failures_file_that_are_not_configured_are_never_digested(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "mcp-failures.json"
    padding = {f"stranger-{i}": {"configHash": "0" * 64} for i in range(5_000)}
    path.write_text(json.dumps({"version": 1, "servers": padding}), encoding="utf-8")
    digested: list[ServerEntry] = []
    entry_digest = _failures.entry_digest

    def counted(entry: ServerEntry) -> str:
        digested.append(entry)
        return entry_digest(entry)

    monkeypatch.setattr(_failures, "entry_digest", counted)

    assert FailureMemory(path).get_many(configured(50)) == {}
    assert digested == []


def test_a_configuration_replaced_after_loading_does_not_move_the_lines_reported_later(
    tmp_path: Path,
) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    path = agent_dir / "mcp.json"
    servers = {
        "first": {"command": "/bin/false"},
        "second": {"url": "https://api.example/mcp", "bearerToken": CANARY},
    }
    path.write_text(json.dumps({"mcpServers": servers}, indent=2), encoding="utf-8")
    second_line = next(
        i for i, line in enumerate(path.read_text().splitlines(), 1) if '"second"' in line
    )
    config = load_config(agent_dir=agent_dir, project_dir=tmp_path, home=tmp_path, environ={})
    # Someone rewrites the file before the line is first asked for.
    path.write_text("\n" * 500 + json.dumps({"mcpServers": {}}), encoding="utf-8")

    origin = config.provenance["second"].origin

    assert origin.line == second_line
    assert CANARY not in repr(config.provenance["second"])
    assert CANARY not in repr(origin)


@pytest.mark.parametrize(
    ("written", "digest"),
    [
        pytest.param(
            {
                "command": "run",
                "args": ["\ud83d", "x"],
                "env": {"\U0001f600": "a", "\uff01": "b", "Z": "${HOME}"},
            },
            "0937fe8becf9b873ef96fd67409f5a93b353261e7e7ef409fb4ef837da0ac6fe",
            id="utf16-key-order-and-lone-surrogate",
        ),
        pytest.param(
            {
                "url": "https://h/${TOKEN}",
                "headers": {"X-\u00e9": "v", "A": "$env:TOKEN"},
                "bearerTokenEnv": "TOKEN",
                "includeTools": ["a*"],
            },
            "49b8a6d97302ca034e60c0cffef9245b152e49d8dbf483aaa215be92348555a4",
            id="variables-and-token-from-the-environment",
        ),
        pytest.param(
            {
                "command": "run",
                "cwd": "~/a/../b/",
                "excludeTools": [],
                "exposeResources": False,
                "auth": "bearer",
                "protocolVersion": "auto",
            },
            "802b62c8f4bf5ecdf397657137b0d5a51e4079eb3c7ff3f112a81b256b4e09ca",
            id="path-and-explicit-defaults",
        ),
    ],
)
def test_the_config_hash_of_awkward_entries_is_unchanged(
    written: dict[str, object], digest: str
) -> None:
    entry = ServerEntry.model_validate(written)

    assert config_hash(entry, environ={"HOME": "/home/u", "TOKEN": "t0k"}) == digest
