"""A hostile gateway client against sign-in: JWTs that claim another client, forged and confused
JWTs, a JWT passed off as a hashed token, and a broken client list (a real ``pi-mcp serve`` on
loopback, a real JWKS endpoint, the official SDK client)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import jwt
import pytest

from gateway.conftest import PI_MCP, GatewayWorkspace, fixture_entry, run_http_gateway, text_of
from pi_mcp_adapter.config._validate import validate_settings

from ._identity_support import (
    OTHER_GATEWAY,
    Issuer,
    hmac_signed_with_public_key,
    initialize_with,
    public_jwk,
    refusal_of,
    rsa_key,
    serve_key_set,
    unsigned,
)

pytestmark = pytest.mark.anyio

ADMIN_TOKEN = "admin-token-5b0e9d1c"
BOTH_TOKEN = "both-token-c4d2a871"
NOT_FOR_JWT = "the client this JWT names does not sign in with a JWT here"


@pytest.fixture
def workspace(tmp_path: Path) -> GatewayWorkspace:
    return GatewayWorkspace(tmp_path)


def _sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _clients() -> list[dict[str, object]]:
    return [
        # Says nothing about sign-in and has a token: its token only.
        {"name": "admin", "tokenSha256": _sha256(ADMIN_TOKEN)},
        # No token: JWTs only.
        {"name": "ci", "allow": ["fixture_echo"]},
        {
            "name": "both",
            "tokenSha256": _sha256(BOTH_TOKEN),
            "signIn": ["token", "jwt"],
            "allow": ["fixture_echo"],
        },
    ]


@pytest.mark.slow
async def test_a_jwt_naming_a_client_that_signs_in_with_its_token_is_refused(
    workspace: GatewayWorkspace,
) -> None:
    issuer = Issuer()
    with serve_key_set([public_jwk(issuer.key, issuer.kid)]) as keys:
        workspace.write_config(
            {"fixture": fixture_entry(directTools=True, lifecycle="eager")},
            {"gatewayClients": _clients(), "gatewayJwt": issuer.jwt_settings(keys.url)},
        )
        with run_http_gateway(workspace, "--stateless") as gateway:
            as_admin = issuer.mint("admin")
            as_nobody = issuer.mint("nobody")
            # Same answer for a token-only client and one that does not exist: a JWT holder
            # learns nothing about which clients are configured.
            assert refusal_of(await initialize_with(gateway.url, as_admin)) == NOT_FOR_JWT
            assert refusal_of(await initialize_with(gateway.url, as_nobody)) == NOT_FOR_JWT

            async with gateway.client(token=ADMIN_TOKEN) as admin:
                assert "fixture_env" in {t.name for t in (await admin.list_tools()).tools}

            async with gateway.client(token=issuer.mint("ci")) as ci:
                listed = {t.name for t in (await ci.list_tools()).tools}
                assert "fixture_echo" in listed
                assert "fixture_env" not in listed
                denied = await ci.call_tool("fixture_env", {"name": "HOME"})
                assert denied.is_error

            # A client that says both signs in either way, with its own policy each time.
            for credential in (BOTH_TOKEN, issuer.mint("both")):
                async with gateway.client(token=credential) as both:
                    echoed = await both.call_tool("fixture_echo", {"message": "x"})
                    assert text_of(echoed) == "Echo: x"
                    assert "fixture_env" not in {t.name for t in (await both.list_tools()).tools}

            log = gateway.stderr()
            assert "refused a JWT for client 'admin'" in log
            for secret in (as_admin, as_nobody, ADMIN_TOKEN, BOTH_TOKEN):
                assert secret not in log


@pytest.mark.slow
async def test_forged_confused_replayed_and_stale_jwts_are_refused_with_a_reason(
    workspace: GatewayWorkspace,
) -> None:
    issuer = Issuer()
    attacker = rsa_key()
    now = int(time.time())
    with (
        serve_key_set([public_jwk(issuer.key, issuer.kid)]) as keys,
        serve_key_set([public_jwk(attacker, "evil")]) as attacker_keys,
    ):
        workspace.write_config(
            {"fixture": fixture_entry(directTools=True, lifecycle="eager")},
            {"gatewayClients": _clients(), "gatewayJwt": issuer.jwt_settings(keys.url)},
        )
        claims = issuer.claims("ci")
        by_attacker_key = {"headers": {"kid": "k1"}, "algorithm": "RS256"}
        refused = {
            "alg none": (unsigned(claims), "algorithm is not accepted"),
            "HS256 keyed with the public key": (
                hmac_signed_with_public_key(claims, issuer.key),
                "algorithm is not accepted",
            ),
            "the attacker's key under the issuer's kid": (
                jwt.encode(claims, attacker, **by_attacker_key),  # type: ignore[arg-type]
                "not signed by a key of this gateway's issuer",
            ),
            "the attacker's key announced in the header (jwk, jku)": (
                jwt.encode(
                    claims,
                    attacker,
                    algorithm="RS256",
                    headers={
                        "kid": "evil",
                        "jku": attacker_keys.url,
                        "jwk": public_jwk(attacker, "evil"),
                    },
                ),
                "not signed by a key of this gateway's issuer",
            ),
            "minted for another gateway": (issuer.mint("ci", aud=OTHER_GATEWAY), "(aud)"),
            "another issuer": (issuer.mint("ci", iss="https://evil.example"), "(iss)"),
            "expired beyond the leeway": (issuer.mint("ci", exp=now - 600), "has expired"),
            "not valid for ten minutes": (issuer.mint("ci", nbf=now + 600), "not valid yet"),
            "issued in the future": (issuer.mint("ci", iat=now + 600), "not valid yet"),
            "no expiry": (issuer.mint("ci", exp=None), "lacks a required claim"),
            "no audience": (issuer.mint("ci", aud=None), "lacks a required claim"),
            "no client claim": (issuer.mint(None, sub="ci"), "names no client"),
            "a list for a client": (issuer.mint(None, client_id=["ci"]), "names no client"),
            "client_id and azp disagree": (
                issuer.mint("ci", azp="admin"),
                "name different clients",
            ),
            "upper case": (issuer.mint("CI"), NOT_FOR_JWT),
            "leading space": (issuer.mint(" ci"), NOT_FOR_JWT),
            "trailing space": (issuer.mint("ci "), NOT_FOR_JWT),
            "the reserved client of --auth-token": (issuer.mint("gateway-token"), NOT_FOR_JWT),
        }
        with run_http_gateway(workspace, "--stateless") as gateway:
            for why, (token, reason) in refused.items():
                answer = await initialize_with(gateway.url, token)
                assert reason in refusal_of(answer), why

            # Within the clock-skew leeway (30 s by default) a token is accepted.
            for skewed in (issuer.mint("ci", exp=now - 10), issuer.mint("ci", nbf=now + 10)):
                assert (await initialize_with(gateway.url, skewed)).status_code == 200
            log = gateway.stderr()
        # The header's key URL is never followed.
        assert attacker_keys.hits == []
        for token, _ in refused.values():
            assert token not in log


@pytest.mark.slow
async def test_a_jwt_whose_hash_is_a_clients_token_is_still_checked_as_a_jwt(
    workspace: GatewayWorkspace,
) -> None:
    issuer = Issuer()
    # An operator pasted the hash of a (now expired) admin JWT as admin's token: presented,
    # it is a JWT, checked as one, and refused; it never signs in by its digest.
    stale_admin_jwt = issuer.mint("admin", exp=int(time.time()) - 3600)
    # An opaque token that merely contains two dots is still a token.
    dotted = "opaque.token.with-dots"
    with serve_key_set([public_jwk(issuer.key, issuer.kid)]) as keys:
        workspace.write_config(
            {"fixture": fixture_entry(lifecycle="eager")},
            {
                "gatewayClients": [
                    {"name": "admin", "tokenSha256": _sha256(stale_admin_jwt)},
                    {"name": "dotted", "tokenSha256": _sha256(dotted)},
                ],
                "gatewayJwt": issuer.jwt_settings(keys.url),
            },
        )
        with run_http_gateway(workspace, "--stateless") as gateway:
            answer = await initialize_with(gateway.url, stale_admin_jwt)
            assert refusal_of(answer) == "the JWT has expired"
            assert (await initialize_with(gateway.url, dotted)).status_code == 200
            unknown = await initialize_with(gateway.url, "not-a-token")
            assert refusal_of(unknown) == (
                "the bearer token is not one of this gateway's client tokens"
            )


@pytest.mark.slow
async def test_a_broken_client_list_stops_the_gateway_instead_of_serving_without_sign_in(
    workspace: GatewayWorkspace,
) -> None:
    workspace.write_config(
        {"fixture": fixture_entry()},
        {"gatewayClients": [{"name": "ci", "tokenSha256": "not-a-digest"}]},
    )
    finished = subprocess.run(
        [str(PI_MCP), *workspace.serve_args("--transport", "http", "--port", "0")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=workspace.root,
    )
    assert finished.returncode == 2
    assert "listening on" not in finished.stdout
    assert "tokenSha256 must be 64 hex digits" in finished.stderr
    assert "not serving over HTTP until gatewayClients/gatewayJwt are fixed" in finished.stderr

    # A repository's broken gateway settings are ignored, not a way to stop the user's gateway.
    (workspace.root / ".mcp.json").write_text(
        json.dumps(
            {
                "settings": {
                    "gatewayClients": [{"name": "x", "tokenSha256": "bad"}],
                    "gatewayJwt": {"issuer": "i", "audience": "a", "jwksUrl": "http://evil/k"},
                }
            }
        )
    )
    workspace.write_config(
        {"fixture": fixture_entry()},
        {"gatewayClients": [{"name": "admin", "tokenSha256": _sha256(ADMIN_TOKEN)}]},
    )
    with run_http_gateway(workspace, "--stateless") as gateway:
        assert (await initialize_with(gateway.url, ADMIN_TOKEN)).status_code == 200
        assert (await initialize_with(gateway.url, None)).status_code == 401


_JWT = {"issuer": "https://idp.example", "audience": "https://gw.example/mcp"}


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        pytest.param(
            {"gatewayJwt": {**_JWT, "jwksUrl": "https://idp.example/k", "algorithms": ["none"]}},
            "algorithms must be public-key algorithms",
            id="alg none",
        ),
        pytest.param(
            {"gatewayJwt": {**_JWT, "jwksUrl": "https://idp.example/k", "algorithms": ["HS256"]}},
            "not HS256",
            id="an HMAC algorithm",
        ),
        pytest.param(
            {"gatewayJwt": {**_JWT, "jwksUrl": "http://idp.example/k"}},
            "jwksUrl must be an https:// URL",
            id="keys fetched without TLS",
        ),
        pytest.param(
            {"gatewayJwt": {**_JWT, "jwksUrl": "https://idp.example/k", "clientClaim": "aud"}},
            "clientClaim must name the claim that identifies the client",
            id="the audience as the client",
        ),
        pytest.param(
            {"gatewayJwt": {**_JWT, "jwksUrl": "https://idp.example/k", "leewaySeconds": 86400}},
            "leewaySeconds must be between 0 and 300",
            id="a day of clock skew",
        ),
        pytest.param(
            {"gatewayClients": [{"name": "admin"}, {"name": "Admin"}]},
            "have the same name",
            id="names that differ in case",
        ),
        pytest.param(
            {"gatewayClients": [{"name": "admin "}]},
            "printable ASCII characters without spaces",
            id="a name with a space",
        ),
        pytest.param(
            {"gatewayClients": [{"name": "gateway-token"}]},
            "reserved for --auth-token",
            id="the shared token's client",
        ),
        pytest.param(
            {
                "gatewayClients": [
                    {"name": "a", "tokenSha256": "ab" * 32},
                    {"name": "b", "tokenSha256": "AB" * 32},
                ]
            },
            "have the same tokenSha256",
            id="one token for two clients",
        ),
        pytest.param(
            {"gatewayClients": [{"name": "ci", "signIn": ["token"]}]},
            'signIn has "token" but the client has no tokenSha256',
            id="token sign-in without a token",
        ),
    ],
)
def test_unsafe_gateway_sign_in_settings_are_refused_with_a_reason(
    settings: dict[str, object], complaint: str
) -> None:
    kept, errors, _ = validate_settings(settings, path=Path("mcp.json"), line_of=lambda _: None)
    assert kept == {}
    assert len(errors) == 1
    assert complaint in str(errors[0])
