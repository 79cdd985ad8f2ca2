"""OAuth tokens shared by replicas through Redis (``sharedState`` + ``PI_MCP_STATE_KEY``):
one sign-in for all, one refresh between them, against the local authorization server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gateway._team_services import RedisServer, missing_packages, redis_server
from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter.servers._token_store import create_token_store

from .conftest import SERVER, Machine, OAuthServer, free_port
from .test_oauth_cli import sign_in

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(missing_packages()),
        reason=f"needs the Debian package(s) {', '.join(missing_packages())} "
        "(.ci/run installs them)",
    ),
]

STATE_KEY = "replicas-state-key-2b8f"


def replica(root: Path, redis: RedisServer, oauth_server: OAuthServer) -> Machine:
    machine = Machine(
        root,
        env={
            "MCP_OAUTH_CALLBACK_PORT": str(free_port()),
            "PI_MCP_STATE_KEY": STATE_KEY,
        },
    )
    machine.configure({SERVER: {"url": oauth_server.url, "auth": "oauth"}}, sharedState=redis.url)
    return machine


def expire_shared_token(machine: Machine, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    monkeypatch.setenv("PI_MCP_STATE_KEY", STATE_KEY)
    shared_state.activate(redis_url, environ={})
    try:
        store = create_token_store("file", machine.agent_dir)
        record = store.load(SERVER)
        now = time.time()
        store.save(SERVER, replace(record, expires_at=now - 60, obtained_at=now - 3660))
    finally:
        shared_state.deactivate()


def test_replicas_sign_in_once_and_refresh_once_between_them(
    tmp_path: Path, oauth_server: OAuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    with redis_server(tmp_path / "redis") as redis:
        first = replica(tmp_path / "first", redis, oauth_server)
        sign_in(first)
        assert oauth_server.count("authorize") == 1

        # Replicas with empty agent dirs: no sign-in of their own, no browser.
        names = ("second", "third", "fourth", "fifth")
        others = [replica(tmp_path / name, redis, oauth_server) for name in names]
        for machine in others:
            called = machine.run("call", f"{SERVER}_echo", '{"message": "hi"}')
            assert called.returncode == 0, called.stderr
            assert "Echo: hi" in called.stdout
            assert not machine.tokens_path.exists()  # the tokens came from Redis

        # The token expires: the replicas call at once; one refreshes, the others use that.
        expire_shared_token(first, redis.url, monkeypatch)
        processes = [m.popen("call", f"{SERVER}_echo", '{"message": "x"}') for m in others]
        for process in processes:
            out, err = process.communicate(timeout=60)
            assert process.returncode == 0, err
            assert "Echo: x" in out
        counts = oauth_server.stats()["counts"]
        assert counts.get("authorize") == 1
        # Refresh tokens rotate: a second refresh with the same one would have been refused.
        assert counts.get("grant:refresh_token") == 1
        assert counts.get("refresh:rejected", 0) == 0
        refreshed = [m for m in others if m.tokens_path.exists()]
        assert len(refreshed) == 1  # the one that refreshed wrote its own copy
        stored = json.loads(refreshed[0].tokens_path.read_text())
        assert stored["expiresAt"] > time.time() * 1000
