"""Who is calling the HTTP gateway: per-client bearer tokens and JWTs (``settings.gatewayClients``,
``settings.gatewayJwt``).

Each client has a name, how it may sign in (``signIn``: its hashed token, a JWT, or both), the
SHA-256 of its token (the token itself is never stored) and a policy. Tokens are checked by
the SDK's server-side auth (``token_verifier``: its middleware answers 401 with
``WWW-Authenticate`` and puts the verified identity in a context variable for the request);
the gateway reads the client's name from there, applies its policy and surface, and the trace
records that name. What the SDK keeps of a token is its digest, never the token.

Sign-in rules (the one place they are enforced):

- A bearer token is one kind or the other, decided by its shape: with ``gatewayJwt`` set, a
  token that parses as a JWT is verified only as a JWT (its digest is never looked up, so a
  JWT whose hash was pasted into ``tokenSha256`` is not accepted past its expiry, and a JWT
  never lands on a token-only client); any other token is compared with the digests of the
  clients that accept tokens.
- A JWT must be signed with a public-key algorithm the settings allow, by a key of the
  issuer's key set whose own algorithm is that one; carry ``iss``, ``aud`` and ``exp`` (and
  pass ``nbf``/``iat`` when present), within ``leewaySeconds``; name its client in
  ``clientClaim`` as a string; and every client-naming claim it carries (``clientClaim``,
  ``client_id``, ``azp``) must say the same. The named client must exist, spelled exactly, and
  accept JWTs.
- A refused request gets 401 ``invalid_token`` with a fixed description of why (never the
  token, never text from it); the gateway's log says which client a JWT named.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from pi_mcp_adapter.config._models import GatewayClient, GatewayJwt
from pi_mcp_adapter.engine import CallerPolicy
from pi_mcp_adapter.surface import SurfaceKind

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("pi_mcp_adapter.gateway")

SHARED_TOKEN_CLIENT = "gateway-token"
"""The client name of ``--auth-token`` / ``PI_MCP_GATEWAY_TOKEN`` beside configured clients:
it is allowed everything, as it is without them."""

CLIENT_NAMING_CLAIMS = ("client_id", "azp")
"""Claims that name the OAuth client a JWT was issued to; when present beside ``clientClaim``
they must agree with it, so a token cannot say one client to us and another to the issuer."""

JWKS_FETCH_TIMEOUT_S = 10
"""Fetching the issuer's key set; a slow issuer delays only JWT sign-ins (in a worker thread)."""
JWKS_LIFESPAN_S = 300
"""How long a fetched key set is used; an unknown ``kid`` refetches at most every 30 s
(PyJWT's cool-down), so random key ids cannot make the gateway hammer the issuer."""


def token_sha256(token: str) -> str:
    """What ``tokenSha256`` holds for ``token`` (``printf %s TOKEN | sha256sum``)."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ClientAccess:
    policy: CallerPolicy
    surface: SurfaceKind | None


ClientConfig = tuple[tuple[GatewayClient, ...], GatewayJwt | None]
"""``settings.gatewayClients`` and ``settings.gatewayJwt``."""


class SignInRefused(Exception):
    """Why a bearer token was not accepted: a fixed sentence, safe to send to the client."""


_REFUSAL: ContextVar[list[str] | None] = ContextVar("pi_mcp_gateway_sign_in_refusal", default=None)
"""The running request's refusal reason, written by the verifier and read by
:class:`ExplainSignInRefusals`, which wraps the SDK's auth and shares the request's task."""


class ClientTokenVerifier:
    """The SDK's ``TokenVerifier`` over the configured clients' token digests and, with
    ``gatewayJwt``, the issuer's JWTs. ``config`` is asked on every verification, so clients
    added, removed or given new tokens by a reload count from the next request."""

    def __init__(self, config: Callable[[], ClientConfig], shared_token: str | None = None) -> None:
        self._config = config
        self._shared_digest = (
            hashlib.sha256(shared_token.encode()).digest() if shared_token else None
        )
        self._seen: ClientConfig | None = None
        self._digests: list[tuple[bytes, str]] = []
        self._jwt_clients: frozenset[str] = frozenset()
        self._jwt: GatewayJwt | None = None
        self._jwks: Any = None
        self._follow()

    def _follow(self) -> None:
        config = self._config()
        if config is self._seen:
            return
        clients, jwt_settings = config
        self._seen = config
        # Only the clients that may sign in with their token are looked up by digest.
        self._digests = [
            (bytes.fromhex(c.token_sha256), c.name)
            for c in clients
            if c.token_sha256 and "token" in c.sign_in_methods
        ]
        if self._shared_digest is not None:
            self._digests.append((self._shared_digest, SHARED_TOKEN_CLIENT))
        self._jwt_clients = frozenset(c.name for c in clients if "jwt" in c.sign_in_methods)
        if jwt_settings != self._jwt:
            self._jwks = None  # another issuer's keys
        self._jwt = jwt_settings

    async def verify_token(self, token: str) -> AccessToken | None:
        self._follow()
        try:
            if self._jwt is not None and _is_jwt(token):
                return await self._verify_jwt(token, self._jwt)
            return self._verify_hashed(token)
        except SignInRefused as refused:
            reasons = _REFUSAL.get()
            if reasons is not None:
                reasons.append(str(refused))
            return None

    def _verify_hashed(self, token: str) -> AccessToken:
        digest = hashlib.sha256(token.encode()).digest()
        name = None
        for expected, client in self._digests:
            # Every digest is compared, in constant time: no timing says which client is near.
            if hmac.compare_digest(digest, expected) and name is None:
                name = client
        if name is None:
            raise SignInRefused("the bearer token is not one of this gateway's client tokens")
        # The SDK keeps ``token`` for the request; it gets the digest, not the secret.
        return AccessToken(token=digest.hex(), client_id=name, scopes=[])

    async def _verify_jwt(self, token: str, settings: GatewayJwt) -> AccessToken:
        # Fetching the issuer's keys (cached, see JWKS_LIFESPAN_S) is blocking I/O.
        claims = await anyio.to_thread.run_sync(self._jwt_claims, token, settings)
        name = jwt_client(claims, settings.client_claim)
        if name not in self._jwt_clients:
            # One answer for "no such client" and "a client that signs in otherwise": the
            # holder of a JWT learns nothing about which other clients exist.
            logger.warning(
                "refused a JWT for client %r: no client of that name signs in with a JWT "
                "(settings.gatewayClients, signIn)",
                name,
            )
            raise SignInRefused("the client this JWT names does not sign in with a JWT here")
        scope = claims.get("scope")
        exp = claims["exp"]
        subject = claims.get("sub")
        return AccessToken(
            token=hashlib.sha256(token.encode()).hexdigest(),
            client_id=name,
            scopes=scope.split() if isinstance(scope, str) else [],
            # The SDK refuses a token past ``expires_at`` with no leeway of its own.
            expires_at=int(exp) + settings.leeway_seconds if isinstance(exp, int | float) else None,
            subject=subject if isinstance(subject, str) else None,
            # The issuer is part of the principal a stateful session is bound to.
            claims={"iss": settings.issuer},
        )

    def _jwt_claims(self, token: str, settings: GatewayJwt) -> dict[str, Any]:
        import jwt  # PyJWT with its crypto extra comes with the MCP SDK

        if self._jwks is None:
            self._jwks = jwt.PyJWKClient(
                settings.jwks_url, lifespan=JWKS_LIFESPAN_S, timeout=JWKS_FETCH_TIMEOUT_S
            )
        try:
            header = jwt.get_unverified_header(token)
            algorithm = header.get("alg")
            if algorithm not in settings.algorithms:
                # Before any key is looked up: ``none`` and HMAC never reach a key.
                raise SignInRefused("the JWT's algorithm is not accepted by this gateway")
            key = self._jwks.get_signing_key_from_jwt(token)
            if key.algorithm_name != algorithm or key.key_type == "oct":
                # A key is used only with its own algorithm, and never as an HMAC secret.
                raise SignInRefused("the JWT's algorithm is not accepted by this gateway")
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[algorithm],
                audience=settings.audience,
                issuer=settings.issuer,
                leeway=settings.leeway_seconds,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            logger.info("refused a bearer JWT: %s", type(exc).__name__)
            raise SignInRefused(_jwt_refusal(exc)) from None
        return claims


def jwt_client(claims: Mapping[str, Any], client_claim: str) -> str:
    """The client a verified JWT names in ``client_claim``; every other client-naming claim it
    carries must agree.

    Raises:
        SignInRefused: the claim is missing or not a string, or two claims disagree.
    """
    name = claims.get(client_claim)
    if not isinstance(name, str) or not name:
        raise SignInRefused(f"the JWT names no client (claim {client_claim!r})")
    for other in CLIENT_NAMING_CLAIMS:
        value = claims.get(other)
        if other != client_claim and value is not None and value != name:
            logger.warning(
                "refused a JWT whose claims name different clients: %s=%r, %s=%r",
                client_claim,
                name,
                other,
                value,
            )
            raise SignInRefused("the JWT's client claims (client_id, azp) name different clients")
    return name


def _jwt_refusal(exc: Exception) -> str:
    """A fixed sentence for a PyJWT error: its own message may quote the token's header."""
    import jwt

    refusals: list[tuple[type[Exception], str]] = [
        (jwt.ExpiredSignatureError, "the JWT has expired"),
        (jwt.ImmatureSignatureError, "the JWT is not valid yet (nbf or iat is in the future)"),
        (jwt.InvalidAudienceError, "the JWT is not for this gateway (aud)"),
        (jwt.InvalidIssuerError, "the JWT is not from this gateway's issuer (iss)"),
        (jwt.MissingRequiredClaimError, "the JWT lacks a required claim (exp, iss or aud)"),
        (jwt.InvalidAlgorithmError, "the JWT's algorithm is not accepted by this gateway"),
        (jwt.PyJWKClientConnectionError, "the issuer's keys could not be fetched; try again"),
        (jwt.PyJWKClientError, "the JWT is not signed by a key of this gateway's issuer"),
        (jwt.InvalidSignatureError, "the JWT is not signed by a key of this gateway's issuer"),
    ]
    return next((text for kind, text in refusals if isinstance(exc, kind)), "invalid JWT")


def _is_jwt(token: str) -> bool:
    """Whether ``token`` has a JWT's shape: three dot-separated parts, the first a JSON object
    with ``alg`` (base64url). No signature is checked here."""
    import base64

    header, dot, _ = token.partition(".")
    if not dot or token.count(".") != 2 or len(header) > 4096:
        return False
    try:
        decoded = json.loads(base64.urlsafe_b64decode(header + "=" * (-len(header) % 4)))
    except ValueError:
        return False
    return isinstance(decoded, dict) and "alg" in decoded


class ExplainSignInRefusals:
    """ASGI middleware around the SDK's auth: its 401 says "Authentication required" whatever
    happened; this one carries the verifier's reason instead (a fixed sentence)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        reasons: list[str] = []
        replaced = False

        async def explained(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 401 and reasons:
                replaced = True
                # A quoted-string in a header: no quotes, backslashes or control characters.
                reason = "".join(c for c in reasons[-1] if " " <= c <= "~" and c not in '"\\')
                body = json.dumps({"error": "invalid_token", "error_description": reason})
                challenge = f'Bearer error="invalid_token", error_description="{reason}"'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", challenge.encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body.encode()})
                return
            if replaced and message["type"] == "http.response.body":
                return  # the SDK's own body for the response replaced above
            await send(message)

        reset = _REFUSAL.set(reasons)
        try:
            await self._app(scope, receive, explained)
        finally:
            _REFUSAL.reset(reset)


def client_access(clients: Sequence[GatewayClient]) -> dict[str, ClientAccess]:
    access = {
        c.name: ClientAccess(CallerPolicy(c.name, c.allow, c.deny), c.surface) for c in clients
    }
    access.setdefault(SHARED_TOKEN_CLIENT, ClientAccess(CallerPolicy(SHARED_TOKEN_CLIENT), None))
    return access


def requesting_client() -> str | None:
    """The name of the client whose verified token the running request carries."""
    token = get_access_token()
    return token.client_id if token is not None else None
