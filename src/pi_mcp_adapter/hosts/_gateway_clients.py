"""Per-client bearer tokens for the HTTP gateway (``settings.gatewayClients``).

Each client has a name, the SHA-256 of its token (the token itself is never stored) and a
policy. Tokens are checked by the SDK's server-side auth (``token_verifier``: its middleware
answers 401 with ``WWW-Authenticate`` and puts the verified identity in a context variable for
the request); the gateway reads the client's name from there, applies its policy and surface,
and the trace records that name. What the SDK keeps of a token is its digest, never the token.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from pi_mcp_adapter.config._models import GatewayClient, GatewayJwt
from pi_mcp_adapter.engine import CallerPolicy
from pi_mcp_adapter.surface import SurfaceKind

logger = logging.getLogger("pi_mcp_adapter.gateway")

SHARED_TOKEN_CLIENT = "gateway-token"
"""The client name of ``--auth-token`` / ``PI_MCP_GATEWAY_TOKEN`` beside configured clients:
it is allowed everything, as it is without them."""


def token_sha256(token: str) -> str:
    """What ``tokenSha256`` holds for ``token`` (``printf %s TOKEN | sha256sum``)."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class ClientAccess:
    policy: CallerPolicy
    surface: SurfaceKind | None


ClientConfig = tuple[tuple[GatewayClient, ...], GatewayJwt | None]
"""``settings.gatewayClients`` and ``settings.gatewayJwt``."""


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
        self._names: set[str] = set()
        self._jwt: GatewayJwt | None = None
        self._jwks: Any = None
        self._follow()

    def _follow(self) -> None:
        config = self._config()
        if config is self._seen:
            return
        clients, jwt_settings = config
        self._seen = config
        self._digests = [(bytes.fromhex(c.token_sha256), c.name) for c in clients if c.token_sha256]
        if self._shared_digest is not None:
            self._digests.append((self._shared_digest, SHARED_TOKEN_CLIENT))
        self._names = {c.name for c in clients}
        if jwt_settings != self._jwt:
            self._jwks = None  # another issuer's keys
        self._jwt = jwt_settings

    async def verify_token(self, token: str) -> AccessToken | None:
        self._follow()
        digest = hashlib.sha256(token.encode()).digest()
        name = None
        for expected, client in self._digests:
            # Every digest is compared, in constant time: no timing says which client is near.
            if hmac.compare_digest(digest, expected) and name is None:
                name = client
        if name is not None:
            # The SDK keeps ``token`` for the request; it gets the digest, not the secret.
            return AccessToken(token=digest.hex(), client_id=name, scopes=[])
        if self._jwt is None or token.count(".") != 2:
            return None
        # Fetching the issuer's keys (cached for 5 minutes) is blocking I/O.
        claims = await anyio.to_thread.run_sync(self._jwt_claims, token)
        if claims is None:
            return None
        name = claims.get(self._jwt.client_claim)
        if not isinstance(name, str) or name not in self._names:
            logger.warning("refused a valid JWT for a client that is not configured: %r", name)
            return None
        scope = claims.get("scope")
        return AccessToken(
            token=digest.hex(),
            client_id=name,
            scopes=scope.split() if isinstance(scope, str) else [],
            expires_at=claims.get("exp") if isinstance(claims.get("exp"), int) else None,
            subject=claims.get("sub") if isinstance(claims.get("sub"), str) else None,
        )

    def _jwt_claims(self, token: str) -> dict[str, Any] | None:
        import jwt  # PyJWT with its crypto extra comes with the MCP SDK

        settings = self._jwt
        assert settings is not None
        if self._jwks is None:
            self._jwks = jwt.PyJWKClient(settings.jwks_url, lifespan=300, timeout=10)
        jwks = self._jwks
        try:
            key = jwks.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=list(settings.algorithms),
                audience=settings.audience,
                issuer=settings.issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:
            logger.info("refused a bearer JWT: %s", exc)
            return None
        return claims


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
