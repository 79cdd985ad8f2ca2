from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import keyring
import pytest
from keyring.backend import KeyringBackend
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from pi_mcp_adapter.servers._token_store import (
    KEYRING_SERVICE,
    AuthRecord,
    FileTokenStore,
    KeyringTokenStore,
    ServerTokenStorage,
)

URL = "https://mcp.example.com/mcp"
NOW = 1_800_000_000.0


class MemoryKeyring(KeyringBackend):
    """The keyring interface over a dict: the OS keyring cannot run in this sandbox."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[tuple[str, str], str] = {}
        self.reads = 0

    def get_password(self, service: str, username: str) -> str | None:
        self.reads += 1
        return self.values.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.values[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        del self.values[(service, username)]


@pytest.fixture
def memory_keyring() -> MemoryKeyring:
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def token(access: str = "at-1", refresh: str | None = "rt-1") -> OAuthToken:
    return OAuthToken(access_token=access, refresh_token=refresh, expires_in=3600, scope="read")


async def test_files_are_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        storage = ServerTokenStorage("srv", URL, FileTokenStore(tmp_path), clock=lambda: NOW)
        await storage.set_tokens(token())
        await storage.set_client_info(
            OAuthClientInformationFull(client_id="c", redirect_uris=["http://127.0.0.1:1/cb"])
        )
    finally:
        os.umask(old)
    directory = tmp_path / "mcp-oauth" / "srv"
    assert stat.S_IMODE((tmp_path / "mcp-oauth").stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert {p.name for p in directory.iterdir()} == {"tokens.json", "client.json"}
    for path in directory.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads((directory / "tokens.json").read_text())
    assert saved["expiresAt"] == int((NOW + 3600) * 1000)
    assert saved["serverUrl"] == URL


async def test_tokens_written_by_the_reference_adapter_are_read(tmp_path: Path) -> None:
    directory = tmp_path / "mcp-oauth" / "srv"
    directory.mkdir(parents=True)
    (directory / "tokens.json").write_text(
        json.dumps(
            {
                "access_token": "legacy-at",
                "token_type": "bearer",
                "refresh_token": "legacy-rt",
                "expires_in": 3600,
                "expiresAt": int((NOW + 600) * 1000),
            }
        )
    )
    storage = ServerTokenStorage("srv", URL, FileTokenStore(tmp_path, clock=lambda: NOW))
    loaded = await storage.get_tokens()
    assert loaded is not None
    assert loaded.access_token == "legacy-at"
    assert loaded.refresh_token == "legacy-rt"
    assert loaded.expires_in == 600
    assert storage.expires_at == NOW + 600


async def test_a_record_for_another_url_is_dropped_not_used(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path)
    await ServerTokenStorage("srv", URL, store).set_tokens(token())
    moved = ServerTokenStorage("srv", "https://evil.example.com/mcp", store)
    assert await moved.get_tokens() is None
    assert await moved.get_client_info() is None
    assert not (tmp_path / "mcp-oauth" / "srv" / "tokens.json").exists()


async def test_the_url_binding_ignores_query_and_credentials(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path)
    await ServerTokenStorage("srv", URL + "?key=1", store).set_tokens(token())
    assert await ServerTokenStorage("srv", URL, store).get_tokens() is not None
    data = json.loads((tmp_path / "mcp-oauth" / "srv" / "tokens.json").read_text())
    assert "key=1" not in data["serverUrl"]


def test_a_server_name_cannot_escape_the_token_directory(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path)
    store.save("../../etc/passwd", AuthRecord(server_url=URL, tokens=token()))
    written = list((tmp_path / "mcp-oauth").iterdir())
    assert [p.name[:7] for p in written] == ["sha256-"]
    assert store.load("../../etc/passwd").tokens == token()


def test_delete_says_whether_anything_was_stored(tmp_path: Path) -> None:
    store = FileTokenStore(tmp_path)
    assert store.delete("srv") is False
    store.save("srv", AuthRecord(server_url=URL, tokens=token()))
    assert store.delete("srv") is True
    assert store.load("srv").is_empty


async def test_keyring_round_trip_splits_long_entries(
    tmp_path: Path, memory_keyring: MemoryKeyring
) -> None:
    store = KeyringTokenStore(tmp_path, clock=lambda: NOW)
    long_token = token(access="a" * 1500, refresh="r" * 1500)
    await ServerTokenStorage("srv", URL, store, clock=lambda: NOW).set_tokens(long_token)
    parts = [k for (service, k) in memory_keyring.values if service == KEYRING_SERVICE]
    assert len(parts) > 2  # a head plus several parts
    assert all(len(v) <= 1280 for v in memory_keyring.values.values())
    fresh = KeyringTokenStore(tmp_path, clock=lambda: NOW)
    record = fresh.load("srv")
    assert record.tokens is not None
    assert record.tokens.access_token == "a" * 1500
    assert record.server_url == URL
    assert fresh.delete("srv") is True
    assert memory_keyring.values == {}


def test_the_keyring_is_read_once_per_process(
    tmp_path: Path, memory_keyring: MemoryKeyring
) -> None:
    store = KeyringTokenStore(tmp_path, clock=lambda: NOW)
    store.save("srv", AuthRecord(server_url=URL, tokens=token()))
    reader = KeyringTokenStore(tmp_path, clock=lambda: NOW)
    before = memory_keyring.reads
    for _ in range(5):
        reader.load("srv")
    assert memory_keyring.reads - before == 1
    reader.load("srv", fresh=True)  # a refresh re-reads, another process may have written
    assert memory_keyring.reads - before == 2
