from __future__ import annotations

import json

import pytest

from pi_mcp_adapter.config import mask_secrets
from pi_mcp_adapter.config._masking import MASK
from pi_mcp_adapter.config._models import OAuthConfig, ServerEntry

from .conftest import CANARY, Machine


def test_every_reference_oauth_field_is_read(machine: Machine) -> None:
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "linear": {
                    "url": "https://mcp.linear.example/mcp",
                    "auth": "oauth",
                    "oauth": {
                        "grantType": "authorization_code",
                        "clientId": "app",
                        "clientSecret": "s3cr3t",
                        "clientMetadataUrl": "https://client.example/metadata.json",
                        "scope": "read write",
                        "authorizationParams": {"prompt": "consent"},
                        "redirectUri": "http://127.0.0.1:8765/callback",
                        "clientName": "my agent",
                        "authServerMetadataUrl": "https://auth.example",
                    },
                }
            },
            "settings": {"autoAuth": True, "oauthStore": "keyring"},
        },
    )
    config = machine.load()
    assert not config.errors
    entry = config.servers["linear"]
    assert entry.oauth == OAuthConfig(
        client_id="app",
        client_secret="s3cr3t",
        client_metadata_url="https://client.example/metadata.json",
        scope="read write",
        authorization_params={"prompt": "consent"},
        redirect_uri="http://127.0.0.1:8765/callback",
        client_name="my agent",
        auth_server_metadata_url="https://auth.example",
    )
    assert entry.oauth_mode == "explicit"
    assert config.settings.auto_auth is True
    assert config.settings.oauth_store == "keyring"


@pytest.mark.parametrize(
    ("oauth", "field", "message"),
    [
        pytest.param(
            '{"grantType": "password"}',
            "mcpServers.s.oauth.grantType",
            '\'oauth.grantType\' must be one of "authorization_code", "client_credentials"',
            id="grant-type",
        ),
        pytest.param(
            '{"scope": ["a", "b"]}',
            "mcpServers.s.oauth.scope",
            "'oauth.scope' must be a string, not array",
            id="scope-list",
        ),
        pytest.param(
            '{"grantType": "client_credentials", "clientId": "x"}',
            "mcpServers.s.oauth.grantType",
            "grantType client_credentials needs one of 'oauth.clientSecret' and "
            "'oauth.clientPrivateKey'",
            id="client-credentials-without-secret",
        ),
        pytest.param(
            '{"grantType": "client_credentials", "clientId": "x", "clientSecret": "s3cr3t", '
            '"clientPrivateKey": "/keys/app.pem"}',
            "mcpServers.s.oauth.clientSecret",
            "grantType client_credentials needs one of 'oauth.clientSecret' and "
            "'oauth.clientPrivateKey'",
            id="client-credentials-with-secret-and-key",
        ),
        pytest.param(
            '{"grantType": "identity_assertion", "clientId": "x", "clientSecret": "s3cr3t", '
            '"authServerMetadataUrl": "https://as.example", "idp": {"tokenEndpoint": "https://idp.example/token"}}',
            "mcpServers.s.oauth.idp.idToken",
            "'oauth.idp.idToken' is required with grantType identity_assertion",
            id="identity-assertion-without-id-token",
        ),
        pytest.param(
            '{"idp": {"tokenEndpoint": "https://idp.example/token"}}',
            "mcpServers.s.oauth.idp",
            "'oauth.idp' is used with grantType identity_assertion only",
            id="idp-without-identity-assertion",
        ),
        pytest.param(
            '{"clientPrivateKey": "/keys/app.pem"}',
            "mcpServers.s.oauth.clientPrivateKey",
            "'oauth.clientPrivateKey' is used with grantType client_credentials only",
            id="private-key-without-client-credentials",
        ),
        pytest.param(
            '{"clientMetadataUrl": "http://client.example/m.json"}',
            "mcpServers.s.oauth.clientMetadataUrl",
            "'oauth.clientMetadataUrl' must be an https URL with a path",
            id="metadata-url-not-https",
        ),
        pytest.param(
            '{"redirectUri": "https://example.com/cb"}',
            "mcpServers.s.oauth.redirectUri",
            "'oauth.redirectUri' must be a loopback http URL with a port",
            id="redirect-not-loopback",
        ),
    ],
)
def test_a_wrong_oauth_field_is_named_with_file_line_and_path(
    machine: Machine, oauth: str, field: str, message: str
) -> None:
    text = '{\n  "mcpServers": {\n    "s": {\n      "url": "https://x.example/mcp",\n'
    text += f'      "oauth": {oauth}\n    }}\n  }}\n}}\n'
    path = machine.write_layer("agent", text)
    config = machine.load()
    assert "s" in config.invalid_servers
    error = config.invalid_servers["s"]
    assert error.path == str(path)
    assert error.field == field
    assert error.line == 5
    assert message in error.message


def test_auth_accepts_oauth_bearer_and_false_only(machine: Machine) -> None:
    machine.write_layer(
        "agent",
        '{"mcpServers": {"s": {"url": "https://x.example", "auth": "basic"}}}',
    )
    error = machine.load().invalid_servers["s"]
    assert error.field == "mcpServers.s.auth"
    assert 'one of "bearer", "oauth" or one of false' in error.message


@pytest.mark.parametrize(
    ("fields", "mode"),
    [
        pytest.param({"url": "https://x"}, "implicit", id="url-alone"),
        pytest.param({"url": "https://x", "auth": "oauth"}, "explicit", id="auth-oauth"),
        pytest.param({"url": "https://x", "oauth": {"scope": "a"}}, "explicit", id="oauth-object"),
        pytest.param({"url": "https://x", "auth": False}, None, id="auth-false"),
        pytest.param({"url": "https://x", "oauth": False}, None, id="oauth-false"),
        pytest.param({"url": "https://x", "auth": "bearer"}, None, id="bearer"),
        pytest.param({"url": "https://x", "bearerTokenEnv": "T"}, None, id="bearer-env"),
        pytest.param(
            {"url": "https://x", "headers": {"Authorization": "Bearer x"}}, None, id="auth-header"
        ),
        pytest.param(
            {"url": "https://x", "headers": {"X-Team": "core"}}, "implicit", id="plain-header"
        ),
        pytest.param({"command": "server"}, None, id="stdio"),
    ],
)
def test_which_entries_use_oauth(fields: dict[str, object], mode: str | None) -> None:
    assert ServerEntry.model_validate(fields).oauth_mode == mode


def test_client_secret_from_the_environment_is_resolved_and_never_shown(machine: Machine) -> None:
    machine.environ["APP_SECRET"] = CANARY
    machine.write_layer(
        "agent",
        {
            "mcpServers": {
                "s": {
                    "url": "https://x.example",
                    "oauth": {
                        "grantType": "client_credentials",
                        "clientId": "app",
                        "clientSecret": "${APP_SECRET}",
                        "authorizationParams": {"audience": "api", "api_key": CANARY},
                    },
                }
            }
        },
    )
    entry = machine.load().servers["s"]
    assert isinstance(entry.oauth, OAuthConfig)
    assert entry.oauth.client_secret == CANARY
    masked = mask_secrets(entry)
    assert masked["oauth"] == {
        "grantType": "client_credentials",
        "clientId": "app",
        "clientSecret": MASK,
        "authorizationParams": {"audience": "api", "api_key": MASK},
    }
    for shown in (repr(entry), str(entry), json.dumps(masked)):
        assert CANARY not in shown


def _loaded_entry(machine: Machine, oauth: dict[str, object]) -> ServerEntry:
    """Server ``s`` with this ``oauth`` object, loaded from the agent's config file."""
    entry = {"url": "https://x.example", "oauth": oauth}
    machine.write_layer("agent", {"mcpServers": {"s": entry}})
    config = machine.load()
    assert not config.errors, config.errors
    return config.servers["s"]


PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    f"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg{CANARY}\n"
    "-----END PRIVATE KEY-----\n"
)


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        pytest.param("${APP_KEY}", MASK, id="pem-from-the-environment"),
        pytest.param(PEM, MASK, id="pem-written-in-the-file"),
        pytest.param("~/keys/app.pem", "{home}/keys/app.pem", id="path"),
    ],
)
def test_a_private_key_is_resolved_and_only_its_path_is_ever_shown(
    machine: Machine, value: str, shown: str
) -> None:
    machine.environ["APP_KEY"] = PEM
    oauth = {"grantType": "client_credentials", "clientId": "app", "clientPrivateKey": value}
    loaded = _loaded_entry(machine, oauth)
    assert isinstance(loaded.oauth, OAuthConfig)
    expected = shown.format(home=machine.home) if shown != MASK else PEM
    assert loaded.oauth.client_private_key == expected
    masked = mask_secrets(loaded)
    assert masked["oauth"]["clientPrivateKey"] == shown.format(home=machine.home)
    for text in (repr(loaded), str(loaded), json.dumps(masked)):
        assert CANARY not in text


def test_an_identity_provider_is_read_and_its_tokens_never_shown(machine: Machine) -> None:
    machine.environ["ID_TOKEN"] = f"eyJ-{CANARY}"
    oauth = {
        "grantType": "identity_assertion",
        "clientId": "app",
        "clientSecret": f"{CANARY}-as",
        "authServerMetadataUrl": "https://as.example",
        "idp": {
            "tokenEndpoint": "https://idp.example/token",
            "clientId": "agent",
            "clientSecret": f"{CANARY}-idp",
            "idToken": "${ID_TOKEN}",
        },
    }
    loaded = _loaded_entry(machine, oauth)
    assert isinstance(loaded.oauth, OAuthConfig)
    assert loaded.oauth.idp is not None
    assert loaded.oauth.idp.id_token == f"eyJ-{CANARY}"
    masked = mask_secrets(loaded)
    assert masked["oauth"]["idp"] == {
        "tokenEndpoint": "https://idp.example/token",
        "clientId": "agent",
        "clientSecret": MASK,
        "idToken": MASK,
    }
    for text in (repr(loaded), str(loaded), json.dumps(masked)):
        assert CANARY not in text
