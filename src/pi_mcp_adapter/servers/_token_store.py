"""Where OAuth tokens and client registrations live: files (default) or the OS keyring.

Files, compatible with the reference adapter: ``<agent dir>/mcp-oauth/<server>/tokens.json``
(``{access_token, token_type, refresh_token?, expires_in?, expiresAt? (ms), scope?}``, plus our
``serverUrl`` and ``obtainedAt``) and ``client.json`` beside it (the dynamic registration, also
with ``serverUrl``). Directories are created 0700 and files written 0600, atomically (a
temporary file in the same directory, then ``os.replace``), so a reader never sees half a file.

Keyring (``settings.oauthStore: "keyring"``, extra ``pi-mcp-adapter[keyring]``): one compact JSON
entry per server under service ``pi-mcp-adapter.oauth`` and account ``sha256-<hex of the server
name>``, split into numbered parts when longer than some keyrings accept. Each entry is read once
per process (some keyrings ask the user on every read) unless a caller asks for a fresh read.

Records are bound to the server URL they were obtained for: :class:`ServerTokenStorage` drops a
record whose ``serverUrl`` differs from the configured one, so a token never travels to another
server. Records written by the reference's v1.1 carry no URL and are accepted as they are.

Static bearer tokens (``auth: "bearer"`` with ``bearerTokenStore: true``, set with ``pi-mcp
token set``) live in the same backend as OAuth tokens: ``bearer.json`` (``{token, serverUrl}``,
0600) beside ``tokens.json``, or in the keyring under the reference's service
``pi-mcp-adapter.bearer``, account ``sha256-<hex>``, with its chunk manifest for long records, so
both adapters read one stored token. A token is used only while the server's URL equals the
one it was stored for.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import ValidationError

from pi_mcp_adapter import _shared_state as shared_state
from pi_mcp_adapter._errors import UsageError
from pi_mcp_adapter._secrets import register_secret

from ._translate import redact_url

__all__ = [
    "AuthRecord",
    "BearerRecord",
    "BearerStore",
    "FileTokenStore",
    "KeyringTokenStore",
    "ServerTokenStorage",
    "TokenStore",
    "bound_url",
    "create_bearer_store",
    "create_token_store",
    "oauth_dir",
]

logger = logging.getLogger("pi_mcp_adapter.oauth")

KEYRING_SERVICE = "pi-mcp-adapter.oauth"
KEYRING_PART_CHARS = 1000
"""Windows Credential Manager rejects long secrets; longer entries are split into parts."""
KEYRING_MAX_SINGLE_CHARS = 1280

DIR_MODE = 0o700
FILE_MODE = 0o600
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$")


def oauth_dir(agent_dir: Path) -> Path:
    return agent_dir / "mcp-oauth"


def bound_url(url: str) -> str:
    """The form of a server URL that tokens are bound to: no userinfo, query or fragment."""
    return redact_url(url).rstrip("/")


def _account(server: str) -> str:
    return "sha256-" + hashlib.sha256(server.encode()).hexdigest()


def server_dir_name(server: str) -> str:
    """The directory of ``server`` under ``mcp-oauth``: the name itself when it is a plain file
    name (as the reference writes it), else a hash, so no name can escape the directory."""
    return server if _SAFE_NAME.match(server) else _account(server)


@dataclass(frozen=True, slots=True)
class AuthRecord:
    """What is stored for one server. Times are seconds since the epoch."""

    server_url: str | None = None
    tokens: OAuthToken | None = None
    expires_at: float | None = None
    obtained_at: float | None = None
    client_info: OAuthClientInformationFull | None = None

    @property
    def is_empty(self) -> bool:
        return self.tokens is None and self.client_info is None


class TokenStore(Protocol):
    """A backend holding one :class:`AuthRecord` per server name."""

    kind: Literal["file", "keyring"]

    def load(self, server: str, *, fresh: bool = False) -> AuthRecord: ...

    def save(self, server: str, record: AuthRecord) -> None: ...

    def delete(self, server: str) -> bool:
        """Remove everything stored for ``server``; whether anything was there."""
        ...

    def lock_path(self, server: str) -> Path:
        """A file whose lock serialises refreshes of ``server`` across processes."""
        ...

    def location(self, server: str) -> str:
        """Where ``server``'s record lives, for messages (never the content)."""
        ...


def _ensure_private_dir(path: Path) -> None:
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    # mkdir's mode is reduced by the umask and ignored for existing directories.
    if path.stat().st_mode & 0o777 != DIR_MODE:
        path.chmod(DIR_MODE)


def _write_private(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as JSON to ``path`` atomically, readable by the owner only."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            json.dump(data, handle, separators=(",", ":"))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        logger.warning("%s is unreadable (%s); it is ignored", path, type(exc).__name__)
        return None
    return data if isinstance(data, dict) else None


def _token_from(data: dict[str, Any], now: float) -> tuple[OAuthToken | None, float | None]:
    """Tokens and absolute expiry from the file format (reference v1.1 keys)."""
    expires_at_ms = data.get("expiresAt")
    expires_at = expires_at_ms / 1000 if isinstance(expires_at_ms, int | float) else None
    fields = {
        key: data[key]
        for key in ("access_token", "token_type", "refresh_token", "scope")
        if data.get(key) is not None
    }
    if expires_at is not None:
        fields["expires_in"] = max(0, int(expires_at - now))
    elif isinstance(data.get("expires_in"), int):
        fields["expires_in"] = data["expires_in"]
    try:
        token = OAuthToken.model_validate(fields)
    except ValidationError:
        return None, None
    return token, expires_at


def _client_from(data: dict[str, Any] | None) -> OAuthClientInformationFull | None:
    if data is None:
        return None
    body = {k: v for k, v in data.items() if k != "serverUrl"}
    try:
        return OAuthClientInformationFull.model_validate(body)
    except ValidationError:
        return None


class FileTokenStore:
    """``<agent dir>/mcp-oauth/<server>/tokens.json`` and ``client.json``."""

    kind: Literal["file", "keyring"] = "file"

    def __init__(self, agent_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        self.root = oauth_dir(agent_dir)
        self._clock = clock

    def server_dir(self, server: str) -> Path:
        return self.root / server_dir_name(server)

    def tokens_path(self, server: str) -> Path:
        return self.server_dir(server) / "tokens.json"

    def client_path(self, server: str) -> Path:
        return self.server_dir(server) / "client.json"

    def load(self, server: str, *, fresh: bool = False) -> AuthRecord:
        tokens_data = _read_json(self.tokens_path(server))
        client_data = _read_json(self.client_path(server))
        token, expires_at, obtained_at = None, None, None
        url: str | None = None
        if tokens_data is not None:
            token, expires_at = _token_from(tokens_data, self._clock())
            obtained = tokens_data.get("obtainedAt")
            obtained_at = obtained / 1000 if isinstance(obtained, int | float) else None
            url = tokens_data.get("serverUrl") if token is not None else None
        client = _client_from(client_data)
        if url is None and client is not None and client_data is not None:
            url = client_data.get("serverUrl")
        return AuthRecord(
            server_url=url if isinstance(url, str) else None,
            tokens=token,
            expires_at=expires_at,
            obtained_at=obtained_at,
            client_info=client,
        )

    def save(self, server: str, record: AuthRecord) -> None:
        _ensure_private_dir(self.root)
        directory = self.server_dir(server)
        _ensure_private_dir(directory)
        if record.tokens is not None:
            data: dict[str, Any] = record.tokens.model_dump(mode="json", exclude_none=True)
            if record.expires_at is not None:
                data["expiresAt"] = int(record.expires_at * 1000)
            if record.obtained_at is not None:
                data["obtainedAt"] = int(record.obtained_at * 1000)
            if record.server_url is not None:
                data["serverUrl"] = record.server_url
            _write_private(self.tokens_path(server), data)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.tokens_path(server).unlink()
        if record.client_info is not None:
            client = record.client_info.model_dump(mode="json", exclude_none=True)
            if record.server_url is not None:
                client["serverUrl"] = record.server_url
            _write_private(self.client_path(server), client)
        else:
            with contextlib.suppress(FileNotFoundError):
                self.client_path(server).unlink()

    def delete(self, server: str) -> bool:
        removed = False
        for path in (self.tokens_path(server), self.client_path(server)):
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed = True
        return removed

    def lock_path(self, server: str) -> Path:
        _ensure_private_dir(self.root)
        directory = self.server_dir(server)
        _ensure_private_dir(directory)
        return directory / "refresh.lock"

    def location(self, server: str) -> str:
        return str(self.tokens_path(server))


class KeyringTokenStore:
    """One JSON entry per server in the OS keyring (see the module docstring)."""

    kind: Literal["file", "keyring"] = "keyring"

    def __init__(self, agent_dir: Path, *, clock: Callable[[], float] = time.time) -> None:
        try:
            import keyring
        except ModuleNotFoundError as exc:
            raise UsageError(
                'settings.oauthStore is "keyring", but the keyring package is not installed: '
                "pip install 'pi-mcp-adapter[keyring]'"
            ) from exc
        self._keyring = keyring
        self._root = oauth_dir(agent_dir)
        self._clock = clock
        self._cache: dict[str, AuthRecord] = {}
        self._lock = threading.Lock()

    def _get(self, account: str) -> str | None:
        value: str | None = self._keyring.get_password(KEYRING_SERVICE, account)
        return value

    def _read_raw(self, server: str) -> str | None:
        account = _account(server)
        head = self._get(account)
        if head is None or not head.startswith("parts:"):
            return head
        try:
            count = int(head.removeprefix("parts:"))
        except ValueError:
            return None
        parts = [self._get(f"{account}.{index}") for index in range(count)]
        if any(part is None for part in parts):
            return None
        return "".join(part for part in parts if part is not None)

    def load(self, server: str, *, fresh: bool = False) -> AuthRecord:
        with self._lock:
            if not fresh and server in self._cache:
                return self._cache[server]
        try:
            raw = self._read_raw(server)
        except Exception as exc:  # keyring backends raise their own errors
            logger.warning("the OS keyring could not be read (%s)", type(exc).__name__)
            raw = None
        record = self._decode(raw)
        with self._lock:
            self._cache[server] = record
        return record

    def _decode(self, raw: str | None) -> AuthRecord:
        if not raw:
            return AuthRecord()
        try:
            data = json.loads(raw)
        except ValueError:
            return AuthRecord()
        if not isinstance(data, dict):
            return AuthRecord()
        tokens = data.get("tokens")
        token: OAuthToken | None = None
        expires_at: float | None = None
        obtained_at: float | None = None
        if isinstance(tokens, dict):
            expires = tokens.get("expiresAt")
            expires_at = float(expires) if isinstance(expires, int | float) else None
            obtained = tokens.get("obtainedAt")
            obtained_at = float(obtained) if isinstance(obtained, int | float) else None
            fields: dict[str, Any] = {"access_token": tokens.get("accessToken")}
            for ours, theirs in (("refresh_token", "refreshToken"), ("scope", "scope")):
                if tokens.get(theirs) is not None:
                    fields[ours] = tokens[theirs]
            if expires_at is not None:
                fields["expires_in"] = max(0, int(expires_at - self._clock()))
            with contextlib.suppress(ValidationError):
                token = OAuthToken.model_validate(fields)
        client_data = data.get("clientInfo")
        url = data.get("serverUrl")
        return AuthRecord(
            server_url=url if isinstance(url, str) else None,
            tokens=token,
            expires_at=expires_at if token is not None else None,
            obtained_at=obtained_at if token is not None else None,
            client_info=_client_from(client_data if isinstance(client_data, dict) else None),
        )

    def save(self, server: str, record: AuthRecord) -> None:
        data: dict[str, Any] = {}
        if record.tokens is not None:
            tokens: dict[str, Any] = {"accessToken": record.tokens.access_token}
            if record.tokens.refresh_token:
                tokens["refreshToken"] = record.tokens.refresh_token
            if record.expires_at is not None:
                tokens["expiresAt"] = int(record.expires_at)
            if record.obtained_at is not None:
                tokens["obtainedAt"] = int(record.obtained_at)
            if record.tokens.scope:
                tokens["scope"] = record.tokens.scope
            data["tokens"] = tokens
        if record.client_info is not None:
            data["clientInfo"] = record.client_info.model_dump(mode="json", exclude_none=True)
        if record.server_url is not None:
            data["serverUrl"] = record.server_url
        raw = json.dumps(data, separators=(",", ":"))
        self._delete_raw(server)
        account = _account(server)
        if len(raw) <= KEYRING_MAX_SINGLE_CHARS:
            self._keyring.set_password(KEYRING_SERVICE, account, raw)
        else:
            parts = [
                raw[i : i + KEYRING_PART_CHARS] for i in range(0, len(raw), KEYRING_PART_CHARS)
            ]
            for index, part in enumerate(parts):
                self._keyring.set_password(KEYRING_SERVICE, f"{account}.{index}", part)
            self._keyring.set_password(KEYRING_SERVICE, account, f"parts:{len(parts)}")
        with self._lock:
            self._cache[server] = record

    def _delete_raw(self, server: str) -> bool:
        account = _account(server)
        try:
            head = self._get(account)
        except Exception:
            return False
        if head is None:
            return False
        accounts = [account]
        if head.startswith("parts:"):
            with contextlib.suppress(ValueError):
                accounts += [f"{account}.{i}" for i in range(int(head.removeprefix("parts:")))]
        for name in accounts:
            with contextlib.suppress(Exception):
                self._keyring.delete_password(KEYRING_SERVICE, name)
        return True

    def delete(self, server: str) -> bool:
        removed = self._delete_raw(server)
        with self._lock:
            self._cache.pop(server, None)
        return removed

    def lock_path(self, server: str) -> Path:
        _ensure_private_dir(self._root)
        directory = self._root / server_dir_name(server)
        _ensure_private_dir(directory)
        return directory / "refresh.lock"

    def location(self, server: str) -> str:
        return f"the OS keyring (service {KEYRING_SERVICE}, account {_account(server)})"


def create_token_store(
    kind: Literal["file", "keyring"], agent_dir: Path, *, clock: Callable[[], float] = time.time
) -> TokenStore:
    """The backend ``settings.oauthStore`` names; with shared state and ``PI_MCP_STATE_KEY``,
    its records are also kept, encrypted, in Redis for every replica.

    Raises:
        UsageError: ``keyring`` was asked for and the extra is not installed.
    """
    local: TokenStore = (
        KeyringTokenStore(agent_dir, clock=clock)
        if kind == "keyring"
        else FileTokenStore(agent_dir, clock=clock)
    )
    shared = shared_state.active()
    secret = os.environ.get("PI_MCP_STATE_KEY")
    if shared is None or not secret:
        return local
    from ._shared_tokens import SharedTokenStore

    register_secret(secret)
    return SharedTokenStore(local, shared, secret)


class ServerTokenStorage:
    """The SDK's ``TokenStorage`` for one server, bound to its URL.

    A stored record for another URL is dropped on first use (the server's ``url`` changed), so
    its tokens are never sent anywhere else. ``expires_at`` and ``obtained_at`` track the
    current tokens for the provider's refresh timing, which the SDK does not persist.
    """

    def __init__(
        self,
        server: str,
        url: str,
        store: TokenStore,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.server = server
        self.url = bound_url(url)
        self.store = store
        self._clock = clock
        self._record: AuthRecord | None = None

    def record(self, *, fresh: bool = False) -> AuthRecord:
        """The stored record for this URL (empty when there is none or it was for another)."""
        if self._record is not None and not fresh:
            return self._record
        record = self.store.load(self.server, fresh=fresh)
        if record.server_url is not None and record.server_url != self.url:
            logger.info(
                "server %r: its url changed; the OAuth credentials stored for the old url "
                "are dropped",
                self.server,
            )
            self.store.delete(self.server)
            record = AuthRecord()
        self._record = _registered(record)
        return record

    @property
    def expires_at(self) -> float | None:
        return self.record().expires_at

    @property
    def obtained_at(self) -> float | None:
        return self.record().obtained_at

    async def get_tokens(self) -> OAuthToken | None:
        return self.record().tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        now = self._clock()
        expires_at = now + int(tokens.expires_in) if tokens.expires_in is not None else None
        record = replace(
            self.record(),
            server_url=self.url,
            tokens=tokens,
            expires_at=expires_at,
            obtained_at=now,
        )
        _registered(record)
        self.store.save(self.server, record)
        self._record = record

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.record().client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        record = replace(self.record(), server_url=self.url, client_info=client_info)
        _registered(record)
        self.store.save(self.server, record)
        self._record = record

    def forget_tokens(self) -> None:
        record = replace(self.record(), tokens=None, expires_at=None, obtained_at=None)
        self.store.save(self.server, record)
        self._record = record

    def forget_client_info(self) -> None:
        record = replace(self.record(), client_info=None)
        self.store.save(self.server, record)
        self._record = record

    def forget(self) -> bool:
        self._record = AuthRecord()
        return self.store.delete(self.server)


def _registered(record: AuthRecord) -> AuthRecord:
    """``record``, its tokens and client secret registered as secrets for every output."""
    if record.tokens is not None:
        register_secret(record.tokens.access_token)
        register_secret(record.tokens.refresh_token)
    if record.client_info is not None:
        register_secret(record.client_info.client_secret)
    return record


BEARER_KEYRING_SERVICE = "pi-mcp-adapter.bearer"
_BEARER_CHUNK_CHARS = 1000
_BEARER_MANIFEST_KEY = "__piMcpAdapterBearerChunked"


@dataclass(frozen=True, slots=True)
class BearerRecord:
    """A stored bearer token and the exact server URL it was stored for."""

    token: str = field(repr=False)
    server_url: str


class BearerStore:
    """Static bearer tokens, one per server, in the backend ``settings.oauthStore`` names.

    Every token read or written is registered as a secret, so no output shows it.
    """

    def __init__(self, kind: Literal["file", "keyring"], agent_dir: Path) -> None:
        self.kind = kind
        self._root = oauth_dir(agent_dir)
        self._keyring: Any = None
        if kind == "keyring":
            try:
                import keyring
            except ModuleNotFoundError as exc:
                raise UsageError(
                    'settings.oauthStore is "keyring", but the keyring package is not '
                    "installed: pip install 'pi-mcp-adapter[keyring]'"
                ) from exc
            self._keyring = keyring

    def _path(self, server: str) -> Path:
        return self._root / server_dir_name(server) / "bearer.json"

    def location(self, server: str) -> str:
        """Where ``server``'s token lives, for messages (never the token)."""
        if self.kind == "keyring":
            return f"the OS keyring (service {BEARER_KEYRING_SERVICE}, account {_account(server)})"
        return str(self._path(server))

    def load(self, server: str) -> BearerRecord | None:
        """The stored record, or None when there is none (or it cannot be read).

        Raises:
            OSError: the keyring backend failed (locked, no backend).
        """
        raw = self._read_keyring(server) if self.kind == "keyring" else self._read_file(server)
        if raw is None:
            return None
        token, url = raw.get("token"), raw.get("serverUrl")
        if not isinstance(token, str) or not token or not isinstance(url, str):
            return None
        register_secret(token)
        return BearerRecord(token, url)

    def save(self, server: str, record: BearerRecord) -> None:
        """Store ``record``, replacing what was there.

        Raises:
            OSError: the file or the keyring could not be written.
        """
        register_secret(record.token)
        data = {"token": record.token, "serverUrl": record.server_url}
        if self.kind == "keyring":
            self._write_keyring(server, json.dumps(data, separators=(",", ":")))
            return
        _ensure_private_dir(self._root)
        _ensure_private_dir(self._path(server).parent)
        _write_private(self._path(server), data)

    def delete(self, server: str) -> bool:
        """Forget ``server``'s token; whether one was stored.

        Raises:
            OSError: the keyring backend failed.
        """
        if self.kind == "keyring":
            return self._delete_keyring(server)
        try:
            self._path(server).unlink()
        except FileNotFoundError:
            return False
        return True

    def _read_file(self, server: str) -> dict[str, Any] | None:
        return _read_json(self._path(server))

    def _keyring_call(self, method: str, *args: str) -> Any:
        try:
            return getattr(self._keyring, method)(BEARER_KEYRING_SERVICE, *args)
        except Exception as exc:  # keyring backends raise their own errors
            if method == "delete_password" and type(exc).__name__ == "PasswordDeleteError":
                return None
            raise OSError(
                f"the OS keyring is unavailable ({type(exc).__name__}); unlock or configure "
                'it, or set settings.oauthStore to "file"'
            ) from exc

    def _manifest(self, head: str | None) -> tuple[int, str] | None:
        if head is None:
            return None
        try:
            data = json.loads(head)
        except ValueError:
            return None
        if not isinstance(data, dict) or data.get(_BEARER_MANIFEST_KEY) != 1:
            return None
        count, digest = data.get("chunkCount"), data.get("chunkDigest")
        if isinstance(count, int) and count > 0 and isinstance(digest, str):
            return count, digest
        return None

    def _read_keyring(self, server: str) -> dict[str, Any] | None:
        account = _account(server)
        head = self._keyring_call("get_password", account)
        manifest = self._manifest(head)
        if manifest is not None:
            count, digest = manifest
            parts = [
                self._keyring_call("get_password", f"{account}.chunk.{digest}.{index}")
                for index in range(count)
            ]
            if any(part is None for part in parts):
                return None
            head = "".join(parts)
        if head is None:
            return None
        try:
            data = json.loads(head)
        except ValueError:
            return None
        return data if isinstance(data, dict) else None

    def _write_keyring(self, server: str, payload: str) -> None:
        account = _account(server)
        self._delete_keyring(server)
        if len(payload) <= _BEARER_CHUNK_CHARS:
            self._keyring_call("set_password", account, payload)
            return
        digest = hashlib.sha256(payload.encode()).hexdigest()[:16]
        chunks = [
            payload[i : i + _BEARER_CHUNK_CHARS]
            for i in range(0, len(payload), _BEARER_CHUNK_CHARS)
        ]
        for index, chunk in enumerate(chunks):
            self._keyring_call("set_password", f"{account}.chunk.{digest}.{index}", chunk)
        manifest = {_BEARER_MANIFEST_KEY: 1, "chunkCount": len(chunks), "chunkDigest": digest}
        self._keyring_call("set_password", account, json.dumps(manifest))

    def _delete_keyring(self, server: str) -> bool:
        account = _account(server)
        head = self._keyring_call("get_password", account)
        if head is None:
            return False
        manifest = self._manifest(head)
        if manifest is not None:
            count, digest = manifest
            for index in range(count):
                self._keyring_call("delete_password", f"{account}.chunk.{digest}.{index}")
        self._keyring_call("delete_password", account)
        return True


def create_bearer_store(kind: Literal["file", "keyring"], agent_dir: Path) -> BearerStore:
    """The bearer store in the backend ``settings.oauthStore`` names.

    Raises:
        UsageError: ``keyring`` was asked for and the extra is not installed.
    """
    return BearerStore(kind, agent_dir)
