"""``private_key_jwt`` client credentials: which key signs, with which algorithm, and that the
key never shows. The whole flow against a real authorization server is the conformance suite's
``auth/client-credentials-jwt`` scenario (``test_conformance.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from pi_mcp_adapter._errors import ServerStartError
from pi_mcp_adapter._secrets import redact
from pi_mcp_adapter.servers._oauth import _key_algorithm, _private_key_pem


def _pem(key: Any) -> str:
    return str(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ).decode()
    )


@pytest.mark.parametrize(
    ("make_key", "algorithm"),
    [
        pytest.param(lambda: rsa.generate_private_key(65537, 2048), "RS256", id="rsa"),
        pytest.param(lambda: ec.generate_private_key(ec.SECP256R1()), "ES256", id="p-256"),
        pytest.param(lambda: ec.generate_private_key(ec.SECP384R1()), "ES384", id="p-384"),
        pytest.param(ed25519.Ed25519PrivateKey.generate, "EdDSA", id="ed25519"),
    ],
)
def test_the_key_names_its_algorithm(make_key: Callable[[], Any], algorithm: str) -> None:
    assert _key_algorithm("s", _pem(make_key())) == algorithm


def test_a_key_without_a_known_algorithm_asks_for_one() -> None:
    pem = _pem(ec.generate_private_key(ec.SECP256K1()))
    with pytest.raises(ServerStartError, match=r"set 'oauth\.clientAssertionAlg'"):
        _key_algorithm("s", pem)


def test_text_that_is_no_key_is_named_as_such() -> None:
    with pytest.raises(ServerStartError, match="not an unencrypted PEM private key"):
        _key_algorithm("s", "-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")


def test_a_key_file_is_read_and_its_content_becomes_a_secret(tmp_path: Path) -> None:
    pem = _pem(ec.generate_private_key(ec.SECP256R1()))
    path = tmp_path / "app.pem"
    path.write_text(pem)
    assert _private_key_pem("s", str(path)) == pem
    body_line = pem.splitlines()[1]
    assert body_line not in redact(f"the key was {body_line}")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("keys/app.pem", "must be PEM text or an absolute path", id="relative"),
        pytest.param("/nonexistent/app.pem", "cannot read the private key", id="missing"),
    ],
)
def test_a_key_path_that_cannot_be_used_says_why(value: str, message: str) -> None:
    with pytest.raises(ServerStartError, match=message):
        _private_key_pem("s", value)
