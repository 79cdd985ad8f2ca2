"""OAuth records shared by gateway replicas through Redis, encrypted at rest.

With ``settings.sharedState`` and ``PI_MCP_STATE_KEY`` both set, each server's
:class:`~pi_mcp_adapter.servers._token_store.AuthRecord` (tokens, expiry, client registration)
is also kept in the ``pi-mcp:oauth`` hash, encrypted with Fernet (AES-128-CBC with an HMAC,
from ``cryptography``, which the MCP SDK already depends on through ``pyjwt[crypto]``) under a
key derived from ``PI_MCP_STATE_KEY``. A replica that joins finds the sign-in done; a token
refreshed by one replica is what the others load next. Without the key, tokens stay in each
replica's own store (files or keyring) and nothing about them reaches Redis.

The local store stays written: it is what a replica uses while Redis is away.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any, Literal

from cryptography.fernet import Fernet, InvalidToken

from pi_mcp_adapter._shared_state import SharedLock, SharedState

from ._token_store import AuthRecord, TokenStore, _client_from, _token_from

logger = logging.getLogger("pi_mcp_adapter.oauth")

KEY_ENV = "PI_MCP_STATE_KEY"
_TABLE = "oauth"


def fernet_for(secret: str) -> Fernet:
    """A Fernet key from any secret string (its SHA-256): operators set a passphrase or
    ``Fernet.generate_key()``'s output alike."""
    return Fernet(base64.urlsafe_b64encode(hashlib.sha256(secret.encode()).digest()))


class SharedTokenStore:
    """A local :class:`TokenStore` whose records are also kept, encrypted, in Redis."""

    def __init__(self, local: TokenStore, shared: SharedState, secret: str) -> None:
        self._local = local
        self._shared = shared
        self._fernet = fernet_for(secret)
        self.kind: Literal["file", "keyring"] = local.kind

    def load(self, server: str, *, fresh: bool = False) -> AuthRecord:
        answered, value = self._shared.record(_TABLE, server)
        if answered and isinstance(value, str):
            record = self._decrypt(server, value)
            if record is not None:
                return record
        return self._local.load(server, fresh=fresh)

    def save(self, server: str, record: AuthRecord) -> None:
        self._local.save(server, record)
        self._shared.put(_TABLE, server, self._encrypt(record))

    def delete(self, server: str) -> bool:
        self._shared.delete(_TABLE, server)
        return self._local.delete(server)

    def lock_path(self, server: str) -> Path:
        return self._local.lock_path(server)

    def refresh_lock(self, server: str, *, timeout_s: float) -> SharedLock:
        """Held by one replica at a time while it refreshes ``server``'s tokens: the others
        wait, then load the refreshed tokens from Redis instead of refreshing again."""
        return self._shared.lock(f"oauth-refresh:{server}", timeout_s=timeout_s)

    def location(self, server: str) -> str:
        return f"{self._local.location(server)} and {self._shared.status().url} (encrypted)"

    # ------------------------------------------------------------------ encoding

    def _encrypt(self, record: AuthRecord) -> str:
        body: dict[str, Any] = {"serverUrl": record.server_url}
        if record.tokens is not None:
            tokens = record.tokens.model_dump(mode="json", exclude_none=True)
            if record.expires_at is not None:
                tokens["expiresAt"] = int(record.expires_at * 1000)
            body["tokens"] = tokens
        if record.obtained_at is not None:
            body["obtainedAt"] = int(record.obtained_at * 1000)
        if record.client_info is not None:
            body["client"] = record.client_info.model_dump(mode="json", exclude_none=True)
        return self._fernet.encrypt(json.dumps(body).encode()).decode("ascii")

    def _decrypt(self, server: str, value: str) -> AuthRecord | None:
        try:
            body = json.loads(self._fernet.decrypt(value.encode("ascii")))
        except (InvalidToken, ValueError):
            logger.warning(
                "the shared OAuth record of %r cannot be decrypted with %s; using the local one",
                server,
                KEY_ENV,
            )
            return None
        tokens, expires_at = (
            _token_from(body["tokens"], time.time())
            if isinstance(body.get("tokens"), dict)
            else (None, None)
        )
        obtained = body.get("obtainedAt")
        url = body.get("serverUrl")
        return AuthRecord(
            server_url=url if isinstance(url, str) else None,
            tokens=tokens,
            expires_at=expires_at,
            obtained_at=obtained / 1000 if isinstance(obtained, int | float) else None,
            client_info=_client_from(body.get("client")),
        )
