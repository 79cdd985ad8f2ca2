"""Typed shapes of a configuration: one server entry and the global settings.

These models are the result of loading and merging (see ``_loader``); the loader validates
each layer's raw JSON field by field so that errors can name the file, line and field, then
builds these. Field names are snake_case in Python and camelCase in JSON (``bearerTokenEnv``).
Unknown keys are kept (``model_extra``) and reported as warnings by the loader.

``repr()`` and ``str()`` of a :class:`ServerEntry` never show secrets: env values, header values,
the bearer token, URL passwords and credential-looking extras are masked (see ``_masking``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from pydantic.alias_generators import to_camel

from ._masking import MASK, mask_args, mask_extra, mask_url, sounds_secret
from ._trust import ProjectTrustMode

Lifecycle = Literal["lazy", "eager", "keep-alive", "lazy-keep-alive"]
ToolPrefixMode = Literal["server", "short", "none", "mcp"]
Surface = Literal["proxy", "toolsearch"]
SearchRanking = Literal["lexical", "hybrid"]
AuthKind = Literal["bearer", "oauth"]
GrantType = Literal["authorization_code", "client_credentials", "identity_assertion"]
OAuthStore = Literal["file", "keyring"]

DEFAULT_IDLE_TIMEOUT_MIN = 10.0
DEFAULT_STARTUP_TIMEOUT_MS = 30_000
DEFAULT_REQUEST_TIMEOUT_MS = 60_000


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        frozen=True,
    )


class IdentityProviderConfig(_Model):
    """``oauth.idp``: the enterprise identity provider of ``grantType: "identity_assertion"``
    (SEP-990, Enterprise-Managed Authorization). Its token endpoint exchanges the person's ID
    token for an identity assertion grant (ID-JAG, RFC 8693 token exchange) that the MCP
    server's authorization server takes instead of a sign-in. ``repr()`` never shows
    ``idToken`` or ``clientSecret``."""

    token_endpoint: str | None = None
    id_token: str | None = None
    """The person's ID token from the identity provider: ``${VAR}`` or ``!command``."""
    client_id: str | None = None
    client_secret: str | None = None
    """This client's credentials at the identity provider, when it asks for them."""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            secret = name in ("id_token", "client_secret") and value is not None
            yield name, MASK if secret else value


class OAuthConfig(_Model):
    """The ``oauth`` object of a server entry (the reference's field names).

    Every field is optional: with none set, the client registers itself dynamically (or uses a
    client ID metadata document) after discovering the authorization server from the MCP
    server's protected-resource metadata. ``repr()`` never shows ``clientSecret`` or
    ``clientPrivateKey``.
    """

    grant_type: GrantType = "authorization_code"
    client_id: str | None = None
    client_secret: str | None = None
    client_private_key: str | None = None
    """``client_credentials`` with ``private_key_jwt`` (RFC 7523) instead of a secret: the PEM
    text of the private key, or the absolute path of a PEM file."""
    idp: IdentityProviderConfig | None = None
    """The identity provider of ``grantType: "identity_assertion"``."""
    client_assertion_alg: str | None = None
    """The algorithm that signs the client assertion; by default the key's own (``ES256`` for a
    P-256 key, ``RS256`` for RSA, ``EdDSA`` for Ed25519...)."""
    client_metadata_url: str | None = None
    """An HTTPS URL used as the client ID where the server supports client ID metadata
    documents, instead of dynamic registration."""
    scope: str | None = None
    authorization_params: dict[str, str] = Field(default_factory=dict)
    """Extra query parameters added to the authorization URL (e.g. ``{"prompt": "consent"}``)."""
    redirect_uri: str | None = None
    """The loopback callback, e.g. ``http://127.0.0.1:8765/callback``; its port is used."""
    client_name: str | None = None
    client_uri: str | None = None
    logo_uri: str | None = None
    auth_server_metadata_url: str | None = None
    """The authorization server's issuer URL (or its ``/.well-known/...`` metadata URL), for
    servers whose protected-resource metadata does not say; also pins the issuer that
    ``client_credentials`` secrets may be sent to."""
    skip_issuer_metadata_validation: bool = False
    """Accept authorization-server metadata whose ``issuer`` differs from where it was found
    (RFC 8414 §3.3 forbids that; some older servers do it). Off by default."""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        extras = self.model_extra or {}
        for name, value in super().__repr_args__():
            if name in ("client_secret", "client_private_key") and value is not None:
                yield name, MASK
            elif name == "authorization_params" and isinstance(value, dict):
                yield name, {k: mask_extra(k, v) for k, v in value.items()}
            elif name is not None and name in extras:
                yield name, mask_extra(name, value)
            else:
                yield name, value


class RequestHeadersCommand(_Model):
    """A trusted command whose stdout (a JSON object) adds or replaces HTTP request headers."""

    command: str
    args: tuple[str, ...] | None = None
    env: dict[str, str] | None = None
    timeout_ms: int | None = None

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            if name == "env" and isinstance(value, dict):
                yield name, dict.fromkeys(value, MASK)
            elif name == "args" and isinstance(value, tuple):
                yield name, tuple(mask_args(value))
            else:
                yield name, value


@dataclass(frozen=True, slots=True)
class UntrustedOrigin:
    """The project-level files an untrusted server's fields came from, and how to trust them."""

    files: tuple[Path, ...]
    command: str
    """``pi-mcp trust --project DIR``."""
    mode: ProjectTrustMode = "ask"
    """``never``: ``projectTrust`` forbids project servers, trusting the files does not help."""

    @property
    def message(self) -> str:
        shown = ", ".join(str(f) for f in self.files)
        if self.mode == "never":
            return (
                f"comes from the project file {shown}, and projectTrust is 'never'; set it "
                "to 'ask' in your user config (or PI_MCP_PROJECT_TRUST=ask) to allow it"
            )
        return f"comes from the project file {shown}, which is not trusted; run `{self.command}`"


class ToolOverride(_Model):
    """``toolOverrides.<tool>``: how one of a server's tools is presented, in place of the
    server's own words. The server's definition is kept as it sent it (definition pinning and
    ``pi-mcp trust`` compare that), and a call reaches the tool under its own name."""

    name: str | None = None
    """The new name, prefixed as the server's tools are (``<server>_<name>``)."""
    title: str | None = None
    description: str | None = None
    hidden: bool = False
    """Offered nowhere: not listed, searched, described or callable, as ``excludeTools``."""


class ServerEntry(_Model):
    """One entry of ``mcpServers``, after merging and interpolation.

    Exactly one of ``command`` (stdio), ``url`` (Streamable HTTP, SSE fallback) and ``socket``
    (newline-delimited JSON-RPC over a unix domain socket) is set on a usable entry; the loader
    reports and skips entries that have none or several.
    """

    enabled: bool = True
    disabled: bool = False
    command: str | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    socket: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    request_headers_command: RequestHeadersCommand | None = None
    ca_file: str | None = None
    auth: AuthKind | Literal[False] | None = None
    bearer_token: str | None = None
    bearer_token_env: str | None = None
    bearer_token_store: bool = False
    """With ``auth: "bearer"``: send the token stored by ``pi-mcp token set`` (when neither
    ``bearerToken`` nor ``bearerTokenEnv`` is set)."""
    oauth: OAuthConfig | Literal[False] | None = None
    """OAuth client settings; ``false`` turns OAuth off even where it would be implied."""
    lifecycle: Lifecycle = "lazy"
    idle_timeout: float | None = None
    """Minutes without use before a lazy server is closed; ``None`` = the global setting."""
    startup_timeout_ms: int | None = None
    request_timeout_ms: int | None = None
    expose_resources: bool = True
    direct_tools: bool | tuple[str, ...] | Literal["search"] = False
    always_load: bool | tuple[str, ...] = False
    """Claude Code's name: these tools (``true``: all; names or globs, as ``includeTools``) are
    loaded from the start of a session, never deferred to a search; the same as
    ``directTools``, and added to it."""
    tool_overrides: dict[str, ToolOverride] | None = None
    """The server's own tool name -> a new name, title or description, or ``hidden``."""
    include_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] | None = None
    tool_prefix: ToolPrefixMode | None = None
    search_keywords: dict[str, tuple[str, ...]] | None = None
    """Tool selector (name or glob, as ``includeTools``) -> extra words the search matches."""
    approve_tools: bool | tuple[str, ...] | None = None
    """Ask the user before calling these tools (``true`` = all); ``None`` = the global setting."""
    idempotent_tools: tuple[str, ...] | None = None
    """Tools (names or globs, as ``includeTools``) that may run again when a load balancer
    replays a request after a gateway replica failed, beside those the server annotates
    ``readOnlyHint`` or ``idempotentHint`` (``["*"]``: every tool). Others are not run twice."""
    trace: bool | None = None
    http_transport: Literal["streamable-http", "sse"] | None = None
    protocol_version: Literal["legacy", "auto", "2026-07-28"] = "legacy"
    """The protocol era to speak: ``legacy`` (the ``initialize`` handshake), ``auto`` (the
    2026-07-28 era where the server offers it, else legacy) or ``2026-07-28`` (that era only).
    Legacy by default, as the TypeScript adapter: on a 2026-07-28 connection a server cannot
    send requests of its own, so servers that ask their client mid-call the handshake way
    (elicitation, sampling) lose those questions there."""
    tasks: bool = True
    """Let a tool call the server turns into a task (the ``io.modelcontextprotocol/tasks``
    extension, 2026-07-28 connections only) be polled to its end; ``false`` keeps every call
    inline."""
    debug: bool = False
    _written: Mapping[str, object] | None = PrivateAttr(default=None)
    """The transport and credential fields as the files wrote them, before interpolation."""
    _env_templates: dict[str, str] = PrivateAttr(default_factory=dict)
    _untrusted: UntrustedOrigin | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _always_load_is_direct(self) -> ServerEntry:
        # alwaysLoad is directTools by another name (Claude Code's): folded in here, once, so
        # every surface and host that honours directTools honours it too.
        always, direct = self.always_load, self.direct_tools
        if always is False or always == ():
            return self
        if always is True or direct is True:
            merged: bool | tuple[str, ...] = True
        elif isinstance(direct, tuple):
            merged = tuple(dict.fromkeys([*direct, *always]))
        else:  # False, or "search" (alwaysLoad, the more specific, names what is loaded)
            merged = always
        object.__setattr__(self, "direct_tools", merged)
        return self

    @property
    def env_templates(self) -> dict[str, str]:
        """Fields whose value came from environment variables, as written: ``{"args[2]":
        "postgresql://app:${PASS}@db/x"}``. Shown instead of the value wherever the entry is
        displayed (keys: ``url``, ``command``, ``cwd``, ``args[i]``, ``env.K``, ``headers.K``,
        ``bearerToken``)."""
        return self._env_templates

    @classmethod
    def from_checked(
        cls,
        values: Mapping[str, object],
        extras: Mapping[str, object],
        *,
        written: dict[str, object],
        env_templates: dict[str, str],
    ) -> ServerEntry:
        """What ``model_validate({**values, **extras})`` returns, with :meth:`with_written` and
        :meth:`with_env_templates` applied, for ``values`` (Python field names) each of which
        already is what validating its own field returns; ``extras`` are unknown keys.

        The loader validates every field of every layer on its own, so that an error names its
        file, line and field (``config/_validate.py``), and interpolation only replaces strings
        with strings: validating the merged entry a second time found nothing, and cost a
        fifth of loading 19,641 servers (pydantic's set-up of the private attributes, in
        Python, most of it). ``values``, ``written`` and ``env_templates`` are taken as they
        are, not copied. An ``alwaysLoad`` goes through :meth:`model_validate`: the model
        validator folds it into ``directTools``.
        """
        if "always_load" in values:
            entry = cls.model_validate({**values, **extras})
            return entry.with_written(written).with_env_templates(env_templates)
        state = _SERVER_DEFAULTS.copy()
        for name, factory in _SERVER_DEFAULT_FACTORIES:
            state[name] = factory()
        state.update(values)
        private = _SERVER_PRIVATE_DEFAULTS.copy()
        for name, private_factory in _SERVER_PRIVATE_FACTORIES:
            private[name] = private_factory()
        private["_written"] = written
        private["_env_templates"] = env_templates
        entry = cls.__new__(cls)
        # The four slots pydantic's own model_construct fills.
        _object_setattr(entry, "__dict__", state)
        _object_setattr(entry, "__pydantic_fields_set__", {*values, *extras})
        _object_setattr(entry, "__pydantic_extra__", dict(extras))
        _object_setattr(entry, "__pydantic_private__", private)
        return entry

    def with_env_templates(self, templates: dict[str, str]) -> ServerEntry:
        """Record where ``templates`` came from (the loader calls this); returns ``self``."""
        self._set_private("_env_templates", dict(templates))
        return self

    def _set_private(self, name: str, value: object) -> None:
        # Into pydantic's own dict, as the properties read it: its __setattr__ is two Python
        # calls for each, and the loader sets two per server (19,641 at 95,000 tools).
        private = self.__pydantic_private__
        if private is None:
            setattr(self, name, value)
        else:
            private[name] = value

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # repr() and str() end up in logs and tracebacks, so secrets never reach them.
        extras = self.model_extra or {}
        for name, value in super().__repr_args__():
            if name in ("env", "headers") and isinstance(value, dict):
                yield name, dict.fromkeys(value, MASK)
            elif name == "request_headers_command" and value is not None:
                yield name, repr(value)
            elif name == "bearer_token" and value is not None:
                yield name, MASK
            elif name == "oauth" and isinstance(value, OAuthConfig):
                yield name, value
            elif name == "url" and isinstance(value, str):
                yield name, mask_url(value)
            elif name == "args" and isinstance(value, tuple):
                yield name, tuple(mask_args(value))
            elif name is not None and name in extras:
                yield name, mask_extra(name, value)
            else:
                yield name, value

    @property
    def untrusted(self) -> UntrustedOrigin | None:
        """Why this entry may not run: a field came from a project-level file that is not
        trusted (see ``config/_trust.py``); None for a trusted entry."""
        # From pydantic's own dict, as ``written`` reads its attribute: through the model's
        # __getattr__ this was a quarter of each server's line of a status (three reads each).
        private = self.__pydantic_private__
        return private.get("_untrusted") if private else None

    def with_untrusted(self, origin: UntrustedOrigin | None) -> ServerEntry:
        """Mark the entry untrusted (the loader calls this); returns ``self``."""
        self._untrusted = origin
        return self

    @property
    def is_enabled(self) -> bool:
        """Enabled in the configuration and trusted: an untrusted entry is treated as disabled
        everywhere (no process, no ``!command``, no cached tools offered)."""
        return self.enabled and not self.disabled and self.untrusted is None

    @property
    def oauth_mode(self) -> Literal["explicit", "implicit"] | None:
        """How OAuth applies to this entry.

        ``explicit``: ``auth: "oauth"`` or an ``oauth`` object. ``implicit``: a remote server
        with no ``auth``, no bearer token and no credential header, which uses OAuth only if it
        answers 401 with a ``WWW-Authenticate`` challenge. ``None``: no OAuth (stdio, bearer,
        ``auth: false``, ``oauth: false``).
        """
        if self.url is None or self.auth is False or self.auth == "bearer" or self.oauth is False:
            return None
        if self.auth == "oauth" or self.oauth is not None:
            return "explicit"
        if self.bearer_token or self.bearer_token_env or self.request_headers_command is not None:
            return None
        if any(sounds_secret(name) for name in self.headers):
            return None
        return "implicit"

    @property
    def oauth_config(self) -> OAuthConfig:
        """The ``oauth`` object, or its defaults when none was written."""
        return self.oauth if isinstance(self.oauth, OAuthConfig) else OAuthConfig()

    @property
    def transport_kind(self) -> Literal["stdio", "http", "socket"]:
        if self.command is not None:
            return "stdio"
        return "socket" if self.socket is not None else "http"

    @property
    def written(self) -> Mapping[str, object]:
        """JSON key -> value as written, for the fields the cache hash reads before interpolation.

        Entries built in code (not loaded from files) have no separate written form: their
        values are taken as written.
        """
        # The private attribute read from pydantic's own dict: going through the model's
        # __getattr__ twice was a fifth of each configHash (one per server on every start).
        private = self.__pydantic_private__
        written: Mapping[str, object] | None = private.get("_written") if private else None
        if written is not None:
            return written
        return _written_from_values(self)

    def with_written(self, written: Mapping[str, object]) -> ServerEntry:
        self._set_private("_written", dict(written))
        return self

    @property
    def startup_timeout_s(self) -> float:
        ms = self.startup_timeout_ms or DEFAULT_STARTUP_TIMEOUT_MS
        return ms / 1000

    @property
    def request_timeout_s(self) -> float:
        ms = self.request_timeout_ms or DEFAULT_REQUEST_TIMEOUT_MS
        return ms / 1000


_object_setattr = object.__setattr__
_SERVER_DEFAULTS: dict[str, object] = {
    name: info.default for name, info in ServerEntry.model_fields.items()
}
"""Defaults of :class:`ServerEntry`'s fields in field order (the order of ``__dict__``, so of a
dump and a repr). Those without a factory are immutable (None, booleans, words, tuples) and
shared by every entry, as pydantic shares them; a field with a factory gets a fresh value."""
_SERVER_DEFAULT_FACTORIES = tuple(
    # No factory of ServerEntry takes the validated data (pydantic's other kind of factory).
    (name, cast("Callable[[], object]", info.default_factory))
    for name, info in ServerEntry.model_fields.items()
    if info.default_factory is not None
)
_SERVER_PRIVATE_DEFAULTS: dict[str, object] = {
    name: attr.default for name, attr in ServerEntry.__private_attributes__.items()
}
_SERVER_PRIVATE_FACTORIES = tuple(
    (name, cast("Callable[[], object]", attr.default_factory))
    for name, attr in ServerEntry.__private_attributes__.items()
    if attr.default_factory is not None and name not in ("_written", "_env_templates")
)

WRITTEN_KEYS = (
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "socket",
    "headers",
    "bearerToken",
    "requestHeadersCommand",
)
"""Fields whose values are interpolated at load time but hashed as written."""


def _written_from_values(entry: ServerEntry) -> dict[str, object]:
    explicit = entry.model_fields_set
    values: dict[str, object] = {}
    for key, name in (
        ("command", "command"),
        ("args", "args"),
        ("env", "env"),
        ("cwd", "cwd"),
        ("url", "url"),
        ("socket", "socket"),
        ("headers", "headers"),
        ("bearerToken", "bearer_token"),
    ):
        value = getattr(entry, name)
        if name in explicit and value is not None:
            values[key] = list(value) if isinstance(value, tuple) else value
    command = entry.request_headers_command
    if command is not None:
        values["requestHeadersCommand"] = command.model_dump(by_alias=True, exclude_unset=True)
    return values


class OutputGuardSettings(_Model):
    max_bytes: int | None = None
    max_lines: int | None = None

    @field_validator("max_bytes", "max_lines", mode="before")
    @classmethod
    def _whole_number(cls, value: object) -> object:
        # As the reference reads them: a fractional limit is rounded down (1000.7 -> 1000)
        # rather than rejected, so a file shared with it means the same here; a limit that
        # is not positive afterwards is ignored by the guard.
        if isinstance(value, float) and not isinstance(value, bool):
            return math.floor(value) if math.isfinite(value) else None
        return value


class TraceSettings(_Model):
    enabled: bool = True
    file: str | None = None


class TelemetrySettings(_Model):
    """``settings.telemetry``: OpenTelemetry traces and metrics (docs/observability.md)."""

    enabled: bool = True
    exporter: Literal["otlp", "console", "none"] | None = None
    """``None``: from ``OTEL_TRACES_EXPORTER``, else ``otlp`` when an endpoint is named."""
    endpoint: str | None = None
    """The OTLP base URL (``/v1/traces`` and ``/v1/metrics`` are added for HTTP); ``None``:
    the standard ``OTEL_EXPORTER_OTLP_*`` variables."""
    protocol: Literal["http/protobuf", "grpc"] | None = None
    service_name: str = "pi-mcp-adapter"
    record_arguments: bool = False
    """Argument values (and search queries) as span attributes, masked; off: never."""
    record_results: bool = False
    """Tool results as span attributes, masked; off: never."""
    metrics_token: str | None = None
    """A bearer token for the HTTP gateway's ``/metrics`` and ``/status`` alone (a scraper
    needs no client token); write it as ``${VAR}``."""


class CaptureStats(_Model):
    path: str | None = None
    flush_delay_ms: int = 500


SignInMethod = Literal["token", "jwt"]
"""How a gateway client may prove who it is: its hashed bearer token, or a JWT from the
issuer of ``settings.gatewayJwt``."""

RESERVED_CLIENT_NAME = "gateway-token"
"""The client of ``--auth-token`` / ``PI_MCP_GATEWAY_TOKEN``; no configured client may take it
(its token would then carry that client's policy, and a JWT could name it)."""

ASYMMETRIC_JWT_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
    | {"ES256", "ES256K", "ES384", "ES512", "EdDSA"}
)
"""The JWT algorithms ``gatewayJwt`` may accept: signatures checked with a public key. ``none``
proves nothing, and an HMAC key in a public key set is a key anybody can sign with."""

_NOT_A_CLIENT_CLAIM = frozenset({"iss", "aud", "exp", "nbf", "iat", "jti", "scope", "typ"})


class GatewayClient(_Model):
    """One client of an HTTP gateway (``settings.gatewayClients``): its name (what the trace
    records), the SHA-256 of its bearer token (hex), how it may sign in, and its policy.
    ``allow`` and ``deny`` are globs over tool names as the client sees them (``github_*``) or
    ``server/tool`` (``github/*``); deny wins, and no ``allow`` allows every tool. ``surface``
    overrides the gateway's surface for this client.

    ``signIn`` binds the client to how it proves who it is; unset, a client with a
    ``tokenSha256`` signs in with that token only, and a client without one with a JWT only
    (:attr:`sign_in_methods`). A JWT may name only a client that accepts JWTs."""

    name: str
    token_sha256: str | None = None
    sign_in: tuple[SignInMethod, ...] | None = None
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    surface: Surface | None = None

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        # A name is matched exactly against a JWT's claim and written to the trace: printable
        # ASCII without spaces leaves no look-alike (case, padding, homoglyph) to confuse.
        if not value or len(value) > 200 or any(not "!" <= c <= "~" for c in value):
            raise ValueError(
                "a client name must be 1-200 printable ASCII characters without spaces"
            )
        if value.casefold() == RESERVED_CLIENT_NAME:
            raise ValueError(
                f"the client name {RESERVED_CLIENT_NAME!r} is reserved for --auth-token"
            )
        return value

    @field_validator("token_sha256")
    @classmethod
    def _hex_digest(cls, value: str | None) -> str | None:
        if value is None:
            return None
        digest = value.strip().lower()
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise ValueError("tokenSha256 must be 64 hex digits (sha256sum of the token)")
        return digest

    @field_validator("sign_in")
    @classmethod
    def _some_sign_in(
        cls, value: tuple[SignInMethod, ...] | None
    ) -> tuple[SignInMethod, ...] | None:
        if value is not None and not value:
            raise ValueError('signIn must name at least one of "token", "jwt"')
        return value

    @model_validator(mode="after")
    def _token_to_sign_in_with(self) -> GatewayClient:
        if "token" in self.sign_in_methods and self.token_sha256 is None:
            raise ValueError(
                f'client {self.name!r}: signIn has "token" but the client has no tokenSha256'
            )
        return self

    @property
    def sign_in_methods(self) -> frozenset[SignInMethod]:
        """How this client may sign in: ``signIn`` as written, else its token when it has
        one (a token client is never reachable by a JWT unless it says so), else a JWT."""
        if self.sign_in is not None:
            return frozenset(self.sign_in)
        return frozenset({"token"} if self.token_sha256 is not None else {"jwt"})


def gateway_client_conflicts(clients: tuple[GatewayClient, ...]) -> str | None:
    """Why ``clients`` cannot be used together, or None: two clients whose names differ only
    in case (a JWT naming one must not be read as the other), or who share a token (the token
    would sign in as whichever comes first)."""
    names: dict[str, str] = {}
    digests: dict[str, str] = {}
    for client in clients:
        folded = client.name.casefold()
        if folded in names:
            return (
                f"clients {names[folded]!r} and {client.name!r} have the same name "
                "(names are compared ignoring case here)"
            )
        names[folded] = client.name
        if client.token_sha256 is not None:
            if client.token_sha256 in digests:
                return (
                    f"clients {digests[client.token_sha256]!r} and {client.name!r} have the "
                    "same tokenSha256; give each client a token of its own"
                )
            digests[client.token_sha256] = client.name
    return None


class GatewayJwt(_Model):
    """``settings.gatewayJwt``: the HTTP gateway as an OAuth 2.1 resource server. A bearer
    token that is a JWT signed by one of the issuer's keys (from ``jwksUrl``), with ``iss``
    ``issuer``, ``aud`` ``audience`` and an ``exp`` (``nbf``/``iat`` when present), within
    ``leewaySeconds`` of clock skew, names its client in ``clientClaim``; that client must be
    one of ``gatewayClients`` that accepts JWTs (its policy applies), or the request is
    refused."""

    issuer: str
    audience: str
    jwks_url: str
    client_claim: str = "client_id"
    algorithms: tuple[str, ...] = ("RS256", "ES256")
    leeway_seconds: int = 30
    """Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""

    @field_validator("issuer", "audience")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip() or value != value.strip():
            raise ValueError("issuer and audience must be non-empty, without surrounding spaces")
        return value

    @field_validator("jwks_url")
    @classmethod
    def _keys_over_tls(cls, value: str) -> str:
        # Whoever can change the key set in transit can sign any client's JWT.
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        local = parts.hostname in ("127.0.0.1", "localhost", "::1")
        if parts.scheme != "https" and not (parts.scheme == "http" and local):
            raise ValueError("jwksUrl must be an https:// URL (http:// only on loopback)")
        return value

    @field_validator("client_claim")
    @classmethod
    def _identity_claim(cls, value: str) -> str:
        if not value or value in _NOT_A_CLIENT_CLAIM:
            raise ValueError(
                "clientClaim must name the claim that identifies the client "
                '("client_id", "azp", "sub", ...)'
            )
        return value

    @field_validator("algorithms")
    @classmethod
    def _public_key_algorithms(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        refused = [a for a in value if a not in ASYMMETRIC_JWT_ALGORITHMS]
        if not value or refused:
            accepted = ", ".join(sorted(ASYMMETRIC_JWT_ALGORITHMS))
            raise ValueError(
                f"algorithms must be public-key algorithms ({accepted})"
                + (f"; not {', '.join(refused)}" if refused else "")
            )
        return value

    @field_validator("leeway_seconds")
    @classmethod
    def _small_leeway(cls, value: int) -> int:
        if not 0 <= value <= 300:
            raise ValueError("leewaySeconds must be between 0 and 300")
        return value


class Settings(_Model):
    """The ``settings`` object, merged shallowly across layers (later layers win per key)."""

    tool_prefix: ToolPrefixMode = "server"
    tool_separator: Literal["_", "__"] = "_"
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_MIN
    """Minutes; 0 = never close idle servers."""
    toon_encode: bool | tuple[str, ...] = False
    capture_stats: bool | CaptureStats = False
    surface: Surface = "proxy"
    validate_args: bool = True
    output_limit_bytes: int = 50 * 1024
    output_limit_lines: int = 2000
    on_definition_change: Literal["warn", "block"] = "warn"
    """``block`` refuses calls to tools whose definitions changed until they are trusted."""
    output_guard: bool | OutputGuardSettings = True
    """``false`` turns the output guard off; an object tunes ``maxBytes``/``maxLines``."""
    trace: bool | TraceSettings = False
    """``true`` or ``{"enabled": true, "file": ...}`` writes one JSON line per tool call."""
    approve_tools: bool | tuple[str, ...] = False
    tool_search_limit: int = 5
    script_mode: bool | None = None
    """The ``mcp_script`` tool beside the surface tool; ``None``: on when the ``script`` extra
    (the sandbox) is installed."""
    tool_search_budget_tokens: int = 600
    always_load_most_used: int = 0
    """Load this many of the most called tools (``captureStats``'s counts) at session start,
    besides ``alwaysLoad``; chosen once, so the session's tool list stays stable. 0: off."""
    namespace_proxy_tools: bool = False
    """Register one ``mcp__<server>`` tool per server, taking ``{tool, args}``. Off by default
    (the TypeScript adapter's default is on): each costs the model 95-120 tokens a turn."""
    search_ranking: SearchRanking | None = None
    """``None``: hybrid when the ``semantic`` extra is installed, lexical otherwise."""
    health_check_interval_ms: int = 30_000
    startup_concurrency: int = 10
    auto_auth: bool = False
    """Run the OAuth sign-in on first use of a server that needs it, when a person can answer
    (a terminal, or ``BROWSER`` set); otherwise such a server reports ``needs-auth``."""
    oauth_store: OAuthStore = "file"
    """Where OAuth tokens live: files under ``<agent dir>/mcp-oauth/`` or the OS keyring
    (needs the ``keyring`` extra)."""
    agent_plugin_paths: tuple[str, ...] | None = None
    """Agent plugin directories (``plugin.json`` + ``mcp.json``) whose servers are added as
    ``<plugin>__<server>``; relative paths are from the project directory."""
    shared_state: str | None = None
    """A ``redis://`` URL: failure memory, approvals granted for always, trust records and
    the metadata cache are shared by every process using it (replicas of a gateway); files
    stay the fallback. Needs the ``redis`` extra; ``PI_MCP_SHARED_STATE`` overrides it."""
    telemetry: bool | TelemetrySettings = False
    """OpenTelemetry traces and metrics, the gateway's ``/metrics`` and status page; the
    standard ``OTEL_*`` variables turn it on too. Needs the ``telemetry`` extra."""
    gateway_clients: tuple[GatewayClient, ...] = ()
    gateway_jwt: GatewayJwt | None = None
    """Who may use an HTTP gateway, each with a bearer token (stored as its SHA-256) or JWTs
    from ``gatewayJwt``, and a policy; when set, every request must carry one of these."""
    project_trust: ProjectTrustMode = "ask"
    """Servers from project-level files: ``ask`` (at a terminal; headless they stay
    ``untrusted`` until ``pi-mcp trust --project``), ``always`` or ``never``. Read from user-
    and agent-level files only (a project file may only make it stricter);
    ``PI_MCP_PROJECT_TRUST`` overrides it."""

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # Unknown keys are kept as written; one may hold a credential.
        extras = self.model_extra or {}
        for name, value in super().__repr_args__():
            yield name, mask_extra(name, value) if name is not None and name in extras else value
