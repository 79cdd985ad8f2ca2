"""Field-by-field validation of raw server entries and settings, before they are merged.

Each layer is checked on its own so that an error can name the file, the line and the field, and
so that one bad entry costs only that entry in that layer. Messages describe the expected and the
actual JSON type, never the value: a value may be a secret.
"""

from __future__ import annotations

import difflib
import functools
import json
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_origin
from urllib.parse import SplitResult, urlsplit

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.alias_generators import to_camel

from pi_mcp_adapter._errors import ConfigError

from ._jsonc import JsonPath
from ._models import OAuthConfig, ServerEntry, Settings, gateway_client_conflicts

__all__ = [
    "RawEntry",
    "ValidEntry",
    "did_you_mean",
    "empty_name_error",
    "format_json_path",
    "json_name",
    "json_type",
    "no_lines",
    "validate_server_entry",
    "validate_settings",
]

LineLookup = Callable[[JsonPath], int | None]


def no_lines(_path: JsonPath) -> int | None:
    """The line lookup of an entry that was not read from a file."""
    return None


# RawEntry and ValidEntry are the loader's working records, two for each server of each file,
# made and read only inside this package; they are never changed once made. Not frozen: a
# frozen dataclass sets each field through object.__setattr__, which made building them four
# times slower (0.02 s of loading 19,641 servers).


@dataclass(slots=True)
class RawEntry:
    """One server entry as read from a file, already in this project's JSON shape."""

    name: str
    value: object
    path: Path
    json_path: JsonPath
    """Where the entry sits in its file, e.g. ``("mcpServers", "github")``."""
    line_of: LineLookup = no_lines
    key_paths: Mapping[str, JsonPath] = field(default_factory=dict)
    """For entries translated from another host's format: our key -> the host's key path."""

    def path_of(self, key: str) -> JsonPath:
        return self.key_paths.get(key, (*self.json_path, key))

    @property
    def line(self) -> int | None:
        return self.line_of(self.json_path)


@dataclass(slots=True)
class ValidEntry:
    """A server entry whose every known field has the right type (values not yet interpolated)."""

    fields: Mapping[str, object]
    """Python field name -> value, only for the keys the file set."""
    extras: Mapping[str, object]
    """Unknown keys, kept as written."""
    line_of: LineLookup = field(default=no_lines, repr=False, compare=False)
    json_path: JsonPath = ()
    """Where the entry sits in its file: its line is looked up only when it is reported."""

    @property
    def line(self) -> int | None:
        return self.line_of(self.json_path)


class _FieldAdapters(dict[str, "TypeAdapter[Any]"]):
    """One validator per model field, built on first use: building all of them costs tens of
    milliseconds, paid by every command, while a file sets only a few fields."""

    def __init__(self, model: type[BaseModel]) -> None:
        super().__init__()
        self._model = model

    def __missing__(self, name: str) -> TypeAdapter[Any]:
        annotation = self._model.model_fields[name].annotation
        assert annotation is not None
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        self[name] = adapter
        return adapter


def _field_tables(model: type[BaseModel]) -> tuple[dict[str, str], dict[str, TypeAdapter[Any]]]:
    by_key: dict[str, str] = {}
    for name, info in model.model_fields.items():
        by_key[info.alias or name] = name
        by_key[name] = name
    return by_key, _FieldAdapters(model)


_SERVER_KEYS, _SERVER_ADAPTERS = _field_tables(ServerEntry)


class _NeedsValidator:
    """What a quick check returns for a value it cannot vouch for."""


_NEEDS_VALIDATOR = _NeedsValidator()


def _quick_check(annotation: Any) -> Callable[[object], object] | None:
    """A check that accepts, as pydantic's validator would return it, the exact JSON value a
    field usually holds (a string, a list of strings, an object of strings, a boolean, one of
    a few words), and answers :data:`_NEEDS_VALIDATOR` for anything else.

    Validating a server's fields one adapter call at a time was most of reading 19,641
    servers; these checks take the common values in a type test, and every other value (null,
    a number where a string belongs, a wrong word) still goes through the full validator,
    which words the error. None for an annotation without such a check."""
    options = (
        get_args(annotation) if get_origin(annotation) in (typing.Union, types.UnionType) else ()
    )
    plain = [a for a in options if a is not type(None)] if options else [annotation]
    if len(plain) != 1:
        return None
    (kind,) = plain
    if kind is str:
        return lambda value: value if type(value) is str else _NEEDS_VALIDATOR
    if kind is bool:
        return lambda value: value if type(value) is bool else _NEEDS_VALIDATOR
    if get_origin(kind) is Literal and all(type(a) is str for a in get_args(kind)):
        words = frozenset(get_args(kind))
        return lambda value: value if type(value) is str and value in words else _NEEDS_VALIDATOR
    if get_origin(kind) is tuple and get_args(kind) == (str, ...):
        return lambda value: (
            tuple(value)
            if type(value) is list and all(type(item) is str for item in value)
            else _NEEDS_VALIDATOR
        )
    if get_origin(kind) is dict and get_args(kind) == (str, str):
        return lambda value: (
            dict(value)
            if type(value) is dict and all(type(item) is str for item in value.values())
            else _NEEDS_VALIDATOR
        )
    return None


_SERVER_QUICK_CHECKS = {
    name: check
    for name, info in ServerEntry.model_fields.items()
    if (check := _quick_check(info.annotation)) is not None
}
_OAUTH_KEYS, _OAUTH_ADAPTERS = _field_tables(OAuthConfig)
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_SETTINGS_KEYS, _SETTINGS_ADAPTERS = _field_tables(Settings)


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """``"; did you mean 'command'?"`` for a key close to a known one, else ``""``."""
    # 0.75 catches one or two letters dropped, doubled or swapped ('comand', 'lifecyle',
    # 'settngs') without pairing unrelated short keys.
    close = difflib.get_close_matches(key, sorted(set(known)), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _json_keys(model: type[BaseModel]) -> list[str]:
    return [info.alias or name for name, info in model.model_fields.items()]


def empty_name_error(raw: RawEntry) -> ConfigError | None:
    """The error for a server entry without a name (``"": {...}``), else None."""
    if raw.name.strip():
        return None
    return ConfigError(
        'a server name must not be empty; this entry is ignored (give it a name such as "github")',
        path=str(raw.path),
        line=raw.line,
    )


def json_name(model: type[BaseModel], name: str) -> str:
    """The camelCase key a field is written with in JSON."""
    return _json_names(model).get(name, name)


@functools.cache
def _json_names(model: type[BaseModel]) -> dict[str, str]:
    # Once per model: reading ``model_fields`` goes through pydantic's class-property
    # machinery, and loading the configuration asks for every field of every server (a
    # sixth of loading 19,641 servers).
    return {name: info.alias or name for name, info in model.model_fields.items()}


def json_type(value: object) -> str:
    """The JSON type of a parsed value, as a user would call it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def format_json_path(path: JsonPath) -> str:
    parts: list[str] = []
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(f".{part}" if parts else part)
    return "".join(parts)


def _describe(annotation: object) -> str:
    """Say in words what a field annotation accepts, e.g. ``a list of strings``."""
    origin = get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in get_args(annotation) if a is not type(None)]
        return " or ".join(_describe(a) for a in options)
    if origin is Literal:
        return "one of " + ", ".join(_literal(v) for v in get_args(annotation))
    if origin is tuple or origin is list:
        return f"a list of {_plural(get_args(annotation)[0])}"
    if origin is dict:
        return f"an object whose values are {_plural(get_args(annotation)[1])}"
    simple = {bool: "true or false", int: "a whole number", float: "a number", str: "a string"}
    if isinstance(annotation, type):
        if annotation in simple:
            return simple[annotation]
        if issubclass(annotation, BaseModel):
            return "an object"
    return "a value of another type"


_PLURALS: dict[object, str] = {
    str: "strings",
    int: "whole numbers",
    float: "numbers",
    bool: "booleans",
}


def _plural(annotation: object) -> str:
    return _PLURALS.get(annotation, "values")


def _literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"'


def _type_error(
    what: str,
    annotation: object,
    value: object,
    *,
    path: Path,
    line: int | None,
    field: str,
    consequence: str,
    error: ValidationError | None = None,
) -> ConfigError:
    inner = _inner_location(error, annotation, value)
    if inner is not None:
        suffix, annotation, value = inner
        what = f"{what[:-1]}{suffix}'" if what.endswith("'") else f"{what}{suffix}"
        field = f"{field}{suffix}"
    return ConfigError(
        f"{what} must be {_describe(annotation)}, {_shown(annotation, value)}; {consequence}",
        path=str(path),
        line=line,
        field=field,
    )


def _inner_location(
    error: ValidationError | None, annotation: object, value: object
) -> tuple[str, object, object] | None:
    """For a wrong item inside an object or list field: its path suffix, type and value."""
    if error is None:
        return None
    union = get_origin(annotation) in (typing.Union, types.UnionType)
    options = [a for a in get_args(annotation) if a is not type(None)] if union else []
    container = next(
        (a for a in [annotation, *options] if get_origin(a) in (dict, tuple, list)), None
    )
    if container is None:
        return None
    for detail in error.errors():
        loc = detail.get("loc", ())
        if not loc:
            continue
        step = loc[0]
        if get_origin(container) is dict and isinstance(value, dict) and step in value:
            return f".{step}", get_args(container)[1], value[step]
        if isinstance(step, int) and isinstance(value, list) and 0 <= step < len(value):
            return f"[{step}]", get_args(container)[0], value[step]
    return None


def _shown(annotation: object, value: object) -> str:
    """The wrong value for the message: written out only for choices (never a secret there),
    otherwise its JSON type, so that a misplaced token is not printed."""
    union = get_origin(annotation) in (typing.Union, types.UnionType)
    options = [a for a in get_args(annotation) if a is not type(None)] if union else [annotation]
    is_choice = any(get_origin(a) is Literal for a in options)
    if is_choice and isinstance(value, str | int | float | bool) and len(str(value)) <= 40:
        from ._masking import looks_like_credential

        if not (isinstance(value, str) and looks_like_credential(value)):
            return "got " + (repr(value) if isinstance(value, str) else _literal(value))
    return f"not {json_type(value)}"


def validate_server_entry(raw: RawEntry) -> tuple[ValidEntry | None, list[ConfigError], list[str]]:
    """Check every known field of one entry; unknown keys are kept and warned about.

    Returns the entry (``None`` when any field is wrong: the whole entry is then ignored in
    this file, and the same server's entries in other files still apply), the errors (one per
    wrong field, each saying the entry is ignored), and the warnings.
    """
    if not isinstance(raw.value, dict):
        error = ConfigError(
            f"server {raw.name!r} must be an object, not {json_type(raw.value)}; it is ignored",
            path=str(raw.path),
            line=raw.line,
            field=format_json_path(raw.json_path),
        )
        return None, [error], []
    fields: dict[str, object] = {}
    extras: dict[str, object] = {}
    errors: list[ConfigError] = []
    warnings: list[str] = []
    for key, value in raw.value.items():
        name = _SERVER_KEYS.get(key)
        if name is not None:
            quick = _SERVER_QUICK_CHECKS.get(name)
            if quick is not None and (checked := quick(value)) is not _NEEDS_VALIDATOR:
                fields[name] = checked
                continue
        key_path = raw.path_of(key)
        if name is None:
            extras[key] = value
            line = raw.line_of(key_path)
            location = f"{raw.path}:{line}" if line is not None else str(raw.path)
            warnings.append(
                f"{location}: server {raw.name!r}: unknown key {key!r} is kept but not used"
                + did_you_mean(key, _json_keys(ServerEntry))
            )
            continue
        if name == "oauth" and isinstance(value, dict):
            oauth, oauth_errors = _validate_oauth(raw, value, key_path, warnings)
            errors.extend(oauth_errors)
            if oauth is not None:
                fields[name] = oauth
            continue
        if name in ("disabled", "enabled") and not isinstance(value, bool):
            # The TypeScript adapter disables a server only for the boolean true; "true" as a
            # string leaves it running there, so it does here too, with a warning.
            line = raw.line_of(key_path)
            location = f"{raw.path}:{line}" if line is not None else str(raw.path)
            warnings.append(
                f"{location}: server {raw.name!r}: {key!r} is {json_type(value)} "
                f"{json.dumps(value)}, not a boolean; it is ignored (write {key}: true "
                "without quotes)"
            )
            continue
        try:
            fields[name] = _SERVER_ADAPTERS[name].validate_python(value)
        except ValidationError as exc:
            annotation = ServerEntry.model_fields[name].annotation
            errors.append(
                _type_error(
                    f"server {raw.name!r}: {key!r}",
                    annotation,
                    value,
                    path=raw.path,
                    line=raw.line_of(key_path),
                    field=format_json_path(key_path),
                    error=exc,
                    consequence="this entry is ignored in this file; "
                    "the server's entries in other files still apply",
                )
            )
    if errors:
        return None, errors, warnings
    valid = ValidEntry(fields=fields, extras=extras, line_of=raw.line_of, json_path=raw.json_path)
    return valid, [], warnings


def _validate_oauth(
    raw: RawEntry, value: dict[str, object], json_path: JsonPath, warnings: list[str]
) -> tuple[OAuthConfig | None, list[ConfigError]]:
    """Check the ``oauth`` object key by key, so an error names e.g. ``oauth.grantType``."""
    fields: dict[str, object] = {}
    extras: dict[str, object] = {}
    errors: list[ConfigError] = []
    consequence = (
        "this entry is ignored in this file; the server's entries in other files still apply"
    )

    def error(message: str, *keys: str) -> ConfigError:
        key_path = (*json_path, *keys)
        return ConfigError(
            f"server {raw.name!r}: {message}; {consequence}",
            path=str(raw.path),
            line=raw.line_of(key_path),
            field=format_json_path(key_path),
        )

    for key, item in value.items():
        key_path = (*json_path, key)
        name = _OAUTH_KEYS.get(key)
        if name is None:
            extras[key] = item
            line = raw.line_of(key_path)
            location = f"{raw.path}:{line}" if line is not None else str(raw.path)
            warnings.append(
                f"{location}: server {raw.name!r}: unknown oauth key {key!r} is kept but not used"
                + did_you_mean(key, _json_keys(OAuthConfig))
            )
            continue
        try:
            fields[name] = _OAUTH_ADAPTERS[name].validate_python(item)
        except ValidationError:
            errors.append(
                _type_error(
                    f"server {raw.name!r}: 'oauth.{key}'",
                    OAuthConfig.model_fields[name].annotation,
                    item,
                    path=raw.path,
                    line=raw.line_of(key_path),
                    field=format_json_path(key_path),
                    consequence=consequence,
                )
            )
    if errors:
        return None, errors
    config = OAuthConfig.model_validate({**fields, **extras})
    if config.grant_type == "client_credentials":
        if not config.client_id:
            errors.append(
                error("'oauth.clientId' is required with grantType client_credentials", "clientId")
            )
        if bool(config.client_secret) == bool(config.client_private_key):
            errors.append(
                error(
                    "grantType client_credentials needs one of 'oauth.clientSecret' and "
                    "'oauth.clientPrivateKey' (private_key_jwt)",
                    "clientSecret" if config.client_secret else "grantType",
                )
            )
    elif config.client_private_key:
        errors.append(
            error(
                "'oauth.clientPrivateKey' is used with grantType client_credentials only",
                "clientPrivateKey",
            )
        )
    if config.grant_type == "identity_assertion":
        idp = config.idp
        required: tuple[tuple[tuple[str, ...], str | None], ...] = (
            (("clientId",), config.client_id),
            (("clientSecret",), config.client_secret),
            (("authServerMetadataUrl",), config.auth_server_metadata_url),
            (("idp", "tokenEndpoint"), idp.token_endpoint if idp else None),
            (("idp", "idToken"), idp.id_token if idp else None),
        )
        for keys, present in required:
            if not present:
                named = ".".join(keys)
                # Pointing at the line of what is there: the idp object, or the grant.
                where = keys if idp is not None or len(keys) == 1 else ("grantType",)
                errors.append(
                    error(f"'oauth.{named}' is required with grantType identity_assertion", *where)
                )
    elif config.idp is not None:
        errors.append(error("'oauth.idp' is used with grantType identity_assertion only", "idp"))
    metadata_url = config.client_metadata_url
    if metadata_url is not None:
        parts = _split_url(metadata_url)
        if parts is None or parts.scheme != "https" or parts.path in ("", "/"):
            errors.append(
                error(
                    "'oauth.clientMetadataUrl' must be an https URL with a path "
                    "(where the client ID metadata document is served)",
                    "clientMetadataUrl",
                )
            )
    if config.redirect_uri is not None:
        parts = _split_url(config.redirect_uri)
        if (
            parts is None
            or parts.scheme != "http"
            or parts.netloc.rsplit(":", 1)[0] not in _LOOPBACK_HOSTS
            or _port_of(parts) is None
        ):
            errors.append(
                error(
                    "'oauth.redirectUri' must be a loopback http URL with a port, "
                    "e.g. http://127.0.0.1:19876/callback",
                    "redirectUri",
                )
            )
    return (None, errors) if errors else (config, [])


def _split_url(url: str) -> SplitResult | None:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError:
        return None
    return parts


def _port_of(parts: SplitResult) -> int | None:
    try:
        return parts.port
    except ValueError:
        return None


def validate_settings(
    value: object, *, path: Path, line_of: LineLookup, json_path: JsonPath = ("settings",)
) -> tuple[dict[str, object], list[ConfigError], list[str]]:
    """Check the ``settings`` object key by key; a wrong key is dropped, the others are kept.

    The returned mapping uses Python field names for known keys and the written key otherwise.
    """
    where = format_json_path(json_path)
    if not isinstance(value, dict):
        error = ConfigError(
            f"'settings' must be an object, not {json_type(value)}; "
            "this file's settings are ignored",
            path=str(path),
            line=line_of(json_path),
            field=where,
        )
        return {}, [error], []
    result: dict[str, object] = {}
    errors: list[ConfigError] = []
    warnings: list[str] = []
    for key, item in value.items():
        key_path = (*json_path, key)
        name = _SETTINGS_KEYS.get(key)
        if name is None:
            result[key] = item
            line = line_of(key_path)
            location = f"{path}:{line}" if line is not None else str(path)
            warnings.append(
                f"{location}: unknown setting {key!r} is kept but not used"
                + did_you_mean(key, _json_keys(Settings))
            )
            continue
        try:
            checked = _SETTINGS_ADAPTERS[name].validate_python(item)
        except ValidationError as exc:
            if name in _GATEWAY_AUTH_SETTINGS:
                errors.append(
                    _gateway_auth_error(key, exc, path=path, line=line_of(key_path), where=where)
                )
                continue
            errors.append(
                _type_error(
                    f"setting {key!r}",
                    Settings.model_fields[name].annotation,
                    item,
                    path=path,
                    line=line_of(key_path),
                    field=format_json_path(key_path),
                    consequence="this setting is ignored in this file",
                    error=exc,
                )
            )
            continue
        minimum = _SETTINGS_MINIMUMS.get(name)
        if minimum is not None and isinstance(checked, int | float) and checked < minimum[0]:
            errors.append(
                ConfigError(
                    f"setting {key!r} must be {minimum[1]}, got {checked!r}; "
                    "this setting is ignored in this file",
                    path=str(path),
                    line=line_of(key_path),
                    field=format_json_path(key_path),
                )
            )
            continue
        conflict = gateway_client_conflicts(checked) if name == "gateway_clients" else None
        if conflict is not None:
            errors.append(
                ConfigError(
                    f"setting {key!r}: {conflict}; this setting is ignored in this file",
                    path=str(path),
                    line=line_of(key_path),
                    field=format_json_path(key_path),
                )
            )
            continue
        result[name] = checked
    return result, errors, warnings


_GATEWAY_AUTH_SETTINGS = frozenset({"gateway_clients", "gateway_jwt"})
"""Settings whose errors name the rule that was broken (who may sign in, with which keys):
the generic "must be an object" would hide why a client or an issuer was refused."""


def _gateway_auth_error(
    key: str, error: ValidationError, *, path: Path, line: int | None, where: str
) -> ConfigError:
    detail = error.errors()[0]
    location = "".join(
        f"[{step}]" if isinstance(step, int) else f".{to_camel(str(step))}"
        for step in detail.get("loc", ())
    )
    reason = str(detail.get("msg", "invalid")).removeprefix("Value error, ")
    return ConfigError(
        f"setting '{key}{location}': {reason}; this setting is ignored in this file",
        path=str(path),
        line=line,
        field=f"{where}.{key}{location}",
    )


_SETTINGS_MINIMUMS: dict[str, tuple[float, str]] = {
    "output_limit_bytes": (0, "0 (no limit) or a positive whole number"),
    "output_limit_lines": (0, "0 (no limit) or a positive whole number"),
    "idle_timeout": (0, "0 (never close idle servers) or a positive number of minutes"),
    "health_check_interval_ms": (0, "0 (no health checks) or a positive whole number"),
    "startup_concurrency": (1, "at least 1"),
    "tool_search_limit": (1, "at least 1"),
    "tool_search_budget_tokens": (0, "0 or a positive whole number"),
    "always_load_most_used": (0, "0 (off) or a positive whole number"),
}
"""Lower bounds of numeric settings, with what to write instead; checked at load time so that
a bad value is reported with its file and line, not when it is first used."""
