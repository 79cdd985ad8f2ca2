"""Stored bearer tokens: the file and keyring formats, URL binding, and secret registration."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

import pytest

from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.servers._token_store import (
    BEARER_KEYRING_SERVICE,
    BearerRecord,
    create_bearer_store,
)

from .test_token_store import MemoryKeyring, memory_keyring  # noqa: F401  (fixture)

URL = "https://api.example.com/mcp"


def account(server: str) -> str:
    return "sha256-" + hashlib.sha256(server.encode()).hexdigest()


def test_the_file_store_writes_the_token_owner_only_beside_the_oauth_tokens(
    tmp_path: Path,
) -> None:
    store = create_bearer_store("file", tmp_path)
    store.save("api", BearerRecord("file-token-0123456789", URL))
    path = tmp_path / "mcp-oauth" / "api" / "bearer.json"
    assert json.loads(path.read_text()) == {"token": "file-token-0123456789", "serverUrl": URL}
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert store.load("api") == BearerRecord("file-token-0123456789", URL)
    assert "file-token-0123456789" not in redact("sent file-token-0123456789")
    assert store.delete("api") is True
    assert store.load("api") is None
    assert store.delete("api") is False


def test_a_name_that_is_not_a_file_name_cannot_escape_the_store(tmp_path: Path) -> None:
    store = create_bearer_store("file", tmp_path)
    store.save("../../evil", BearerRecord("escape-token-0123456789", URL))
    written = list((tmp_path / "mcp-oauth").rglob("bearer.json"))
    assert [p.parent.name for p in written] == [account("../../evil")]


def test_the_keyring_entry_is_the_reference_adapter_s(
    memory_keyring: MemoryKeyring,  # noqa: F811
    tmp_path: Path,
) -> None:
    store = create_bearer_store("keyring", tmp_path)
    store.save("api", BearerRecord("short-token-0123456789", URL))
    assert json.loads(memory_keyring.values[(BEARER_KEYRING_SERVICE, account("api"))]) == {
        "token": "short-token-0123456789",
        "serverUrl": URL,
    }
    long_token = "x" * 2500
    store.save("api", BearerRecord(long_token, URL))
    manifest = json.loads(memory_keyring.values[(BEARER_KEYRING_SERVICE, account("api"))])
    assert manifest["__piMcpAdapterBearerChunked"] == 1
    assert manifest["chunkCount"] == 3
    payload = json.dumps({"token": long_token, "serverUrl": URL}, separators=(",", ":"))
    assert manifest["chunkDigest"] == hashlib.sha256(payload.encode()).hexdigest()[:16]
    chunks = [
        memory_keyring.values[
            (BEARER_KEYRING_SERVICE, f"{account('api')}.chunk.{manifest['chunkDigest']}.{i}")
        ]
        for i in range(3)
    ]
    assert "".join(chunks) == payload
    assert store.load("api") == BearerRecord(long_token, URL)
    assert store.delete("api") is True
    assert not [key for key in memory_keyring.values if key[0] == BEARER_KEYRING_SERVICE]


@pytest.mark.parametrize(
    "content",
    [
        pytest.param("{", id="not-json"),
        pytest.param('{"token": "", "serverUrl": "x"}', id="empty-token"),
        pytest.param('{"token": "t0123456789"}', id="no-url"),
        pytest.param("[]", id="not-an-object"),
    ],
)
def test_a_damaged_record_counts_as_no_token(tmp_path: Path, content: str) -> None:
    path = tmp_path / "mcp-oauth" / "api" / "bearer.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    assert create_bearer_store("file", tmp_path).load("api") is None
