"""Facts about the environment a command runs in, read the same way everywhere."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterator, Mapping
from urllib.parse import unquote

__all__ = ["MIN_ENVIRONMENT_SECRET_CHARS", "environment_secrets", "in_ci_job", "names_a_secret"]


def in_ci_job(environ: Mapping[str, str]) -> bool:
    """Whether this runs in a CI job: ``CI`` set to anything but ``0`` or ``false``, as CI
    services set it. Such a job has no person to ask and should leave no process behind."""
    return environ.get("CI", "").strip().lower() not in ("", "0", "false")


MIN_ENVIRONMENT_SECRET_CHARS = 8
"""Shorter values of secret-named variables are left alone: the environment is full of short
settings under such names (``AUTH_MODE=oidc``, ``SESSION_TTL=3600``), and hiding them would hide
every occurrence of that word. GitLab refuses to mask CI variables shorter than 8 characters
for the same reason."""

_SECRET_WORDS = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|PRIVATE|COOKIE|SESSION|DSN|SIGNATURE"
    r"|BEARER|CONN(?:ECTION)?_?STR"
    # KEY, API_KEY, APIKEY, KEYS; not KEYBOARD, KEYMAP, KEYRING.
    r"|KEY(?![A-RT-Z])"
    # AUTH, OAUTH, AUTHZ; not AUTHOR (GIT_AUTHOR_NAME) or XAUTHORITY.
    r"|AUTH(?!OR)"
    # Short words only as whole words: GITHUB_PAT, DB_PASS, SMTP_PWD; not PATH, PASSTHROUGH.
    r"|(?:^|_)(?:PAT|PASS|PWD|PW)(?:_|$)"
)
_PLACE_SUFFIX = re.compile(
    r"_(?:FILE|PATH|DIR|SOCK|SOCKET|URL|URI|ENDPOINT|HOST|PORT|USER|USERNAME|NAME|TYPE|MODE"
    r"|REGION|TIMEOUT|TTL|ENABLED|HELPER|PROGRAM|COMMAND|CMD)$"
)
"""Secret-named variables that say where or how, not what: ``GOOGLE_APPLICATION_CREDENTIALS_FILE``
names a file, ``OAUTH_TOKEN_URL`` an endpoint (a password inside such a URL still counts)."""
_HARMLESS_VARIABLES = frozenset(
    {
        "SSH_AUTH_SOCK",
        "XAUTHORITY",
        "DBUS_SESSION_BUS_ADDRESS",
        "SESSION_MANAGER",
        "DESKTOP_SESSION",
        "GPG_AGENT_INFO",
        "PWD",
        "OLDPWD",
        "GIT_ASKPASS",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
    }
)
"""Session plumbing of desktops and shells: secret-sounding names, public values."""
_PLAIN_VALUE = re.compile(
    r"(?i:true|false|yes|no|on|off|none|null|unset|enabled|disabled|[-+0-9.,:_ ]+)"
)
_URL_USERINFO = re.compile(
    r"[A-Za-z][A-Za-z0-9+.-]{0,30}://(?P<user>[^\s:/@]*):(?P<password>[^\s/@]+)@"
)


def names_a_secret(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential (``ACME_API_KEY``,
    ``AWS_SECRET_ACCESS_KEY``, ``GITHUB_PAT``, ``SENTRY_DSN``), not a place or a setting."""
    upper = name.upper()
    if upper in _HARMLESS_VARIABLES or upper.startswith("XDG_"):
        return False
    return _SECRET_WORDS.search(upper) is not None and _PLACE_SUFFIX.search(upper) is None


def _is_plain_value(value: str) -> bool:
    if _PLAIN_VALUE.fullmatch(value):
        return True
    # A path to a key file is not the key (the file's content is).
    return value.startswith(("/", "~")) and os.path.exists(os.path.expanduser(value))


def environment_secrets(environ: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """``(variable, secret)`` for every secret the environment holds: the value of each
    secret-named variable (:func:`names_a_secret`) long enough to be one, and the password
    of every URL with credentials (``DATABASE_URL=postgres://app:pw@db``), decoded too, and
    the base64 of its ``user:password`` (the same credentials in a Basic-auth header)."""
    for name, value in environ.items():
        match = _URL_USERINFO.search(value) if "://" in value else None
        if match is not None:
            password = match.group("password")
            yield name, password
            if unquote(password) != password:
                yield name, unquote(password)
            pair = f"{unquote(match.group('user'))}:{unquote(password)}"
            yield name, base64.b64encode(pair.encode()).decode()
        if (
            len(value) >= MIN_ENVIRONMENT_SECRET_CHARS
            and names_a_secret(name)
            and not _is_plain_value(value)
        ):
            yield name, value
