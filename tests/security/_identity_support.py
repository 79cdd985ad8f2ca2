"""An identity provider for gateway sign-in tests: RSA keys, a JWKS document on a loopback port,
and JWTs minted as that issuer (or as an attacker imitating it)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

ISSUER = "https://idp.example"
AUDIENCE = "https://gateway-a.example/mcp"
OTHER_GATEWAY = "https://gateway-b.example/mcp"
"""Another gateway trusting the same issuer: a token minted for it must not work here."""


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(key: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk: dict[str, Any] = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    jwk.update(kid=kid, use="sig", alg="RS256")
    return jwk


@dataclass
class KeySetServer:
    """A JWKS document served on loopback; ``hits`` counts the fetches."""

    url: str
    hits: list[str] = field(default_factory=list)


@contextmanager
def serve_key_set(keys: list[dict[str, Any]]) -> Iterator[KeySetServer]:
    body = json.dumps({"keys": keys}).encode()
    served = KeySetServer(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.hits.append(self.path)
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Issuer:
    """The identity provider the gateway trusts: one signing key, ``k1``."""

    key: rsa.RSAPrivateKey = field(default_factory=rsa_key)
    kid: str = "k1"

    def claims(self, client: str | None, **changes: object) -> dict[str, object]:
        now = int(time.time())
        claims: dict[str, object] = {"iss": ISSUER, "aud": AUDIENCE, "exp": now + 300}
        if client is not None:
            claims["client_id"] = client
        claims.update(changes)
        return {name: value for name, value in claims.items() if value is not None}

    def mint(self, client: str | None, **changes: object) -> str:
        """A JWT for ``client`` signed by the issuer; ``changes`` replace claims (None drops)."""
        return jwt.encode(
            self.claims(client, **changes), self.key, algorithm="RS256", headers={"kid": self.kid}
        )

    def jwt_settings(self, jwks_url: str, **extra: object) -> dict[str, object]:
        return {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": jwks_url, **extra}


def unsigned(claims: dict[str, object]) -> str:
    """``alg: none``: a token anybody can write."""
    return jwt.encode(claims, None, algorithm="none")


def hmac_signed_with_public_key(claims: dict[str, object], key: rsa.RSAPrivateKey) -> str:
    """The classic confusion: HS256 with the issuer's public key (PEM) as the shared secret."""
    import base64
    import hashlib
    import hmac

    from cryptography.hazmat.primitives import serialization

    secret = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = part(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    payload = part(json.dumps(claims).encode())
    signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{part(signature)}"


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "attacker", "version": "1"},
    },
}


async def initialize_with(url: str, token: str | None) -> httpx2.Response:
    """An initialize request as a client sends it, with ``token`` as its bearer token."""
    headers = {"Accept": "application/json, text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, json=INITIALIZE, headers=headers)


def refusal_of(answer: httpx2.Response) -> str:
    """The reason a 401 gives, checking that the header and the body say the same."""
    assert answer.status_code == 401, answer.text
    description = str(answer.json()["error_description"])
    assert f'error_description="{description}"' in answer.headers["www-authenticate"]
    return description
