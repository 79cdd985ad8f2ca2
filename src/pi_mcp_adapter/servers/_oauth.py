"""OAuth 2.1 for remote servers, on the SDK's client (``mcp.client.auth``).

The protocol (discovery, dynamic registration or client ID metadata documents, PKCE, the
``resource`` parameter, refresh, 403 step-up, ``client_credentials``) is the SDK's. This module
adds what a long-lived, multi-process client needs around it:

- one provider per server for the process lifetime (:class:`OAuthProviders.auth_for`, the
  manager's ``auth_factory``), with tokens in a :class:`TokenStore` bound to the server URL;
- the token's absolute expiry, which the SDK does not persist: a new process refreshes an
  expired token instead of starting a browser flow, and refreshes a little before expiry;
- one refresh in flight per server across processes (a file lock beside the tokens), so two
  processes holding the same rotating refresh token do not burn it;
- the person's part (``_oauth_prompt``): a loopback callback server, the browser through
  :mod:`webbrowser` (so ``BROWSER`` decides), and a pasted redirect URL or code on stdin when
  no browser opens;
- the policy of when a person may be asked at all (:func:`allow_prompts`): never at startup or
  in the background, so a server without a token reports ``needs-auth`` at once instead of
  hanging.

Secrets (tokens, codes, verifiers, client secrets) are never logged or put in messages.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
import warnings
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import anyio
import anyio.abc
import filelock
import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.client.auth.utils import extract_field_from_www_auth, extract_scope_from_www_auth
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

from pi_mcp_adapter._errors import NeedsAuthError, ServerStartError, UsageError
from pi_mcp_adapter._secrets import MASK, register_secret
from pi_mcp_adapter.config import ServerEntry, Settings, is_pem_text

if TYPE_CHECKING:
    from pi_mcp_adapter._shared_state import SharedLock

from ._oauth_prompt import (
    CALLBACK_PATH,
    DEFAULT_CALLBACK_PORT,
    AuthorizationPrompt,
    CallbackPortBusy,
    loopback_socket,
    parse_pasted_redirect,
)
from ._prompt_policy import allow_prompts, prompts_allowed
from ._token_store import (
    AuthRecord,
    ServerTokenStorage,
    TokenStore,
    create_bearer_store,
    create_token_store,
)

__all__ = [
    "DEFAULT_CALLBACK_PORT",
    "AuthorizationPrompt",
    "OAuthProviders",
    "OAuthState",
    "allow_prompts",
    "parse_pasted_redirect",
]

logger = logging.getLogger("pi_mcp_adapter.oauth")

REFRESH_MARGIN_S = 30.0
"""Refresh this long before expiry (a third of the lifetime for short-lived tokens), so a
request does not leave with a token that expires on the way."""
REFRESH_LOCK_TIMEOUT_S = 60.0
"""Another process refreshing holds the lock for one token request; a minute means stuck."""


class _HideReportedFlowErrors(logging.Filter):
    """The SDK logs every aborted flow with a traceback; these errors reach the caller as our
    own (``NeedsAuthError`` with the next step), so the traceback would only be noise."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, NeedsAuthError | OAuthFlowError)


logging.getLogger("mcp.client.auth.oauth2").addFilter(_HideReportedFlowErrors())


def needs_auth_error(server: str, reason: str = "") -> NeedsAuthError:
    detail = f" ({reason})" if reason else ""
    return NeedsAuthError(
        server,
        f"server {server!r} needs authorization{detail}: run `pi-mcp auth {server}`",
    )


# -- providers ------------------------------------------------------------------------------


def _union_scopes(*scopes: str | None) -> str | None:
    seen: dict[str, None] = {}
    for scope in scopes:
        for item in (scope or "").split():
            seen[item] = None
    return " ".join(seen) or None


def _configured_issuer(entry: ServerEntry) -> str | None:
    """The issuer ``authServerMetadataUrl`` pins for ``client_credentials``, if set."""
    url = entry.oauth_config.auth_server_metadata_url
    return _issuer_of(url) if url else None


def _issuer_of(metadata_url: str) -> str:
    """The issuer a configured ``authServerMetadataUrl`` names (either form is accepted)."""
    parts = urlsplit(metadata_url)
    path = parts.path
    for marker in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        if path.startswith(marker):
            path = path.removeprefix(marker)
            break
        if path.endswith(marker):
            path = path.removesuffix(marker)
            break
    return urlunsplit((parts.scheme, parts.netloc, path.rstrip("/"), "", ""))


def _callback_port(environ: Mapping[str, str]) -> int:
    value = environ.get("MCP_OAUTH_CALLBACK_PORT", "")
    if value.isdigit() and 0 < int(value) < 65536:
        return int(value)
    return DEFAULT_CALLBACK_PORT


def _port_is_free(port: int) -> bool:
    try:
        sock = loopback_socket("127.0.0.1", port)
    except OSError:
        return False
    sock.close()
    return True


def _free_port() -> int:
    sock = loopback_socket("127.0.0.1", 0)
    port: int = sock.getsockname()[1]
    sock.close()
    return port


def choose_redirect_uri(
    entry: ServerEntry,
    environ: Mapping[str, str],
    registered: OAuthClientInformationFull | None = None,
) -> str:
    """The loopback redirect URI for ``entry``.

    ``oauth.redirectUri`` when set; else the one the stored dynamic registration was made with
    (the authorization server accepts no other); else the callback port
    (``MCP_OAUTH_CALLBACK_PORT`` or 19876) when it is free, else any free port.
    """
    configured = entry.oauth_config.redirect_uri
    if configured:
        return configured
    if registered is not None and not entry.oauth_config.client_id:
        for uri in registered.redirect_uris or []:
            parts = urlsplit(str(uri))
            if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
                return str(uri)
    port = _callback_port(environ)
    if not _port_is_free(port):
        port = _free_port()
    return f"http://127.0.0.1:{port}{CALLBACK_PATH}"


class _RefreshLock(Protocol):
    def release(self) -> None: ...


class _BothLocks:
    """This machine's refresh lock and the replicas' shared one, released together."""

    def __init__(self, local: filelock.FileLock, shared: SharedLock) -> None:
        self._local = local
        self._shared = shared

    def release(self) -> None:
        try:
            self._shared.release()
        finally:
            self._local.release()


class _StoredExpiryMixin:
    """What every provider of ours adds to the SDK's: persisted expiry, the cross-process
    refresh lock, the implicit-OAuth rule, a step-up limit and configured scopes."""

    context: Any
    _initialized: bool

    def _count_token_request(self) -> None:
        """A ``client_credentials`` token request is about to go out: discovery replaced the
        scope with the server's challenge, so the configured one is asked for too."""
        self.context.client_metadata.scope = _union_scopes(
            self._entry.oauth_config.scope, self.context.client_metadata.scope
        )
        self.authorization_count += 1

    def _setup(self, server: str, storage: ServerTokenStorage, entry: ServerEntry) -> None:
        self._server = server
        self._storage = storage
        self._entry = entry
        self._stepped_up: set[frozenset[str]] = set()
        self._clock: Callable[[], float] = time.time
        self.denial: NeedsAuthError | OAuthFlowError | None = None
        self._pending_step_up: frozenset[str] | None = None
        self.refresh_count = 0
        self.authorization_count = 0

    def _refresh_at(self, record: AuthRecord) -> float | None:
        if record.expires_at is None:
            return None
        lifetime = (
            record.expires_at - record.obtained_at
            if record.obtained_at is not None
            else REFRESH_MARGIN_S * 3
        )
        return record.expires_at - min(REFRESH_MARGIN_S, max(0.0, lifetime) / 3)

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        # The SDK loads tokens but not their expiry: an expired token would be sent, answered
        # 401 and replaced by a whole new authorization instead of a refresh.
        self.context.token_expiry_time = self._refresh_at(self._storage.record())

    def _refresh_due(self) -> bool:
        record = self._storage.record()
        if record.tokens is None or not record.tokens.refresh_token:
            return False
        refresh_at = self._refresh_at(record)
        return refresh_at is not None and self._clock() >= refresh_at

    async def _acquire_refresh_lock(self) -> _RefreshLock:
        lock = filelock.FileLock(
            self._storage.store.lock_path(self._server),
            timeout=REFRESH_LOCK_TIMEOUT_S,
            thread_local=False,
        )
        await anyio.to_thread.run_sync(lock.acquire)
        from ._shared_tokens import SharedTokenStore

        store = self._storage.store
        if not isinstance(store, SharedTokenStore):
            return lock
        # Replicas sharing their tokens refresh once between them, not once each.
        shared = store.refresh_lock(self._server, timeout_s=REFRESH_LOCK_TIMEOUT_S)
        await anyio.to_thread.run_sync(shared.acquire)
        return _BothLocks(lock, shared)

    async def _auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        lock: _RefreshLock | None = None
        self._adopt_tokens_stored_elsewhere()
        if self._refresh_due():
            lock = await self._acquire_refresh_lock()
            # Another process may have refreshed while this one waited: start from its tokens.
            self._storage.record(fresh=True)
            self._initialized = False
            if self._refresh_due():
                self.refresh_count += 1
        inner = super()._auth_flow(request)  # type: ignore[misc]
        failure: NeedsAuthError | OAuthFlowError | None = None
        self._pending_step_up = None
        try:
            outgoing: httpx2.Request = await inner.__anext__()
            while True:
                if outgoing is request and lock is not None:
                    lock.release()
                    lock = None
                response = yield outgoing
                if outgoing is request:
                    self._check_response(response)
                elif self._entry.oauth_config.skip_issuer_metadata_validation:
                    response = await self._with_expected_issuer(outgoing, response)
                outgoing = await inner.asend(response)
        except StopAsyncIteration:
            granted = self._take_pending_step_up()
            if granted is not None:
                self._stepped_up.add(granted)
            return
        except _StopFlow:
            return
        except (NeedsAuthError, OAuthFlowError) as exc:
            if isinstance(exc, OAuthFlowError):
                self._forget_rejected_client(exc)
            if _is_initialize(request):
                raise  # the connect fails and reports it (see ``connect_error``)
            failure = exc
            wanted = self._take_pending_step_up()
            if isinstance(exc, NeedsAuthError) and wanted is not None:
                scope = " ".join(sorted(wanted))
                failure = NeedsAuthError(
                    self._server,
                    f"server {self._server!r} needs the larger scope {scope!r} for this request "
                    "and nobody can approve it now: add it to `oauth.scope` and run "
                    f"`pi-mcp auth {self._server}`, or set `settings.autoAuth`",
                )
        finally:
            await inner.aclose()
            if lock is not None:
                lock.release()
        # An exception here would end the whole connection (the SDK runs each request in the
        # transport's task group): note why, and let the server refuse this one request.
        self.denial = failure
        yield request

    def take_denial(self) -> NeedsAuthError | OAuthFlowError | None:
        """Why the last request was sent without the authorization it needed (once)."""
        denial, self.denial = self.denial, None
        return denial

    async def _with_expected_issuer(
        self, request: httpx2.Request, response: httpx2.Response
    ) -> httpx2.Response:
        """Authorization-server metadata with its ``issuer`` replaced by the one the SDK
        expects, for servers configured with ``skipIssuerMetadataValidation``."""
        path = request.url.path
        if response.status_code != 200 or not (
            "/.well-known/oauth-authorization-server" in path
            or "/.well-known/openid-configuration" in path
        ):
            return response
        body = await response.aread()
        try:
            metadata = json.loads(body)
        except ValueError:
            return response
        if not isinstance(metadata, dict):
            return response
        expected = self._expected_issuer()  # type: ignore[attr-defined]
        if metadata.get("issuer") != expected:
            logger.info(
                "server %r: authorization server metadata names issuer %r, not %r; accepted "
                "because skipIssuerMetadataValidation is set",
                self._server,
                metadata.get("issuer"),
                expected,
            )
            metadata["issuer"] = expected
        return httpx2.Response(
            response.status_code,
            headers={"content-type": "application/json"},
            content=json.dumps(metadata).encode(),
            request=request,
        )

    def _take_pending_step_up(self) -> frozenset[str] | None:
        pending, self._pending_step_up = self._pending_step_up, None
        return pending

    def _adopt_tokens_stored_elsewhere(self) -> None:
        """Without usable tokens, look at the store again: a sign-in in another process
        (``pi-mcp auth``) then takes effect in a running gateway with its next request. Only
        for files; the keyring is read once per process."""
        if not self._initialized or self._storage.store.kind != "file":
            return
        if self.context.is_token_valid() or self.context.can_refresh_token():
            return
        known = self._storage.record()
        fresh = self._storage.record(fresh=True)
        if fresh.tokens is not None and (
            known.tokens is None or fresh.tokens.access_token != known.tokens.access_token
        ):
            self._initialized = False

    def _check_response(self, response: httpx2.Response) -> None:
        if (
            response.status_code == 401
            and self._entry.oauth_mode == "implicit"
            and "www-authenticate" not in response.headers
        ):
            # Not an OAuth challenge: leave the 401 to the caller (bearer tokens, headers).
            raise _StopFlow
        if (
            response.status_code == 403
            and extract_field_from_www_auth(response, "error") == "insufficient_scope"
        ):
            wanted = frozenset((extract_scope_from_www_auth(response) or "").split())
            if any(wanted <= granted for granted in self._stepped_up):
                # Authorized for exactly this once already: asking again would loop.
                self.denial = NeedsAuthError(
                    self._server,
                    f"server {self._server!r} still answers 403 insufficient_scope after "
                    f"authorizing scope {' '.join(sorted(wanted))!r}: the authorization server "
                    "did not grant it to this account",
                )
                raise _StopFlow
            self._pending_step_up = wanted

    def _forget_rejected_client(self, exc: Exception) -> None:
        if "invalid_client" in str(exc) and not self._entry.oauth_config.client_id:
            logger.info(
                "server %r: the authorization server rejected the stored client registration; "
                "it is dropped and the next authorization registers again",
                self._server,
            )
            self._storage.forget_client_info()
            self.context.client_info = None


def _is_initialize(request: httpx2.Request) -> bool:
    try:
        body = json.loads(request.content or b"{}")
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("method") == "initialize"


def take_auth_denial(auth: object) -> NeedsAuthError | None:
    """If ``auth`` is one of our providers and it let a request go out unauthorized, why (as
    the error to raise instead of the server's bare refusal)."""
    take = getattr(auth, "take_denial", None)
    if take is None:
        return None
    denial = take()
    if denial is None or isinstance(denial, NeedsAuthError):
        return denial
    server: str = getattr(auth, "_server", "?")
    return NeedsAuthError(
        server,
        f"server {server!r}: OAuth authorization failed: {str(denial)[:300]}; "
        f"run `pi-mcp auth {server}` to try again",
    )


class _StopFlow(Exception):
    """Internal: hand the current response back to the caller as it is."""


class _CodeFlowProvider(_StoredExpiryMixin, OAuthClientProvider):
    """Authorization code with PKCE (the SDK's), plus the behaviour of the mixin."""

    def __init__(
        self,
        server: str,
        entry: ServerEntry,
        storage: ServerTokenStorage,
        prompt: AuthorizationPrompt,
        redirect_uri: str,
    ) -> None:
        oauth = entry.oauth_config
        assert entry.url is not None
        metadata = OAuthClientMetadata(
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            token_endpoint_auth_method="client_secret_post" if oauth.client_secret else "none",
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            scope=oauth.scope,
            client_name=oauth.client_name or "pi-mcp-adapter",
            client_uri=oauth.client_uri,  # type: ignore[arg-type]
            logo_uri=oauth.logo_uri,  # type: ignore[arg-type]
        )
        self._prompt = prompt
        self._redirect_uri = redirect_uri
        self._pending_url: str | None = None
        super().__init__(
            entry.url,
            metadata,
            storage,
            redirect_handler=self._redirect,
            callback_handler=self._callback,
            client_metadata_url=oauth.client_metadata_url,
        )
        self._setup(server, storage, entry)

    async def _initialize(self) -> None:
        await super()._initialize()
        oauth = self._entry.oauth_config
        if oauth.client_id:
            self.context.client_info = OAuthClientInformationFull(
                client_id=oauth.client_id,
                client_secret=oauth.client_secret,
                redirect_uris=[self._redirect_uri],  # type: ignore[list-item]
                token_endpoint_auth_method="client_secret_basic" if oauth.client_secret else "none",
                grant_types=["authorization_code", "refresh_token"],
            )
        if oauth.auth_server_metadata_url and self.context.auth_server_url is None:
            self.context.auth_server_url = _issuer_of(oauth.auth_server_metadata_url)

    def _select_authorization_server(self, advertised: list[str]) -> str:
        configured = self._entry.oauth_config.auth_server_metadata_url
        if configured:
            issuer = _issuer_of(configured)
            for server in advertised:
                if server.rstrip("/") == issuer.rstrip("/"):
                    return server
        return advertised[0]

    def _fit_token_auth_method(self) -> None:
        """Use a method the authorization server supports for a configured client secret."""
        info = self.context.client_info
        metadata = self.context.oauth_metadata
        if info is None or metadata is None or not self._entry.oauth_config.client_secret:
            return
        supported = metadata.token_endpoint_auth_methods_supported or []
        if supported and info.token_endpoint_auth_method not in supported:
            for method in ("client_secret_basic", "client_secret_post"):
                if method in supported:
                    self.context.client_info = info.model_copy(
                        update={"token_endpoint_auth_method": method}
                    )
                    return

    async def _exchange_token_authorization_code(
        self, auth_code: str, code_verifier: str
    ) -> httpx2.Request:
        self._fit_token_auth_method()
        return await super()._exchange_token_authorization_code(auth_code, code_verifier)

    async def _refresh_token(self) -> httpx2.Request:
        self._fit_token_auth_method()
        return await super()._refresh_token()

    async def _redirect(self, authorization_url: str) -> None:
        if not prompts_allowed():
            raise needs_auth_error(self._server)
        self._pending_url = self._with_configured_params(authorization_url)

    def _with_configured_params(self, url: str) -> str:
        oauth = self._entry.oauth_config
        parts = urlsplit(url)
        params = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        scope = _union_scopes(oauth.scope, params.get("scope"))
        if scope:
            params["scope"] = scope
        for key, value in oauth.authorization_params.items():
            params.setdefault(key, value)
        return urlunsplit(parts._replace(query=urlencode(params)))

    async def _callback(self) -> AuthorizationCodeResult:
        url = self._pending_url
        if url is None:
            raise OAuthFlowError("the authorization URL was not prepared")
        self._pending_url = None
        self.authorization_count += 1
        try:
            return await self._prompt(self._server, url, self._redirect_uri)
        except CallbackPortBusy as exc:
            if not self._entry.oauth_config.client_id and not self._entry.oauth_config.redirect_uri:
                # The registration is tied to that port: register afresh (and pick a free
                # port) on the next try.
                self._storage.forget_client_info()
                raise OAuthFlowError(f"{exc}; the next `pi-mcp auth` uses another port") from exc
            raise


class _ClientCredentialsProvider(_StoredExpiryMixin, ClientCredentialsOAuthProvider):
    """``client_credentials`` (the SDK's extension): no person, no browser."""

    def __init__(self, server: str, entry: ServerEntry, storage: ServerTokenStorage) -> None:
        oauth = entry.oauth_config
        assert entry.url is not None
        assert oauth.client_id
        assert oauth.client_secret
        with warnings.catch_warnings():
            # Without a configured issuer the SDK warns that discovery picks the server; that
            # is the documented behaviour of a config without authServerMetadataUrl.
            warnings.simplefilter("ignore", DeprecationWarning)
            super().__init__(
                entry.url,
                storage,
                client_id=oauth.client_id,
                client_secret=oauth.client_secret,
                scope=oauth.scope,
                issuer=_configured_issuer(entry),
            )
        self._setup(server, storage, entry)

    async def _exchange_token_client_credentials(self) -> httpx2.Request:
        self._count_token_request()
        metadata = self.context.oauth_metadata
        supported = (metadata.token_endpoint_auth_methods_supported or []) if metadata else []
        info = self.context.client_info
        if (
            info is not None
            and info.token_endpoint_auth_method not in supported
            and "client_secret_post" in supported
        ):
            self.context.client_info = info.model_copy(
                update={"token_endpoint_auth_method": "client_secret_post"}
            )
        return await super()._exchange_token_client_credentials()


class _PrivateKeyJwtProvider(_StoredExpiryMixin, PrivateKeyJWTOAuthProvider):
    """``client_credentials`` authenticated by a signed assertion (``private_key_jwt``,
    RFC 7523) instead of a secret: the SDK's extension, signing with the configured key."""

    def __init__(self, server: str, entry: ServerEntry, storage: ServerTokenStorage) -> None:
        oauth = entry.oauth_config
        assert entry.url is not None
        assert oauth.client_id
        assert oauth.client_private_key
        pem = _private_key_pem(server, oauth.client_private_key)
        signer = SignedJWTParameters(
            issuer=oauth.client_id,
            subject=oauth.client_id,
            signing_key=pem,
            signing_algorithm=oauth.client_assertion_alg or _key_algorithm(server, pem),
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # as for client secrets
            super().__init__(
                entry.url,
                storage,
                client_id=oauth.client_id,
                assertion_provider=signer.create_assertion_provider(),
                scope=oauth.scope,
                issuer=_configured_issuer(entry),
            )
        self._setup(server, storage, entry)

    async def _exchange_token_client_credentials(self) -> httpx2.Request:
        self._count_token_request()
        return await super()._exchange_token_client_credentials()


def _private_key_pem(server: str, value: str) -> str:
    """The PEM text of ``oauth.clientPrivateKey``: the value itself, or the file it names."""
    if is_pem_text(value):
        return value
    path = Path(value)
    if not path.is_absolute():
        raise ServerStartError(
            server,
            f"server {server!r}: 'oauth.clientPrivateKey' must be PEM text or an "
            f"absolute path (or ~/...) of a PEM file, not {value!r}",
        )
    try:
        pem = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServerStartError(
            server, f"server {server!r}: cannot read the private key {value}: {exc}"
        ) from exc
    register_secret(pem.strip(), MASK)
    return pem


_CURVE_ALGORITHMS = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}


def _key_algorithm(server: str, pem: str) -> str:
    """The JWS algorithm a key signs with, when ``oauth.clientAssertionAlg`` does not say."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ServerStartError(
            server,
            f"server {server!r}: 'oauth.clientPrivateKey' is not an unencrypted PEM private key",
        ) from exc
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name in _CURVE_ALGORITHMS:
        return _CURVE_ALGORITHMS[key.curve.name]
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return "EdDSA"
    raise ServerStartError(
        server,
        f"server {server!r}: no signing algorithm is known for this private key; "
        "set 'oauth.clientAssertionAlg'",
    )


_TOKEN_EXCHANGE_GRANT = "urn:ietf:params:oauth:grant-type:token-exchange"
_ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
_ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"
IDP_TIMEOUT_S = 30.0


class _IdentityAssertionProvider(IdentityAssertionOAuthProvider):
    """``identity_assertion`` (SEP-990, Enterprise-Managed Authorization): no sign-in at the
    MCP server's authorization server; the person's ID token is exchanged at the enterprise
    identity provider for an identity assertion grant (ID-JAG, RFC 8693), which the SDK
    presents to the configured authorization server (RFC 7523 jwt-bearer) for the access
    token. The authorization server is configuration (``authServerMetadataUrl``), never what
    the MCP server names, so neither the grant nor the client secret can be redirected."""

    def __init__(self, server: str, entry: ServerEntry, storage: ServerTokenStorage) -> None:
        oauth = entry.oauth_config
        idp = oauth.idp
        assert entry.url is not None
        assert oauth.client_id
        assert oauth.client_secret
        assert oauth.auth_server_metadata_url
        assert idp is not None
        assert idp.token_endpoint
        assert idp.id_token
        self._server = server
        self._idp = idp
        self.authorization_count = 0
        super().__init__(
            entry.url,
            storage,
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            issuer=_issuer_of(oauth.auth_server_metadata_url),
            assertion_provider=self._exchange_id_token,
            scope=oauth.scope,
            # RFC 6749 §2.3.1: the method every authorization server must accept.
            token_endpoint_auth_method="client_secret_basic",
        )

    async def _exchange_id_token(self, audience: str, resource: str) -> str:
        """The ID-JAG for ``audience`` (the authorization server) and ``resource`` (the MCP
        server), from the identity provider's token endpoint."""
        from ._http_extras import resolve_one

        idp = self._idp
        assert idp.token_endpoint
        assert idp.id_token
        id_token = await resolve_one(self._server, idp.id_token, what="oauth.idp.idToken")
        data = {
            "grant_type": _TOKEN_EXCHANGE_GRANT,
            "subject_token": id_token,
            "subject_token_type": _ID_TOKEN_TYPE,
            "requested_token_type": _ID_JAG_TYPE,
            "audience": audience,
            "resource": resource,
        }
        auth: httpx2.Auth | None = None
        if idp.client_id and idp.client_secret:
            secret = await resolve_one(
                self._server, idp.client_secret, what="oauth.idp.clientSecret"
            )
            auth = httpx2.BasicAuth(idp.client_id, secret)
        elif idp.client_id:
            data["client_id"] = idp.client_id
        async with httpx2.AsyncClient(timeout=IDP_TIMEOUT_S) as http:
            response = await http.post(
                idp.token_endpoint, data=data, auth=auth or httpx2.USE_CLIENT_DEFAULT
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        grant = body.get("access_token") if isinstance(body, dict) else None
        if response.status_code != 200 or not isinstance(grant, str) or not grant:
            reason = body.get("error") if isinstance(body, dict) else None
            raise OAuthFlowError(
                f"server {self._server!r}: the identity provider at {idp.token_endpoint} "
                f"gave no identity assertion (HTTP {response.status_code}"
                + (f", {reason}" if isinstance(reason, str) else "")
                + "); check oauth.idp.idToken (it may have expired)"
            )
        register_secret(grant, MASK)
        self.authorization_count += 1
        return grant


# -- the per-process registry ---------------------------------------------------------------

_Provider = (
    _CodeFlowProvider
    | _ClientCredentialsProvider
    | _PrivateKeyJwtProvider
    | _IdentityAssertionProvider
)


@dataclass(frozen=True, slots=True)
class OAuthState:
    """What is stored for one server, without any secret: for status and ``pi-mcp auth``."""

    server: str
    mode: Literal["explicit", "implicit"] | None
    grant_type: str
    store: Literal["file", "keyring"]
    location: str
    has_tokens: bool
    has_refresh_token: bool
    expires_at: float | None
    scope: str | None
    registered_client: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "oauth": self.mode,
            "grantType": self.grant_type,
            "store": self.store,
            "location": self.location,
            "hasTokens": self.has_tokens,
            "hasRefreshToken": self.has_refresh_token,
            "expiresAt": self.expires_at,
            "scope": self.scope,
            "registeredClient": self.registered_client,
        }


class OAuthProviders:
    """One OAuth provider per server for the life of the process.

    ``auth_for(name)`` is the manager's ``auth_factory``: the ``httpx2.Auth`` to attach to a
    remote server's HTTP client, or ``None`` when the entry does not use OAuth. ``may_prompt``
    says whether first use may run a sign-in (``settings.autoAuth`` and a person at hand: stdin
    is a terminal or ``BROWSER`` is set); callers pass it to :func:`allow_prompts`.
    """

    def __init__(
        self,
        servers: Mapping[str, ServerEntry],
        *,
        agent_dir: Path,
        settings: Settings | None = None,
        environ: Mapping[str, str] | None = None,
        prompt: AuthorizationPrompt | None = None,
        store: TokenStore | None = None,
    ) -> None:
        self._servers = dict(servers)
        self._agent_dir = agent_dir
        self._settings = settings or Settings()
        self._environ = dict(os.environ if environ is None else environ)
        self._prompt = prompt or AuthorizationPrompt(environ=self._environ)
        self._store = store
        self._providers: dict[str, _Provider] = {}
        self._storages: dict[str, ServerTokenStorage] = {}

    @property
    def may_prompt(self) -> bool:
        if not self._settings.auto_auth:
            return False
        if self._environ.get("BROWSER"):
            return True
        try:
            return sys.stdin is not None and sys.stdin.isatty()
        except ValueError:
            return False

    @property
    def store(self) -> TokenStore:
        """The token store (created on first use, so a missing keyring extra only matters to
        configurations that use OAuth).

        Raises:
            UsageError: ``oauthStore`` is ``keyring`` and the extra is not installed.
        """
        if self._store is None:
            self._store = create_token_store(self._settings.oauth_store, self._agent_dir)
        return self._store

    def _entry(self, server: str) -> ServerEntry | None:
        return self._servers.get(server)

    def set_servers(self, servers: Mapping[str, ServerEntry], settings: Settings) -> None:
        """Follow a reloaded configuration: a server that was added, removed or changed gets
        its provider made afresh from its new entry on next use (a provider keeps the URL,
        grant and client it was made with); unchanged servers keep theirs, tokens in memory
        included. A changed token store (``oauthStore``) or ``autoAuth`` starts every one
        afresh."""
        new = dict(servers)
        if (
            settings.oauth_store != self._settings.oauth_store
            or settings.auto_auth != self._settings.auto_auth
        ):
            self._providers.clear()
            self._storages.clear()
            if settings.oauth_store != self._settings.oauth_store:
                self._store = None
        for name in {*self._servers, *new}:
            if self._servers.get(name) != new.get(name):
                self._providers.pop(name, None)
                self._storages.pop(name, None)
        self._servers = new
        self._settings = settings

    def storage(self, server: str) -> ServerTokenStorage:
        storage = self._storages.get(server)
        if storage is None:
            entry = self._servers[server]
            assert entry.url is not None
            storage = ServerTokenStorage(server, entry.url, self.store)
            self._storages[server] = storage
        return storage

    def auth_for(self, server: str) -> httpx2.Auth | None:
        """The provider for ``server``, created once; ``None`` when OAuth does not apply.

        Raises:
            ServerStartError: the token store cannot be opened (e.g. no keyring extra).
        """
        provider = self._providers.get(server)
        if provider is not None:
            return provider
        entry = self._entry(server)
        if entry is not None and uses_stored_bearer(entry):
            return _stored_bearer_auth(server, entry, self._settings, self._agent_dir)
        if entry is None or entry.oauth_mode is None:
            return None
        try:
            storage = self.storage(server)
        except UsageError as exc:
            raise ServerStartError(server, f"server {server!r}: {exc}") from exc
        if entry.oauth_config.grant_type == "identity_assertion":
            provider = _IdentityAssertionProvider(server, entry, storage)
        elif entry.oauth_config.grant_type == "client_credentials":
            provider = (
                _PrivateKeyJwtProvider(server, entry, storage)
                if entry.oauth_config.client_private_key
                else _ClientCredentialsProvider(server, entry, storage)
            )
        else:
            registered = storage.record().client_info
            redirect_uri = choose_redirect_uri(entry, self._environ, registered)
            provider = _CodeFlowProvider(server, entry, storage, self._prompt, redirect_uri)
        self._providers[server] = provider
        return provider

    def provider(self, server: str) -> _Provider | None:
        """The provider created for ``server`` so far, if any (for counters in tests)."""
        return self._providers.get(server)

    def state(self, server: str) -> OAuthState | None:
        """What is stored for ``server`` (no secrets); ``None`` for non-OAuth entries."""
        entry = self._entry(server)
        if entry is None or entry.oauth_mode is None:
            return None
        record = self.storage(server).record()
        tokens = record.tokens
        return OAuthState(
            server=server,
            mode=entry.oauth_mode,
            grant_type=entry.oauth_config.grant_type,
            store=self.store.kind,
            location=self.store.location(server),
            has_tokens=tokens is not None,
            has_refresh_token=bool(tokens and tokens.refresh_token),
            expires_at=record.expires_at,
            scope=tokens.scope if tokens is not None else None,
            registered_client=record.client_info is not None,
        )

    def needs_auth(self, server: str) -> bool:
        """Whether ``server`` certainly cannot connect without a sign-in: it is configured for
        OAuth with the authorization-code grant and nothing is stored for it."""
        entry = self._entry(server)
        if entry is None or entry.oauth_mode != "explicit":
            return False
        if entry.oauth_config.grant_type != "authorization_code":
            return False  # no person signs in: a token is obtained when needed
        try:
            return self.storage(server).record().tokens is None
        except UsageError:
            return False

    def forget_tokens(self, server: str) -> None:
        """Drop ``server``'s tokens but keep its client registration (a new sign-in follows)."""
        self._providers.pop(server, None)
        self.storage(server).forget_tokens()

    def logout(self, server: str) -> bool:
        """Delete ``server``'s stored tokens and client registration; whether any existed.

        Raises:
            UsageError: ``server`` is not a remote server.
        """
        entry = self._entry(server)
        if entry is None or entry.url is None:
            raise UsageError(f"{server!r} is not a configured remote server")
        self._providers.pop(server, None)
        removed = self.storage(server).forget()
        self._storages.pop(server, None)
        return removed


def uses_stored_bearer(entry: ServerEntry) -> bool:
    """``auth: "bearer"`` with ``bearerTokenStore: true`` and no token written in the config
    (``bearerToken`` and ``bearerTokenEnv`` take precedence, as in the reference)."""
    return (
        entry.url is not None
        and entry.auth == "bearer"
        and entry.bearer_token_store
        and entry.bearer_token is None
        and entry.bearer_token_env is None
    )


class _BearerAuth(httpx2.Auth):
    """Adds ``Authorization: Bearer <token>`` to every request of one server's client."""

    def __init__(self, token: str) -> None:
        self._token = token

    def auth_flow(self, request: httpx2.Request) -> Any:
        request.headers["Authorization"] = f"Bearer {self._token}"
        yield request


def _stored_bearer_auth(
    server: str, entry: ServerEntry, settings: Settings, agent_dir: Path
) -> httpx2.Auth:
    """The stored bearer token of ``server`` as an auth, read at each connect (so a token set
    while the process runs is used on the next start).

    Raises:
        ServerStartError: no token is stored, it was stored for another URL, or the store
            cannot be read; the message says which command fixes it.
    """
    assert entry.url is not None
    try:
        record = create_bearer_store(settings.oauth_store, agent_dir).load(server)
    except (UsageError, OSError) as exc:
        raise ServerStartError(
            server, f"server {server!r}: the token store cannot be read: {exc}"
        ) from exc
    if record is None:
        raise ServerStartError(
            server,
            f"server {server!r} authenticates with a stored token (bearerTokenStore) and none "
            f"is stored: run `pi-mcp token set {server}`",
        )
    if record.server_url != entry.url:
        raise ServerStartError(
            server,
            f"server {server!r}: its stored token was stored for another URL; run "
            f"`pi-mcp token set {server}` to store one for the current URL",
        )
    return _BearerAuth(record.token)
