"""The process-wide secret registry: every secret value the process resolves, and its reference.

Secrets are hidden by value, not by the name of the field they sit in: a token interpolated
into a URL path, a command line or a socket path is as secret as one in an ``Authorization``
header, and a server that prints its environment on stderr prints the values we gave it.

What is registered (once, when it is resolved):

- the value of every ``${VAR}`` reference, in any field (reference: ``${VAR}``), except the
  variables that name places rather than credentials (:data:`PLACE_VARIABLES`);
- the output of every ``!command`` value, and header values printed by a
  ``requestHeadersCommand`` (reference: the mask);
- header values, ``env`` values and bearer tokens written literally in the configuration,
  ``bearerTokenEnv`` values, OAuth tokens and client secrets (reference: the mask, or
  ``${VAR}`` when the value came from one).

- the inherited environment's secrets (:func:`register_environment_secrets`, called where the
  configuration is loaded): values of variables whose names say credential (``ACME_API_KEY``,
  ``AWS_SECRET_ACCESS_KEY``, ``GITHUB_PAT``...; reference: ``${NAME}``) and passwords of URLs
  with credentials (``DATABASE_URL``), whether or not the configuration names them: a server
  inherits the environment and may print it.

Values the process never resolved are still recognised by shape (:data:`TOKEN_SHAPES`):
GitHub, GitLab, OpenAI, Anthropic, Stripe, AWS, Slack and Google tokens, JWTs, private key PEM
blocks, ``Bearer``/``Basic`` credentials and URL passwords are masked in the same sinks.

Values shorter than :data:`MIN_SECRET_CHARS` are not registered: ``1``, ``true`` or ``info``
would hide every occurrence of common text. GitLab refuses to mask variables shorter than
8 characters for the same reason; we stop at 6 to still cover short API keys.

Every sink calls :func:`redact` (or :func:`redact_data` for JSON-shaped values): the CLI's
stdout and stderr, Python log records (a record factory, so our loggers and those of ``mcp``,
``httpx``, ``uvicorn``... are all covered), every file we write, notices, error messages, server
stderr tails and logs, and every tool result a model or gateway client receives. Replacement is
longest first, so a value that contains another registered value is replaced whole.
"""

from __future__ import annotations

import binascii
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import IO, TYPE_CHECKING, Any, TypeVar

from pi_mcp_adapter._environment import environment_secrets

if TYPE_CHECKING:
    from pydantic import BaseModel
from urllib.parse import quote

_Model = TypeVar("_Model", bound="BaseModel")

__all__ = [
    "MASK",
    "MIN_SECRET_CHARS",
    "PLACE_VARIABLES",
    "TOKEN_SHAPES",
    "LineRedactor",
    "RedactingStream",
    "forget_secrets",
    "is_place_variable",
    "mask_token_shapes",
    "redact",
    "redact_bytes",
    "redact_data",
    "redact_model",
    "register_environment_secrets",
    "register_secret",
    "registered_count",
]

MASK = "********"

MIN_SECRET_CHARS = 6
"""Shorter values are not registered (too many false hits in ordinary text)."""

PLACE_VARIABLES = frozenset(
    {
        "HOME",
        "USERPROFILE",
        "PWD",
        "OLDPWD",
        "TMPDIR",
        "TEMP",
        "TMP",
        "USER",
        "USERNAME",
        "LOGNAME",
        "PATH",
        "SHELL",
        "APPDATA",
        "LOCALAPPDATA",
    }
)
"""Variables that say where things are, not how to get in: interpolating ``${HOME}`` must not
turn every path the program prints into ``${HOME}/...``. ``XDG_*`` variables count too."""


def is_place_variable(name: str) -> bool:
    return name in PLACE_VARIABLES or name.startswith("XDG_")


# One immutable snapshot, replaced whole on registration, so that readers never lock: the
# pattern and the mapping it was built from always agree.
_Snapshot = tuple["re.Pattern[str]", dict[str, str]]
_snapshot: _Snapshot | None = None
_lock = threading.Lock()


def register_secret(value: str | None, reference: str = MASK) -> None:
    """Remember ``value`` as a secret shown as ``reference`` from now on, in every sink.

    Also registers the forms the value takes when written as JSON or percent-encoded in a URL,
    and each line of a multi-line value. A value shorter than :data:`MIN_SECRET_CHARS`, or one
    that its own reference contains, is ignored. A reference that names the value's origin
    (``${VAR}``) replaces the bare mask of an earlier registration.
    """
    _register_all([(value, reference)])


def _forms_of(value: str) -> set[str]:
    forms = {value, json.dumps(value, ensure_ascii=False)[1:-1], quote(value, safe="")}
    if "\n" in value:
        forms.update(line.strip() for line in value.splitlines())
    return forms


def _register_all(secrets: Iterable[tuple[str | None, str]]) -> None:
    """Register several values with one rebuild of the pattern (the environment's secrets
    arrive together, and compiling the alternation is the costly part)."""
    global _snapshot
    wanted = [
        (form, reference)
        for value, reference in secrets
        if value and len(value) >= MIN_SECRET_CHARS
        for form in _forms_of(value)
        if len(form) >= MIN_SECRET_CHARS and form not in reference
    ]
    if not wanted:
        return
    with _lock:
        current = dict(_snapshot[1]) if _snapshot is not None else {}
        changed = False
        for form, reference in wanted:
            known = current.get(form)
            if known is None or (known == MASK and reference != MASK):
                current[form] = reference
                changed = True
        if not changed:
            return
        ordered = sorted(current, key=len, reverse=True)  # longest first wins at a position
        first = _snapshot is None
        _snapshot = (re.compile("|".join(map(re.escape, ordered))), current)
    if first:
        _install_record_factory()


def forget_secrets() -> None:
    """Forget every registered value (a test that must not see another test's secrets)."""
    global _snapshot
    with _lock:
        _snapshot = None
        _environment_seen.clear()


_environment_seen: set[tuple[str, str]] = set()
"""Environment pairs already registered: loading the configuration again costs one scan of
the environment and no rebuild of the pattern."""


def register_environment_secrets(environ: Mapping[str, str]) -> None:
    """Register the secrets of ``environ`` that no configuration needs to name (see
    :func:`~pi_mcp_adapter._environment.environment_secrets`), each shown as ``${NAME}``.

    Called wherever a configuration is loaded, with the environment its servers inherit, so
    the CLI, the gateway, the warm process's forks and the Python API all register the
    environment they run with. Cheap when nothing changed (one pass over the names).
    """
    _install_record_factory()  # token shapes are masked in log records even with no value
    fresh = [pair for pair in environment_secrets(environ) if pair not in _environment_seen]
    if not fresh:
        return
    _environment_seen.update(fresh)
    _register_all((value, f"${{{name}}}") for name, value in fresh)


def registered_count() -> int:
    """How many values (counting their encoded forms) are registered."""
    snapshot = _snapshot
    return 0 if snapshot is None else len(snapshot[1])


def redact(text: str) -> str:
    """``text`` with every registered value replaced by its reference, and every token of a
    well-known shape masked (:func:`mask_token_shapes`)."""
    if not text:
        return text
    snapshot = _snapshot
    if snapshot is not None:
        pattern, references = snapshot
        text = pattern.sub(lambda match: references[match.group(0)], text)
    return mask_token_shapes(text)


def redact_data(data: Any) -> Any:
    """A JSON-shaped value (dicts, lists, tuples, strings) with every string redacted."""
    if isinstance(data, str):
        return redact(data)
    if isinstance(data, Mapping):
        return {redact(k) if isinstance(k, str) else k: redact_data(v) for k, v in data.items()}
    if isinstance(data, list):
        return [redact_data(item) for item in data]
    if isinstance(data, tuple):
        return tuple(redact_data(item) for item in data)
    return data


def redact_model(model: _Model) -> _Model:
    """A pydantic value (a server's result) with every registered value replaced in its
    strings; the same object when it holds none (the common case costs one dump)."""
    dumped = model.model_dump(by_alias=True, exclude_unset=True)
    redacted = redact_data(dumped)
    if redacted == dumped:
        return model
    return type(model).model_validate(redacted)


def redact_bytes(data: bytes) -> bytes:
    """UTF-8 ``data`` redacted; anything that is not UTF-8 text is returned as it is."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    redacted = redact(text)
    return data if redacted == text else redacted.encode("utf-8")


# Token shapes. Each is tried only when one of its literal triggers occurs in the text: a
# substring test is a fast search, a regex alternation is not (measured: ~15 ms against ~130 ms
# per shape on 16 MB of text), so text without any trigger costs one `in` per trigger. Whether
# a prefix starts a word is checked on the match, not by a look-behind. The part of a match
# named "keep" (a scheme, a prefix that says what kind of token it was) stays; the rest
# becomes the mask. Lengths and digit look-aheads keep prose ("Bearer authentication") out.
_TOKEN_CHARS = r"[A-Za-z0-9_\-]"

_Replace = Callable[[re.Match[str]], str]
_Shape = tuple[tuple[str, ...], "re.Pattern[str]", _Replace]


def _starts_a_word(match: re.Match[str]) -> bool:
    start = match.start()
    return start == 0 or not (match.string[start - 1].isalnum() or match.string[start - 1] in "_-")


def _keep_prefix(match: re.Match[str]) -> str:
    if not _starts_a_word(match):
        return match.group(0)
    return match.group("keep") + MASK


def _keep_url_password(match: re.Match[str]) -> str:
    password = match.group("secret")
    if password == MASK or password.startswith(("${", "$env:", "{env:")):
        return match.group(0)
    return match.group("keep") + MASK


def _keep_basic_if_credentials(match: re.Match[str]) -> str:
    encoded = match.group("secret")
    if not _starts_a_word(match) or len(encoded.rstrip("=")) % 4 == 1:
        return match.group(0)
    try:
        decoded = binascii.a2b_base64(encoded + "=" * (-len(encoded) % 4))
    except (binascii.Error, ValueError):
        return match.group(0)
    # Only base64 of "user:password" is a Basic credential; "Basic authentication" is prose.
    if b":" not in decoded:
        return match.group(0)
    return match.group("keep") + MASK


def _mask_pem(match: re.Match[str]) -> str:
    kind = match.group("kind")
    return f"-----BEGIN {kind}-----{MASK}-----END {kind}-----"


def _after(
    prefixes: Iterable[str], kept: str, rest: str, replace: _Replace = _keep_prefix
) -> list[_Shape]:
    """One shape per literal prefix (a pattern that starts with a literal is a fast search;
    one that starts with an alternation or a class is not)."""
    return [
        ((prefix,), re.compile(f"(?P<keep>{re.escape(prefix)}{kept}){rest}"), replace)
        for prefix in prefixes
    ]


TOKEN_SHAPES: tuple[_Shape, ...] = (
    # A private key, whole; one cut short (a truncated dump) is masked to the end of the text.
    (
        ("-----BEGIN ",),
        re.compile(
            r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----"
            r"(?:[\s\S]*?-----END (?P=kind)-----|[\s\S]*)"
        ),
        _mask_pem,
    ),
    # The password of a URL (scheme://user:password@host).
    (
        ("://",),
        re.compile(r"(?P<keep>://[^\s:/@\"'<>]*:)(?P<secret>[^\s/@\"'<>]+)(?=@)"),
        _keep_url_password,
    ),
    *_after(
        ("Bearer", "bearer", "BEARER"),
        r"\s+",
        r"(?=[A-Za-z0-9._~+/\-]*\d)[A-Za-z0-9._~+/\-]{16,}=*",
    ),
    *_after(
        ("Basic", "basic", "BASIC"),
        r"\s+",
        r"(?P<secret>[A-Za-z0-9+/]{8,}={0,2})(?![\w+/=])",
        _keep_basic_if_credentials,
    ),
    # GitHub and GitLab tokens.
    *_after(("gh",), "[pousr]_", "[A-Za-z0-9_]{20,}"),
    *_after(("github_pat_",), "", "[A-Za-z0-9_]{20,}"),
    *_after(("glpat-",), "", r"[A-Za-z0-9_\-]{20,}"),
    # OpenAI (sk-, sk-proj-, sk-svcacct-) and Anthropic (sk-ant-) keys.
    *_after(("sk-",), "", rf"(?={_TOKEN_CHARS}*\d){_TOKEN_CHARS}{{20,}}"),
    # Stripe secret and restricted keys.
    *_after(("sk_live_", "rk_live_", "sk_test_", "rk_test_"), "", "[A-Za-z0-9]{16,}"),
    # AWS access key ids (the secret access key has no shape; its variable's name gives it away).
    *_after(("AKIA", "ASIA"), "", "[A-Z0-9]{16}(?![A-Za-z0-9])"),
    # Slack tokens.
    *_after(("xox",), "[abposre]-", r"[A-Za-z0-9\-]{10,}"),
    # Google API keys and OAuth access tokens.
    *_after(("AIza", "ya29."), "", r"[0-9A-Za-z_\-]{20,}"),
    # A JWT (header.payload.signature), all three parts.
    *_after(("eyJ",), "", r"[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
)
"""``(triggers, pattern, replacement)`` for every well-known token shape :func:`redact` masks,
whether or not the process ever resolved the value."""


def mask_token_shapes(text: str) -> str:
    """``text`` with tokens of a well-known shape (:data:`TOKEN_SHAPES`) masked."""
    for triggers, pattern, replace in TOKEN_SHAPES:
        if any(trigger in text for trigger in triggers):
            text = pattern.sub(replace, text)
    return text


_PRIVATE_KEY_BEGIN = re.compile(r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----")


class LineRedactor:
    """Redacts a stream of lines (a server's stderr) as it arrives, one line behind.

    A printer that wraps long lines cuts a secret in two, and neither half is a registered
    value; a private key prints over many lines, and only its first says what it is. So each
    line is held until the next arrives: a registered value that runs across the line end is
    replaced whole (its reference ends the first line, the rest of it leaves the second), and
    the lines from ``-----BEGIN ... PRIVATE KEY-----`` to its ``-----END`` are dropped after the
    first, which shows the mask. A value cut over three lines or more is not recognised.
    """

    def __init__(self) -> None:
        self._held: str | None = None
        self._in_private_key: str | None = None

    def push(self, line: str) -> str | None:
        """Take the next raw line; return the previous one redacted (None: nothing to show)."""
        shown = self._skip_private_key(line)
        if shown is None:
            return None
        held, self._held = self._held, shown
        if held is None:
            return None
        held, self._held = _unsplit(held, shown)
        return redact(held)

    def held(self) -> str | None:
        """The line held back, redacted as it stands (for a tail shown before the next)."""
        return None if self._held is None else redact(self._held)

    def flush(self) -> str | None:
        """The line held back, redacted; the stream ended."""
        held, self._held = self._held, None
        return None if held is None else redact(held)

    def _skip_private_key(self, line: str) -> str | None:
        kind = self._in_private_key
        if kind is not None:
            end = f"-----END {kind}-----"
            at = line.find(end)
            if at < 0:
                return None
            self._in_private_key = None
            rest = line[at + len(end) :]
            return rest if rest.strip() else None
        begin = _PRIVATE_KEY_BEGIN.search(line)
        if begin is not None and f"-----END {begin.group('kind')}-----" not in line:
            self._in_private_key = begin.group("kind")
        return line


def _unsplit(first: str, second: str) -> tuple[str, str]:
    """``first`` and ``second`` with a registered value that runs across the line end between
    them replaced by its reference, at the end of ``first`` (the second's indent is ignored)."""
    snapshot = _snapshot
    if snapshot is None or not first or not second:
        return first, second
    pattern, references = snapshot
    body = second.lstrip()
    indent = second[: len(second) - len(body)]
    head = first.rstrip("\r")
    joined = head + body
    for match in pattern.finditer(joined):
        if match.start() < len(head) < match.end():
            return head[: match.start()] + references[match.group(0)], indent + body[
                match.end() - len(head) :
            ]
        if match.start() >= len(head):
            break
    return first, second


class RedactingStream:
    """A text stream that redacts everything written through it (the CLI's stdout/stderr).

    Every other attribute (``encoding``, ``isatty``, ``fileno``...) is the wrapped stream's,
    so click and rich treat it as the terminal it wraps. Writes are redacted one call at a
    time: our printers write whole messages, so a value is never split between two calls.
    """

    def __init__(self, inner: IO[str]) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(redact(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


_PLAIN_ARG_TYPES = (int, float, bool, type(None))


def _redact_arg(arg: object) -> object:
    if isinstance(arg, str):
        return redact(arg)
    if isinstance(arg, _PLAIN_ARG_TYPES):
        return arg
    # URLs, exceptions, paths: their text is what the record will show.
    shown = str(arg)
    redacted = redact(shown)
    return arg if redacted == shown else redacted


def _redact_record(record: logging.LogRecord) -> None:
    if isinstance(record.msg, str):
        record.msg = redact(record.msg)
    args = record.args
    if isinstance(args, tuple):
        record.args = tuple(_redact_arg(arg) for arg in args)
    elif isinstance(args, Mapping):
        record.args = {key: _redact_arg(value) for key, value in args.items()}
    if record.exc_info and record.exc_info[0] is not None and not record.exc_text:
        # A traceback's last line is the exception's text (an httpx error names the URL); the
        # formatter uses exc_text when it is set, so set it redacted.
        text = logging.Formatter().formatException(record.exc_info)
        redacted = redact(text)
        if redacted != text:
            record.exc_text = redacted
    if record.stack_info:
        record.stack_info = redact(record.stack_info)


def _install_record_factory() -> None:
    """Redact every log record of the process as it is created.

    A filter on a logger does not see the records of its child loggers (``mcp.client.sse``
    under ``mcp``), and handlers belong to the application; the record factory is the one
    place every record passes, whoever logs it and wherever it goes.
    """
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_pi_mcp_redacts", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        _redact_record(record)
        return record

    factory._pi_mcp_redacts = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
