"""Hiding secrets in anything shown to a person: ``pi-mcp config``, reprs, logs.

What counts as a secret, erring on the side of hiding:

- every ``env`` value (environment variables are where tokens usually travel);
- ``bearerToken``;
- every header value, whatever its name (``X-Plain`` can carry a key as well as
  ``X-Api-Key``);
- a ``!command`` value shows its program only (``!op ********``): the rest of the command line
  may hold the secret itself, and its output always does;
- the password in a URL and query parameters with credential-sounding names;
- command-line arguments after or inside ``--token``/``--api-key``-style flags, and arguments
  that look like tokens;
- values of unknown keys with credential-sounding names, at any depth;
- inside any string: URL passwords (``postgresql://app:pw@db``), ``Bearer <x>`` and
  ``token=<x>``-style pairs (:func:`mask_text`).

A value that came from an environment variable is shown as the reference that was written
(``${NAME}``), never as its value, in every field (``url``, ``command``, ``args``, ``cwd``,
``socket``, ``caFile``, headers, env, tokens): the loader keeps those templates with the entry.
This masking by field is the first line; the process-wide registry of resolved values
(:mod:`pi_mcp_adapter._secrets`) is the second, applied to everything printed.

A config file's own text (a dry run's diff) is masked the same way, value by value in place
(:func:`mask_config_text`), so that comments and layout stay as written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pi_mcp_adapter._secrets import MASK

if TYPE_CHECKING:
    from ._models import ServerEntry

__all__ = [
    "MASK",
    "looks_like_credential",
    "mask_args",
    "mask_config_text",
    "mask_extra",
    "mask_headers",
    "mask_secrets",
    "mask_text",
    "mask_url",
    "sounds_secret",
]

_SECRET_NAME = re.compile(
    r"auth|token|key|secret|passw|pwd|cookie|session|credential|signature|bearer|private",
    re.IGNORECASE,
)
_SCHEME_PREFIX = re.compile(r"^(bearer|basic|token|digest|apikey)\s", re.IGNORECASE)
_KNOWN_TOKEN = re.compile(
    r"^(?:sk|pk|rk)[-_]|^gh[pousr]_|^github_pat_|^xox[abprse]-|^glpat-|^AKIA|^AIza|^ya29\.|^eyJ"
)
# Keys of the ``oauth`` object that are public by nature; the rest are masked by name and content.
_PLAIN_OAUTH_KEYS = frozenset(
    {
        "grantType",
        "clientId",
        "clientMetadataUrl",
        "scope",
        "redirectUri",
        "clientName",
        "clientUri",
        "logoUri",
        "authServerMetadataUrl",
        "skipIssuerMetadataValidation",
        "clientAssertionAlg",
    }
)
_RANDOM_LOOKING = re.compile(r"^[A-Za-z0-9_\-+=./~]{24,}$")
_ENV_REFERENCE = re.compile(
    r"^(?:\$\{(?:env:)?[A-Za-z_]\w*\}|\$env:[A-Za-z_]\w*|\{env:[A-Za-z_]\w*\})$"
)
_URL_PASSWORD = re.compile(
    r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*:)(?P<secret>[^@/\s]+)(?=@)"
)
_SCHEME_TOKEN = re.compile(r"(?P<head>\b(?:bearer|basic)\s+)(?P<secret>[^\s\"',;]+)", re.IGNORECASE)
_SECRET_PAIR = re.compile(
    r"(?P<head>[\w.\-]*(?:token|secret|passw|pwd|api[_\-]?key|apikey|auth|credential|signature)"
    r"[\w.\-]*=)(?P<secret>[^&\s\"',;]+)",
    re.IGNORECASE,
)


def sounds_secret(name: str) -> bool:
    """Whether a header, variable, flag or key name suggests its value is a credential."""
    return _SECRET_NAME.search(name) is not None


def looks_like_credential(value: str) -> bool:
    """Whether a value looks like a credential regardless of its name."""
    if _SCHEME_PREFIX.match(value) or _KNOWN_TOKEN.match(value):
        return True
    if "://" in value or value.startswith(("/", "~", ".")):
        return False
    return (
        _RANDOM_LOOKING.match(value) is not None
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


def is_pem_text(value: str) -> bool:
    """Whether ``value`` is a PEM block itself (as opposed to the path of a file holding one)."""
    return value.lstrip().startswith("-----BEGIN")


def _hide(value: str) -> str:
    # An empty value is shown as empty: that is what a user debugging an unset variable needs.
    return MASK if value else ""


def mask_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {
        name: _hide(value) if sounds_secret(name) or looks_like_credential(value) else value
        for name, value in headers.items()
    }


def mask_url(url: str) -> str:
    """Hide the password of a URL and the values of credential-sounding query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK if looks_like_credential(url) else url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{MASK}@{host}" if ":" in userinfo else f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        masked = [
            (k, MASK if v and (sounds_secret(k) or looks_like_credential(v)) else v)
            for k, v in pairs
        ]
        query = urlencode(masked, safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def mask_args(args: Sequence[str]) -> list[str]:
    """Hide values of credential flags (``--token X``, ``--api-key=X``) and token-like args."""
    result: list[str] = []
    hide_next = False
    for arg in args:
        if hide_next:
            result.append(_hide(arg))
            hide_next = False
            continue
        if arg.startswith("-"):
            flag, sep, value = arg.partition("=")
            if sounds_secret(flag):
                if sep:
                    result.append(f"{flag}={_hide(value)}")
                else:
                    result.append(arg)
                    hide_next = True
                continue
            if sep and looks_like_credential(value):
                result.append(f"{flag}={MASK}")
                continue
        result.append(MASK if looks_like_credential(arg) else arg)
    return result


def mask_text(text: str) -> str:
    """``text`` with URL passwords, ``Bearer <x>`` and ``token=<x>``-style values masked.

    For free text (arguments, error messages, log lines) where no field name tells what a
    value is. A ``${NAME}`` reference is left as it is: it names a secret, it is not one.
    """

    def hide(match: re.Match[str]) -> str:
        secret = match.group("secret")
        if _ENV_REFERENCE.match(secret) or secret == MASK:
            return match.group(0)
        return match.group("head") + MASK

    for pattern in (_URL_PASSWORD, _SCHEME_TOKEN, _SECRET_PAIR):
        text = pattern.sub(hide, text)
    return text


def mask_extra(name: str, value: object) -> object:
    """Mask an unknown key's value: whole when its name sounds secret, else by content."""
    if sounds_secret(name):
        return _hide(value) if isinstance(value, str) else MASK
    if isinstance(value, str):
        return MASK if looks_like_credential(value) else value
    if isinstance(value, Mapping):
        return {str(k): mask_extra(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_extra("", v) for v in value]
    return value


def mask_secrets(entry: ServerEntry) -> dict[str, Any]:
    """The entry as JSON (camelCase keys, only the keys that were set), with secrets masked.

    Values that came from environment variables are shown as the references written in the
    configuration (``${NAME}``). Safe to print, log or write to a cache shown to users.
    """
    data = entry.model_dump(mode="json", by_alias=True, exclude_unset=True)
    templates = entry.env_templates
    for key in ("env", "headers"):
        if key in data:
            data[key] = {
                k: _secret_shown(v, templates.get(f"{key}.{k}")) for k, v in data[key].items()
            }
    if data.get("bearerToken"):
        data["bearerToken"] = _secret_shown(data["bearerToken"], templates.get("bearerToken"))
    oauth = data.get("oauth")
    if isinstance(oauth, dict):
        data["oauth"] = {key: _mask_oauth_value(key, value) for key, value in oauth.items()}
    if data.get("url"):
        data["url"] = mask_text(mask_url(templates.get("url", data["url"])))
    if "args" in data:
        shown = [templates.get(f"args[{i}]", arg) for i, arg in enumerate(data["args"])]
        data["args"] = [mask_text(arg) for arg in mask_args(shown)]
    for key in ("cwd", "command", "socket", "caFile"):
        if isinstance(data.get(key), str):
            data[key] = mask_text(templates.get(key, data[key]))
    command = data.get("requestHeadersCommand")
    if isinstance(command, dict):
        if isinstance(command.get("env"), dict):
            command["env"] = {k: _hide(v) for k, v in command["env"].items()}
        if isinstance(command.get("args"), list):
            command["args"] = [mask_text(arg) for arg in mask_args(command["args"])]
    for key in entry.model_extra or {}:
        if key in data:
            data[key] = mask_extra(key, data[key])
    return data


def _secret_shown(value: str, template: str | None) -> str:
    """A secret field's value as shown: its ``${NAME}`` template, ``!program ********`` for a
    command value, or the mask."""
    if template is not None:
        return mask_text(template)
    if value.startswith("!") and not value.startswith("!!"):
        program = value[1:].split(maxsplit=1)
        return f"!{program[0]} {MASK}" if program else MASK
    return _hide(value)


def _mask_oauth_value(key: str, value: object) -> object:
    if key == "clientSecret":
        return _hide(value) if isinstance(value, str) else MASK
    if key == "idp" and isinstance(value, Mapping):
        plain = ("tokenEndpoint", "clientId")
        return {
            str(k): v if k in plain else _hide(v) if isinstance(v, str) else MASK
            for k, v in value.items()
        }
    if key == "clientPrivateKey":
        # The path of a key file is shown; the key itself never.
        return value if isinstance(value, str) and not is_pem_text(value) else MASK
    if key == "authorizationParams" and isinstance(value, Mapping):
        return {str(k): mask_extra(str(k), v) for k, v in value.items()}
    if key in _PLAIN_OAUTH_KEYS:
        return value
    return mask_extra(key, value)


_SERVER_KEYS = ("mcpServers", "mcp-servers")
_TEMPLATE_FIELDS = ("url", "command", "cwd", "socket", "caFile", "bearerToken")
_INTERPOLATION = re.compile(r"\$\{|\$env:|\{env:")
_Path = tuple[str | int, ...]


def mask_config_text(text: str) -> str:
    """A config file's text with every value ``pi-mcp config`` hides shown as it shows it.

    For a dry run's diff: the text stays as written (comments, order, spacing), and each value
    ``config`` would mask is replaced in place by what ``config`` prints for it (``${NAME}``
    references stay, ``!program ********`` for a command value, the mask otherwise). Text that
    does not parse is masked as free text (:func:`mask_text`).
    """
    from ._jsonc import JsoncSyntaxError, parse_jsonc

    try:
        document = parse_jsonc(text)
    except JsoncSyntaxError:
        return mask_text(text)
    if document is None or not isinstance(document.data, dict):
        return text
    shown: dict[_Path, object] = {}
    for key, value in document.data.items():
        if key in _SERVER_KEYS and isinstance(value, dict):
            for name, raw in value.items():
                if isinstance(raw, dict):
                    _collect_masked((key, name), raw, _masked_entry(raw), shown)
        else:
            _collect_masked((key,), value, mask_extra(key, value), shown)
    spans = document.value_spans
    # From the end, so that earlier offsets stay valid.
    for path in sorted(shown, key=lambda p: spans[p][0], reverse=True):
        start, end = spans[path]
        text = text[:start] + json.dumps(shown[path], ensure_ascii=False) + text[end:]
    return text


def _masked_entry(raw: Mapping[str, object]) -> object:
    """What ``config`` shows for a server written as ``raw`` (values not yet interpolated: a
    value that refers to a variable is its own template)."""
    from pydantic import ValidationError

    from ._models import ServerEntry

    templates: dict[str, str] = {}
    for field in _TEMPLATE_FIELDS:
        value = raw.get(field)
        if isinstance(value, str) and _INTERPOLATION.search(value):
            templates[field] = value
    args = raw.get("args")
    if isinstance(args, list):
        for index, arg in enumerate(args):
            if isinstance(arg, str) and _INTERPOLATION.search(arg):
                templates[f"args[{index}]"] = arg
    for group in ("env", "headers"):
        values = raw.get(group)
        if isinstance(values, dict):
            for name, value in values.items():
                if isinstance(value, str) and _INTERPOLATION.search(value):
                    templates[f"{group}.{name}"] = value
    try:
        entry = ServerEntry.model_validate(raw)
    except ValidationError:
        # An entry config would reject: every env and header value hidden, the rest by name.
        return {
            key: {k: _hide(v) if isinstance(v, str) else MASK for k, v in value.items()}
            if key in ("env", "headers") and isinstance(value, Mapping)
            else mask_extra(key, value)
            for key, value in raw.items()
        }
    return mask_secrets(entry.with_env_templates(templates))


def _collect_masked(path: _Path, raw: object, masked: object, shown: dict[_Path, object]) -> None:
    """Record under ``shown`` each value of ``raw`` that masking changed, with its masked
    form (``masked`` is ``raw`` as masked; a key it lacks is masked by name and content)."""
    if isinstance(raw, dict | list) and isinstance(masked, str):
        shown[path] = masked  # hidden whole
    elif isinstance(raw, dict):
        masked_map = masked if isinstance(masked, Mapping) else {}
        for key, value in raw.items():
            sub = masked_map[key] if key in masked_map else mask_extra(str(key), value)
            _collect_masked((*path, key), value, sub, shown)
    elif isinstance(raw, list):
        masked_items = masked if isinstance(masked, list) and len(masked) == len(raw) else None
        for index, item in enumerate(raw):
            sub = masked_items[index] if masked_items is not None else mask_extra("", item)
            _collect_masked((*path, index), item, sub, shown)
    elif raw != masked and MASK in json.dumps(masked, ensure_ascii=False):
        # Only what masking changed: the model may also normalise a value, which is not ours
        # to rewrite in the person's file.
        shown[path] = masked
